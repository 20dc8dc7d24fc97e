"""Corruption: flipped bytes in stored inputs (blobs), checkpoints (ledger records and
attachments) and run records (KV), written straight into a SQLite database file.

What must hold: every read of a corrupted value raises a typed error (`CorruptRecordError`
for workflow records, flow `StoreError` wrapping the decode error for checkpoints) - nothing
crashes with anything else; a run is marked failed only where the spec says so (missing or
corrupt input or checkpoint) and with a bounded summary; and a corrupted checkpoint never
resumes with a wrong state.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections import Counter
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from flowledger import flow
from flowledger.flow.checkpoint import to_document
from flowledger.storage import Store, open_store
from flowledger.tools import ToolError
from flowledger.workflows.activities.journal import journal_name
from flowledger.workflows.errors import CorruptRecordError, ReconciliationError
from flowledger.workflows.records.registry import RunRegistry
from flowledger.workflows.records.requests import (
    RunRequests,
    cancel_request_key,
    resume_request_key,
)
from flowledger.workflows.records.run import Run, RunStatus, run_key
from flowledger.workflows.records.unfinished import UnfinishedIndex, unfinished_key
from flowledger.workflows.runtime.supervisor import Supervisor
from flowledger.workflows.runtime.worker import WorkerRecord, read_workers, worker_key
from tests.workflows.conftest import Session, build_session

from ._harness import check_consistent, tools_for
from ._sqlite_bytes import SqliteBytes, flip

MAX_SUMMARY_BYTES = 1024


@dataclass
class Db:
    store: Store
    session: Session
    supervisor: Supervisor
    bytes: SqliteBytes


@pytest.fixture
async def db(tmp_path: Path) -> AsyncIterator[Db]:
    path = tmp_path / "corrupt.db"
    async with open_store(f"sqlite:///{path}") as store:
        session = build_session(store)
        supervisor = session.supervisor()
        await supervisor.activate()
        try:
            yield Db(store, session, supervisor, SqliteBytes(path))
        finally:
            await supervisor.shutdown()


async def interrupted_asker(db: Db) -> Run:
    run = await db.session.create_run("asker")
    await (await db.supervisor.start(run.id)).wait()
    assert await db.supervisor.wait_idle() is None
    run = await db.session.registry.get(db.session.session_id, run.id)
    assert run.status is RunStatus.INTERRUPTED
    return run


async def restart(db: Db, *, clean: bool = True) -> Db:
    """A new owner with a fresh session (no caches) over the same database; with ``clean``
    its adoption must report no worker error."""
    await db.supervisor.shutdown()
    session = build_session(db.store, db.session.session_id)
    supervisor = session.supervisor()
    await supervisor.activate()
    error = await supervisor.wait_idle()
    if clean:
        assert error is None
    return Db(db.store, session, supervisor, db.bytes)


def assert_bounded_failure(run: Run, summary: str) -> None:
    assert run.status is RunStatus.FAILED
    assert run.status_summary == summary
    assert len(run.status_summary.encode()) <= MAX_SUMMARY_BYTES


# -- inputs ---------------------------------------------------------------------------------


async def test_every_flipped_input_byte_is_a_corrupt_record(db: Db) -> None:
    """Input blobs are verified (size and SHA-256) on every read: any flipped byte is a
    `CorruptRecordError`, never a silently different input."""
    run = await db.session.create_run("counter", {"count": 7})
    key = run.input.key
    original = db.bytes.read("blobs", key)
    for position in range(len(original)):
        db.bytes.write("blobs", key, flip(original, position))
        with pytest.raises(CorruptRecordError):
            await db.session.inputs.get(db.session.session_id, run.input)
    db.bytes.write("blobs", key, original)
    assert await db.session.inputs.get(db.session.session_id, run.input) == original


async def test_corrupt_input_fails_the_run_with_a_bounded_summary(db: Db) -> None:
    """A pending run whose input is corrupt becomes failed ("workflow input unavailable")
    when it is started; no checkpoint is written and nothing of the input is shown."""
    run = await db.session.create_run("counter", {"count": 7})
    db.bytes.write("blobs", run.input.key, flip(db.bytes.read("blobs", run.input.key), 3))
    db = await restart(db)  # adoption starts the pending run
    after = await db.session.registry.get(db.session.session_id, run.id)
    assert_bounded_failure(after, "workflow input unavailable")
    with pytest.raises(flow.CheckpointNotFoundError):
        await db.session.checkpoints.history(run.graph_run_id)
    assert await db.session.kinds(run.id) == ["run_failed"]
    await check_consistent(db.session, after)


# -- checkpoints ----------------------------------------------------------------------------


def _typed_checkpoint_error(error: BaseException) -> bool:
    return isinstance(error, flow.StoreError | flow.CheckpointDecodeError)


async def _flip_every_record_byte(db: Db, run: Run) -> Counter[str]:
    """Flip each byte of each checkpoint record in turn and read the history through a fresh
    checkpoint store. Returns how often the read raised / matched / differed."""
    log = f"flow/runs/{run.graph_run_id}"
    original = await db.session.checkpoints.history(run.graph_run_id)
    documents = [to_document(cp) for cp in original]
    outcomes: Counter[str] = Counter()
    for seq in range(1, len(original) + 1):
        data = db.bytes.read_record(log, seq)
        for position in range(len(data)):
            db.bytes.write_record(log, seq, flip(data, position))
            try:
                history = await flow.LedgerCheckpointStore(db.store.ledger).history(
                    run.graph_run_id
                )
            except Exception as exc:
                assert _typed_checkpoint_error(exc), f"seq {seq} byte {position}: {exc!r}"
                outcomes["error"] += 1
                continue
            assert [cp.state for cp in history] == [cp.state for cp in original], (
                f"seq {seq} byte {position}: the state changed silently"
            )
            same = [to_document(cp) for cp in history] == documents
            outcomes["same" if same else "different"] += 1
        db.bytes.write_record(log, seq, data)
    return outcomes


async def test_flipped_checkpoint_records_never_change_state_or_crash(db: Db) -> None:
    """Every single-byte flip of every checkpoint record either raises a typed flow error
    (`StoreError` wrapping the decode error) or decodes to exactly the original state: the
    state lives in digest-verified attachments."""
    run = await interrupted_asker(db)
    outcomes = await _flip_every_record_byte(db, run)
    assert outcomes["error"] > 0


async def test_flipped_checkpoint_records_are_always_detected(db: Db) -> None:
    """The backend's per-record CRC-32 turns every single-byte flip into a decode error:
    none decodes, not even to an equal checkpoint."""
    run = await interrupted_asker(db)
    outcomes = await _flip_every_record_byte(db, run)
    assert set(outcomes) == {"error"}, outcomes


async def test_every_flipped_attachment_byte_is_detected(db: Db) -> None:
    """Attachments (state manifests and large fields) are verified against their digest on
    read: any flipped byte is a typed flow error."""
    run = await interrupted_asker(db)
    for digest in db.bytes.digests():
        original = db.bytes.read("attachments", digest)
        for position in range(0, len(original), max(1, len(original) // 64)):
            db.bytes.write("attachments", digest, flip(original, position))
            with pytest.raises((flow.StoreError, flow.CheckpointDecodeError)):
                await flow.LedgerCheckpointStore(db.store.ledger).history(run.graph_run_id)
        db.bytes.write("attachments", digest, original)


async def test_corrupt_checkpoint_record_fails_the_run_instead_of_resuming(db: Db) -> None:
    """Resuming a run whose latest checkpoint record does not decode marks it failed
    ("workflow checkpoint corrupt"), runs no task and appends no checkpoint."""
    run = await interrupted_asker(db)
    log = f"flow/runs/{run.graph_run_id}"
    tip = await db.store.ledger.tip(log)
    db.bytes.write_record(log, tip, b"{" + db.bytes.read_record(log, tip))
    runs_before = dict(db.session.gates.runs)
    # The resume call itself raises ReconciliationError (BUG, see
    # test_resume_of_a_corrupt_checkpoint_returns_the_failed_run); the record is right.
    with contextlib.suppress(ReconciliationError):
        await db.supervisor.resume(run.id, b'{"increment": 3}')
    after = await db.session.registry.get(db.session.session_id, run.id)
    assert_bounded_failure(after, "workflow checkpoint corrupt")
    assert db.session.gates.runs == runs_before  # the task never ran again
    assert await db.store.ledger.tip(log) == tip


async def test_a_dropped_checkpoint_log_fails_a_paused_run_once(db: Db) -> None:
    """A paused run whose checkpoint log is really gone (dropped; the file intact, so the
    store confirms the miss): resume fails it "workflow checkpoint missing" with one
    `run_failed`. Every later reconciliation of the failed run (here a new owner's) used to
    publish one more `run_failed`, one revision further; it publishes nothing now."""
    run = await interrupted_asker(db)
    await db.supervisor.shutdown()
    supervisor = db.session.supervisor(integrity=db.store.integrity)
    await supervisor.activate()
    try:
        assert await supervisor.wait_idle() is None
        assert await db.store.ledger.drop([run.ledger_locator]) == 1
        after = await supervisor.resume(run.id, b'{"increment": 3}')
        assert after is not None
        assert_bounded_failure(after, "workflow checkpoint missing")
        assert (await db.session.kinds(run.id)).count("run_failed") == 1
    finally:
        await supervisor.shutdown()
    db = await restart(db)
    again = await db.session.registry.get(db.session.session_id, run.id)
    assert again.activity_cursor == after.activity_cursor
    assert (await db.session.kinds(run.id)).count("run_failed") == 1


async def test_checkpoints_copied_from_another_sessions_run_are_detected(db: Db) -> None:
    """Intact checkpoint rows (bytes and checksum) of run X of session A copied over those
    of run Y of session B - a hand edit, a bad merge of two databases - are corrupt where
    they land: Y's history is a typed decode error, and a resume of Y marks it failed
    ("workflow checkpoint corrupt") instead of continuing with X's state."""
    x = await interrupted_asker(db)  # session A, count 0
    other = build_session(db.store)
    other_supervisor = other.supervisor()
    await other_supervisor.activate()
    try:
        y = await other.create_run("asker", {"count": 40})
        await (await other_supervisor.start(y.id)).wait()
        assert await other_supervisor.wait_idle() is None
        x_log, y_log = f"flow/runs/{x.graph_run_id}", f"flow/runs/{y.graph_run_id}"
        tip = await db.store.ledger.tip(y_log)
        assert tip == await db.store.ledger.tip(x_log) > 1
        # Revision 0 names its run; the later records leave the fixed part out.
        for seq in range(2, tip + 1):
            db.bytes.write_record_row(y_log, seq, db.bytes.read_record_row(x_log, seq))
        with pytest.raises(flow.StoreError) as caught:
            await flow.LedgerCheckpointStore(db.store.ledger).history(y.graph_run_id)
        assert isinstance(caught.value.__cause__, flow.CheckpointDecodeError)
        after = await other_supervisor.resume(y.id, b'{"increment": 2}')
        assert after is not None
        assert_bounded_failure(after, "workflow checkpoint corrupt")
        assert await db.store.ledger.tip(y_log) == tip  # nothing appended on X's state
        x_history = await db.session.checkpoints.history(x.graph_run_id)
        assert len(x_history) == tip  # the source run is untouched
    finally:
        await other_supervisor.shutdown()


async def test_resume_of_a_corrupt_checkpoint_returns_the_failed_run(db: Db) -> None:
    run = await interrupted_asker(db)
    log = f"flow/runs/{run.graph_run_id}"
    tip = await db.store.ledger.tip(log)
    db.bytes.write_record(log, tip, b"{" + db.bytes.read_record(log, tip))
    after = await db.supervisor.resume(run.id, b'{"increment": 3}')
    assert after is not None and after.status is RunStatus.FAILED


async def test_corrupt_state_attachment_fails_the_run_on_adoption(db: Db) -> None:
    """A new owner that finds an interrupted run's state attachments corrupt marks it
    failed (bounded summary) instead of offering it for resume; the task never runs again,
    no checkpoint is appended, and a resume is refused."""
    run = await interrupted_asker(db)
    log = f"flow/runs/{run.graph_run_id}"
    tip = await db.store.ledger.tip(log)
    for digest in db.bytes.digests():
        db.bytes.write("attachments", digest, flip(db.bytes.read("attachments", digest), 0))
    db = await restart(db, clean=False)
    after = await db.session.registry.get(db.session.session_id, run.id)
    assert_bounded_failure(after, "workflow checkpoint corrupt")
    assert db.session.gates.runs == {}
    assert await db.store.ledger.tip(log) == tip
    tools = tools_for(db.session, db.supervisor)
    with pytest.raises(ToolError):
        await tools.call("workflow_run_resume", {"run_id": run.id, "resume": {"increment": 1}})


@pytest.mark.parametrize("paused", [True, False])
async def test_a_renamed_state_attachment_fails_the_run_on_adoption(db: Db, paused: bool) -> None:
    """Regression (Reliability II, 3): an attachment stored under another digest (so the
    checkpoint's own digest names nothing) is a corrupt checkpoint, as docs/reliability.md
    promises: the new owner's adoption reaches ``failed`` ("workflow checkpoint corrupt")
    and reports no worker error, instead of retrying forever; nothing runs again."""
    if paused:
        run = await interrupted_asker(db)
    else:  # a running run whose owner stopped mid-segment
        db.session.gates.close("two")
        run = await db.session.create_run()
        await (await db.supervisor.start(run.id)).wait()
        await asyncio.wait_for(db.session.gates.entered["two"].wait(), 60)
        await db.supervisor.shutdown()
    log = f"flow/runs/{run.graph_run_id}"
    tip = await db.store.ledger.tip(log)
    for digest in db.bytes.digests():
        db.bytes.rename_attachment(digest, "f" * 8 + digest[8:])
    db = await restart(db, clean=True)
    after = await db.session.registry.get(db.session.session_id, run.id)
    assert_bounded_failure(after, "workflow checkpoint corrupt")
    assert db.session.gates.runs == {}
    assert await db.store.ledger.tip(log) == tip
    assert (await db.session.kinds(run.id))[-1] == "run_failed"


async def test_run_failed_for_a_corrupt_checkpoint_publishes_run_failed(db: Db) -> None:
    run = await interrupted_asker(db)
    for digest in db.bytes.digests():
        db.bytes.write("attachments", digest, flip(db.bytes.read("attachments", digest), 0))
    db = await restart(db, clean=False)
    assert (await db.session.registry.get(db.session.session_id, run.id)).status is (
        RunStatus.FAILED
    )
    db = await restart(db, clean=False)
    assert await db.supervisor.wait_idle() is None
    assert (await db.session.kinds(run.id))[-1] == "run_failed"


# -- run records ----------------------------------------------------------------------------


async def _flip_every_run_record_byte(db: Db, run: Run) -> Counter[str]:
    key = run_key(db.session.session_id, run.id)
    original = db.bytes.read("kv", key)
    outcomes: Counter[str] = Counter()
    for position in range(len(original)):
        db.bytes.write("kv", key, flip(original, position))
        try:
            decoded = await RunRegistry(db.store.kv).get(db.session.session_id, run.id)
        except CorruptRecordError:
            outcomes["error"] += 1
            continue
        outcomes["same" if decoded == run else "different"] += 1
    db.bytes.write("kv", key, original)
    return outcomes


async def test_flipped_run_records_raise_only_corrupt_record_errors(db: Db) -> None:
    """Every single-byte flip of a run record either decodes or raises
    `CorruptRecordError` - never another exception."""
    run = await interrupted_asker(db)
    outcomes = await _flip_every_run_record_byte(db, run)
    assert outcomes["error"] > 0


async def test_flipped_run_records_are_always_detected(db: Db) -> None:
    """The backend's per-value CRC-32 turns every single-byte flip of a run record into a
    `CorruptRecordError`."""
    run = await interrupted_asker(db)
    outcomes = await _flip_every_run_record_byte(db, run)
    assert set(outcomes) == {"error"}, outcomes


async def test_corrupt_run_record_is_a_typed_tool_error_and_blocks_nothing_else(
    db: Db,
) -> None:
    """A corrupt run record is a `ToolError` through the tools (get, resume, cancel,
    history) and a `CorruptRecordError` through the registry; the session's other runs
    are unaffected and nothing is written to the corrupt record."""
    broken = await interrupted_asker(db)
    healthy = await interrupted_asker(db)
    key = run_key(db.session.session_id, broken.id)
    db.bytes.write("kv", key, b"\xff" + db.bytes.read("kv", key)[1:])
    corrupt = db.bytes.read("kv", key)
    tools = tools_for(db.session, db.supervisor)
    calls: list[tuple[str, dict[str, Any]]] = [
        ("workflow_run_get", {"run_id": broken.id}),
        ("workflow_run_resume", {"run_id": broken.id, "resume": {"increment": 1}}),
        ("workflow_run_cancel", {"run_id": broken.id}),
        ("workflow_run_history", {"run_id": broken.id}),
    ]
    for name, arguments in calls:
        with pytest.raises(ToolError):
            await tools.call(name, arguments)
    with pytest.raises(CorruptRecordError):
        await db.session.registry.get(db.session.session_id, broken.id)
    assert db.bytes.read("kv", key) == corrupt
    result = await tools.call("workflow_run_get", {"run_id": healthy.id})
    assert result["run_status"] == "interrupted"


async def test_corrupt_run_record_refuses_activation_with_its_cause(db: Db) -> None:
    """Activation lists every run; a corrupt record aborts it with the `CorruptRecordError`
    as the cause (the registry's documented page rule), releasing the lease, writing
    nothing."""
    broken = await interrupted_asker(db)
    key = run_key(db.session.session_id, broken.id)
    db.bytes.write("kv", key, b"\xff" + db.bytes.read("kv", key)[1:])
    await db.supervisor.shutdown()
    session = build_session(db.store, db.session.session_id)
    supervisor = session.supervisor()
    with pytest.raises(RuntimeError) as caught:
        await supervisor.activate()
    assert isinstance(caught.value.__cause__, CorruptRecordError)
    assert not supervisor.active
    again = session.supervisor()  # the lease was released
    with pytest.raises(RuntimeError):
        await again.activate()
    db.supervisor = again  # the fixture shuts it down


# -- the other workflow records -------------------------------------------------------------


async def test_a_flipped_activity_record_is_a_corrupt_record(db: Db) -> None:
    """Activity journal records are checked like checkpoints: a damaged one makes the
    journal's reads a `CorruptRecordError`, never a shortened or altered history. Through
    the tools, the owning supervisor then rebuilds the journal from the checkpoints and
    answers with the history as it was published."""
    run = await interrupted_asker(db)
    log = journal_name(db.session.session_id, run.id)
    original = db.bytes.read_record(log, 1)
    tools = tools_for(db.session, db.supervisor)
    published = await tools.call("workflow_run_history", {"run_id": run.id})
    for position in range(0, len(original), max(1, len(original) // 32)):
        db.bytes.write_record(log, 1, flip(original, position))
        with pytest.raises(CorruptRecordError):
            await db.session.journal.records(db.session.session_id, run.id)
        with pytest.raises(CorruptRecordError):
            await db.session.journal.page(db.session.session_id, run.id)
    assert await tools.call("workflow_run_history", {"run_id": run.id}) == published
    assert await db.session.journal.generation(db.session.session_id, run.id) == 1
    assert (await db.session.kinds(run.id))[0] == "run_started"


async def test_flipped_resume_and_cancel_requests_are_corrupt_records(db: Db) -> None:
    run = await interrupted_asker(db)
    requests = RunRequests(db.store.kv)
    session_id = db.session.session_id
    await requests.request_resume(session_id, run.id, b'{"increment": 1}', 1)
    await requests.request_cancel(session_id, run.id, "no longer needed")
    reads = {
        resume_request_key(session_id, run.id): requests.resume_request,
        cancel_request_key(session_id, run.id): requests.cancel_request,
    }
    for key, read in reads.items():
        original = db.bytes.read("kv", key)
        for position in range(len(original)):
            db.bytes.write("kv", key, flip(original, position))
            with pytest.raises(CorruptRecordError):
                await read(session_id, run.id)
        db.bytes.write("kv", key, original)
        assert await read(session_id, run.id) is not None


async def test_flipped_index_and_heartbeat_records_count_as_unreadable(db: Db) -> None:
    """Hints that are rewritten whole by their owner: a damaged unfinished-run entry is
    infinitely old (so it is re-checked against the run record), a damaged worker
    heartbeat is skipped."""
    session_id, run_id = db.session.session_id, str(uuid.uuid4())
    index = UnfinishedIndex(db.store.kv)
    await index.add(session_id, run_id)
    key = unfinished_key(session_id, run_id)
    db.bytes.write("kv", key, flip(db.bytes.read("kv", key), 2))
    assert await index.age(session_id, run_id) == float("inf")
    worker_id = str(uuid.uuid4())
    heartbeat = WorkerRecord(worker_id, "host", 1, 5.0, (session_id,), 1.0, 2.0)
    await db.store.kv.put(worker_key(worker_id), heartbeat.encode(), expected=0)
    assert [w.worker_id for w in await read_workers(db.store)] == [worker_id]
    db.bytes.write("kv", worker_key(worker_id), flip(heartbeat.encode(), 3))
    assert await read_workers(db.store) == []


# -- activity journal repair ----------------------------------------------------------------


def _journal_bytes(db: Db, run: Run, tip: int, generation: int = 0) -> list[bytes]:
    log = journal_name(db.session.session_id, run.id, generation)
    return [db.bytes.read_record(log, seq) for seq in range(1, tip + 1)]


async def test_a_damaged_journal_record_is_rebuilt_and_resume_returns_the_run(
    db: Db, caplog: pytest.LogCaptureFixture
) -> None:
    """Regression (Reliability II, 3): with a flipped byte in an activity record, a resume
    used to run the workflow to completion and then fail with "publish durable activity
    failed", leaving the run ``running / workflow resuming`` forever. Now the damage is
    detected, reported (a warning naming the run, not its data), the journal rebuilt from
    the checkpoints with the same event IDs, and the run's status follows its
    checkpoints: ``completed``."""
    run = await interrupted_asker(db)
    sid = db.session.session_id
    log = journal_name(sid, run.id)
    before = await db.session.journal.records(sid, run.id)
    damaged = db.bytes.read_record(log, 2)
    db.bytes.write_record(log, 2, flip(damaged, len(damaged) // 2))
    with caplog.at_level("WARNING"):
        after = await db.supervisor.resume(run.id, b'{"increment": 3}')
    assert after is not None and after.status is RunStatus.COMPLETED
    assert db.session.gates.runs == {"ask": 2}
    assert await db.session.journal.generation(sid, run.id) == 1
    records = await db.session.journal.records(sid, run.id)
    assert [str(r.activity.kind) for r in records] == [
        "run_started",
        "run_interrupted",
        "run_resumed",
        "vertex_completed",
        "run_completed",
    ]
    assert records[: len(before)] == before  # the same activities, the same event IDs
    warnings = [r.getMessage() for r in caplog.records if "journal" in r.getMessage()]
    assert len(warnings) == 1 and run.id in warnings[0]
    assert "increment" not in warnings[0] and "how much" not in warnings[0]
    # The superseded log is left as it was; nothing reads it any more.
    assert db.bytes.read_record(log, 2) != damaged
    await check_consistent(db.session, await db.session.registry.get(sid, run.id))


async def test_a_missing_journal_record_is_rebuilt_when_the_run_is_adopted(db: Db) -> None:
    """A journal record that is gone (a gap below the tip) is detected by the next owner's
    publication, the journal rebuilt, and the run's status follows its checkpoints."""
    db.session.gates.close("two")
    run = await db.session.create_run()
    await (await db.supervisor.start(run.id)).wait()
    await asyncio.wait_for(db.session.gates.entered["two"].wait(), 60)
    sid = db.session.session_id
    for _ in range(6000):  # live publication runs beside the vertex (hang deadline only)
        if len(await db.session.journal.records(sid, run.id)) == 2:
            break
        await asyncio.sleep(0.01)
    await db.supervisor.shutdown()
    log = journal_name(sid, run.id)
    before = await db.session.journal.records(sid, run.id)
    assert len(before) == 2
    db.bytes.delete_record(log, 1)  # run_started: a gap below the tip
    db = await restart(db)
    after = await db.session.registry.get(sid, run.id)
    assert after.status is RunStatus.COMPLETED
    records = await db.session.journal.records(sid, run.id)
    assert records[: len(before)] == before
    assert [str(r.activity.kind) for r in records][-1] == "run_completed"
    assert await db.session.journal.generation(sid, run.id) == 1
    await check_consistent(db.session, after)


async def test_history_of_a_damaged_journal_is_rebuilt_byte_for_byte(db: Db) -> None:
    """A history read that finds a damaged record (here, of a finished run that paused and
    was resumed) makes the owning supervisor rebuild the journal from the checkpoints;
    every rebuilt record is byte-for-byte the one published originally, the
    ``run_resumed`` included."""
    run = await interrupted_asker(db)
    done = await db.supervisor.resume(run.id, b'{"increment": 2}')
    assert done is not None and done.status is RunStatus.COMPLETED
    sid = db.session.session_id
    log = journal_name(sid, run.id)
    tip = await db.store.ledger.tip(log)
    original = _journal_bytes(db, run, tip)
    page = await db.supervisor.history(run.id)
    db.bytes.write_record(log, 3, flip(original[2], 5))
    with pytest.raises(CorruptRecordError):
        await db.session.journal.page(sid, run.id)
    assert await db.supervisor.history(run.id) == page
    assert await db.session.journal.generation(sid, run.id) == 1
    assert _journal_bytes(db, run, tip, 1) == original
    assert await db.store.ledger.tip(journal_name(sid, run.id, 1)) == tip


async def test_a_journal_rebuild_cut_short_changes_nothing(db: Db) -> None:
    """A rebuild that fails half-way leaves the current journal as it was (its partial
    log is never read); the next rebuild uses a fresh generation."""
    run = await interrupted_asker(db)
    sid = db.session.session_id
    journal = db.session.journal
    records = await journal.records(sid, run.id)

    async def broken() -> AsyncIterator[list[Any]]:
        yield records[:1]
        raise OSError("disk gone")

    with pytest.raises(OSError):
        await journal.rebuild(sid, run.id, broken())
    assert await journal.generation(sid, run.id) == 0
    assert await journal.records(sid, run.id) == records

    async def whole() -> AsyncIterator[list[Any]]:
        yield records

    assert await journal.rebuild(sid, run.id, whole()) == 2
    assert await journal.records(sid, run.id) == records
    assert await journal.position(sid, run.id) == len(records)
