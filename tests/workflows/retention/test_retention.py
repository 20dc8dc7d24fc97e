"""Retention through the Python API (`flowledger.workflows.retention.pruning.prune`), on SQLite and
PostgreSQL: exactly the eligible runs go with all their data, everything else stays and
still works."""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from flowledger.clock import ManualClock
from flowledger.host import open_session
from flowledger.storage import KV, Entry, Fence, Store, open_store
from flowledger.tools import WorkflowTools
from flowledger.workflows.records.registry import RunRegistry
from flowledger.workflows.records.run import RunStatus, input_key, run_key
from flowledger.workflows.records.unfinished import UnfinishedIndex
from flowledger.workflows.retention.pruning import (
    InvalidDurationError,
    InvalidStatusError,
    PruneBusyError,
    RetentionPolicy,
    parse_duration,
    parse_statuses,
    prune,
    prune_lease_name,
)
from flowledger.workflows.runtime.session import default_session_id

from ..._postgres import postgres_url
from .._retention_support import Runs, backdate, catalog, owned_names, snapshot

POLICY = RetentionPolicy(timedelta(days=30))


@pytest.fixture(params=["sqlite", "postgres"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'prune.db'}"
    else:
        with postgres_url() as found:
            yield found


async def _session_id(url: str) -> str:
    async with open_store(url) as store:
        return await default_session_id(store)


async def test_prune_removes_exactly_the_eligible_runs_and_all_their_data(url: str) -> None:
    async with open_session(url, catalog()) as session:
        runs = Runs(session)
        done = await runs.completed("shared")
        done_alone = await runs.completed("alone")
        recent = await runs.completed("recent")
        waiting = await runs.interrupted("shared")  # shares its input with ``done``
        cancelled = await runs.cancelled("gone")
        failed = await runs.failed("down")
        sid = session.session_id
    async with open_store(url) as store:
        registry = RunRegistry(store.kv, index=UnfinishedIndex(store.kv))
        running = await Runs.running_record(_Facade(store, sid, registry), done_alone)
        old = [done, done_alone, waiting, cancelled, failed, running]
        records = {run_id: await backdate(store, sid, run_id) for run_id in old}
        records[recent] = await registry.get(sid, recent)
        pruned = [done, done_alone, cancelled, failed]
        owned = {run_id: await owned_names(store, sid, records[run_id]) for run_id in records}
        for run_id in pruned:
            assert run_key(sid, run_id) in owned[run_id]
            assert any(name.startswith("flow/runs/") for name in owned[run_id])
            assert any("/workflows/activity/" in name for name in owned[run_id])
        inputs = {run_id: records[run_id].input.key for run_id in records}
        before = await snapshot(store)

        report = await prune(store, sid, POLICY)

        after = await snapshot(store)
        gone = before - after
        expected = set().union(*(owned[r] for r in pruned))
        # Not "shared" (the interrupted run's) nor "alone" (the running record's).
        expected |= {inputs[r] for r in (cancelled, failed)}
        assert gone.names() == expected
        assert after - before == type(after)(frozenset(), frozenset(), frozenset())
        assert {inputs[done], inputs[done_alone]} <= after.blobs  # still needed
        for run_id in (recent, waiting, running):
            assert owned[run_id] <= after.names()
        assert sorted(report.runs) == sorted(pruned)
        assert report.by_status() == {"completed": 2, "cancelled": 1, "failed": 1}
        assert report.records == 4 and report.input_blobs == 2
        assert report.logs == len([n for n in expected if n in before.logs])
        assert report.kv_keys == len([n for n in expected if n in before.kv]) - 4
        assert report.record_bytes > 0 and report.log_bytes > 0 and report.input_bytes > 0
        assert report.sweep is not None  # the pruned runs' attachments went with them
        await store.kv.delete(run_key(sid, running))  # nothing would ever execute it
        await store.kv.delete(f"workflows/unfinished/{sid}/{running}")

        settled = await snapshot(store)
        again = await prune(store, sid, POLICY)  # "alone" is nobody's input any more
        assert again.runs == {} and again.input_blobs == 1
        assert (settled - await snapshot(store)).names() == {inputs[done_alone]}

    async with open_session(url, catalog()) as session:
        runs = Runs(session)
        for run_id in (recent, waiting):
            got = await runs.call("workflow_run_get", {"run_id": run_id})
            history = await runs.call("workflow_run_history", {"run_id": run_id})
            assert got["run_id"] == run_id and history["entries"]
        for run_id in pruned:
            with pytest.raises(Exception, match="not found"):
                await runs.call("workflow_run_get", {"run_id": run_id})
        listed = await runs.call("workflow_run_list", {})
        assert {r["run_id"] for r in listed["runs"]} == {recent, waiting}
        resumed = await runs.call(
            "workflow_run_resume", {"run_id": waiting, "resume": {"approved": True}}
        )
        assert resumed["run_status"] == "completed"


class _Facade:
    """Enough of a session for `Runs.running_record` on a store nobody owns."""

    def __init__(self, store: Store, session_id: str, registry: RunRegistry) -> None:
        self.session = self
        self.store = store
        self.session_id = session_id
        self.registry = registry


async def test_a_fork_keeps_its_origin_unless_pruned_with_it(url: str) -> None:
    async with open_session(url, catalog()) as session:
        runs = Runs(session)
        origin = await runs.completed("origin")
        fork = await runs.completed("fork")
        lonely = await runs.completed("lonely")
        sid = session.session_id
    async with open_store(url) as store:
        await backdate(store, sid, origin)
        await backdate(store, sid, lonely)
        forks = f"sessions/{sid}/workflows/forks/"
        await store.kv.put(f"{forks}{origin}/{fork}", b"", expected=0)
        # A marker without its fork's record is a fork being made: it keeps its origin.
        being_made = f"{forks}{lonely}/{_absent()}"
        await store.kv.put(being_made, b"", expected=0)

        first = await prune(store, sid, POLICY)
        assert first.runs == {}
        assert first.kept["forked"] == 2
        assert run_key(sid, origin) in await store.kv.keys(f"sessions/{sid}/")

        await backdate(store, sid, fork)  # now both are old: they go in the same pass
        second = await prune(store, sid, POLICY)
        assert set(second.runs) == {origin, fork}
        assert await store.kv.keys(forks) == [being_made]


async def test_requests_and_children_keep_a_run(url: str) -> None:
    async with open_session(url, catalog()) as session:
        runs = Runs(session)
        asked = await runs.completed("asked")
        parent = await runs.completed("parent")
        child_started = await runs.tools.call(
            "workflow_run_start",
            {
                "definition_name": "ask",
                "definition_version": "v1",
                "input": {"text": "child"},
                "parent_run_id": parent,
            },
        )
        await session.supervisor.wait_idle()
        sid = session.session_id
    async with open_store(url) as store:
        for run_id in (asked, parent):
            await backdate(store, sid, run_id)
        request = f"sessions/{sid}/workflows/cancel-requests/{asked}"
        await store.kv.put(request, b'{"version":1,"reason":"","requested_at":0}', expected=0)
        report = await prune(store, sid, POLICY)
        assert report.runs == {}
        assert report.kept["requested"] == 1 and report.kept["parent"] == 1
        keys = await store.kv.keys(f"sessions/{sid}/workflows/runs/")
        assert {run_key(sid, r) for r in (asked, parent, str(child_started["run_id"]))} <= set(keys)


def _absent() -> str:
    import uuid

    return str(uuid.uuid4())


def _sha256(path: Path) -> str:
    """The database file's digest; a write-ahead log beside it must hold nothing (a
    reader of a WAL database may create an empty one)."""
    wal = path.with_name(path.name + "-wal")
    assert not wal.exists() or wal.stat().st_size == 0
    return hashlib.sha256(path.read_bytes()).hexdigest()


async def test_dry_run_reports_the_same_and_writes_nothing(tmp_path: Path) -> None:
    path = tmp_path / "dry.db"
    url = f"sqlite:///{path}"
    async with open_session(url, catalog()) as session:
        runs = Runs(session)
        old = [await runs.completed("a"), await runs.cancelled("b"), await runs.failed("c")]
        sid = session.session_id
    async with open_store(url) as store:
        for run_id in old:
            await backdate(store, sid, run_id)
    files = _sha256(path)
    async with open_store(url, read_only=True) as store:
        dry = await prune(store, sid, POLICY, dry_run=True)
    assert _sha256(path) == files
    async with open_store(url) as store:
        real = await prune(store, sid, POLICY)
    assert dry.dry_run and not real.dry_run
    # A dry run knows the bytes of the attachments the pruned runs alone refer to, not
    # their number: everything else, bytes included, is what the real pass did.
    unequal = ("dry_run", "cutoff", "attachments")
    plan = {k: v for k, v in dry.to_json().items() if k not in unequal}
    done = {k: v for k, v in real.to_json().items() if k not in unequal}
    assert plan == done
    assert real.sweep is not None and real.sweep.attachments > 0
    assert plan["runs"] == {"completed": 1, "cancelled": 1, "failed": 1, "total": 3}


async def test_only_the_chosen_statuses_and_ages_go(url: str) -> None:
    async with open_session(url, catalog()) as session:
        runs = Runs(session)
        done = await runs.completed("a")
        cancelled = await runs.cancelled("b")
        sid = session.session_id
    async with open_store(url) as store:
        await backdate(store, sid, done, timedelta(hours=3))
        await backdate(store, sid, cancelled, timedelta(hours=3))
        policy = RetentionPolicy(timedelta(hours=4), parse_statuses("completed"))
        assert (await prune(store, sid, policy)).runs == {}
        policy = RetentionPolicy(timedelta(hours=2), parse_statuses("completed"))
        assert set((await prune(store, sid, policy)).runs) == {done}
        later = datetime.now(UTC) + timedelta(days=1)  # an injected clock
        report = await prune(store, sid, RetentionPolicy(timedelta(hours=20)), now=later)
        assert set(report.runs) == {cancelled}


class _ChangingKV:
    """A KV that, when the pruner writes its tombstone for ``run``, rewrites the run's
    record first (as a worker's late bookkeeping update would)."""

    def __init__(self, inner: KV, record: str) -> None:
        self.inner = inner
        self.record = record

    async def get(self, key: str) -> Entry:
        return await self.inner.get(key)

    async def put(
        self, key: str, value: bytes, *, expected: int, fence: Fence | None = None
    ) -> int:
        if "/workflows/pruning/" in key:
            entry = await self.inner.get(self.record)
            await self.inner.put(self.record, entry.value, expected=entry.revision)
        return await self.inner.put(key, value, expected=expected, fence=fence)

    async def delete(self, key: str, *, fence: Fence | None = None) -> None:
        await self.inner.delete(key, fence=fence)

    async def keys(self, prefix: str = "") -> list[str]:
        return await self.inner.keys(prefix)


async def test_a_record_that_changed_since_the_scan_is_skipped(url: str) -> None:
    async with open_session(url, catalog()) as session:
        run_id = await Runs(session).completed("a")
        sid = session.session_id
    async with open_store(url) as store:
        await backdate(store, sid, run_id)
        before = await snapshot(store)
        changing = dataclasses.replace(store, kv=_ChangingKV(store.kv, run_key(sid, run_id)))
        report = await prune(changing, sid, POLICY)
        assert report.runs == {} and report.kept["changed"] == 1
        assert await snapshot(store) == before  # the tombstone went again
        assert set((await prune(store, sid, POLICY)).runs) == {run_id}


async def test_a_crash_mid_prune_leaves_nothing_dangling_and_the_next_pass_finishes(
    url: str,
) -> None:
    async with open_session(url, catalog()) as session:
        runs = Runs(session)
        run_id = await runs.completed("a")
        kept = await runs.interrupted("b")
        sid = session.session_id
    async with open_store(url) as store:
        record = await backdate(store, sid, run_id)
        owned = await owned_names(store, sid, record)
        before = await snapshot(store)

        class Crash(Exception):
            pass

        async def crash(names: Any) -> None:
            raise Crash

        broken = dataclasses.replace(store, ledger=_WithDrop(store.ledger, crash))
        with pytest.raises(Crash):
            await prune(broken, sid, POLICY)
        middle = await snapshot(store)
        assert run_key(sid, run_id) not in middle.kv  # the record went first
        assert any("/workflows/pruning/" in key for key in middle.kv)
        assert owned & middle.logs  # its logs are still there, and nobody reads them
        tools = await _reader(store, sid)
        listed = await tools.call("workflow_run_list", {})
        assert [r["run_id"] for r in listed["runs"]] == [kept]

        report = await prune(store, sid, POLICY)
        assert report.leftover_runs == 1
        gone = (before - await snapshot(store)).names()
        assert gone == owned | {record.input.key}


class _WithDrop:
    def __init__(self, inner: Any, drop: Any) -> None:
        self._inner = inner
        self.drop = drop

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


async def _reader(store: Store, sid: str) -> WorkflowTools:
    from flowledger.tools.reading import ReadingControl
    from flowledger.workflows.runtime.session import WorkflowSession

    session = WorkflowSession.build(store, sid, catalog())
    return WorkflowTools.for_session(session, supervisor=ReadingControl(session, RuntimeError))


async def test_one_prune_of_a_session_at_a_time(url: str) -> None:
    sid = await _session_id(url)
    async with open_store(url) as store:
        lease = await store.leases.acquire(prune_lease_name(sid), ttl=30)
        with pytest.raises(PruneBusyError, match="another prune"):
            await prune(store, sid, POLICY)
        await lease.release()
        assert (await prune(store, sid, POLICY)).runs == {}


@pytest.mark.parametrize("text", ["", "3x", "30", "d", "-1d", "0d", "1.5h", "12h30", "99999d"])
def test_bad_durations_are_typed_errors_with_a_hint(text: str) -> None:
    with pytest.raises(InvalidDurationError, match=r"hint: .*30d"):
        parse_duration(text)


def test_durations() -> None:
    assert parse_duration("30d") == timedelta(days=30)
    assert parse_duration("12h") == timedelta(hours=12)
    assert parse_duration("90m") == timedelta(minutes=90)
    assert parse_duration("1d12h") == timedelta(days=1, hours=12)
    assert parse_duration(" 45S ") == timedelta(seconds=45)


@pytest.mark.parametrize("text", ["running", "interrupted", "pending", "done", ","])
def test_bad_statuses_are_typed_errors(text: str) -> None:
    with pytest.raises(InvalidStatusError, match="only finished runs"):
        parse_statuses(text)


def test_statuses() -> None:
    assert parse_statuses(None) == {RunStatus.COMPLETED, RunStatus.CANCELLED, RunStatus.FAILED}
    assert parse_statuses("failed, completed") == {RunStatus.COMPLETED, RunStatus.FAILED}


async def test_input_key_layout_is_what_prune_deletes() -> None:
    sid = _absent()
    assert input_key(sid, "a" * 64) == f"sessions/{sid}/workflows/inputs/sha256/{'a' * 64}"


async def test_a_worker_with_a_catalog_retention_prunes_by_its_clock(tmp_path: Path) -> None:
    """The catalog's policy, an injected clock (no backdating, no sleeping for age)."""
    import asyncio
    import contextlib

    from flowledger.workflows.runtime.worker import Worker, WorkerSettings

    url = f"sqlite:///{tmp_path / 'worker.db'}"
    async with open_session(url, catalog()) as session:
        runs = Runs(session)
        done = await runs.completed("a")
        waiting = await runs.interrupted("b")  # so that the worker claims the session
        sid = session.session_id
    application = catalog()
    application.retention = RetentionPolicy(timedelta(days=30), every=3600)
    later = datetime.now(UTC) + timedelta(days=31)
    async with open_store(url) as store:
        worker = Worker(store, application, WorkerSettings(poll=0.05), clock=ManualClock(later))
        assert worker.retention is not None
        stop = asyncio.Event()
        task = asyncio.create_task(worker.run(stop))
        try:
            async with asyncio.timeout(60):  # a hang deadline
                while sid not in worker.retention.reports:  # noqa: ASYNC110 (the worker task fills it)
                    await asyncio.sleep(0.05)
        finally:
            stop.set()
            with contextlib.suppress(Exception):
                await task
        report = worker.retention.reports[sid]
        assert set(report.runs) == {done}
        keys = await store.kv.keys(f"sessions/{sid}/workflows/runs/")
        assert keys == [run_key(sid, waiting)]


async def test_pruning_gives_the_space_back_to_the_file_system(tmp_path: Path) -> None:
    """Issue #19: the database shrinks by what was pruned. A new SQLite file uses
    incremental auto-vacuum and a pass ends with its sweep, which hands free pages back,
    so the file itself gets smaller (not only its free list longer)."""
    path = tmp_path / "space.db"
    url = f"sqlite:///{path}"
    async with open_session(url, catalog()) as session:
        runs = Runs(session)
        made = [await runs.completed(f"text {i} " + "x" * 3000) for i in range(60)]
        kept = await runs.completed("kept " + "y" * 3000)
        sid = session.session_id
    async with open_store(url) as store:
        for run_id in made:
            await backdate(store, sid, run_id)
    before = path.stat().st_size
    async with open_store(url) as store:
        report = await prune(store, sid, POLICY)
        assert len(report.runs) == len(made)
        assert report.sweep is not None and report.sweep.attachments > 0
    after = path.stat().st_size
    assert after < before - report.input_bytes, (before, after, report.total_bytes)
    async with open_session(url, catalog()) as session:
        got = await Runs(session).call("workflow_run_get", {"run_id": kept})
        assert got["run_status"] == "completed"
