"""Conformance: checkpoint stores (flow-spec §6; checklist §8.194-205 and §8.228-239).

Every contract test runs on four stores: the in-memory `MemoryCheckpointStore` (the
oracle), and `LedgerCheckpointStore` over ``open_store("memory://")``, over
``open_store("sqlite:///<tmp>/x.db")`` and over PostgreSQL (a schema of its own per test,
see ``tests/_postgres.py``). Ledger-specific tests (layout, envelope, limits,
de-duplication, durability) run on the three ledgers.

Ours: operation names are lowercase ("append", "latest", "history"); an append takes a
batch of consecutive checkpoints of one run; cancellation is asyncio's (§8.201's context
checks do not apply). The ledger store keeps each top-level state field once, by
digest, as a ledger attachment (DESIGN.md "L1 flow").
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import sqlite3
import threading
from collections.abc import AsyncIterator, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from flowledger import flow
from flowledger.flow import (
    Checkpoint,
    CheckpointDecodeError,
    CheckpointNotFoundError,
    CodecError,
    HaltKind,
    HaltRecord,
    InterruptKind,
    InterruptRecord,
    RevisionConflictError,
    RouteRecord,
    RunRecord,
    RunStatus,
    StepPhase,
    StoreError,
    VertexRecord,
    VertexStatus,
)
from flowledger.flow.codec import dumps, loads
from flowledger.flow.ids import new_run_id
from flowledger.storage import Record, StorageError, Store, digest_of, open_store

from .._postgres import postgres_url

T0 = datetime(2025, 1, 2, 3, 4, 5, 678_901, tzinfo=UTC)


def make_cp(
    run_id: str,
    revision: int,
    state: Any = None,
    *,
    phase: StepPhase = StepPhase.ROUTED,
    step_base: Any = None,
    frontier: Sequence[str] = ("a",),
    **more: Any,
) -> Checkpoint:
    """A small valid checkpoint; ``state`` defaults to ``{"rev": revision}``."""
    run = RunRecord(
        graph_run_id=run_id,
        graph_id="g",
        graph_version="0" * 64 + ":0",
        status=RunStatus.RUNNING,
        step=revision,
        revision=revision,
        created_at=T0,
        started_at=T0,
        updated_at=T0 + timedelta(seconds=revision),
    )
    return Checkpoint(
        run=run,
        phase=phase,
        state={"rev": revision} if state is None else state,
        step_base=step_base,
        frontier=list(frontier),
        **more,
    )


def rich_cp(run_id: str, revision: int, phase: StepPhase) -> Checkpoint:
    """A checkpoint with every part populated that ``phase`` allows."""
    cp = make_cp(
        run_id,
        revision,
        {"vals": ["a", "b"], "n": 2, "nested": {"k": [1, {"z": None}]}, "s": "é & <x>"},
        phase=phase,
        step_base={"vals": ["a"], "n": 1, "nested": {"k": []}, "s": ""},
        frontier=["b", "c"],
        vertices=[
            VertexRecord("a", new_run_id(), 1, VertexStatus.DONE, 1, T0, T0, T0),
            VertexRecord(
                "b", new_run_id(), 1, VertexStatus.FAILED, 2, T0, T0, None, None, T0, "boom"
            ),
        ],
        routes=[RouteRecord("a", ("b", "c"), False), RouteRecord("c", ("b",), True)],
    )
    cp.run.finish_reached = True
    cp.run.interrupted_at = T0
    if phase in (StepPhase.RUNNING, StepPhase.PAUSED):
        cp.interrupts = [
            InterruptRecord("b", InterruptKind.ERRORED, None, "boom"),
            InterruptRecord("c", InterruptKind.AWAITING, {"q": 1}, "", True, ["cont"]),
        ]
    if phase is StepPhase.HALTED:
        cp.halt = HaltRecord(HaltKind.DEAD_END, 1, "dead end")
    return cp


# -- backends -------------------------------------------------------------------------------


@dataclass
class Backend:
    """A checkpoint store under test, with the white-box helpers the tests need."""

    kind: str
    store: Any
    storage: Store | None = None
    path: Path | None = None
    extra: list[Store] = field(default_factory=list)
    url: str = ""
    exits: contextlib.ExitStack = field(default_factory=contextlib.ExitStack)

    @property
    def ledger(self) -> Any:
        assert self.storage is not None
        return self.storage.ledger

    async def writer(self) -> Any:
        """Another store object writing the same runs (for a race): a second store over
        the same ledger, or over a second connection to the same SQLite file."""
        if self.kind == "memory":
            return self.store
        if self.kind in ("ledger-sqlite", "ledger-postgres"):
            other = await open_store(self.url)
            self.extra.append(other)
            return flow.LedgerCheckpointStore(other.ledger)
        return flow.LedgerCheckpointStore(self.ledger)

    async def corrupt(self, run_id: str, data: bytes) -> None:
        """Make ``data`` the newest stored record of ``run_id``."""
        if self.kind == "memory":
            history = self.store._runs[run_id]
            self.store.corrupt(run_id, len(history) - 1, data)
        else:
            name = f"flow/runs/{run_id}"
            await self.ledger.append(name, [data], expected=await self.ledger.tip(name))

    def _postgres(self, query: str) -> int:
        import psycopg

        schema = self.url.rsplit("schema=", 1)[1]
        with psycopg.connect(self.url.split("?", 1)[0]) as conn:
            row = conn.execute(query.replace("attachments", f'"{schema}".attachments')).fetchone()
            return int(row[0] if row is not None else 0)

    def attachment_count(self) -> int:
        if self.kind == "ledger-memory":
            return len(self.ledger._attachments)
        if self.kind == "ledger-postgres":
            return self._postgres("SELECT count(*) FROM attachments")
        assert self.path is not None
        with sqlite3.connect(self.path) as conn:
            return int(conn.execute("SELECT count(*) FROM attachments").fetchone()[0])

    def attachment_bytes(self) -> int:
        if self.kind == "ledger-memory":
            return sum(len(v) for v in self.ledger._attachments.values())
        if self.kind == "ledger-postgres":
            return self._postgres("SELECT coalesce(sum(length(content)), 0) FROM attachments")
        assert self.path is not None
        with sqlite3.connect(self.path) as conn:
            return int(conn.execute("SELECT sum(length(content)) FROM attachments").fetchone()[0])


async def _open(kind: str, tmp_path: Path) -> Backend:
    if kind == "memory":
        return Backend(kind, flow.MemoryCheckpointStore())
    if kind == "ledger-memory":
        storage = await open_store("memory://")
        return Backend(kind, flow.LedgerCheckpointStore(storage.ledger), storage)
    if kind == "ledger-postgres":
        exits = contextlib.ExitStack()
        url = exits.enter_context(postgres_url())
        try:
            storage = await open_store(url)
        except BaseException:
            exits.close()
            raise
        return Backend(
            kind, flow.LedgerCheckpointStore(storage.ledger), storage, url=url, exits=exits
        )
    path = tmp_path / "x.db"
    url = f"sqlite:///{path}"
    storage = await open_store(url)
    return Backend(kind, flow.LedgerCheckpointStore(storage.ledger), storage, path, url=url)


async def _close(backend: Backend) -> None:
    try:
        for other in backend.extra:
            await other.close()
        if backend.storage is not None:
            await backend.storage.close()
    finally:
        backend.exits.close()


KINDS = ["memory", "ledger-memory", "ledger-sqlite", "ledger-postgres"]
LEDGER_KINDS = KINDS[1:]


@pytest.fixture(params=KINDS)
async def backend(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Backend]:
    opened = await _open(request.param, tmp_path)
    yield opened
    await _close(opened)


@pytest.fixture(params=LEDGER_KINDS)
async def ledger_backend(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Backend]:
    opened = await _open(request.param, tmp_path)
    yield opened
    await _close(opened)


async def fill(store: Any, run_id: str, count: int) -> list[Checkpoint]:
    cps = [make_cp(run_id, r) for r in range(count)]
    for cp in cps:
        await store.append([cp])
    return cps


# -- §8.194-197 compare-and-append -------------------------------------------------------------


def test_stores_satisfy_the_protocol() -> None:
    """§6.1 / §8.234: both stores are CheckpointStores; the ledger store needs a ledger."""
    assert isinstance(flow.MemoryCheckpointStore(), flow.CheckpointStore)
    with pytest.raises(TypeError):
        flow.LedgerCheckpointStore(None)  # type: ignore[arg-type]


async def test_append_latest_history(backend: Backend) -> None:
    """§8.194 / §8.228-229: revisions 0,1,2 -> latest is 2, history is 0,1,2 in order."""
    run_id = new_run_id()
    cps = await fill(backend.store, run_id, 3)
    latest = await backend.store.latest(run_id)
    assert latest.revision == 2
    assert latest == cps[2]
    assert await backend.store.history(run_id) == cps


@pytest.mark.parametrize(
    ("existing", "attempt", "expected"),
    [(0, 1, 0), (1, 0, 1), (1, 2, 1), (2, 1, 2), (2, 0, 2), (3, 7, 3)],
    ids=["first-is-1", "duplicate-0", "gap-2", "stale-1", "stale-0", "far-ahead"],
)
async def test_revision_conflicts(
    backend: Backend, existing: int, attempt: int, expected: int
) -> None:
    """§8.195 / §8.233: a wrong revision -> RevisionConflictError(expected, actual); no change."""
    run_id = new_run_id()
    before = await fill(backend.store, run_id, existing)
    with pytest.raises(RevisionConflictError) as caught:
        await backend.store.append([make_cp(run_id, attempt, {"intruder": True})])
    error = caught.value
    assert (error.run_id, error.expected, error.actual) == (run_id, expected, attempt)
    if existing == 0:
        with pytest.raises(CheckpointNotFoundError):
            await backend.store.history(run_id)
    else:
        assert await backend.store.history(run_id) == before


async def test_single_writer_never_conflicts(backend: Backend) -> None:
    """§8.197: one writer appending revisions 0..50 never conflicts; latest is 50."""
    run_id = new_run_id()
    await fill(backend.store, run_id, 51)
    assert (await backend.store.latest(run_id)).revision == 50
    assert [cp.revision for cp in await backend.store.history(run_id)] == list(range(51))


def _race(writers: Sequence[Any], cps: Sequence[Checkpoint]) -> list[BaseException | None]:
    """Append ``cps[i]`` through ``writers[i]`` on one thread each, released together."""
    barrier = threading.Barrier(len(cps))
    outcomes: list[BaseException | None] = [None] * len(cps)

    def go(i: int) -> None:
        barrier.wait(10)
        try:
            asyncio.run(writers[i].append([cps[i]]))
        except BaseException as exc:
            outcomes[i] = exc

    threads = [threading.Thread(target=go, args=(i,)) for i in range(len(cps))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    return outcomes


async def _race_on_this_loop(
    writers: Sequence[Any], cps: Sequence[Checkpoint]
) -> list[BaseException | None]:
    """Append ``cps[i]`` through ``writers[i]`` concurrently (each on its own connections)."""
    results = await asyncio.gather(
        *(w.append([cp]) for w, cp in zip(writers, cps, strict=True)), return_exceptions=True
    )
    return [r if isinstance(r, BaseException) else None for r in results]


async def test_concurrent_appends_have_one_winner(backend: Backend) -> None:
    """§8.196: 200 rounds of two racing appends: exactly one winner each; 201 revisions."""
    run_id = new_run_id()
    writers = [backend.store, await backend.writer()]
    await writers[0].append([make_cp(run_id, 0)])
    winners = []
    for revision in range(1, 201):
        cps = [make_cp(run_id, revision, {"who": who, "rev": revision}) for who in (0, 1)]
        if backend.kind == "ledger-postgres":  # its stores are bound to one event loop
            outcomes = await _race_on_this_loop(writers, cps)
        else:
            outcomes = await asyncio.to_thread(_race, writers, cps)
        ok = [i for i, o in enumerate(outcomes) if o is None]
        assert len(ok) == 1, outcomes
        loser = outcomes[1 - ok[0]]
        assert isinstance(loser, RevisionConflictError), loser
        assert (loser.expected, loser.actual) == (revision + 1, revision)
        winners.append(ok[0])
    history = await backend.store.history(run_id)
    assert [cp.revision for cp in history] == list(range(201))
    assert [cp.state["who"] for cp in history[1:]] == winners  # type: ignore[index]


async def test_batch_append_is_atomic(backend: Backend) -> None:
    """§6.1 (ours: batches): a batch commits all or nothing."""
    run_id = new_run_id()
    await backend.store.append([make_cp(run_id, 0), make_cp(run_id, 1), make_cp(run_id, 2)])
    assert [cp.revision for cp in await backend.store.history(run_id)] == [0, 1, 2]
    with pytest.raises(RevisionConflictError):
        await backend.store.append([make_cp(run_id, 2), make_cp(run_id, 3)])
    assert (await backend.store.latest(run_id)).revision == 2


@pytest.mark.parametrize(
    "batch",
    [
        lambda r, o: [],
        lambda r, o: [make_cp(r, 0), make_cp(r, 2)],
        lambda r, o: [make_cp(r, 1), make_cp(r, 0)],
        lambda r, o: [make_cp(r, 0), make_cp(o, 1)],
        lambda r, o: [make_cp(r, 0), {"not": "a checkpoint"}],
        lambda r, o: [None],
    ],
    ids=["empty", "gap", "descending", "two-runs", "not-checkpoint", "none"],
)
async def test_malformed_batches(backend: Backend, batch: Callable[[str, str], Any]) -> None:
    """§6.1 / §10 Q15: empty, gapped, mixed-run or non-Checkpoint batches -> StoreError "append"."""
    run_id, other = new_run_id(), new_run_id()
    with pytest.raises(StoreError) as caught:
        await backend.store.append(batch(run_id, other))
    assert caught.value.op == "append"
    for rid in (run_id, other):
        with pytest.raises(CheckpointNotFoundError):
            await backend.store.latest(rid)


# -- §8.198-203 immutability, not found, isolation, fidelity ---------------------------------


async def test_mutating_after_append_changes_nothing(backend: Backend) -> None:
    """§8.198: mutating a checkpoint after append does not change the stored history."""
    run_id = new_run_id()
    cp = rich_cp(run_id, 0, StepPhase.PAUSED)
    original = cp.copy()
    await backend.store.append([cp])
    cp.run.step = 99
    cp.state["vals"].append("zzz")  # type: ignore[index]
    cp.state["new"] = 1  # type: ignore[index]
    cp.step_base["n"] = -1  # type: ignore[index]
    cp.frontier.append("q")
    cp.vertices[0].status = VertexStatus.FAILED
    cp.interrupts[1].info["q"] = 2
    assert await backend.store.latest(run_id) == original
    assert await backend.store.history(run_id) == [original]


async def test_mutating_returned_checkpoints_changes_nothing(backend: Backend) -> None:
    """§8.199: mutating what latest/history returned does not affect later reads."""
    run_id = new_run_id()
    original = rich_cp(run_id, 0, StepPhase.RUNNING)
    await backend.store.append([original.copy()])
    for read in (backend.store.latest(run_id), backend.store.history(run_id)):
        got = await read
        cp = got if isinstance(got, Checkpoint) else got[0]
        cp.run.step = 42
        cp.state["vals"].clear()  # type: ignore[index]
        cp.step_base.clear()  # type: ignore[union-attr]
        cp.frontier.clear()
        cp.vertices[1].error = "changed"
        cp.interrupts[1].continuation.append("more")
        if isinstance(got, list):
            got.clear()
    assert await backend.store.latest(run_id) == original
    assert await backend.store.history(run_id) == [original]
    first, second = await backend.store.latest(run_id), await backend.store.latest(run_id)
    assert first is not second and first.state is not second.state


async def test_unknown_run_not_found(backend: Backend) -> None:
    """§8.200 / §8.230: latest/history of an unknown run -> CheckpointNotFoundError naming it."""
    run_id = new_run_id()
    for read in (backend.store.latest, backend.store.history):
        with pytest.raises(CheckpointNotFoundError) as caught:
            await read(run_id)
        assert caught.value.run_id == run_id
        assert run_id in str(caught.value)


async def test_runs_are_isolated(backend: Backend) -> None:
    """§8.202 / §8.235: two runs keep separate histories and revision sequences."""
    a, b = new_run_id(), new_run_id()
    await fill(backend.store, a, 2)
    await fill(backend.store, b, 1)
    history_a = await backend.store.history(a)
    history_b = await backend.store.history(b)
    assert [cp.run.graph_run_id for cp in history_a] == [a, a]
    assert [cp.run.graph_run_id for cp in history_b] == [b]
    with pytest.raises(RevisionConflictError) as caught:
        await backend.store.append([make_cp(b, 2)])
    assert caught.value.expected == 1
    await backend.store.append([make_cp(b, 1)])
    assert len(await backend.store.history(a)) == 2


@pytest.mark.parametrize("phase", list(StepPhase), ids=str)
async def test_checkpoints_read_back_equal(backend: Backend, phase: StepPhase) -> None:
    """§8.203: a stored checkpoint of every phase reads back deeply equal."""
    run_id = new_run_id()
    cps = [rich_cp(run_id, 0, phase), make_cp(run_id, 1, {}, frontier=[], step_base={})]
    await backend.store.append([cp.copy() for cp in cps])
    assert await backend.store.history(run_id) == cps
    latest = await backend.store.latest(run_id)
    assert latest.frontier == [] and latest.state == {} and latest.step_base == {}


@pytest.mark.parametrize("kind", KINDS)
async def test_later_revisions_keep_their_own_run_fields(kind: str, tmp_path: Path) -> None:
    """§8.203 / §8.138a-b: a later revision's graph id/version/times read back as appended."""
    opened = await _open(kind, tmp_path)
    try:
        run_id = new_run_id()
        await opened.store.append([make_cp(run_id, 0)])
        cp = make_cp(run_id, 1)
        cp.run.graph_id = "other"
        cp.run.graph_version = "f" * 64 + ":1"
        cp.run.created_at += timedelta(days=1)
        cp.run.started_at += timedelta(days=2)
        try:
            await opened.store.append([cp.copy()])
        except StoreError as exc:
            assert exc.op == "append"
            assert (await opened.store.latest(run_id)).revision == 0
            return
        assert await opened.store.latest(run_id) == cp
        assert (await opened.store.history(run_id))[1] == cp
    finally:
        await _close(opened)


async def test_absent_states_stay_absent(backend: Backend) -> None:
    """§1.8: a checkpoint without state or step base reads back with both None."""
    run_id = new_run_id()
    cp = make_cp(run_id, 0)
    cp.state = None
    await backend.store.append([cp])
    back = await backend.store.latest(run_id)
    assert back.state is None and back.step_base is None


async def test_history_window(backend: Backend) -> None:
    """§6.1 (ours): history(after=, limit=) returns revisions > after, at most limit."""
    run_id = new_run_id()
    await fill(backend.store, run_id, 6)

    async def revisions(**window: Any) -> list[int]:
        return [cp.revision for cp in await backend.store.history(run_id, **window)]

    assert await revisions() == [0, 1, 2, 3, 4, 5]
    assert await revisions(after=2) == [3, 4, 5]
    assert await revisions(after=-1, limit=2) == [0, 1]
    assert await revisions(after=1, limit=3) == [2, 3, 4]
    assert await revisions(after=5) == []
    assert await revisions(after=3, limit=0) == []


# -- §8.204-205 bad input and corrupt bytes ----------------------------------------------------


class Opaque:
    pass


@pytest.mark.parametrize(
    "spoil",
    [
        lambda cp: setattr(cp, "state", {"x": Opaque()}),
        lambda cp: setattr(cp, "state", {"x": float("nan")}),
        lambda cp: setattr(cp, "step_base", {"x": {"y": float("inf")}}),
        lambda cp: setattr(
            cp, "interrupts", [InterruptRecord("a", InterruptKind.AWAITING, Opaque())]
        ),
        lambda cp: setattr(
            cp, "interrupts", [InterruptRecord("a", InterruptKind.AWAITING, 1, "", True, {1j})]
        ),
    ],
    ids=["state-object", "state-nan", "base-inf", "info-object", "continuation-set"],
)
async def test_unencodable_checkpoint_is_refused(backend: Backend, spoil: Any) -> None:
    """§8.204: an unencodable checkpoint -> StoreError "append" (codec cause); nothing stored."""
    run_id = new_run_id()
    cp = make_cp(run_id, 0, phase=StepPhase.RUNNING)
    spoil(cp)
    with pytest.raises(StoreError) as caught:
        await backend.store.append([cp])
    assert caught.value.op == "append"
    assert isinstance(caught.value.cause, CodecError)
    with pytest.raises(CheckpointNotFoundError):
        await backend.store.history(run_id)


def _bomb(depth: int) -> bytes:
    return b"[" * depth + b"]" * depth


GENERIC_CORRUPTION = [
    pytest.param(b"garbage", id="garbage"),
    pytest.param(b"{", id="truncated"),
    pytest.param(b"", id="empty"),
    pytest.param(b"\xff\xfe\x00", id="not-utf8"),
    pytest.param(b"[]", id="array"),
    pytest.param(b'{"x":1}', id="wrong-object"),
    pytest.param(b'{"a":1,"a":1}', id="duplicate-key"),
    pytest.param(_bomb(200_000), id="depth-bomb"),
    pytest.param(b"null", id="null"),
]


@pytest.mark.parametrize("data", GENERIC_CORRUPTION)
async def test_corrupt_bytes_are_store_errors(backend: Backend, data: bytes) -> None:
    """§8.205 / §8.238: corrupt stored bytes -> StoreError "latest" / "history", no crash."""
    run_id = new_run_id()
    await fill(backend.store, run_id, 2)
    await backend.corrupt(run_id, data)
    for op, read in (("latest", backend.store.latest), ("history", backend.store.history)):
        with pytest.raises(StoreError) as caught:
            await read(run_id)
        assert caught.value.op == op
        assert isinstance(caught.value.cause, CodecError | CheckpointDecodeError), caught.value
        assert str(caught.value).startswith(f"flow: store operation {op} failed: ")


def _deep(levels: int) -> Any:
    value: Any = 1
    for _ in range(levels):
        value = [value]
    return value


READ_BACK_CASES = [
    ("deep-state-63", lambda r: [make_cp(r, 0, {"a": _deep(63)})]),
    ("deep-field-65", lambda r: [make_cp(r, 0, {"a": _deep(65)})]),
    ("deep-info", lambda r: [make_cp(r, 0, phase=StepPhase.PAUSED, interrupts=[
        InterruptRecord("a", InterruptKind.AWAITING, _deep(62))])]),
    ("state-17mib", lambda r: [make_cp(r, 0, {"a": "x" * (17 << 20)})]),
    ("info-2mib", lambda r: [make_cp(r, 0, phase=StepPhase.PAUSED, interrupts=[
        InterruptRecord("a", InterruptKind.AWAITING, "y" * (2 << 20))])]),
    ("5000-fields", lambda r: [make_cp(r, 0, {f"f{i}": f"{i:05}" + "v" * 80
                                               for i in range(5000)})]),
    ("batch-of-65", lambda r: [make_cp(r, i) for i in range(65)]),
]  # fmt: skip


@pytest.mark.parametrize(
    ("case", "kind"),
    [
        pytest.param(name, kind, id=f"{name}-{kind}")
        for name, _ in READ_BACK_CASES
        for kind in KINDS
    ],
)
async def test_append_accepts_only_what_reads_back(case: str, kind: str, tmp_path: Path) -> None:
    """§6.1.7-9 / §8.204: append stores only what reads back equal, else StoreError "append"."""
    opened = await _open(kind, tmp_path)
    try:
        run_id = new_run_id()
        cps = dict(READ_BACK_CASES)[case](run_id)
        try:
            await opened.store.append([cp.copy() for cp in cps])
        except StoreError as exc:
            assert exc.op == "append"
            with pytest.raises(CheckpointNotFoundError):
                await opened.store.latest(run_id)
            return
        assert await opened.store.latest(run_id) == cps[-1]
        assert await opened.store.history(run_id) == cps
    finally:
        await _close(opened)


# -- §8.228-239 the ledger adapter ------------------------------------------------------------


def log_name(run_id: str) -> str:
    return f"flow/runs/{run_id}"


async def test_ledger_layout(ledger_backend: Backend) -> None:
    """§8.228-229 / §8.235: revision R is sequence R+1 of log flow/runs/<run>, one log per run."""
    a, b = new_run_id(), new_run_id()
    await fill(ledger_backend.store, a, 1)
    assert await ledger_backend.ledger.tip(log_name(a)) == 1
    await ledger_backend.store.append([make_cp(a, 1), make_cp(a, 2)])
    assert await ledger_backend.ledger.tip(log_name(a)) == 3
    assert (await ledger_backend.store.latest(a)).revision == 2
    await fill(ledger_backend.store, b, 1)
    assert await ledger_backend.ledger.names("flow/runs/") == sorted([log_name(a), log_name(b)])


class Captured(StorageError):
    """Raised by `CaptureLedger` once it has recorded an append."""


class CaptureLedger:
    """A ledger that records what an append would write, then refuses it (reads pass
    through), so tests can write modified copies of exactly what the store produces."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.records: list[bytes] = []
        self.attachments: dict[str, bytes] = {}

    def __getattr__(self, name: str) -> Any:
        # drop, sweep, usage, vacuum and the reference calls pass straight through
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self.inner, name)

    async def append(
        self,
        name: str,
        records: Sequence[bytes],
        *,
        expected: int,
        attachments: Mapping[str, bytes] | None = None,
        refs: Iterable[str] = (),
    ) -> int:
        self.records = list(records)
        self.attachments = dict(attachments or {})
        self.refs = list(refs)
        raise Captured(name)

    async def read(self, name: str, *, after: int = 0, limit: int = 100) -> list[Record]:
        result: list[Record] = await self.inner.read(name, after=after, limit=limit)
        return result

    async def tip(self, name: str) -> int:
        result: int = await self.inner.tip(name)
        return result

    async def names(self, prefix: str = "") -> list[str]:
        result: list[str] = await self.inner.names(prefix)
        return result

    async def attachments(self, digests: Iterable[str]) -> dict[str, bytes]:
        result: dict[str, bytes] = await self.inner.attachments(digests)
        return result


async def encoded(backend: Backend, cps: Sequence[Checkpoint]) -> tuple[list[bytes], dict]:
    """The records and attachments the ledger store would append for ``cps``."""
    capture = CaptureLedger(backend.ledger)
    with pytest.raises(StoreError):
        await flow.LedgerCheckpointStore(capture).append(cps)
    return capture.records, capture.attachments


async def write_seed(backend: Backend, run_id: str, spoil: Callable[[Any], Any]) -> None:
    """Write revision 0 of ``run_id`` as the store would, with its envelope spoilt."""
    records, attachments = await encoded(backend, [make_cp(run_id, 0, {"v": "x" * 100})])
    envelope = loads(records[0])
    await backend.ledger.append(
        log_name(run_id), [dumps(spoil(envelope))], expected=0, attachments=attachments
    )


async def test_ledger_records_are_small_envelopes(ledger_backend: Backend) -> None:
    """§6.3 / DESIGN L1: rev 0 is a small schema_version 2 envelope; big states live outside."""
    run_id = new_run_id()
    big = "q" * 200_000
    await ledger_backend.store.append([make_cp(run_id, 0, {"big": big, "n": 1})])
    (record,) = await ledger_backend.ledger.read(log_name(run_id))
    envelope = loads(record.payload)
    assert envelope["schema_version"] == 2 and envelope["revision"] == 0
    assert isinstance(envelope["checkpoint"], dict)
    assert len(record.payload) < 4_000
    assert (await ledger_backend.store.latest(run_id)).state == {"big": big, "n": 1}


async def test_capture_round_trip(ledger_backend: Backend) -> None:
    """§8.231 (sanity): an unspoilt captured revision-0 record reads back equal."""
    run_id = new_run_id()
    await write_seed(ledger_backend, run_id, lambda envelope: envelope)
    assert (await ledger_backend.store.latest(run_id)).state == {"v": "x" * 100}


async def test_ledger_history_spans_pages(ledger_backend: Backend) -> None:
    """§8.232: histories of 70 and 1005 records (several pages) read back whole, in order."""
    run_id = new_run_id()
    await fill(ledger_backend.store, run_id, 70)
    assert [cp.revision for cp in await ledger_backend.store.history(run_id)] == list(range(70))
    for first in range(70, 1005, 64):
        batch = [make_cp(run_id, r) for r in range(first, min(first + 64, 1005))]
        await ledger_backend.store.append(batch)
    history = await ledger_backend.store.history(run_id)
    assert [cp.revision for cp in history] == list(range(1005))
    assert history[-1].state == {"rev": 1004}
    tail = await ledger_backend.store.history(run_id, after=995, limit=100)
    assert [cp.revision for cp in tail] == list(range(996, 1005))


def _with_run(envelope: dict[str, Any], **changes: Any) -> dict[str, Any]:
    checkpoint = envelope["checkpoint"]
    return {**envelope, "checkpoint": {**checkpoint, "run": {**checkpoint["run"], **changes}}}


NOT_A_MANIFEST = b'{"a":1}'
GARBAGE = b"{not json"
BAD_FIELD_MANIFEST = dumps({"a": digest_of(GARBAGE)})

ENVELOPE_CORRUPTION: list[tuple[str, Callable[[dict[str, Any], str], Any]]] = [
    ("unknown-field", lambda e, other: {**e, "extra": 1}),
    ("unknown-checkpoint-field", lambda e, other: {**e, "checkpoint": {**e["checkpoint"], "x": 1}}),
    ("unknown-run-field", lambda e, other: _with_run(e, bogus=1)),
    ("schema-version-3", lambda e, other: {**e, "schema_version": 3}),
    ("no-schema-version", lambda e, other: {k: v for k, v in e.items() if k != "schema_version"}),
    ("no-checkpoint", lambda e, other: {k: v for k, v in e.items() if k != "checkpoint"}),
    ("checkpoint-list", lambda e, other: {**e, "checkpoint": []}),
    ("revision-1", lambda e, other: {**e, "revision": 1}),
    ("revision-missing", lambda e, other: {k: v for k, v in e.items() if k != "revision"}),
    ("other-run", lambda e, other: _with_run(e, graph_run_id=other)),
    ("bad-status", lambda e, other: _with_run(e, status=42)),
    ("missing-attachment", lambda e, other: {**e, "state": "0" * 64}),
    ("bad-digest", lambda e, other: {**e, "state": "not-a-digest"}),
    ("digest-not-string", lambda e, other: {**e, "state": 5}),
    ("not-a-manifest", lambda e, other: {**e, "state": digest_of(NOT_A_MANIFEST)}),
    ("field-not-json", lambda e, other: {**e, "state": digest_of(BAD_FIELD_MANIFEST)}),
    ("envelope-list", lambda e, other: [e]),
]  # fmt: skip


@pytest.mark.parametrize("spoil", [pytest.param(f, id=name) for name, f in ENVELOPE_CORRUPTION])
async def test_ledger_rejects_bad_envelopes(ledger_backend: Backend, spoil: Any) -> None:
    """§8.231 / §8.238: a spoilt revision-0 envelope -> StoreError on latest and history."""
    stash = {digest_of(d): d for d in (NOT_A_MANIFEST, GARBAGE, BAD_FIELD_MANIFEST)}
    await ledger_backend.ledger.append("scratch", [b"x"], expected=0, attachments=stash)
    run_id, other = new_run_id(), new_run_id()
    await write_seed(ledger_backend, run_id, lambda envelope: spoil(envelope, other))
    store = flow.LedgerCheckpointStore(ledger_backend.ledger)  # nothing cached
    for op, read in (("latest", store.latest), ("history", store.history)):
        with pytest.raises(StoreError) as caught:
            await read(run_id)
        assert caught.value.op == op


async def test_ledger_rejects_a_copied_record(ledger_backend: Backend) -> None:
    """§8.231: a record copied to another sequence or another run's log -> StoreError."""
    a, b = new_run_id(), new_run_id()
    await fill(ledger_backend.store, a, 1)
    (record,) = await ledger_backend.ledger.read(log_name(a))
    await ledger_backend.corrupt(a, record.payload)
    with pytest.raises(StoreError):
        await ledger_backend.store.latest(a)
    await ledger_backend.ledger.append(log_name(b), [record.payload], expected=0)
    with pytest.raises(StoreError):
        await ledger_backend.store.latest(b)
    with pytest.raises(StoreError):
        await ledger_backend.store.history(b)


async def test_ledger_rejects_oversized_records(ledger_backend: Backend) -> None:
    """§8.238: records over 1 MiB are refused on read and on append (StoreError)."""
    run_id = new_run_id()

    def pad(envelope: dict[str, Any]) -> dict[str, Any]:
        return {
            **envelope,
            "checkpoint": {**envelope["checkpoint"], "frontier": ["a" * 1000] * 1100},
        }

    await write_seed(ledger_backend, run_id, pad)
    (record,) = await ledger_backend.ledger.read(log_name(run_id))
    assert len(record.payload) > 1 << 20
    for read in (ledger_backend.store.latest, ledger_backend.store.history):
        with pytest.raises(StoreError) as caught:
            await read(run_id)
        assert "limit" in str(caught.value)
    other = new_run_id()
    big = make_cp(other, 0, frontier=["b" * 1000] * 1100)
    with pytest.raises(StoreError) as appended:
        await ledger_backend.store.append([big])
    assert appended.value.op == "append"
    with pytest.raises(CheckpointNotFoundError):
        await ledger_backend.store.latest(other)


async def test_ledger_rejects_malformed_run_ids(ledger_backend: Backend) -> None:
    """§6.3 (ours): a run id that is not a canonical UUID names no log: reading finds no
    checkpoint (as in the memory store), appending is a StoreError."""
    for read in (ledger_backend.store.latest, ledger_backend.store.history):
        with pytest.raises(CheckpointNotFoundError):
            await read("../escape")
    with pytest.raises(StoreError) as appended:
        await ledger_backend.store.append([make_cp("NOT-A-UUID", 0)])
    assert appended.value.op == "append"


# -- §8.236-237 ledger failures ---------------------------------------------------------------


class Boom(StorageError):
    pass


class FaultyLedger:
    """A ledger wrapper whose chosen operations fail."""

    def __init__(self, inner: Any, fail: set[str], error: BaseException) -> None:
        self.inner = inner
        self.fail = fail
        self.error = error

    def _check(self, op: str) -> None:
        if op in self.fail:
            raise self.error

    def __getattr__(self, name: str) -> Any:
        # drop, sweep, usage, vacuum and the reference calls pass straight through
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self.inner, name)

    async def append(
        self,
        name: str,
        records: Sequence[bytes],
        *,
        expected: int,
        attachments: Mapping[str, bytes] | None = None,
        refs: Iterable[str] = (),
    ) -> int:
        self._check("append")
        result: int = await self.inner.append(
            name, records, expected=expected, attachments=attachments, refs=refs
        )
        return result

    async def read(self, name: str, *, after: int = 0, limit: int = 100) -> list[Record]:
        self._check("read")
        result: list[Record] = await self.inner.read(name, after=after, limit=limit)
        return result

    async def tip(self, name: str) -> int:
        self._check("tip")
        result: int = await self.inner.tip(name)
        return result

    async def names(self, prefix: str = "") -> list[str]:
        result: list[str] = await self.inner.names(prefix)
        return result

    async def attachments(self, digests: Iterable[str]) -> dict[str, bytes]:
        self._check("attachments")
        result: dict[str, bytes] = await self.inner.attachments(digests)
        return result


@pytest.mark.parametrize("error", [Boom("ambiguous commit"), OSError(5, "I/O error")], ids=str)
async def test_ledger_append_failure_is_store_error(ledger_backend: Backend, error: Any) -> None:
    """§8.236: a failing ledger append -> StoreError "append" wrapping it; nothing stored."""
    store = flow.LedgerCheckpointStore(FaultyLedger(ledger_backend.ledger, {"append"}, error))
    run_id = new_run_id()
    with pytest.raises(StoreError) as caught:
        await store.append([make_cp(run_id, 0)])
    assert caught.value.op == "append"
    assert caught.value.cause is error and caught.value.__cause__ is error
    with pytest.raises(CheckpointNotFoundError):
        await ledger_backend.store.latest(run_id)


@pytest.mark.parametrize("failing", ["read", "tip", "attachments"])
async def test_ledger_read_failure_is_store_error(ledger_backend: Backend, failing: str) -> None:
    """§8.237: a failing ledger tip/read/attachments -> StoreError latest/history wrapping it."""
    run_id = new_run_id()
    await fill(ledger_backend.store, run_id, 2)
    error = Boom(f"{failing} failed")
    store = flow.LedgerCheckpointStore(FaultyLedger(ledger_backend.ledger, {failing}, error))
    for op, read in (("latest", store.latest), ("history", store.history)):
        with pytest.raises(StoreError) as caught:
            await read(run_id)
        assert caught.value.op == op
        assert caught.value.cause is error


async def test_any_ledger_works(ledger_backend: Backend) -> None:
    """§8.234: the adapter works over any object with the Ledger interface."""
    store = flow.LedgerCheckpointStore(FaultyLedger(ledger_backend.ledger, set(), Boom()))
    run_id = new_run_id()
    cps = await fill(store, run_id, 3)
    assert await store.history(run_id) == cps
    assert await ledger_backend.store.history(run_id) == cps


# -- de-duplication (DESIGN.md: bytes per step grow with what changed) ------------------------


async def test_one_changed_field_adds_one_field_attachment(ledger_backend: Backend) -> None:
    """DESIGN L1: one changed field adds one field attachment, no more: the next record
    (a schema-2 delta) patches the previous manifest instead of storing a new one."""
    run_id = new_run_id()
    state = {"big": "x" * 100_000, "items": list(range(100)), "text": "t" * 300, "n": 0}
    await ledger_backend.store.append([make_cp(run_id, 0, state)])
    count, size = ledger_backend.attachment_count(), ledger_backend.attachment_bytes()
    changed = {**state, "items": [*range(99), -1]}
    await ledger_backend.store.append([make_cp(run_id, 1, changed, step_base=state)])
    assert ledger_backend.attachment_count() == count + 1
    added = ledger_backend.attachment_bytes() - size
    assert added < len(dumps(changed["items"])) + 1_000
    records = await ledger_backend.ledger.read(log_name(run_id))
    assert all(len(r.payload) < 2_000 for r in records)
    history = await flow.LedgerCheckpointStore(ledger_backend.ledger).history(run_id)
    assert [cp.state for cp in history] == [state, changed]
    assert history[1].step_base == state


async def test_identical_states_add_nothing(ledger_backend: Backend) -> None:
    """DESIGN L1: a state already stored (other run, cold-cache store) adds no attachment."""
    state = {"a": [1, 2, 3], "b": {"c": "d"}}
    await ledger_backend.store.append([make_cp(new_run_id(), 0, state)])
    count = ledger_backend.attachment_count()
    await ledger_backend.store.append([make_cp(new_run_id(), 0, copy.deepcopy(state))])
    fresh = flow.LedgerCheckpointStore(ledger_backend.ledger)
    run_id = new_run_id()
    await fresh.append([make_cp(run_id, 0, copy.deepcopy(state), step_base=state)])
    assert ledger_backend.attachment_count() == count
    assert (await ledger_backend.store.latest(run_id)).state == state


async def test_losing_append_writes_no_attachments(ledger_backend: Backend) -> None:
    """DESIGN L1 / §6.1: a conflicting append stores neither record nor attachments."""
    run_id = new_run_id()
    await fill(ledger_backend.store, run_id, 1)
    count = ledger_backend.attachment_count()
    with pytest.raises(RevisionConflictError):
        await ledger_backend.store.append([make_cp(run_id, 0, {"brand": "new"})])
    assert ledger_backend.attachment_count() == count


# -- §8.239 durability ----------------------------------------------------------------------


async def test_sqlite_durability_across_reopen(tmp_path: Path) -> None:
    """§8.239: SQLite runs A and B survive close/reopen; re-appending A's revision 0 conflicts."""
    url = f"sqlite:///{tmp_path}/x.db"
    a, b = new_run_id(), new_run_id()
    cp_a = rich_cp(a, 0, StepPhase.PAUSED)
    cp_b = make_cp(b, 0, {"b": "only"})
    async with open_store(url) as storage:
        store = flow.LedgerCheckpointStore(storage.ledger)
        await store.append([cp_a.copy()])
        await store.append([cp_b.copy()])
    async with open_store(url) as storage:
        store = flow.LedgerCheckpointStore(storage.ledger)
        assert await store.latest(a) == cp_a
        assert await store.history(b) == [cp_b]
        with pytest.raises(RevisionConflictError) as caught:
            await store.append([make_cp(a, 0)])
        assert (caught.value.expected, caught.value.actual) == (1, 0)
        await store.append([make_cp(a, 1)])
    async with open_store(url) as storage:
        store = flow.LedgerCheckpointStore(storage.ledger)
        assert [cp.revision for cp in await store.history(a)] == [0, 1]


# -- property: whatever is appended reads back, in any batching --------------------------------

POOL_STATES: list[Any] = [
    None,
    {},
    {"a": 1},
    {"a": 1, "b": "x" * 100},
    {"a": 2, "b": "x" * 100, "c": [list(range(30))]},
    {"b": "y" * 300, "n": None},
]
POOL_VERTICES = [
    [],
    [VertexRecord("a", "11111111-2222-4333-8444-555555555555", 0, VertexStatus.DONE, 1, T0)],
    [
        VertexRecord("a", "11111111-2222-4333-8444-555555555555", 1, VertexStatus.DONE, 1, T0),
        VertexRecord("b", "21111111-2222-4333-8444-555555555555", 1, VertexStatus.FAILED, 2),
    ],
]


@st.composite
def histories(draw: st.DrawFn) -> tuple[list[Checkpoint], list[int]]:
    """A run's checkpoints (states and vertex lists often repeated) and a batching."""
    count = draw(st.integers(1, 12))
    run_id = "0b7e3a52-5a7e-4b5c-9f10-6c2d3e4f5a6b"
    cps = []
    for revision in range(count):
        phase = draw(st.sampled_from(list(StepPhase)))
        cp = make_cp(
            run_id,
            revision,
            phase=phase,
            frontier=draw(st.sampled_from([[], ["a"], ["a", "b"]])),
            vertices=copy.deepcopy(draw(st.sampled_from(POOL_VERTICES))),
        )
        cp.state = copy.deepcopy(draw(st.sampled_from(POOL_STATES)))
        cp.step_base = copy.deepcopy(draw(st.sampled_from(POOL_STATES)))
        cp.run.status = draw(st.sampled_from(list(RunStatus)))
        cp.run.finish_reached = draw(st.booleans())
        if phase in (StepPhase.RUNNING, StepPhase.PAUSED) and draw(st.booleans()):
            cp.interrupts = [InterruptRecord("a", InterruptKind.AWAITING, {"i": revision})]
        if phase is StepPhase.HALTED:
            cp.halt = HaltRecord(HaltKind.CONDITION, revision, "c")
        cps.append(cp)
    sizes = []
    left = count
    while left:
        size = draw(st.integers(1, min(left, 5)))
        sizes.append(size)
        left -= size
    return cps, sizes


async def _check_history(
    kind: str, directory: Path, cps: list[Checkpoint], sizes: list[int]
) -> None:
    opened = await _open(kind, directory)
    try:
        start = 0
        for size in sizes:
            await opened.store.append([cp.copy() for cp in cps[start : start + size]])
            start += size
        readers = [opened.store]
        if opened.storage is not None:
            readers.append(flow.LedgerCheckpointStore(opened.ledger))  # a cold cache
        run_id = cps[0].run.graph_run_id
        for reader in readers:
            assert await reader.history(run_id) == cps
            assert await reader.latest(run_id) == cps[-1]
            for after in range(-1, len(cps)):
                assert (
                    await reader.history(run_id, after=after, limit=2) == cps[after + 1 : after + 3]
                )
    finally:
        await _close(opened)


@pytest.mark.parametrize("kind", KINDS)
def test_any_history_reads_back(kind: str, tmp_path_factory: pytest.TempPathFactory) -> None:
    """§8.194 / §8.203: random histories in any batching read back exactly (hypothesis)."""

    @settings(max_examples=40, deadline=None)
    @given(histories())
    def check(case: tuple[list[Checkpoint], list[int]]) -> None:
        directory = tmp_path_factory.mktemp("h")
        asyncio.run(_check_history(kind, directory, *case))

    check()


# -- key order (usability 7) ----------------------------------------------------------------


@dataclass
class _Ordered:
    scores: dict[str, int] = field(default_factory=dict)
    n: int = 0


async def test_state_round_trips_keep_key_order(store: Any) -> None:
    """A dict in a state comes back in insertion order after a checkpoint, on every store."""

    async def write(state: _Ordered) -> dict[str, Any]:
        return {"scores": {"zeta": 1, "alpha": 2, "mid": 3}, "n": state.n + 1}

    graph = flow.Graph("ordered", state=_Ordered)
    graph.add_vertex("write", write)
    runner = graph.compile(entry="write", finish="write", store=store)
    result = await runner.run(_Ordered())
    assert list(result.state.scores) == ["zeta", "alpha", "mid"]
    loaded = await runner.get(result.run.graph_run_id)
    assert list(loaded.state.scores) == ["zeta", "alpha", "mid"]
    history = await runner.history(result.run.graph_run_id)
    assert list(history[-1].state) == ["scores", "n"]  # a state's own fields keep theirs
    assert list(history[-1].state["scores"]) == ["zeta", "alpha", "mid"]
