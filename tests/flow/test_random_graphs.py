"""Property tests over random DAGs with fan-out, fan-in and conditional routes.

* §3.6 / §8.86: PER_VERTEX and PER_STEP reach the same final state and status.
* §4.3 / §9.1 crash recovery: a store whose k-th append fails (before writing, or after
  the write is durable) stops the run; a resume through a normal view of the same store
  ends exactly where the uninterrupted run ends, executes the same (step, vertex) pairs
  (our Q3), never re-executes a vertex whose DONE record was durable, and leaves a
  contiguous history.
"""

from __future__ import annotations

import asyncio
import uuid
from collections import Counter
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from flowledger import flow
from flowledger.flow import RunStatus, VertexStatus
from flowledger.storage import open_store

from .conftest import FaultyStore


@dataclass(frozen=True)
class Shape:
    size: int
    edges: tuple[tuple[int, int], ...]  # i -> j with i < j: a DAG
    routed: frozenset[int]  # vertices whose children are chosen by a pick
    threaded: frozenset[int]  # vertices whose task is a plain function (worker thread)


@st.composite
def shapes(draw: st.DrawFn) -> Shape:
    size = draw(st.integers(2, 7))
    edges = {(draw(st.integers(0, j - 1)), j) for j in range(1, size)}  # all reachable
    extra = draw(st.lists(st.tuples(st.integers(0, size - 1), st.integers(0, size - 1))))
    edges |= {(i, j) for i, j in extra if i < j}
    routed = draw(st.frozensets(st.integers(0, size - 1)))
    threaded = draw(st.frozensets(st.integers(0, size - 1)))
    return Shape(size, tuple(sorted(edges)), routed, threaded)


def name(i: int) -> str:
    return f"v{i}"


class Log:
    def __init__(self) -> None:
        self.executed: list[tuple[str, int, str]] = []  # (run id, step, vertex)

    def pairs(self, run_id: str) -> Counter[tuple[int, str]]:
        return Counter((step, v) for r, step, v in self.executed if r == run_id)


def build(shape: Shape, store: Any, log: Log) -> flow.Runner[dict[str, Any]]:
    graph: flow.Graph[dict[str, Any]] = flow.Graph("random")
    children: dict[int, list[str]] = {}
    for i, j in shape.edges:
        children.setdefault(i, []).append(name(j))
    for i in range(shape.size):
        vertex = name(i)

        def record() -> str:
            info = flow.run_info()
            log.executed.append((info.graph_run_id, info.step, info.vertex))
            return info.vertex

        if i in shape.threaded:

            def task(seen: int, record: Any = record) -> str:
                return str(record())

        else:

            async def task(seen: int, record: Any = record) -> str:  # type: ignore[misc]
                await asyncio.sleep(0)
                return str(record())

        def reduce(state: dict[str, Any], out: str) -> dict[str, Any]:
            return {"vals": [*state["vals"], out]}

        graph.add_vertex(vertex, task, select=lambda s: len(s["vals"]), reduce=reduce)
        targets = children.get(i, [])
        if i in shape.routed and targets:

            def pick(state: dict[str, Any], targets: list[str] = targets) -> list[str]:
                chosen = [t for k, t in enumerate(targets) if (len(state["vals"]) + k) % 2 == 0]
                return chosen or targets[:1]

            graph.add_route(vertex, targets=targets, pick=pick)
        else:
            for target in targets:
                graph.add_edge(vertex, target)
    return graph.compile(entry=name(0), finish=name(shape.size - 1), store=store)


@asynccontextmanager
async def checkpoint_store(kind: str) -> AsyncIterator[Any]:
    if kind == "memory":
        yield flow.MemoryCheckpointStore()
        return
    async with open_store("memory://") as storage:
        yield flow.LedgerCheckpointStore(storage.ledger)


def outcome(result: flow.Result[dict[str, Any]]) -> tuple[Any, ...]:
    halt = None if result.halt is None else (result.halt.kind, result.halt.step)
    return (result.run.status, result.run.step, result.state, halt)


SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@SETTINGS
@given(shape=shapes(), kind=st.sampled_from(["memory", "ledger"]))
def test_granularities_agree(shape: Shape, kind: str) -> None:
    """§8.86 PER_VERTEX and PER_STEP give the same final state, status and step."""

    async def scenario() -> None:
        async with checkpoint_store(kind) as store:
            log = Log()
            runner = build(shape, store, log)
            per_vertex = await runner.run({"vals": []})
            per_step = await runner.run({"vals": []}, checkpoint=flow.Granularity.PER_STEP)
            assert outcome(per_vertex) == outcome(per_step)
            assert per_vertex.run.status is not RunStatus.RUNNING
            assert log.pairs(per_vertex.run.graph_run_id) == log.pairs(per_step.run.graph_run_id)
            for result in (per_vertex, per_step):
                history = await runner.history(result.run.graph_run_id)
                assert [cp.revision for cp in history] == list(range(len(history)))
                assert history[-1].state == result.state

    asyncio.run(scenario())


@SETTINGS
@given(
    shape=shapes(),
    kind=st.sampled_from(["memory", "ledger"]),
    mode=st.sampled_from(list(flow.Granularity)),
    after_write=st.booleans(),
    data=st.data(),
)
def test_crash_then_resume_matches_uninterrupted(
    shape: Shape, kind: str, mode: flow.Granularity, after_write: bool, data: st.DataObject
) -> None:
    """§8.154/§9.1 crash at any append, resume: same end."""

    async def scenario() -> None:
        async with checkpoint_store(kind) as store:
            log = Log()
            counting = FaultyStore(store)
            expected = await build(shape, counting, log).run({"vals": []}, checkpoint=mode)
            expected_pairs = log.pairs(expected.run.graph_run_id)
            crash_at = data.draw(st.integers(1, counting.appends), label="crash_at")

            run_id = str(uuid.uuid4())
            faulty = FaultyStore(store, fail_append=crash_at, after_write=after_write)
            try:
                await build(shape, faulty, log).run({"vals": []}, run_id=run_id, checkpoint=mode)
            except flow.StoreError:
                pass
            else:
                raise AssertionError("the injected append failure was not raised")
            runner = build(shape, store, log)
            try:
                crashed = await runner.history(run_id)
            except flow.CheckpointNotFoundError:
                assert crash_at == 1 and not after_write  # the seed never landed
                return
            durable_done = {
                (v.step, v.vertex)
                for cp in crashed
                for v in cp.vertices
                if v.status is VertexStatus.DONE
            }
            if crashed[-1].run.status is RunStatus.RUNNING:
                result = await runner.resume(run_id, None, checkpoint=mode)
            else:  # the final checkpoint itself was durable
                result = await runner.get(run_id)
            assert outcome(result) == outcome(expected)
            executed = log.pairs(run_id)
            assert set(executed) == set(expected_pairs)
            for pair in durable_done:
                assert executed[pair] == 1, f"{pair} ran again after its DONE was durable"
            assert all(count <= 2 for count in executed.values())
            history = await runner.history(run_id)
            assert [cp.revision for cp in history] == list(range(len(history)))
            assert history[: len(crashed)] == crashed

    asyncio.run(scenario())
