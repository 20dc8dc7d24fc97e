"""`Runner.fork`: a new run from any revision of another (see `flow.fork`).

On every store (memory, SQLite, PostgreSQL): forks of completed, interrupted, halted and
cancelled runs at every revision, with and without a patch; the origin's stored bytes
are unchanged; refusals write nothing; the fork's idempotency keys name the fork; a fork
of a run with a 100 KiB field writes far less than that; and (hypothesis) random forks
of random runs end where a fresh run from the fork point's state ends.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from flowledger import flow
from flowledger.clock import system_clock
from flowledger.flow import RunStatus, StepPhase
from flowledger.flow.checkpoint import to_document
from flowledger.storage import open_store

from .conftest import FaultyStore


@dataclass
class Loop:
    n: int = 0
    limit: int = 3
    log: list[str] = field(default_factory=list)
    blob: str = ""
    ask: bool = False
    broken: bool = False


class Keys:
    def __init__(self) -> None:
        self.seen: list[tuple[str, str]] = []  # (graph run id, idempotency key)


def loop_graph(store: Any, keys: Keys | None = None, *, version: str = "1") -> flow.Runner[Loop]:
    """``tick`` loops until ``n == limit``, then ``fin``. ``ask`` makes ``tick`` pause
    once per execution until resumed with a payload; ``broken`` makes the route fail."""
    graph: flow.Graph[Loop] = flow.Graph("loop", state=Loop)

    def tick(state: Loop) -> dict[str, Any]:
        info = flow.run_info()
        if keys is not None:
            keys.seen.append((info.graph_run_id, info.idempotency_key))
        if state.ask:
            flow.interrupt({"n": state.n})
        return {"n": state.n + 1, "log": [*state.log, f"t{state.n + 1}"]}

    def fin(state: Loop) -> dict[str, Any]:
        return {"log": [*state.log, "fin"]}

    def pick(state: Loop) -> str:
        if state.broken:
            raise RuntimeError("route broken")
        return "tick" if state.n < state.limit else "fin"

    graph.add_vertex("tick", tick)
    graph.add_vertex("fin", fin)
    graph.add_route("tick", targets=["tick", "fin"], pick=pick)
    return graph.compile(entry="tick", finish="fin", store=store, version=version)


async def stored_bytes(store: Any, run_id: str) -> Any:
    """The run's stored records byte for byte (and its attachments) or, in memory, its
    encoded documents."""
    if isinstance(store, flow.MemoryCheckpointStore):
        return list(store._runs[run_id])
    name = store.log_name(run_id)
    records = await store.ledger.read(name, after=0, limit=10_000)
    return [(r.seq, bytes(r.payload)) for r in records]


async def finish(runner: flow.Runner[Loop], run_id: str) -> flow.Result[Loop]:
    """Resume until the run stops for a reason other than a pause (answering pauses)."""
    result = await runner.resume(run_id)
    while result.interrupts:
        result = await runner.resume(run_id, "yes")
    return result


async def test_forks_of_a_completed_run_at_every_revision(store: Any) -> None:
    runner = loop_graph(store)
    origin = await runner.run(Loop(limit=3))
    assert origin.run.status is RunStatus.COMPLETED
    origin_id = origin.run.graph_run_id
    before = await stored_bytes(store, origin_id)
    history = await runner.history(origin_id)
    for cp in history:
        fork_id = await runner.fork(origin_id, cp.revision)
        seed = (await runner.history(fork_id))[0]
        assert seed.revision == 0 and seed.phase is StepPhase.ROUTED
        assert seed.run.status is RunStatus.RUNNING and seed.vertices == []
        assert seed.origin == flow.ForkOrigin(origin_id, cp.revision, flow.checkpoint_digest(cp))
        result = await runner.resume(fork_id)
        assert result.run.status is RunStatus.COMPLETED
        assert result.state == origin.state  # deterministic tasks: the same end
        fork_history = await runner.history(fork_id)
        assert [c.revision for c in fork_history] == list(range(len(fork_history)))
        assert all(c.origin is None for c in fork_history[1:])
        if cp.frontier or cp.phase is not StepPhase.ROUTED:
            assert fork_history[-1].run.step == origin.run.step
        else:  # the completion forked: one empty step completes the fork
            assert fork_history[-1].run.step == origin.run.step + 1
    assert await stored_bytes(store, origin_id) == before
    assert await runner.history(origin_id) == history


async def test_a_patch_changes_what_the_fork_does(store: Any) -> None:
    runner = loop_graph(store)
    origin = await runner.run(Loop(limit=2))
    origin_id = origin.run.graph_run_id
    seed = (await runner.history(origin_id))[0]
    fork_id = await runner.fork(origin_id, seed.revision, {"limit": 4})
    result = await runner.resume(fork_id)
    assert result.state == Loop(n=4, limit=4, log=["t1", "t2", "t3", "t4", "fin"])
    assert (await runner.get(origin_id)).state == origin.state


async def test_mid_step_and_paused_revisions_restart_their_step(store: Any) -> None:
    """A RUNNING or PAUSED revision forks its step's boundary: same state, frontier, step."""
    runner = loop_graph(store)
    paused = await runner.run(Loop(limit=2, ask=True))
    assert paused.interrupts
    origin_id = paused.run.graph_run_id
    done = await finish(runner, origin_id)
    assert done.run.status is RunStatus.COMPLETED
    history = await runner.history(origin_id)
    for cp in history:
        if cp.phase not in (StepPhase.RUNNING, StepPhase.PAUSED):
            continue
        boundary = max(c.revision for c in history[: cp.revision] if c.phase is StepPhase.ROUTED)
        fork_id = await runner.fork(origin_id, cp.revision)
        seed = (await runner.history(fork_id))[0]
        of_boundary = (await runner.history(await runner.fork(origin_id, boundary)))[0]
        assert seed.state == cp.step_base == of_boundary.state
        assert seed.frontier == of_boundary.frontier
        assert seed.run.step == of_boundary.run.step == cp.run.step
        again = await runner.resume(fork_id)
        if seed.frontier == ["tick"]:  # the (paused) vertex runs again: it asks again
            assert again.interrupts and again.interrupts[0].vertex == "tick"
            again = await finish(runner, fork_id)
        assert again.state == done.state


async def test_forks_of_a_halted_run(store: Any) -> None:
    runner = loop_graph(store)
    halted = await runner.run(Loop(limit=3, broken=True))
    assert halted.halt is not None and halted.halt.kind is flow.HaltKind.CONDITION
    origin_id = halted.run.graph_run_id
    tip = halted.run.revision
    unpatched = await runner.fork(origin_id, tip)
    again = await runner.resume(unpatched)
    assert again.halt is not None and again.halt.kind is flow.HaltKind.CONDITION
    fixed = await runner.fork(origin_id, tip, {"broken": False})
    result = await runner.resume(fixed)
    assert result.run.status is RunStatus.COMPLETED
    assert result.state.log == ["t1", "t2", "t3", "fin"]  # the halted step ran again


async def test_forks_of_a_budget_halt_continue_at_its_step(store: Any) -> None:
    runner = loop_graph(store)
    halted = await runner.run(Loop(limit=5), max_steps=2)
    assert halted.halt is not None and halted.halt.kind is flow.HaltKind.MAX_STEPS
    fork_id = await runner.fork(halted.run.graph_run_id, halted.run.revision)
    seed = (await runner.history(fork_id))[0]
    assert seed.run.step == 2 and seed.frontier == ["tick"]
    result = await runner.resume(fork_id)
    assert result.state.log == ["t1", "t2", "t3", "t4", "t5", "fin"]


async def test_forks_of_a_cancelled_run(store: Any) -> None:
    runner = loop_graph(store)
    paused = await runner.run(Loop(limit=2, ask=True))
    origin_id = paused.run.graph_run_id
    await runner.cancel(origin_id, "enough")
    history = await runner.history(origin_id)
    cancel = history[-1]
    assert cancel.run.status is RunStatus.CANCELLED
    before = await stored_bytes(store, origin_id)
    fork_id = await runner.fork(origin_id, cancel.revision, {"ask": False})
    seed = (await runner.history(fork_id))[0]
    previous = (await runner.history(await runner.fork(origin_id, cancel.revision - 1)))[0]
    assert seed.frontier == previous.frontier and seed.run.step == previous.run.step
    assert seed.origin is not None and seed.origin.revision == cancel.revision
    result = await runner.resume(fork_id)
    assert result.run.status is RunStatus.COMPLETED
    assert result.state.log == ["t1", "t2", "fin"]
    # The fork is an ordinary run: it can be cancelled too, and its seed's origin stays.
    other = await runner.fork(origin_id, 0)
    cancelled = await runner.cancel(other)
    assert cancelled.status is RunStatus.CANCELLED
    other_history = await runner.history(other)
    assert other_history[0].origin is not None and other_history[-1].origin is None
    assert (await runner.status(other)).status is RunStatus.CANCELLED
    assert await stored_bytes(store, origin_id) == before


async def test_fork_of_a_fork(store: Any) -> None:
    runner = loop_graph(store)
    origin = await runner.run(Loop(limit=3))
    first = await runner.fork(origin.run.graph_run_id, 2, {"limit": 1})
    await runner.resume(first)
    second = await runner.fork(first, 0, {"limit": 2})
    result = await runner.resume(second)
    assert result.state.log == ["t1", "t2", "fin"]


@pytest.mark.parametrize(
    ("revision", "patch", "error", "where"),
    [
        (-1, None, flow.ForkRevisionError, "-1"),
        (999, None, flow.ForkRevisionError, "999"),
        (True, None, flow.ForkRevisionError, "True"),
        ("1", None, flow.ForkRevisionError, "'1'"),
        (0, {"nope": 1}, flow.StatePatchError, "'nope'"),
        (0, {"limit": "3"}, flow.StatePatchError, "'limit'"),
        (0, {"log": "x"}, flow.StatePatchError, "'log'"),
        (0, {"limit": float("nan")}, flow.StatePatchError, "'limit'"),
        (0, ["limit", 3], flow.StatePatchError, "the patch"),
    ],
)
async def test_refused_forks_write_nothing(
    store: Any, revision: Any, patch: Any, error: type[Exception], where: str
) -> None:
    runner = loop_graph(store)
    origin = await runner.run(Loop(limit=1))
    origin_id = origin.run.graph_run_id
    before = await stored_bytes(store, origin_id)
    counting = FaultyStore(store)
    forking = flow.Runner(runner.graph, counting)
    wanted = flow.ids.new_run_id()
    with pytest.raises(error) as raised:
        await forking.fork(origin_id, revision, patch, run_id=wanted)
    assert where in str(raised.value)
    assert counting.appends == 0
    with pytest.raises(flow.CheckpointNotFoundError):
        await runner.latest(wanted)
    assert await stored_bytes(store, origin_id) == before


async def test_another_graph_or_version_is_refused(store: Any) -> None:
    runner = loop_graph(store)
    origin = await runner.run(Loop(limit=1))
    newer = loop_graph(store, version="2")
    with pytest.raises(flow.GraphVersionMismatchError):
        await newer.fork(origin.run.graph_run_id, 0)
    other: flow.Graph[Loop] = flow.Graph("other", state=Loop)
    other.add_vertex("tick", lambda s: None)
    foreign = other.compile(entry="tick", finish="tick", store=store, version="1")
    with pytest.raises(flow.GraphMismatchError):
        await foreign.fork(origin.run.graph_run_id, 0)
    with pytest.raises(flow.CheckpointNotFoundError):
        await runner.fork(flow.ids.new_run_id(), 0)
    taken = await runner.fork(origin.run.graph_run_id, 0)
    with pytest.raises(flow.GraphRunExistsError):
        await runner.fork(origin.run.graph_run_id, 0, run_id=taken)


async def test_idempotency_keys_of_a_fork_name_the_fork(store: Any) -> None:
    keys = Keys()
    runner = loop_graph(store, keys)
    origin = await runner.run(Loop(limit=3))
    origin_id = origin.run.graph_run_id
    origin_keys = [key for run, key in keys.seen if run == origin_id]
    fork_id = await runner.fork(origin_id, 0)
    await runner.resume(fork_id)
    fork_keys = [key for run, key in keys.seen if run == fork_id]
    assert len(fork_keys) == len(origin_keys) == 3
    assert set(fork_keys).isdisjoint(origin_keys)
    assert fork_keys == [key.replace(f"run={origin_id}", f"run={fork_id}") for key in origin_keys]
    fork_vertex_ids = {v.vertex_run_id for cp in await runner.history(fork_id) for v in cp.vertices}
    origin_vertex_ids = {
        v.vertex_run_id for cp in await runner.history(origin_id) for v in cp.vertices
    }
    assert fork_vertex_ids and fork_vertex_ids.isdisjoint(origin_vertex_ids)


class CountingLedger:
    """A ledger that counts the bytes each append hands to the backend (records and
    attachments): an upper bound of what the append stores."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.bytes = 0

    async def append(
        self,
        name: str,
        records: Sequence[bytes],
        *,
        expected: int,
        attachments: Mapping[str, bytes] | None = None,
        **options: Any,
    ) -> int:
        self.bytes += sum(len(r) for r in records)
        self.bytes += sum(len(d) for d in (attachments or {}).values())
        result: int = await self.inner.append(
            name, records, expected=expected, attachments=attachments, **options
        )
        return result

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
async def test_a_fork_reuses_stored_fields(backend: str, tmp_path: Any) -> None:
    """A 100 KiB field is stored once: the fork (from a fresh store object, in a cold
    cache) hands the backend a small record, not the field again."""
    from .._postgres import postgres_url

    @contextlib.asynccontextmanager
    async def opened() -> AsyncIterator[Any]:
        if backend == "postgres":
            with postgres_url() as url:
                async with open_store(url) as storage:
                    yield storage
        else:
            async with open_store(f"sqlite:///{tmp_path}/f.db") as storage:
                yield storage

    async with opened() as storage:
        first = flow.LedgerCheckpointStore(storage.ledger)
        origin = await loop_graph(first).run(Loop(limit=2, blob="x" * 100 * 1024))
        counting = CountingLedger(storage.ledger)
        runner = loop_graph(flow.LedgerCheckpointStore(counting))
        fork_id = await runner.fork(origin.run.graph_run_id, 3)
        assert counting.bytes < 2048, counting.bytes
        patched = await runner.fork(origin.run.graph_run_id, 3, {"limit": 9})
        assert counting.bytes < 4096, counting.bytes
        assert (await runner.get(fork_id)).state.blob == "x" * 100 * 1024
        assert (await runner.get(patched)).state.limit == 9


# -- random forks of random runs ---------------------------------------------------------


def shape(history: Iterable[flow.Checkpoint]) -> list[tuple[Any, ...]]:
    """A history without ids, times and step numbers."""
    return [
        (
            cp.phase,
            cp.run.status,
            tuple(cp.frontier),
            tuple((v.vertex, v.status) for v in cp.vertices),
            cp.state,
        )
        for cp in history
    ]


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    limit=st.integers(0, 5),
    kind=st.sampled_from(["memory", "sqlite"]),
    pick=st.floats(0, 1),
    patch=st.none()
    | st.fixed_dictionaries(
        {},
        optional={
            "limit": st.integers(0, 6),
            "n": st.integers(0, 6),
            "log": st.lists(st.text(max_size=3), max_size=3),
        },
    ),
    granularity=st.sampled_from(list(flow.Granularity)),
)
def test_random_forks_replay_like_fresh_runs(
    limit: int,
    kind: str,
    pick: float,
    patch: dict[str, Any] | None,
    granularity: flow.Granularity,
) -> None:
    async def scenario(directory: str) -> None:
        if kind == "memory":
            store: Any = flow.MemoryCheckpointStore()
            context: Any = contextlib.nullcontext()
        else:
            context = open_store(f"sqlite:///{directory}/h.db")
        async with context as storage:
            if storage is not None:
                store = flow.LedgerCheckpointStore(storage.ledger)
            runner = loop_graph(store)
            origin = await runner.run(Loop(limit=limit), checkpoint=granularity)
            history = await runner.history(origin.run.graph_run_id)
            revision = min(int(pick * len(history)), len(history) - 1)
            fork_id = await runner.fork(origin.run.graph_run_id, revision, patch)
            seed = (await runner.history(fork_id))[0]
            assert seed.state is not None
            assert {k: seed.state[k] for k in patch or {}} == (patch or {})
            forked = await runner.resume(fork_id, checkpoint=granularity)
            fork_history = await runner.history(fork_id)
            start = Loop(**seed.state)
            if seed.frontier == ["tick"]:
                fresh = await runner.run(start, checkpoint=granularity)
                fresh_history = await runner.history(fresh.run.graph_run_id)
                assert forked.state == fresh.state
                assert forked.run.status is fresh.run.status
                assert shape(fork_history[1:]) == shape(fresh_history[1:])
                assert forked.run.step - seed.run.step == fresh.run.step
            elif seed.frontier == ["fin"]:
                assert forked.state == Loop(**{**seed.state, "log": [*start.log, "fin"]})
            else:
                assert seed.frontier == [] and forked.state == start
            assert forked.run.status is RunStatus.COMPLETED
            assert await runner.history(origin.run.graph_run_id) == history

    import tempfile

    with tempfile.TemporaryDirectory() as directory:
        asyncio.run(scenario(directory))


def test_the_checkpoint_document_keeps_the_origin() -> None:
    origin = flow.ForkOrigin("5d3a4e0e-6a3a-4d8e-9b8b-0a0b0c0d0e0f", 2, "sha256:" + "0" * 64)
    cp = flow.Checkpoint(
        run=flow.RunRecord(
            "6d3a4e0e-6a3a-4d8e-9b8b-0a0b0c0d0e0f",
            "g",
            "1",
            RunStatus.RUNNING,
            0,
            0,
            system_clock.now(),
            system_clock.now(),
            system_clock.now(),
        ),
        phase=StepPhase.ROUTED,
        state={},
        origin=origin,
    )
    doc = to_document(cp)
    assert flow.checkpoint.from_document(doc).origin == origin
    doc["run"]["revision"] = 1
    with pytest.raises(flow.CheckpointDecodeError, match="origin"):
        flow.checkpoint.from_document(doc)
