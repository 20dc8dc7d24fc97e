"""Schema-2 checkpoint logs (`ledger_store`, `ledger_delta`): delta records, bounded chains.

* Bytes written per super-step grow linearly with the fan-out width (counted, not timed).
* Every revision of a fan-out run (paused, resumed by a fresh store, completed) reads back
  exactly, after reopening SQLite / PostgreSQL, from a cold store, one revision at a time.
* Reading a revision is the record plus at most one range read of its chain.
* A schema-1 log (committed fixture, written by the previous format) still reads back and
  is continued in schema 1.
* Damaged delta records are `StoreError`s wrapping `CheckpointDecodeError`.
* Hypothesis: random fan-out step sequences, any batching, tight or default chain bounds:
  every revision reads back equal, key order included.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import copy
import json
import uuid
from collections.abc import AsyncIterator, Callable, Iterable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from flowledger import flow
from flowledger.flow import (
    Checkpoint,
    CheckpointDecodeError,
    InterruptKind,
    InterruptRecord,
    RouteRecord,
    RunRecord,
    RunStatus,
    StepPhase,
    StoreError,
    VertexRecord,
    VertexStatus,
    ledger_store,
)
from flowledger.flow.checkpoint import from_document, to_document
from flowledger.flow.codec import dumps_ordered, loads
from flowledger.storage import Record, open_store

from .._postgres import postgres_url

FIXTURE = Path(__file__).parent / "data" / "ledger_v1_fanout.json"


def log_name(run_id: str) -> str:
    return f"flow/runs/{run_id}"


def exact(cp: Checkpoint) -> bytes:
    """A checkpoint's document in its own key order (``==`` on dicts ignores order)."""
    return dumps_ordered(to_document(cp))


class CountingLedger:
    """A ledger wrapper that counts what committed appends wrote and what reads asked."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.record_bytes = 0
        self.attachment_bytes = 0
        self.reads: list[tuple[int, int, int]] = []  # (after, limit, bytes returned)

    @property
    def written(self) -> int:
        return self.record_bytes + self.attachment_bytes

    async def append(
        self,
        name: str,
        records: Sequence[bytes],
        *,
        expected: int,
        attachments: Mapping[str, bytes] | None = None,
        **fence: Any,
    ) -> int:
        tip: int = await self.inner.append(
            name, records, expected=expected, attachments=attachments, **fence
        )
        self.record_bytes += sum(len(r) for r in records)
        self.attachment_bytes += sum(len(a) for a in (attachments or {}).values())
        return tip

    async def read(self, name: str, *, after: int = 0, limit: int = 100) -> list[Record]:
        records: list[Record] = await self.inner.read(name, after=after, limit=limit)
        self.reads.append((after, limit, sum(len(r.payload) for r in records)))
        return records

    async def tip(self, name: str) -> int:
        result: int = await self.inner.tip(name)
        return result

    async def names(self, prefix: str = "") -> list[str]:
        result: list[str] = await self.inner.names(prefix)
        return result

    async def attachments(self, digests: Iterable[str]) -> dict[str, bytes]:
        result: dict[str, bytes] = await self.inner.attachments(digests)
        return result


class RecordingStore:
    """A checkpoint store wrapper that keeps a copy of every checkpoint appended."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.appended: list[Checkpoint] = []

    async def append(self, checkpoints: Sequence[Checkpoint]) -> None:
        await self.inner.append(checkpoints)
        self.appended.extend(cp.copy() for cp in checkpoints)

    async def latest(self, run_id: str) -> Checkpoint:
        result: Checkpoint = await self.inner.latest(run_id)
        return result

    async def history(
        self, run_id: str, *, after: int = -1, limit: int | None = None
    ) -> list[Checkpoint]:
        result: list[Checkpoint] = await self.inner.history(run_id, after=after, limit=limit)
        return result


def fan_graph(width: int, steps: int, *, pause_at: int | None = None) -> flow.Graph[dict[str, Any]]:
    """``fan -> w0..w{width-1}``, each looping on itself ``steps`` times, then ``stop`` (the
    shape of bench/compare.py's workload c). With ``pause_at``, ``w1`` interrupts once
    at that count."""
    graph: flow.Graph[dict[str, Any]] = flow.Graph("fan", state=dict)

    async def fan(state: dict[str, Any]) -> None:
        return None

    async def stop(state: dict[str, Any]) -> dict[str, Any]:
        return {"count": state["count"] + 1}

    graph.add_vertex("fan", fan)
    graph.add_vertex("stop", stop)
    for i in range(width):
        key, name = f"f{i}", f"w{i}"

        async def work(state: dict[str, Any], key: str = key, name: str = name) -> Any:
            if name == "w1" and state[key] == pause_at:
                answer = flow.interrupt({"at": state[key]})
                return {key: state[key] + 1, "answer": answer}
            return {key: state[key] + 1}

        graph.add_vertex(name, work)
        graph.add_edge("fan", name)
        graph.add_route(
            name,
            targets=[name, "stop"],
            pick=lambda s, key=key, name=name: name if s[key] < steps else "stop",
        )
    return graph


def fan_state(width: int) -> dict[str, Any]:
    return {"count": 0, "payload": "x" * 1024, **{f"f{i}": 0 for i in range(width)}}


# -- bytes per super-step -------------------------------------------------------------------

STEPS = 30


async def _bytes_per_step(width: int) -> float:
    async with open_store("memory://") as storage:
        counting = CountingLedger(storage.ledger)
        store = flow.LedgerCheckpointStore(counting)
        runner = fan_graph(width, STEPS).compile(entry="fan", finish="stop", store=store)
        result = await runner.run(fan_state(width), concurrency=width, max_steps=STEPS + 5)
        assert result.run.status is RunStatus.COMPLETED
        assert result.state["f0"] == STEPS
        return counting.written / STEPS


async def test_fanout_bytes_grow_linearly_with_width() -> None:
    """Issue #18: a super-step of W per-vertex checkpoints writes bytes linear in W (schema 1
    wrote every vertex record of the step into each of them: quadratic)."""
    per_step = {width: await _bytes_per_step(width) for width in (8, 16, 32)}
    assert per_step[16] <= 1.1 * 2 * per_step[8], per_step
    assert per_step[32] <= 1.1 * 4 * per_step[8], per_step
    # About one vertex row, the one field it changed and the run record per checkpoint.
    assert per_step[8] / 9 < 330, per_step


# -- every revision reads back, after reopening -----------------------------------------------


@contextlib.asynccontextmanager
async def _storage_url(kind: str, tmp_path: Path) -> AsyncIterator[str]:
    if kind == "sqlite":
        yield f"sqlite:///{tmp_path}/fan.db"
        return
    with postgres_url() as url:
        yield url


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
async def test_every_revision_of_a_fanout_run_reads_back_after_reopen(
    kind: str, tmp_path: Path
) -> None:
    """A paused fan-out run, resumed by a new store object (its first append follows a read)
    and completed: after reopening, every revision reads back exactly, also one at a time
    from cold stores; latest is the last one appended."""
    width, steps = 5, 6
    async with _storage_url(kind, tmp_path) as url:
        async with open_store(url) as storage:
            recording = RecordingStore(flow.LedgerCheckpointStore(storage.ledger))
            graph = fan_graph(width, steps, pause_at=3)
            runner = graph.compile(entry="fan", finish="stop", store=recording)
            paused = await runner.run(fan_state(width), concurrency=width)
            assert paused.run.status is RunStatus.INTERRUPTED
            run_id = paused.run.graph_run_id
            recording.inner = flow.LedgerCheckpointStore(storage.ledger)  # a cold cache
            runner = graph.compile(entry="fan", finish="stop", store=recording)
            done = await runner.resume(run_id, "yes", concurrency=2)
            assert done.run.status is RunStatus.COMPLETED
            assert done.state["answer"] == "yes"
        appended = recording.appended
        assert [cp.revision for cp in appended] == list(range(len(appended)))
        async with open_store(url) as storage:
            store = flow.LedgerCheckpointStore(storage.ledger)
            history = await store.history(run_id)
            assert history == appended
            assert [exact(cp) for cp in history] == [exact(cp) for cp in appended]
            assert exact(await store.latest(run_id)) == exact(appended[-1])
            for cp in appended:
                cold = flow.LedgerCheckpointStore(storage.ledger)
                (one,) = await cold.history(run_id, after=cp.revision - 1, limit=1)
                assert exact(one) == exact(cp)
            records = await storage.ledger.read(log_name(run_id), after=0, limit=1000)
            depths = [loads(r.payload).get("depth", 0) for r in records]
            assert max(depths) > width  # the records really are deltas, chained across steps


async def test_reading_a_revision_reads_its_chain_in_one_range_read() -> None:
    """Any single revision costs its record and at most one more ledger read, of exactly
    the records back to its chain's full record (plus, once per store, revision 0)."""
    async with open_store("memory://") as storage:
        store = flow.LedgerCheckpointStore(storage.ledger)
        runner = fan_graph(8, 20).compile(entry="fan", finish="stop", store=store)
        result = await runner.run(fan_state(8), concurrency=8)
        run_id = result.run.graph_run_id
        tip = await storage.ledger.tip(log_name(run_id))
        records = await storage.ledger.read(log_name(run_id), after=0, limit=1000)
        depths = [loads(r.payload).get("depth", 0) for r in records]
        for revision in (tip - 1, tip // 2, 1):
            counting = CountingLedger(storage.ledger)
            cold = flow.LedgerCheckpointStore(counting)
            await cold.history(run_id, limit=1)  # revision 0: the log's schema, then cached
            counting.reads.clear()
            await cold.history(run_id, after=revision - 1, limit=1)
            depth = depths[revision]
            expected = [(revision, 1)] + ([(revision - depth, depth)] if depth else [])
            assert [(after, limit) for after, limit, _ in counting.reads] == expected


# -- the schema-1 format ------------------------------------------------------------------------


async def _load_fixture(ledger: Any) -> tuple[str, list[Checkpoint]]:
    data = json.loads(FIXTURE.read_text())
    attachments = {d: base64.b64decode(v) for d, v in data["attachments"].items()}
    records = [r.encode() for r in data["records"]]
    await ledger.append(log_name(data["run_id"]), records, expected=0, attachments=attachments)
    return data["run_id"], [from_document(doc) for doc in data["checkpoints"]]


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
async def test_a_schema_1_log_reads_back_and_is_continued_in_schema_1(
    kind: str, tmp_path: Path
) -> None:
    """A log written by the previous format (committed fixture, with ``same`` sharing) reads
    back exactly, whole and one revision at a time; appending to it keeps its format."""
    url = "memory://" if kind == "memory" else f"sqlite:///{tmp_path}/old.db"
    async with open_store(url) as storage:
        run_id, expected = await _load_fixture(storage.ledger)
        first = await storage.ledger.read(log_name(run_id), after=0, limit=1)
        assert loads(first[0].payload)["schema_version"] == 1
        store = flow.LedgerCheckpointStore(storage.ledger)
        assert await store.history(run_id) == expected
        assert await store.latest(run_id) == expected[-1]
        for cp in expected:
            cold = flow.LedgerCheckpointStore(storage.ledger)
            assert await cold.history(run_id, after=cp.revision - 1, limit=1) == [cp]
        more = expected[-1].copy()
        more.run.revision += 1
        more.run.cancel_reason = "appended by schema 2 code"
        again = more.copy()
        again.run.revision += 1
        await store.append([more.copy(), again.copy()])
        tail = await storage.ledger.read(log_name(run_id), after=len(expected), limit=10)
        for record in tail:
            assert set(loads(record.payload)) <= {"revision", "state", "step_base", "same",
                                                  "checkpoint"}  # fmt: skip
        assert await flow.LedgerCheckpointStore(storage.ledger).history(run_id) == [
            *expected,
            more,
            again,
        ]


async def test_schema_2_keys_in_a_schema_1_log_are_rejected() -> None:
    """Strict per log: a record with a delta ``depth`` in a schema-1 log is a decode error."""
    async with open_store("memory://") as storage:
        run_id, expected = await _load_fixture(storage.ledger)
        (last,) = await storage.ledger.read(log_name(run_id), after=len(expected) - 1, limit=1)
        envelope = loads(last.payload)
        envelope["revision"] += 1
        envelope.pop("same", None)
        envelope["depth"] = 1
        await storage.ledger.append(
            log_name(run_id), [dumps_ordered(envelope)], expected=len(expected)
        )
        with pytest.raises(StoreError) as caught:
            await flow.LedgerCheckpointStore(storage.ledger).latest(run_id)
        assert isinstance(caught.value.cause, CheckpointDecodeError)
        assert "envelope.depth" in str(caught.value)


# -- damaged delta records ----------------------------------------------------------------------


def _rows_patch(env: dict[str, Any]) -> dict[str, Any]:
    patch = env["vertices"]
    assert isinstance(patch, dict) and len(patch["set"]) == 1, env
    return patch  # type: ignore[no-any-return]


def _spoil_rows(change: Callable[[dict[str, Any]], Any]) -> Callable[[dict[str, Any]], Any]:
    def spoil(env: dict[str, Any]) -> Any:
        change(_rows_patch(env))
        return env

    return spoil


def _set(env: dict[str, Any], **changes: Any) -> dict[str, Any]:
    return {**env, **changes}


def _bad_id_row(env: dict[str, Any]) -> dict[str, Any]:
    patch = _rows_patch(env)
    index = patch["set"][0][0]
    patch["set"] = [[index, ["w1", "!" * 22, 1, 2, 1, 0]]]
    return env


def _state_patch(env: dict[str, Any], **changes: Any) -> dict[str, Any]:
    assert isinstance(env["state"], dict), env
    return {**env, "state": {**env["state"], **changes}}


# Each spoils the envelope of a delta record in the middle of a step: it is a depth >= 2
# delta whose state patch sets one field and whose vertex patch changes one row by its tail.
DELTA_DAMAGE: list[tuple[str, Callable[[dict[str, Any]], Any]]] = [
    ("depth-plus-one", lambda e: _set(e, depth=e["depth"] + 1)),
    ("depth-minus-one", lambda e: _set(e, depth=e["depth"] - 1)),
    ("depth-zero", lambda e: _set(e, depth=0)),
    ("depth-missing", lambda e: {k: v for k, v in e.items() if k != "depth"}),
    ("depth-string", lambda e: _set(e, depth=str(e["depth"]))),
    ("depth-true", lambda e: _set(e, depth=True)),
    ("depth-over-the-bound", lambda e: _set(e, depth=ledger_store.MAX_DEPTH + 1)),
    ("depth-before-revision-0", lambda e: _set(e, depth=e["revision"] + 1)),
    ("shared-as-in-schema-1", lambda e: _set(e, same=["state"])),
    ("unknown-envelope-key", lambda e: _set(e, extra=1)),
    ("vertices-in-the-body", lambda e: _set(e, checkpoint={**e["checkpoint"], "vertices": []})),
    ("rows-not-a-patch", lambda e: _set(e, vertices=5)),
    ("rows-unknown-key", _spoil_rows(lambda p: p.update(x=1))),
    ("rows-count-missing", _spoil_rows(lambda p: p.pop("n"))),
    ("rows-count-negative", _spoil_rows(lambda p: p.update(n=-1))),
    ("rows-grown-not-given", _spoil_rows(lambda p: p.update(n=p["n"] + 1))),
    ("rows-index-beyond-count", _spoil_rows(lambda p: p["set"][0].__setitem__(0, p["n"]))),
    ("rows-index-repeated", _spoil_rows(lambda p: p["set"].append(list(p["set"][0])))),
    ("rows-keep-too-long", _spoil_rows(lambda p: p["set"][0].__setitem__(1, 99))),
    ("rows-keep-zero", _spoil_rows(lambda p: p["set"][0].__setitem__(1, 0))),
    ("rows-change-too-long", _spoil_rows(lambda p: p["set"][0].append(1))),
    ("row-too-short", _spoil_rows(lambda p: p["set"].__setitem__(0, [p["set"][0][0], [1]]))),
    ("row-status-bool", _spoil_rows(lambda p: p["set"][0].__setitem__(2, [True]))),
    ("row-bad-status", _spoil_rows(lambda p: p["set"][0].__setitem__(2, [42]))),
    ("row-bad-compact-id", _bad_id_row),
    ("state-not-a-digest", lambda e: _set(e, state=5)),
    ("state-digest-missing", lambda e: _set(e, state="0" * 64)),
    ("state-of-unknown", lambda e: _state_patch(e, of="bogus")),
    ("state-of-default-given", lambda e: _state_patch(e, of="state")),
    ("state-of-a-list", lambda e: _state_patch(e, of=[])),  # found by test_fuzz.py
    ("state-of-a-number", lambda e: _state_patch(e, of=5)),
    ("state-patch-unknown-key", lambda e: _state_patch(e, x=1)),
    ("state-set-not-object", lambda e: _state_patch(e, set=[1])),
    ("state-set-bad-entry", lambda e: _state_patch(e, set={"f1": [1, 2]})),
    ("state-del-unknown", lambda e: _state_patch(e, **{"del": ["nope"]})),
    ("state-del-and-set", lambda e: _state_patch(e, **{"del": list(e["state"]["set"])})),
    ("step-base-patch-of-none", lambda e: _set(e, step_base={"of": "step_base"})),
    ("route-bad-row", lambda e: _set(e, checkpoint={**e["checkpoint"], "routes": [["w0"]]})),
    ("run-created-at-string", lambda e: _set(e, checkpoint={
        **e["checkpoint"], "run": {**e["checkpoint"]["run"], "created_at": "x"}})),
]  # fmt: skip


async def _fan_records(width: int = 3, steps: int = 3) -> tuple[str, list[bytes], dict]:
    async with open_store("memory://") as storage:
        store = flow.LedgerCheckpointStore(storage.ledger)
        runner = fan_graph(width, steps).compile(entry="fan", finish="stop", store=store)
        result = await runner.run(fan_state(width), concurrency=width)
        run_id = result.run.graph_run_id
        records = await storage.ledger.read(log_name(run_id), after=0, limit=1000)
        attachments = dict(storage.ledger._attachments)
        return run_id, [r.payload for r in records], attachments


def _middle_delta(records: list[bytes]) -> int:
    """The index of the first delta record whose state and vertex patches change one each."""
    for index, payload in enumerate(records):
        envelope = loads(payload)
        patch = envelope.get("vertices")
        state = envelope.get("state")
        if (
            envelope.get("depth", 0) >= 2
            and isinstance(patch, dict)
            and len(patch["set"]) == 1
            and len(patch["set"][0]) == 3
            and isinstance(state, dict)
            and "of" not in state
        ):
            return index
    raise AssertionError("no such record")


async def test_undamaged_middle_delta_reads_back() -> None:
    """The sanity check of the damage tests: the chosen record, rewritten unspoilt, reads."""
    run_id, records, attachments = await _fan_records()
    index = _middle_delta(records)
    async with open_store("memory://") as storage:
        again = [dumps_ordered(loads(r)) for r in records[: index + 1]]
        await storage.ledger.append(log_name(run_id), again, expected=0, attachments=attachments)
        cp = await flow.LedgerCheckpointStore(storage.ledger).latest(run_id)
        assert cp.revision == index and cp.phase is StepPhase.RUNNING


@pytest.mark.parametrize("spoil", [pytest.param(f, id=name) for name, f in DELTA_DAMAGE])
async def test_damaged_delta_records_are_decode_errors(spoil: Any) -> None:
    """Strict decoding: each damage of a delta record -> StoreError wrapping a
    CheckpointDecodeError, on latest and on history, from a cold store."""
    run_id, records, attachments = await _fan_records()
    index = _middle_delta(records)
    spoilt = dumps_ordered(spoil(loads(records[index])))
    async with open_store("memory://") as storage:
        await storage.ledger.append(
            log_name(run_id), [*records[:index], spoilt], expected=0, attachments=attachments
        )
        for op in ("latest", "history"):
            store = flow.LedgerCheckpointStore(storage.ledger)
            with pytest.raises(StoreError) as caught:
                await getattr(store, op)(run_id)
            assert caught.value.op == op
            assert isinstance(caught.value.cause, CheckpointDecodeError), caught.value


# -- property: random fan-out histories read back exactly ---------------------------------------

T0 = datetime(2025, 3, 4, 5, 6, 7, 890_123, tzinfo=UTC)
RUN = "0b7e3a52-5a7e-4b5c-9f10-6c2d3e4f5a6b"
IDS = st.one_of(
    st.uuids().map(str),
    st.uuids().map(lambda u: str(u).upper()),  # not canonical: kept as [id]
    st.text("abcdefghijklmnopqrstuvwxyz-_0123456789", min_size=22, max_size=22),
    st.text(max_size=8),
)
TIMES = st.one_of(
    st.none(), st.integers(-(10**9), 10**12).map(lambda us: T0 + timedelta(microseconds=us))
)
VALUES = st.one_of(
    st.integers(-5, 5),
    st.booleans(),
    st.just(1.0),
    st.text(max_size=3),
    st.just("z" * 300),  # a field attachment
    st.lists(st.integers(0, 3), max_size=3),
    st.dictionaries(st.sampled_from("qpr"), st.integers(0, 2), max_size=3),
)


@st.composite
def vertex_records(draw: st.DrawFn, name: str, step: int) -> VertexRecord:
    return VertexRecord(
        name,
        draw(IDS),
        draw(st.sampled_from([step, step, step + 1])),
        draw(st.sampled_from(list(VertexStatus))),
        draw(st.integers(0, 3)),
        *(draw(TIMES) for _ in range(5)),
        draw(st.sampled_from(["", "", "boom"])),
    )


@st.composite
def fanout_histories(draw: st.DrawFn) -> tuple[list[Checkpoint], list[int]]:
    """Steps of random width; each step's per-vertex checkpoints change one vertex record
    and a few state fields (added, changed, removed, reordered); then a boundary."""
    cps: list[Checkpoint] = []
    state: dict[str, Any] | None = {"a": 0}
    base: dict[str, Any] | None = None
    revision = 0

    def emit(phase: StepPhase, vertices: list[VertexRecord], **more: Any) -> None:
        nonlocal revision
        status = draw(st.sampled_from(list(RunStatus)))
        updated = T0 + timedelta(microseconds=draw(st.integers(0, 10**9)))
        run = RunRecord(RUN, "g", "v", status, len(cps) // 3, revision, T0, T0, updated)
        run.finish_reached = draw(st.booleans())
        cps.append(Checkpoint(run, phase, copy.deepcopy(state), copy.deepcopy(base),
                              [copy.copy(v) for v in vertices], **more))  # fmt: skip
        revision += 1

    emit(StepPhase.ROUTED, [], frontier=["v0"])
    for step in range(draw(st.integers(1, 4))):
        width = draw(st.integers(0, 4))
        pool = st.sampled_from([f"v{i}" for i in range(6)])
        names = sorted(draw(st.sets(pool, min_size=width, max_size=width)))
        vertices = [draw(vertex_records(name, step)) for name in names]
        base = draw(st.sampled_from([state, None, {"b": 1}]))
        for _ in range(draw(st.integers(1, 4))):
            if vertices:
                index = draw(st.integers(0, len(vertices) - 1))
                vertices[index] = draw(vertex_records(vertices[index].vertex, step))
            if draw(st.integers(0, 5)) == 0:
                state = None
            else:
                state = dict(state or {})
                for _ in range(draw(st.integers(0, 2))):
                    action = draw(st.sampled_from(["set", "set", "del", "reorder"]))
                    if action == "set":
                        state[draw(st.sampled_from("abcdef"))] = draw(VALUES)
                    elif action == "del" and state:
                        del state[draw(st.sampled_from(sorted(state)))]
                    elif action == "reorder" and state:
                        keys = draw(st.permutations(list(state)))
                        state = {k: state[k] for k in keys}
            paused = InterruptRecord("v0", InterruptKind.AWAITING, {"i": 1})
            interrupts = draw(st.sampled_from([[], [paused]]))
            emit(StepPhase.RUNNING, vertices, interrupts=interrupts)
        routes = [RouteRecord(v.vertex, (v.vertex,), draw(st.booleans())) for v in vertices]
        emit(StepPhase.ROUTED, vertices, frontier=names, routes=routes)
    sizes = []
    left = len(cps)
    while left:
        size = draw(st.integers(1, min(left, 8)))
        sizes.append(size)
        left -= size
    return cps, sizes


async def _check_fanout_history(kind: str, directory: Path, cps: list[Checkpoint],
                                sizes: list[int], cold_writers: list[bool]) -> None:  # fmt: skip
    url = "memory://" if kind == "memory" else f"sqlite:///{directory}/h.db"
    async with open_store(url) as storage:
        writer = flow.LedgerCheckpointStore(storage.ledger)
        start = 0
        for index, size in enumerate(sizes):
            # A new writer knows no previous record: its first one is full.
            if index < len(cold_writers) and cold_writers[index]:
                writer = flow.LedgerCheckpointStore(storage.ledger)
            await writer.append([cp.copy() for cp in cps[start : start + size]])
            start += size
        expected = [exact(cp) for cp in cps]
        for reader in (writer, flow.LedgerCheckpointStore(storage.ledger)):
            assert [exact(cp) for cp in await reader.history(RUN)] == expected
            assert exact(await reader.latest(RUN)) == expected[-1]
        for revision in range(len(cps)):
            cold = flow.LedgerCheckpointStore(storage.ledger)
            got = await cold.history(RUN, after=revision - 1, limit=3)
            assert [exact(cp) for cp in got] == expected[revision : revision + 3]


@pytest.mark.parametrize("bounds", ["default", "tight"])
@pytest.mark.parametrize("kind", ["memory", "sqlite"])
def test_random_fanout_histories_read_back(
    kind: str, bounds: str, tmp_path_factory: pytest.TempPathFactory,
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    """Hypothesis: random fan-out step sequences in any batching, with writers that know
    or do not know the previous record, under the default chain bounds and under tight ones
    (chains restart every few records): every revision reads back exactly."""
    if bounds == "tight":
        monkeypatch.setattr(ledger_store, "MAX_DEPTH", 3)
        monkeypatch.setattr(ledger_store, "CHAIN_MIN_BYTES", 0)
        monkeypatch.setattr(ledger_store, "CHAIN_FACTOR", 1)

    @settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(fanout_histories(), st.lists(st.booleans(), max_size=10))
    def check(case: tuple[list[Checkpoint], list[int]], cold: list[bool]) -> None:
        directory = tmp_path_factory.mktemp("fan")
        asyncio.run(_check_fanout_history(kind, directory, *case, cold))

    check()


def test_compact_ids_are_never_confused() -> None:
    """A run id that looks like a compact UUID is stored as [id] and reads back as given."""
    from flowledger.flow.ledger_delta import rows_to_vertices, vertices_to_rows

    looks_compact = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()
    canonical = str(uuid.uuid4())
    for vertex_run_id in (canonical, canonical.upper(), looks_compact, ""):
        doc = {"vertex": "a", "vertex_run_id": vertex_run_id, "step": 0, "status": 1,
               "attempt": 0}  # fmt: skip
        rows = vertices_to_rows([doc], 0)
        assert rows_to_vertices(rows, 0, "rows") == [doc]
        if vertex_run_id == canonical:
            assert isinstance(rows[0][1], str) and len(rows[0][1]) == 22
        else:
            assert rows[0][1] == [vertex_run_id]
