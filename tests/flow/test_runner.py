"""Runner and engine conformance: flow-spec §3 and checklist §8.22-28, 37-68, 84-90, 170-174."""

from __future__ import annotations

import asyncio
import itertools
import os
import uuid
from typing import Any

import pytest

from flowledger import flow
from flowledger.flow import HaltKind, InterruptKind, RunStatus, StepPhase, VertexStatus
from flowledger.flow.runner import _options

from .conftest import Calls, Cnt, FaultyStore, InjectedFault, Recorder, chain, fan, inject, tag


def routed(history: list[flow.Checkpoint]) -> list[flow.Checkpoint]:
    return [cp for cp in history if cp.phase is StepPhase.ROUTED]


def assert_contiguous(history: list[flow.Checkpoint]) -> None:
    assert [cp.revision for cp in history] == list(range(len(history)))


async def assert_halt_common(
    runner: flow.Runner[Any], result: flow.Result[Any], recorder: Recorder
) -> flow.Checkpoint:
    assert result.run.status is RunStatus.INTERRUPTED
    assert result.interrupts is None
    assert result.halt is not None
    assert result.run.interrupted_at is not None
    latest = await runner.latest(result.run.graph_run_id)
    assert latest.phase is StepPhase.HALTED
    assert latest.halt is not None and latest.halt.kind is result.halt.kind
    assert latest.revision == result.run.revision
    assert len(recorder.of("on_halt")) == 1
    assert recorder.of("on_halt")[0][0] == result.halt
    assert recorder.of("on_run_finish") == []
    return latest


# -- control surface: status and get (§8.22-28) ---------------------------------------------


async def test_status_of_completed_run(store: Any) -> None:
    """§8.22 status returns the latest run record; unknown id -> CheckpointNotFoundError."""
    runner = chain(["a", "fin"], store)
    result = await runner.run(Cnt())
    status = await runner.status(result.run.graph_run_id)
    latest = await runner.latest(result.run.graph_run_id)
    assert status.status is RunStatus.COMPLETED
    assert status.graph_run_id == result.run.graph_run_id
    assert status.revision == latest.revision == result.run.revision
    assert status.step == latest.run.step == result.run.step
    unknown = str(uuid.uuid4())
    with pytest.raises(flow.CheckpointNotFoundError) as caught:
        await runner.status(unknown)
    assert caught.value.run_id == unknown


async def test_status_does_not_decode_state(store: Any) -> None:
    """§8.23 status works on a checkpoint whose state does not decode; get fails on it."""
    runner = chain(["a", "fin"], store)
    result = await runner.run(Cnt())
    run_id = result.run.graph_run_id
    await inject(store, run_id, state={"n": "not a number", "vals": []})
    status = await runner.status(run_id)
    assert status.revision == result.run.revision + 1
    with pytest.raises(flow.CheckpointDecodeError) as caught:
        await runner.get(run_id)
    assert caught.value.field == "state"


async def test_get_after_completion(store: Any) -> None:
    """§8.24 get after completion: decoded final state, no interrupts, no halt."""
    runner = chain(["a", "b", "fin"], store)
    result = await runner.run(Cnt())
    got = await runner.get(result.run.graph_run_id)
    assert got.run.status is RunStatus.COMPLETED
    assert got.state == Cnt(["a", "b", "fin"], 3) == result.state
    assert got.interrupts is None
    assert got.halt is None


async def test_get_paused_run(store: Any) -> None:
    """§8.25 get on a paused run: INTERRUPTED, one AWAITING interruption with stored info."""
    graph: flow.Graph[Cnt] = flow.Graph("g", state=Cnt)

    def body(_: int) -> None:
        flow.interrupt({"reason": "need approval"})

    tag(graph, "a", body=body)
    runner = graph.compile(entry="a", finish="a", store=store)
    result = await runner.run(Cnt())
    got = await runner.get(result.run.graph_run_id)
    assert got.run.status is RunStatus.INTERRUPTED
    assert got.halt is None
    assert got.interrupts is not None and len(got.interrupts) == 1
    (interruption,) = got.interrupts
    assert interruption.vertex == "a"
    assert interruption.kind is InterruptKind.AWAITING
    assert interruption.info == {"reason": "need approval"}
    assert interruption.graph_run_id == result.run.graph_run_id
    assert interruption.cause is None


async def test_get_errored_pause(store: Any) -> None:
    """§8.26 get on an errored pause: one ERRORED interruption with a non-empty cause."""
    graph: flow.Graph[Cnt] = flow.Graph("g", state=Cnt)

    def body(_: int) -> None:
        raise RuntimeError("boom")

    tag(graph, "a", body=body)
    runner = graph.compile(entry="a", finish="a", store=store)
    result = await runner.run(Cnt())
    got = await runner.get(result.run.graph_run_id)
    assert got.interrupts is not None and len(got.interrupts) == 1
    assert got.interrupts[0].kind is InterruptKind.ERRORED
    assert got.interrupts[0].cause is not None
    assert "boom" in str(got.interrupts[0].cause)
    assert got.halt is None


async def test_get_max_steps_halt(store: Any) -> None:
    """§8.27 get on a MAX_STEPS halt returns the halt (kind, run id, cause), no interrupts."""
    runner = chain(["a", "b", "c", "fin"], store)
    result = await runner.run(Cnt(), max_steps=2)
    got = await runner.get(result.run.graph_run_id)
    assert got.interrupts is None
    assert got.halt is not None
    assert got.halt.kind is HaltKind.MAX_STEPS
    assert got.halt.graph_run_id == result.run.graph_run_id
    assert got.halt.step == 2
    assert "max steps" in str(got.halt.cause)
    assert got.state == Cnt(["a", "b"], 2)


async def test_get_unknown_run(store: Any) -> None:
    """§8.28 get on an unknown id -> CheckpointNotFoundError."""
    runner = chain(["a"], store)
    with pytest.raises(flow.CheckpointNotFoundError):
        await runner.get(str(uuid.uuid4()))


# -- engine (§8.37-68) ----------------------------------------------------------------------


async def test_one_task_in_two_graphs(store: Any) -> None:
    """§8.37 one task value bound into two graphs runs in both; runs are isolated."""
    executions: list[int] = []

    def double(n: int) -> int:  # a plain function: runs in a worker thread
        executions.append(n)
        return n * 2

    def fold(state: dict[str, Any], out: int) -> dict[str, Any]:
        return {"n": out}

    runners = []
    other_store = flow.MemoryCheckpointStore()
    for graph_id, target in (("one", store), ("two", other_store)):
        graph: flow.Graph[dict[str, Any]] = flow.Graph(graph_id)
        graph.add_vertex("x", double, select=lambda s: s["n"], reduce=fold)
        graph.add_vertex("y", double, select=lambda s: s["n"], reduce=fold)
        graph.add_edge("x", "y")
        runners.append(graph.compile(entry="x", finish="y", store=target))
    first, second = await asyncio.gather(runners[0].run({"n": 1}), runners[1].run({"n": 3}))
    assert first.state == {"n": 4} and second.state == {"n": 12}
    assert first.run.graph_id == "one" and second.run.graph_id == "two"
    assert first.run.graph_run_id != second.run.graph_run_id
    assert sorted(executions) == [1, 2, 3, 6]
    with pytest.raises(flow.CheckpointNotFoundError):
        await runners[1].latest(first.run.graph_run_id)
    with pytest.raises(flow.CheckpointNotFoundError):
        await runners[0].latest(second.run.graph_run_id)


async def test_single_vertex(store: Any) -> None:
    """§8.38 entry == finish: COMPLETED, reduced once, seed then a COMPLETED latest."""
    calls = Calls()
    runner = chain(["only"], store, calls)
    result = await runner.run(Cnt())
    assert result.run.status is RunStatus.COMPLETED
    assert result.state == Cnt(["only"], 1)
    assert calls.count["only"] == 1
    history = await runner.history(result.run.graph_run_id)
    assert len(history) >= 2
    seed = history[0]
    assert seed.revision == 0 and seed.phase is StepPhase.ROUTED and seed.frontier == ["only"]
    assert history[-1].run.status is RunStatus.COMPLETED
    latest = await runner.latest(result.run.graph_run_id)
    assert latest.run.status is RunStatus.COMPLETED
    assert latest.revision == history[-1].revision


async def test_chain(store: Any) -> None:
    """§8.39 chain a->b->fin: one run each, in order, N=3, contiguous, last state == result."""
    calls = Calls()
    runner = chain(["a", "b", "fin"], store, calls)
    result = await runner.run(Cnt())
    assert calls.order == ["a", "b", "fin"]
    assert calls.seen == {"a": [0], "b": [1], "fin": [2]}
    assert result.state == Cnt(["a", "b", "fin"], 3)
    assert result.run.status is RunStatus.COMPLETED
    history = await runner.history(result.run.graph_run_id)
    assert_contiguous(history)
    assert history[-1].state == {"vals": ["a", "b", "fin"], "n": 3}


async def test_worked_example_revisions(store: Any) -> None:
    """§8.84-85/§3.6 worked example: a->b->fin writes 7 checkpoints per vertex, 4 per step."""
    runner = chain(["a", "b", "fin"], store)
    result = await runner.run(Cnt())
    history = await runner.history(result.run.graph_run_id)
    phases = [cp.phase for cp in history]
    r, g = StepPhase.RUNNING, StepPhase.ROUTED
    assert phases == [g, r, g, r, g, r, g]
    assert [cp.run.step for cp in history] == [0, 0, 0, 1, 1, 2, 2]
    assert [cp.frontier for cp in routed(history)] == [["a"], ["b"], ["fin"], []]
    assert result.run.revision == 6 and result.run.step == 2
    per_step = await runner.run(Cnt(), checkpoint=flow.Granularity.PER_STEP)
    history = await runner.history(per_step.run.graph_run_id)
    assert [cp.phase for cp in history] == [g, g, g, g]
    assert per_step.run.revision == 3 and per_step.run.step == 2


async def test_a_steps_checkpoints_share_one_append(store: Any) -> None:
    """§8.84 (ours) a step's vertex checkpoints and its boundary are one append: they
    are ready together, since vertices are classified after the barrier."""
    faulty = FaultyStore(store)
    _, runner = fan(faulty)
    await runner.run(Cnt())
    # seed; v + boundary; a + b + boundary; fin + completion
    assert faulty.batches == [[0], [1, 2], [3, 4, 5], [6, 7]]
    faulty = FaultyStore(store)
    _, runner = fan(faulty)
    await runner.run(Cnt(), checkpoint=flow.Granularity.PER_STEP)
    assert faulty.batches == [[0], [1], [2], [3]]


async def test_seed_checkpoint(store: Any) -> None:
    """§8.40 the seed: revision 0, STEP_ROUTED, frontier [entry], state = initial input."""
    runner = chain(["a", "fin"], store)
    result = await runner.run(Cnt(["x"], 7))
    seed = (await runner.history(result.run.graph_run_id))[0]
    assert seed.revision == 0
    assert seed.phase is StepPhase.ROUTED
    assert seed.frontier == ["a"]
    assert seed.state == {"vals": ["x"], "n": 7}
    assert seed.step_base is None
    assert seed.vertices == [] and seed.routes == [] and seed.interrupts == []
    assert seed.halt is None
    assert seed.run.status is RunStatus.RUNNING and seed.run.step == 0


async def test_timestamps(store: Any) -> None:
    """§8.41 created, started, completed, updated are set; created <= started <= completed."""
    runner = chain(["a", "fin"], store)
    result = await runner.run(Cnt())
    run = result.run
    assert run.created_at is not None and run.started_at is not None
    assert run.completed_at is not None and run.updated_at is not None
    assert run.created_at <= run.started_at <= run.completed_at <= run.updated_at
    assert run.interrupted_at is None and run.cancelled_at is None


async def test_vertex_record_timestamps(store: Any) -> None:
    """§8.41/§1.4 a classified record has exactly one of completed/interrupted/failed."""

    def fail(_: int) -> None:
        raise RuntimeError("x")

    graph: flow.Graph[Cnt] = flow.Graph("g", state=Cnt)
    tag(graph, "v")
    tag(graph, "a", body=fail, on_error=flow.ErrorRoute("h"))
    tag(graph, "b", body=lambda n: flow.interrupt("?"))
    tag(graph, "c", body=fail)
    tag(graph, "h")
    for sibling in ("a", "b", "c"):
        graph.add_edge("v", sibling)
    runner = graph.compile(entry="v", finish="h", store=store)
    result = await runner.run(Cnt())
    history = await runner.history(result.run.graph_run_id)
    records = [v for cp in history for v in cp.vertices if v.status is not VertexStatus.RUNNING]
    expected = {
        VertexStatus.DONE: "completed_at",
        VertexStatus.INTERRUPTED: "interrupted_at",
        VertexStatus.FAILED: "failed_at",
    }
    assert {v.status for v in records} == set(expected)
    for record in records:
        stamps = {k for k in expected.values() if getattr(record, k) is not None}
        assert stamps == {expected[record.status]}, record
        assert record.created_at is not None and record.started_at is not None
        assert record.created_at <= record.started_at <= getattr(record, expected[record.status])


async def test_hooks_on_chain(store: Any) -> None:
    """§8.42 3-chain hooks: run start/finish once, 3 vertex starts/finishes, checkpoints."""
    recorder = Recorder()
    runner = chain(["a", "b", "fin"], store)
    result = await runner.run(Cnt(), hooks=recorder.hooks)
    (start,) = recorder.of("on_run_start")
    assert start[0].status is RunStatus.RUNNING
    assert start[0].graph_run_id == result.run.graph_run_id
    (finish,) = recorder.of("on_run_finish")
    assert finish[0].status is RunStatus.COMPLETED
    starts = recorder.of("on_vertex_start")
    assert [args[0].vertex for args in starts] == ["a", "b", "fin"]
    assert all(args[0].started_at is not None for args in starts)
    assert all(args[0].status is VertexStatus.RUNNING for args in starts)
    finishes = recorder.of("on_vertex_finish")
    assert [args[0].vertex for args in finishes] == ["a", "b", "fin"]
    assert all(args[0].status is VertexStatus.DONE for args in finishes)
    history = await runner.history(result.run.graph_run_id)
    checkpoints = recorder.of("on_checkpoint")
    assert len(checkpoints) == len(history)
    assert [c[1] for c in checkpoints] == [cp.revision for cp in history]
    assert [c[2] for c in checkpoints] == [cp.run.step for cp in history]


async def test_vertex_start_sees_started_at(store: Any) -> None:
    """§8.43 on_vertex_start always sees a non-zero started_at (2 calls on a 2-chain)."""
    recorder = Recorder()
    runner = chain(["a", "fin"], store)
    await runner.run(Cnt(), hooks=recorder.hooks)
    starts = recorder.of("on_vertex_start")
    assert len(starts) == 2
    assert all(args[0].started_at is not None for args in starts)


async def test_step_base(store: Any) -> None:
    """§8.44 seed has no step base; step 0's is the input; step 1's is step 0's result."""
    runner = chain(["a", "b", "fin"], store)
    result = await runner.run(Cnt(["init"], 5))
    history = await runner.history(result.run.graph_run_id)
    assert history[0].step_base is None
    initial = {"vals": ["init"], "n": 5}
    step0 = [cp for cp in history[1:] if cp.run.step == 0]
    assert step0 and all(cp.step_base == initial for cp in step0)
    committed0 = routed(step0)[-1].state
    step1 = [cp for cp in history if cp.run.step == 1]
    assert step1 and all(cp.step_base == committed0 for cp in step1)
    assert committed0 == {"vals": ["init", "a"], "n": 6}


async def test_two_hook_sets_fire(store: Any) -> None:
    """§8.45 two hook sets both fire."""
    first, second = Recorder(), Recorder()
    runner = chain(["a", "fin"], store)
    await runner.run(Cnt(), hooks=[first.hooks, second.hooks])
    assert first.names() == second.names()
    assert len(first.of("on_run_start")) == 1 and len(first.of("on_run_finish")) == 1


async def test_static_fan_out(store: Any) -> None:
    """§8.46 fan-out v->{a,b}->fin: COMPLETED, N=4, static route from v to {a,b}."""
    _, runner = fan(store)
    result = await runner.run(Cnt())
    assert result.run.status is RunStatus.COMPLETED
    assert result.state.n == 4
    assert result.state.vals == ["v", "a", "b", "fin"]
    history = await runner.history(result.run.graph_run_id)
    routes = [r for cp in history for r in cp.routes if r.source == "v"]
    assert routes == [flow.RouteRecord("v", ("a", "b"), False)]


async def test_fan_in_runs_once_on_merged_state(store: Any) -> None:
    """§8.47 fan-in: j runs exactly once and its selector sees the merged state (N=3)."""
    calls = Calls()
    graph: flow.Graph[Cnt] = flow.Graph("g", state=Cnt)
    for vertex in ("v", "a", "b", "j"):
        tag(graph, vertex, calls)
    for source, target in (("v", "a"), ("v", "b"), ("a", "j"), ("b", "j")):
        graph.add_edge(source, target)
    result = await graph.compile(entry="v", finish="j", store=store).run(Cnt())
    assert calls.count["j"] == 1
    assert calls.seen["j"] == [3]
    assert result.state.vals == ["v", "a", "b", "j"]


async def test_max_steps_on_cycle(store: Any) -> None:
    """§8.48 a cycle with max 4 halts MAX_STEPS at step 4, pending frontier, no error."""
    graph: flow.Graph[Cnt] = flow.Graph("g", state=Cnt)
    tag(graph, "a")
    tag(graph, "b")
    graph.add_edge("a", "b")
    graph.add_edge("b", "a")
    runner = graph.compile(entry="a", finish="b", store=store)
    recorder = Recorder()
    result = await runner.run(Cnt(), max_steps=4, hooks=recorder.hooks)
    latest = await assert_halt_common(runner, result, recorder)
    assert result.halt is not None
    assert result.halt.kind is HaltKind.MAX_STEPS and result.halt.step == 4
    assert isinstance(result.halt.cause, flow.MaxStepsExceededError)
    assert result.halt.cause.max_steps == 4 and result.halt.cause.step == 4
    assert latest.frontier == ["a"]
    assert latest.halt is not None and latest.halt.step == 4
    assert result.state.vals == ["a", "b", "a", "b"]


async def test_dead_end(store: Any) -> None:
    """§8.49 a pick that always chooses a non-finish sink halts DEAD_END."""
    graph: flow.Graph[Cnt] = flow.Graph("g", state=Cnt)
    for vertex in ("a", "sink", "fin"):
        tag(graph, vertex)
    graph.add_route("a", targets=["sink", "fin"], pick=lambda s: "sink")
    runner = graph.compile(entry="a", finish="fin", store=store)
    recorder = Recorder()
    result = await runner.run(Cnt(), hooks=recorder.hooks)
    latest = await assert_halt_common(runner, result, recorder)
    assert result.halt is not None and result.halt.kind is HaltKind.DEAD_END
    assert isinstance(result.halt.cause, flow.DeadEndError)
    assert result.halt.step == 1 and result.halt.cause.step == 1
    assert latest.frontier == []
    assert result.state.vals == ["a", "sink"]


async def test_fan_out_routes_and_edges(store: Any) -> None:
    """§8.50 fan-out history: all routes static, 4 traversed edges, on_edge 4 times."""
    _, runner = fan(store)
    recorder = Recorder()
    result = await runner.run(Cnt(), hooks=recorder.hooks)
    history = await runner.history(result.run.graph_run_id)
    routes = [r for cp in routed(history) for r in cp.routes]
    assert all(not r.conditional for r in routes)
    pairs = [(r.source, t) for r in routes for t in r.targets]
    assert pairs == [("v", "a"), ("v", "b"), ("a", "fin"), ("b", "fin")]
    assert [(e[0], e[1]) for e in recorder.of("on_edge")] == pairs


async def test_one_routed_boundary_per_step(store: Any) -> None:
    """§8.51 every step (seed aside) has exactly one STEP_ROUTED boundary."""
    _, runner = fan(store)
    result = await runner.run(Cnt())
    history = await runner.history(result.run.graph_run_id)
    boundaries = [cp.run.step for cp in routed(history)[1:]]
    assert boundaries == [0, 1, 2]
    adjacent = itertools.pairwise(history)
    assert not any(
        x.phase is y.phase is StepPhase.ROUTED and x.run.step == y.run.step
        for x, y in adjacent
        if x.revision > 0
    )


async def test_finish_with_out_edge(store: Any) -> None:
    """§8.52 finish may have an out-edge: fin in step 1, sink in step 2, then COMPLETED."""
    calls = Calls()
    graph: flow.Graph[Cnt] = flow.Graph("g", state=Cnt)
    for vertex in ("a", "fin", "sink"):
        tag(graph, vertex, calls)
    graph.add_edge("a", "fin")
    graph.add_edge("fin", "sink")
    result = await graph.compile(entry="a", finish="fin", store=store).run(Cnt())
    assert result.run.status is RunStatus.COMPLETED
    assert result.state.n == 3
    assert calls.keys["fin"][0].split("/")[2] == "step=1"
    assert calls.keys["sink"][0].split("/")[2] == "step=2"


async def test_wide_fan_out(store: Any) -> None:
    """§8.53 8 parallel workers over a shared read and disjoint writes: each lands once."""
    graph: flow.Graph[dict[str, Any]] = flow.Graph("wide")
    names = [f"w{i}" for i in range(8)]
    graph.add_vertex("v", lambda s: None)
    graph.add_vertex("fin", lambda s: None)

    def worker(name: str) -> Any:
        async def task(shared: dict[str, int]) -> int:
            await asyncio.sleep(0)
            return shared["base"] + int(name[1:])

        def reduce(state: dict[str, Any], out: int) -> None:
            state["out"][name] = out

        return task, reduce

    for name in names:
        task, reduce = worker(name)
        graph.add_vertex(name, task, select=lambda s: s["shared"], reduce=reduce)
        graph.add_edge("v", name)
        graph.add_edge(name, "fin")
    runner = graph.compile(entry="v", finish="fin", store=store)
    result = await runner.run({"shared": {"base": 100}, "out": {}})
    assert result.state["out"] == {name: 100 + i for i, name in enumerate(names)}
    assert result.state["shared"] == {"base": 100}


@pytest.mark.parametrize("limit", [1, 2])
async def test_concurrency_bound(store: Any, limit: int) -> None:
    """§8.54 concurrency k with 4 blocked workers: observed maximum is exactly k."""
    active = 0
    peak = 0

    async def blocked(_: Any) -> None:
        nonlocal active, peak
        active += 1
        peak = max(peak, active)
        await asyncio.sleep(0.005)
        active -= 1

    graph: flow.Graph[dict[str, Any]] = flow.Graph("g")
    graph.add_vertex("v", lambda s: None)
    graph.add_vertex("fin", lambda s: None)
    for i in range(4):
        graph.add_vertex(f"w{i}", blocked)
        graph.add_edge("v", f"w{i}")
        graph.add_edge(f"w{i}", "fin")
    runner = graph.compile(entry="v", finish="fin", store=store)
    result = await runner.run({}, concurrency=limit)
    assert result.run.status is RunStatus.COMPLETED
    assert peak == limit


async def test_frozen_step_base(store: Any) -> None:
    """§8.55 siblings' selectors see the pre-step value; the change lands once."""
    calls = Calls()
    _, runner = fan(store, calls)
    result = await runner.run(Cnt([], 6))
    assert calls.seen["a"] == [7] and calls.seen["b"] == [7]
    assert result.state.n == 10
    assert result.state.vals.count("a") == 1


async def test_selectors_tasks_and_picks_get_copies(store: Any) -> None:
    """§8.55/Q17 (ours) selectors, tasks and picks get copies."""
    seen: list[list[str]] = []

    def evil_select(state: Cnt) -> int:
        state.vals.append("evil-select")
        return state.n

    async def evil_task(state: Cnt) -> None:  # no selector: the task gets a state copy
        state.vals.append("evil-task")

    def reader(state: Cnt) -> int:
        seen.append(list(state.vals))
        return state.n

    def evil_pick(state: Cnt) -> str:
        state.vals.append("evil-pick")
        return "fin"

    graph: flow.Graph[Cnt] = flow.Graph("g", state=Cnt)
    tag(graph, "v")
    graph.add_vertex("a", lambda n: "a", select=evil_select, reduce=lambda s, o: None)
    graph.add_vertex("b", evil_task)
    graph.add_vertex("c", lambda n: "c", select=reader, reduce=lambda s, o: None)
    graph.add_vertex("fin", lambda s: None)
    graph.add_vertex("r", lambda s: None)
    for sibling in ("a", "b", "c"):
        graph.add_edge("v", sibling)
        graph.add_edge(sibling, "r")
    graph.add_route("r", targets=["fin"], pick=evil_pick)
    result = await graph.compile(entry="v", finish="fin", store=store).run(Cnt())
    assert result.run.status is RunStatus.COMPLETED
    assert seen == [["v"]]
    assert result.state == Cnt(["v"], 1)


async def test_barrier(store: Any) -> None:
    """§8.56 every task of a step (one slow) finishes before the first reducer runs."""
    log: list[str] = []

    def worker(name: str, delay: float) -> tuple[Any, Any]:
        async def task(_: Any) -> str:
            await asyncio.sleep(delay)
            log.append(f"task:{name}")
            return name

        def reduce(state: dict[str, Any], out: str) -> None:
            log.append(f"reduce:{out}")

        return task, reduce

    graph: flow.Graph[dict[str, Any]] = flow.Graph("g")
    graph.add_vertex("v", lambda s: None)
    graph.add_vertex("fin", lambda s: None)
    for name, delay in (("a", 0.0), ("b", 0.02), ("c", 0.0)):
        task, reduce = worker(name, delay)
        graph.add_vertex(name, task, reduce=reduce)
        graph.add_edge("v", name)
        graph.add_edge(name, "fin")
    await graph.compile(entry="v", finish="fin", store=store).run({})
    assert sorted(log[:3]) == ["task:a", "task:b", "task:c"]
    assert log[3:] == ["reduce:a", "reduce:b", "reduce:c"]


@pytest.mark.parametrize("initial", [Cnt(["x"], 5), Cnt()])
async def test_failed_reducer_leaves_state_unchanged(store: Any, initial: Cnt) -> None:
    """§8.57 a reducer mutating then raising leaves the state unchanged."""
    error = ValueError("reducer refuses")

    def bad_reduce(state: Cnt, out: str) -> None:
        state.vals.append("half-done")
        state.n = 1000
        raise error

    graph: flow.Graph[Cnt] = flow.Graph("g", state=Cnt)
    tag(graph, "v")
    tag(graph, "good")
    graph.add_vertex("bad", lambda n: "bad", select=lambda s: s.n, reduce=bad_reduce)
    graph.add_vertex("fin", lambda s: None)
    for sibling in ("good", "bad"):
        graph.add_edge("v", sibling)
        graph.add_edge(sibling, "fin")
    runner = graph.compile(entry="v", finish="fin", store=store)
    result = await runner.run(initial)
    assert result.run.status is RunStatus.INTERRUPTED
    expected = Cnt([*initial.vals, "v", "good"], initial.n + 2)
    assert result.state == expected
    assert result.interrupts is not None and len(result.interrupts) == 1
    assert result.interrupts[0].vertex == "bad"
    assert result.interrupts[0].kind is InterruptKind.ERRORED
    assert result.interrupts[0].cause is error
    latest = await runner.latest(result.run.graph_run_id)
    assert latest.state == {"vals": expected.vals, "n": expected.n}


async def test_same_field_higher_id_conflicts(store: Any) -> None:
    """§8.58 (ours, DESIGN "Decisions") two siblings writing one field without a reducer:
    not last-writer-wins but a ConflictingUpdateError of the higher vertex id, whose
    update is not committed (tests/flow/test_reducers.py covers the rest)."""
    graph: flow.Graph[dict[str, Any]] = flow.Graph("g")
    graph.add_vertex("v", lambda s: None)
    graph.add_vertex("fin", lambda s: None)
    for name in ("zed", "alpha"):  # declaration order is irrelevant
        graph.add_vertex(name, lambda s, name=name: {"x": name})
        graph.add_edge("v", name)
        graph.add_edge(name, "fin")
    result = await graph.compile(entry="v", finish="fin", store=store).run({"x": None})
    assert result.state == {"x": "alpha"}
    assert result.interrupts is not None and [i.vertex for i in result.interrupts] == ["zed"]
    cause = result.interrupts[0].cause
    assert isinstance(cause, flow.ConflictingUpdateError)
    assert (cause.field, cause.vertex, cause.earlier) == ("x", "zed", ("alpha",))


async def test_disjoint_fields_both_land(store: Any) -> None:
    """§8.59 two siblings writing different fields: both land."""
    graph: flow.Graph[dict[str, Any]] = flow.Graph("g")
    graph.add_vertex("v", lambda s: None)
    graph.add_vertex("fin", lambda s: None)
    graph.add_vertex("a", lambda s: {"left": 1})
    graph.add_vertex("b", lambda s: {"right": 2})
    for name in ("a", "b"):
        graph.add_edge("v", name)
        graph.add_edge(name, "fin")
    result = await graph.compile(entry="v", finish="fin", store=store).run({})
    assert result.state == {"left": 1, "right": 2}


async def test_reducers_in_vertex_order(store: Any) -> None:
    """§8.60 reducers run in vertex-id order, whatever order the tasks finish in."""
    graph: flow.Graph[Cnt] = flow.Graph("g", state=Cnt)
    tag(graph, "v")
    graph.add_vertex("fin", lambda s: None)
    for name, delay in (("c", 0.0), ("a", 0.01), ("b", 0.005)):

        async def task(_: int, name: str = name, delay: float = delay) -> str:
            await asyncio.sleep(delay)
            return name

        graph.add_vertex(name, task, select=lambda s: s.n, reduce=lambda s, o: s.vals.append(o))
        graph.add_edge("v", name)
        graph.add_edge(name, "fin")
    result = await graph.compile(entry="v", finish="fin", store=store).run(Cnt())
    assert result.state.vals == ["v", "a", "b", "c"]


# -- conditional routing (§8.61-68) ---------------------------------------------------------


def routed_graph(pick: Any, targets: list[str], calls: Calls | None = None) -> flow.Graph[Cnt]:
    graph: flow.Graph[Cnt] = flow.Graph("cond", state=Cnt)
    tag(graph, "entry", calls)
    for target in targets:
        tag(graph, target, calls)
    graph.add_route("entry", targets=targets, pick=pick)
    return graph


async def test_conditional_single_target(store: Any) -> None:
    """§8.61 a pick of one target completes; conditional route record; on_edge once."""
    runner = routed_graph(lambda s: "fin", ["fin"]).compile(
        entry="entry", finish="fin", store=store
    )
    recorder = Recorder()
    result = await runner.run(Cnt(), hooks=recorder.hooks)
    assert result.run.status is RunStatus.COMPLETED
    history = await runner.history(result.run.graph_run_id)
    routes = [r for cp in history for r in cp.routes]
    assert routes == [flow.RouteRecord("entry", ("fin",), True)]
    assert [(e[0], e[1]) for e in recorder.of("on_edge")] == [("entry", "fin")]


async def test_conditional_fan_out(store: Any) -> None:
    """§8.62 a pick of two targets runs both once; COMPLETED with N=4."""
    calls = Calls()
    graph = routed_graph(lambda s: ["b", "a"], ["a", "b"], calls)
    tag(graph, "fin", calls)
    graph.add_edge("a", "fin")
    graph.add_edge("b", "fin")
    result = await graph.compile(entry="entry", finish="fin", store=store).run(Cnt())
    assert result.run.status is RunStatus.COMPLETED
    assert result.state.n == 4
    assert calls.count == {"entry": 1, "a": 1, "b": 1, "fin": 1}


@pytest.mark.parametrize("choice", ["left", "right"])
async def test_pick_reads_post_reduce_state(store: Any, choice: str) -> None:
    """§8.63 pick sees the choice written by the same vertex's reducer."""
    graph: flow.Graph[dict[str, Any]] = flow.Graph("g")
    graph.add_vertex("entry", lambda s: {"choice": s["want"]})
    graph.add_vertex("left", lambda s: {"went": "left"})
    graph.add_vertex("right", lambda s: {"went": "right"})
    graph.add_route("entry", targets=["left", "right"], pick=lambda s: s["choice"])
    runner = graph.compile(entry="entry", finish=choice, store=store)
    result = await runner.run({"want": choice})
    assert result.run.status is RunStatus.COMPLETED
    assert result.state["went"] == choice


async def test_pick_empty_halts(store: Any) -> None:
    """§8.64 an empty pick halts UNDECLARED_TARGET naming the source and no target."""
    runner = routed_graph(lambda s: [], ["fin"]).compile(entry="entry", finish="fin", store=store)
    recorder = Recorder()
    result = await runner.run(Cnt(), hooks=recorder.hooks)
    latest = await assert_halt_common(runner, result, recorder)
    assert result.halt is not None and result.halt.kind is HaltKind.UNDECLARED_TARGET
    assert isinstance(result.halt.cause, flow.UndeclaredTargetError)
    assert result.halt.cause.source == "entry" and result.halt.cause.target is None
    assert "empty" in str(result.halt.cause)
    assert result.halt.step == 0
    assert latest.frontier == ["entry"]


async def test_pick_undeclared_target_halts(store: Any) -> None:
    """§8.65 a pick outside the declared targets halts UNDECLARED_TARGET naming it."""
    graph = routed_graph(lambda s: ["fin", "other"], ["fin"])
    tag(graph, "other")
    graph.add_edge("fin", "other")
    runner = graph.compile(entry="entry", finish="fin", store=store)
    recorder = Recorder()
    result = await runner.run(Cnt(), hooks=recorder.hooks)
    await assert_halt_common(runner, result, recorder)
    assert result.halt is not None and result.halt.kind is HaltKind.UNDECLARED_TARGET
    assert isinstance(result.halt.cause, flow.UndeclaredTargetError)
    assert result.halt.cause.source == "entry" and result.halt.cause.target == "other"


async def test_pick_error_halts_condition(store: Any) -> None:
    """§8.66 a pick that fails halts CONDITION with a ConditionError wrapping the error."""
    error = LookupError("no route today")

    def pick(state: Cnt) -> str:
        raise error

    runner = routed_graph(pick, ["fin"]).compile(entry="entry", finish="fin", store=store)
    recorder = Recorder()
    result = await runner.run(Cnt(), hooks=recorder.hooks)
    await assert_halt_common(runner, result, recorder)
    assert result.halt is not None and result.halt.kind is HaltKind.CONDITION
    cause = result.halt.cause
    assert isinstance(cause, flow.ConditionError)
    assert cause.source == "entry" and cause.cause is error and cause.__cause__ is error
    assert result.state == Cnt(["entry"], 1)


async def test_pick_crash_halts_condition(store: Any) -> None:
    """§8.67 a pick raising an unexpected exception halts CONDITION naming the failure."""
    runner = routed_graph(lambda s: ["fin"][s.n * 5], ["fin"]).compile(
        entry="entry", finish="fin", store=store
    )
    recorder = Recorder()
    result = await runner.run(Cnt(), hooks=recorder.hooks)
    await assert_halt_common(runner, result, recorder)
    assert result.halt is not None and result.halt.kind is HaltKind.CONDITION
    assert isinstance(result.halt.cause, flow.ConditionError)
    assert "list index out of range" in str(result.halt.cause)


@pytest.mark.parametrize("bad", [None, 42])
async def test_pick_returning_garbage_halts(store: Any, bad: Any) -> None:
    """§8.64/§5.7 a pick returning no target list is captured as a halt, never an error."""
    runner = routed_graph(lambda s: bad, ["fin"]).compile(entry="entry", finish="fin", store=store)
    result = await runner.run(Cnt())
    assert result.run.status is RunStatus.INTERRUPTED
    assert result.halt is not None
    assert result.halt.kind in (HaltKind.CONDITION, HaltKind.UNDECLARED_TARGET)


async def test_conditional_self_loop_max_steps(store: Any) -> None:
    """§8.68 a conditional self-loop that never picks finish halts MAX_STEPS at max 5."""
    graph: flow.Graph[Cnt] = flow.Graph("g", state=Cnt)
    tag(graph, "a")
    tag(graph, "fin")
    graph.add_route("a", targets=["a", "fin"], pick=lambda s: "a")
    runner = graph.compile(entry="a", finish="fin", store=store)
    recorder = Recorder()
    result = await runner.run(Cnt(), max_steps=5, hooks=recorder.hooks)
    await assert_halt_common(runner, result, recorder)
    assert result.halt is not None and result.halt.kind is HaltKind.MAX_STEPS
    assert isinstance(result.halt.cause, flow.MaxStepsExceededError)
    assert result.halt.step == 5
    assert result.state.vals == ["a"] * 5


# -- granularity (§8.84-87) -----------------------------------------------------------------


async def test_per_vertex_running_checkpoints(store: Any) -> None:
    """§8.84 PER_VERTEX on v->{a,b}->fin writes exactly 4 STEP_RUNNING checkpoints."""
    _, runner = fan(store)
    result = await runner.run(Cnt())
    history = await runner.history(result.run.graph_run_id)
    running = [cp for cp in history if cp.phase is StepPhase.RUNNING]
    assert len(running) == 4
    assert_contiguous(history)


async def test_running_checkpoint_contents(store: Any) -> None:
    """§8.84/§3.6 a STEP_RUNNING checkpoint lists all step vertices, sorted."""
    _, runner = fan(store)
    result = await runner.run(Cnt())
    history = await runner.history(result.run.graph_run_id)
    first = next(cp for cp in history if cp.phase is StepPhase.RUNNING and cp.run.step == 1)
    assert [(v.vertex, v.status) for v in first.vertices] == [
        ("a", VertexStatus.DONE),
        ("b", VertexStatus.RUNNING),
    ]
    assert first.state == {"vals": ["v", "a"], "n": 2}
    assert first.step_base == {"vals": ["v"], "n": 1}
    assert first.routes == [] and first.halt is None


async def test_per_step_writes_boundaries_only(store: Any) -> None:
    """§8.85 PER_STEP writes no STEP_RUNNING checkpoint; every checkpoint is STEP_ROUTED."""
    _, runner = fan(store)
    result = await runner.run(Cnt(), checkpoint=flow.Granularity.PER_STEP)
    history = await runner.history(result.run.graph_run_id)
    assert all(cp.phase is StepPhase.ROUTED for cp in history)
    assert len(history) == 4
    assert_contiguous(history)


async def test_granularity_same_outcome(store: Any) -> None:
    """§8.86 PER_VERTEX and PER_STEP give identical final state and status."""
    _, runner = fan(store)
    one = await runner.run(Cnt())
    two = await runner.run(Cnt(), checkpoint=flow.Granularity.PER_STEP)
    assert one.state == two.state
    assert one.run.status is two.run.status is RunStatus.COMPLETED
    assert one.run.step == two.run.step


async def test_granularity_hooks(store: Any) -> None:
    """§8.87 both granularities: same vertex and interrupt hooks, fewer on_checkpoint."""
    counts = {}
    for mode in flow.Granularity:
        recorder = Recorder()
        _, runner = fan(store)
        await runner.run(Cnt(), hooks=recorder.hooks, checkpoint=mode)
        counts[mode] = recorder
    per_vertex = counts[flow.Granularity.PER_VERTEX]
    per_step = counts[flow.Granularity.PER_STEP]
    for event in ("on_vertex_start", "on_vertex_finish", "on_interrupt", "on_edge", "on_step"):
        assert len(per_vertex.of(event)) == len(per_step.of(event)), event
    assert len(per_vertex.of("on_vertex_finish")) == 4
    assert len(per_step.of("on_checkpoint")) < len(per_vertex.of("on_checkpoint"))


# -- engine errors (§8.89-90) ---------------------------------------------------------------


async def test_unencodable_initial_state(store: Any) -> None:
    """§8.89 a non-encodable initial state raises a codec error and writes nothing."""
    graph: flow.Graph[dict[str, Any]] = flow.Graph("g")
    graph.add_vertex("a", lambda s: None)
    runner = graph.compile(entry="a", finish="a", store=store)
    run_id = str(uuid.uuid4())
    with pytest.raises(flow.CodecError) as caught:
        await runner.run({"lock": asyncio.Lock()}, run_id=run_id)
    assert caught.value.op == "encode"
    assert "lock" in caught.value.path
    with pytest.raises(flow.CheckpointNotFoundError):
        await runner.latest(run_id)


@pytest.mark.parametrize(
    ("vertices", "cycle", "mode", "failing"),
    [
        (["only"], False, flow.Granularity.PER_VERTEX, 1),  # the seed append
        (["only"], False, flow.Granularity.PER_STEP, 2),  # the completion boundary
        (["only"], True, flow.Granularity.PER_VERTEX, 2),  # step 0 of a self-cycle
        (["a", "b", "fin"], False, flow.Granularity.PER_VERTEX, 3),
    ],
)
async def test_failing_append_is_an_error(
    store: Any, vertices: list[str], cycle: bool, mode: flow.Granularity, failing: int
) -> None:
    """§8.90 the store's Nth append failing makes run raise that error, never a result."""
    faulty = FaultyStore(store, fail_append=failing)
    graph: flow.Graph[Cnt] = flow.Graph("g", state=Cnt)
    for vertex in vertices:
        tag(graph, vertex)
    for source, target in itertools.pairwise(vertices):
        graph.add_edge(source, target)
    if cycle:
        graph.add_edge(vertices[-1], vertices[0])
    runner = graph.compile(entry=vertices[0], finish=vertices[-1], store=faulty)
    with pytest.raises(flow.StoreError) as caught:
        await runner.run(Cnt(), checkpoint=mode)
    assert isinstance(caught.value.cause, InjectedFault)
    assert faulty.appends == failing


# -- runner (§8.170-174) --------------------------------------------------------------------


async def test_run_mints_distinct_ids(store: Any) -> None:
    """§8.170 run mints a fresh canonical UUID per run."""
    runner = chain(["a"], store)
    one = await runner.run(Cnt())
    two = await runner.run(Cnt())
    assert one.run.graph_run_id != two.run.graph_run_id
    for result in (one, two):
        parsed = uuid.UUID(result.run.graph_run_id)
        assert str(parsed) == result.run.graph_run_id and parsed.int != 0


async def test_run_with_given_id(store: Any) -> None:
    """§8.171 a fresh run id is used as given; an id with history -> GraphRunExistsError."""
    runner = chain(["a"], store)
    run_id = str(uuid.uuid4())
    result = await runner.run(Cnt(), run_id=run_id)
    assert result.run.graph_run_id == run_id
    assert (await runner.latest(run_id)).run.graph_run_id == run_id
    with pytest.raises(flow.GraphRunExistsError) as caught:
        await runner.run(Cnt(), run_id=run_id)
    assert caught.value.run_id == run_id
    assert run_id in str(caught.value)
    assert len(await runner.history(run_id)) == result.run.revision + 1


async def test_run_id_must_be_canonical(store: Any) -> None:
    """§8.171 (ours: run ids are validated) a malformed run id is refused, nothing written."""
    runner = chain(["a"], store)
    for bad in ("", "not-a-uuid", str(uuid.uuid4()).upper()):
        with pytest.raises(ValueError):
            await runner.run(Cnt(), run_id=bad)


async def test_concurrent_runs_with_one_id(store: Any) -> None:
    """§8.171 two runs racing for one id: one runs, the other gets GraphRunExistsError."""
    runner = chain(["a", "fin"], store)
    run_id = str(uuid.uuid4())
    outcomes = await asyncio.gather(
        *(runner.run(Cnt(), run_id=run_id) for _ in range(4)), return_exceptions=True
    )
    results = [o for o in outcomes if isinstance(o, flow.Result)]
    assert len(results) == 1
    assert all(isinstance(o, flow.GraphRunExistsError) for o in outcomes if o not in results)
    assert (await runner.latest(run_id)).run.status is RunStatus.COMPLETED


async def test_run_id_lookup_failure_is_returned(store: Any) -> None:
    """§8.171/§3.1 a failing existence check is raised unchanged and nothing is written."""
    faulty = FaultyStore(store)
    faulty.fail_latest = True
    runner = chain(["a"], faulty)
    with pytest.raises(flow.StoreError) as caught:
        await runner.run(Cnt(), run_id=str(uuid.uuid4()))
    assert isinstance(caught.value.cause, InjectedFault)
    assert faulty.appends == 0


async def test_concurrent_runs_are_isolated(store: Any) -> None:
    """§8.37/§3.11 one runner, 16 concurrent runs: each completes with its own state."""
    _, runner = fan(store)
    results = await asyncio.gather(*(runner.run(Cnt([str(i)], i)) for i in range(16)))
    assert len({r.run.graph_run_id for r in results}) == 16
    for i, result in enumerate(results):
        assert result.state == Cnt([str(i), "v", "a", "b", "fin"], i + 4)
        history = await runner.history(result.run.graph_run_id)
        assert [cp.revision for cp in history] == list(range(len(history)))
        assert all(cp.run.graph_run_id == result.run.graph_run_id for cp in history)


async def test_returned_status_never_running(store: Any) -> None:
    """§8.172 a returned status is never RUNNING."""
    result = await chain(["a", "fin"], store).run(Cnt())
    assert result.run.status is RunStatus.COMPLETED


def test_option_resolution() -> None:
    """§8.173 option defaults and overrides (ours: non-positive values are refused)."""
    defaults = _options((), None, None, flow.Granularity.PER_VERTEX)
    assert defaults.concurrency == (os.cpu_count() or 1)
    assert defaults.max_steps == 10_000
    assert defaults.checkpoint is flow.Granularity.PER_VERTEX
    assert defaults.hooks == ()
    hooks = flow.Hooks()
    custom = _options(hooks, 4, 7, flow.Granularity.PER_STEP)
    assert (custom.concurrency, custom.max_steps) == (4, 7)
    assert custom.checkpoint is flow.Granularity.PER_STEP
    assert custom.hooks == (hooks,)
    assert len(_options([flow.Hooks(), flow.Hooks()], None, None, custom.checkpoint).hooks) == 2
    for bad in (0, -1):
        with pytest.raises(ValueError):
            _options((), bad, None, custom.checkpoint)
        with pytest.raises(ValueError):
            _options((), None, bad, custom.checkpoint)
    with pytest.raises(TypeError):
        _options((), True, None, custom.checkpoint)


async def test_non_positive_options_refused_before_writing(store: Any) -> None:
    """§8.173 (ours) run refuses max_steps=0 with ValueError and writes nothing."""
    runner = chain(["a"], store)
    run_id = str(uuid.uuid4())
    with pytest.raises(ValueError):
        await runner.run(Cnt(), run_id=run_id, max_steps=0)
    with pytest.raises(flow.CheckpointNotFoundError):
        await runner.latest(run_id)


async def test_happy_path_result_shape(store: Any) -> None:
    """§8.174 a completed result has interrupts None and halt None."""
    result = await chain(["a", "fin"], store).run(Cnt())
    assert result.interrupts is None
    assert result.halt is None
