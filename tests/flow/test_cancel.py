"""Cancel and observed cancellation: flow-spec §5.1-5.2 and checklist §8.29-36."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest

from flowledger import flow
from flowledger.flow import HaltKind, RunStatus, StepPhase

from .conftest import Cnt, FaultyStore, InjectedFault, Recorder, chain, inject, pauser, tag

#: Deadline that only catches hangs (never a latency bound: the machine may be busy).
HANG = 60.0


async def paused_run(store: Any) -> tuple[flow.Runner[Cnt], flow.Result[Cnt]]:
    graph: flow.Graph[Cnt] = flow.Graph("g", state=Cnt)
    tag(graph, "a")
    tag(graph, "b", body=pauser("b?"))
    graph.add_edge("a", "b")
    runner = graph.compile(entry="a", finish="b", store=store)
    result = await runner.run(Cnt())
    assert result.run.status is RunStatus.INTERRUPTED
    return runner, result


async def test_cancel_paused_run(store: Any) -> None:
    """§8.29 cancel of a paused run: CANCELLED, reason, revision +1, hook, refusals."""
    runner, paused = await paused_run(store)
    run_id = paused.run.graph_run_id
    recorder = Recorder()
    record = await runner.cancel(run_id, "customer withdrew", hooks=recorder.hooks)
    assert record.status is RunStatus.CANCELLED
    assert record.cancelled_at is not None and record.cancel_reason == "customer withdrew"
    assert record.revision == paused.run.revision + 1
    latest = await runner.latest(run_id)
    assert latest.revision == record.revision
    assert latest.run.status is RunStatus.CANCELLED
    assert latest.run.cancel_reason == "customer withdrew"
    assert latest.state == {"vals": ["a"], "n": 1}
    assert latest.interrupts == [] and latest.routes == [] and latest.halt is None
    assert latest.run.created_at == paused.run.created_at
    assert [args[0].status for args in recorder.of("on_run_finish")] == [RunStatus.CANCELLED]
    assert recorder.of("on_checkpoint") == []  # cancel's append fires no on_checkpoint
    with pytest.raises(flow.ResumeTerminalError) as caught:
        await runner.resume(run_id, "too late")
    assert caught.value.status is RunStatus.CANCELLED
    got = await runner.get(run_id)
    assert got.run.status is RunStatus.CANCELLED
    assert got.state == Cnt(["a"], 1)
    assert got.halt is None


async def test_get_cancelled_run_has_no_interrupts(store: Any) -> None:
    """§8.29 / §1.7 get on a cancelled (formerly paused) run: interrupts and halt None."""
    runner, paused = await paused_run(store)
    await runner.cancel(paused.run.graph_run_id, "stop")
    got = await runner.get(paused.run.graph_run_id)
    assert got.interrupts is None and got.halt is None


async def test_cancel_terminal_or_unknown(store: Any) -> None:
    """§8.30 cancel of a completed or unknown run is refused; nothing appended."""
    runner = chain(["a"], store)
    done = await runner.run(Cnt())
    recorder = Recorder()
    with pytest.raises(flow.ResumeTerminalError) as caught:
        await runner.cancel(done.run.graph_run_id, "x", hooks=recorder.hooks)
    assert caught.value.status is RunStatus.COMPLETED
    assert (await runner.latest(done.run.graph_run_id)).revision == done.run.revision
    with pytest.raises(flow.CheckpointNotFoundError):
        await runner.cancel(str(uuid.uuid4()), "x", hooks=recorder.hooks)
    assert recorder.events == []


async def test_cancel_twice(store: Any) -> None:
    """§8.31 the second cancel gets ResumeTerminalError(CANCELLED)."""
    runner, paused = await paused_run(store)
    await runner.cancel(paused.run.graph_run_id, "first")
    with pytest.raises(flow.ResumeTerminalError) as caught:
        await runner.cancel(paused.run.graph_run_id, "second")
    assert caught.value.status is RunStatus.CANCELLED
    assert (await runner.latest(paused.run.graph_run_id)).run.cancel_reason == "first"


async def test_cancel_halted_run(store: Any) -> None:
    """§8.29/§5.1 a halted run can be cancelled; its phase is copied."""
    runner = chain(["a", "b", "fin"], store)
    halted = await runner.run(Cnt(), max_steps=1)
    record = await runner.cancel(halted.run.graph_run_id, "budget")
    assert record.status is RunStatus.CANCELLED
    latest = await runner.latest(halted.run.graph_run_id)
    assert latest.phase is StepPhase.HALTED and latest.halt is None


class Gate:
    """A task that blocks until released; ``entered`` is set once it is running."""

    def __init__(self) -> None:
        self.entered = asyncio.Event()
        self.release = asyncio.Event()

    async def __call__(self, state: Any) -> dict[str, Any]:
        self.entered.set()
        await asyncio.wait_for(self.release.wait(), HANG)
        return {"gated": True}


def gated_graph(store: Any, gate: Gate) -> flow.Runner[dict[str, Any]]:
    graph: flow.Graph[dict[str, Any]] = flow.Graph("g")
    graph.add_vertex("first", lambda s: {"first": True})
    graph.add_vertex("blocked", gate)
    graph.add_vertex("fin", lambda s: {"fin": True})
    graph.add_edge("first", "blocked")
    graph.add_edge("blocked", "fin")
    return graph.compile(entry="first", finish="fin", store=store)


@pytest.mark.parametrize("mode", list(flow.Granularity))
async def test_observed_cancellation(store: Any, mode: flow.Granularity) -> None:
    """§8.32 a cancel during a blocked task: the run returns CANCELLED, no hooks."""
    gate = Gate()
    runner = gated_graph(store, gate)
    run_id = str(uuid.uuid4())
    recorder = Recorder()
    running = asyncio.ensure_future(
        runner.run({}, run_id=run_id, hooks=recorder.hooks, checkpoint=mode)
    )
    await asyncio.wait_for(gate.entered.wait(), HANG)
    seen_before_cancel = len(recorder.events)
    cancelled = await runner.cancel(run_id, "operator")
    gate.release.set()
    result = await asyncio.wait_for(running, HANG)
    assert result.run.status is RunStatus.CANCELLED
    assert result.run.revision == cancelled.revision
    assert result.run.cancel_reason == "operator"
    assert result.interrupts is None and result.halt is None
    assert result.state == {"first": True, "gated": True}
    latest = await runner.latest(run_id)
    assert latest.run.status is RunStatus.CANCELLED and latest.revision == cancelled.revision
    assert len(recorder.events) == seen_before_cancel


async def test_observed_cancellation_during_resume(store: Any) -> None:
    """§8.32/§5.2 a resume blocked in a task observes a cancel: CANCELLED, no error."""
    gate = Gate()
    graph: flow.Graph[dict[str, Any]] = flow.Graph("g")

    async def ask(state: Any) -> dict[str, Any]:
        answer = flow.interrupt("go?")
        await gate(state)
        return {"answer": answer}

    graph.add_vertex("ask", ask)
    graph.add_vertex("fin", lambda s: {"fin": True})
    graph.add_edge("ask", "fin")
    runner = graph.compile(entry="ask", finish="fin", store=store)
    paused = await runner.run({})
    run_id = paused.run.graph_run_id
    resuming = asyncio.ensure_future(runner.resume(run_id, "yes"))
    await asyncio.wait_for(gate.entered.wait(), HANG)
    cancelled = await runner.cancel(run_id, "changed my mind")
    gate.release.set()
    result = await asyncio.wait_for(resuming, HANG)
    assert result.run.status is RunStatus.CANCELLED
    assert result.run.revision == cancelled.revision == paused.run.revision + 1
    assert result.state == {"answer": "yes"}
    assert (await runner.latest(run_id)).run.status is RunStatus.CANCELLED


async def test_cancelling_the_caller_leaves_a_resumable_run(store: Any) -> None:
    """§8.32/Q12 cancelling the asyncio task running run() stops it; resume completes."""
    gate = Gate()
    runner = gated_graph(store, gate)
    run_id = str(uuid.uuid4())
    running = asyncio.ensure_future(runner.run({}, run_id=run_id))
    await asyncio.wait_for(gate.entered.wait(), HANG)
    running.cancel()
    with pytest.raises(asyncio.CancelledError):
        await running
    latest = await runner.latest(run_id)
    assert latest.run.status is RunStatus.RUNNING
    gate.entered.clear()
    gate.release.set()
    result = await runner.resume(run_id, None)
    assert result.run.status is RunStatus.COMPLETED
    assert result.state == {"first": True, "gated": True, "fin": True}


async def test_rival_checkpoint_is_a_conflict(store: Any) -> None:
    """§8.33 a rival RUNNING checkpoint: RevisionConflictError."""
    gate = Gate()
    runner = gated_graph(store, gate)
    run_id = str(uuid.uuid4())
    running = asyncio.ensure_future(runner.run({}, run_id=run_id))
    await asyncio.wait_for(gate.entered.wait(), HANG)
    rival = await inject(store, run_id)
    assert rival.run.status is RunStatus.RUNNING
    gate.release.set()
    with pytest.raises(flow.RevisionConflictError) as caught:
        await asyncio.wait_for(running, HANG)
    assert caught.value.run_id == run_id
    assert caught.value.expected == rival.revision + 1
    assert caught.value.actual == rival.revision
    assert (await runner.latest(run_id)).revision == rival.revision


async def test_rival_with_failing_latest(store: Any) -> None:
    """§8.34 rival plus failing latest: the original RevisionConflictError."""
    gate = Gate()
    faulty = FaultyStore(store)
    runner = gated_graph(faulty, gate)
    run_id = str(uuid.uuid4())
    running = asyncio.ensure_future(runner.run({}, run_id=run_id))
    await asyncio.wait_for(gate.entered.wait(), HANG)
    await inject(store, run_id, run={"status": RunStatus.CANCELLED})
    faulty.fail_latest = True
    gate.release.set()
    with pytest.raises(flow.RevisionConflictError):
        await asyncio.wait_for(running, HANG)


@pytest.mark.parametrize("failure", ["conflict", "store"])
async def test_failed_cancel_append(store: Any, failure: str) -> None:
    """§8.35 a failing cancel append: same error, no hook, run not cancelled."""
    error: BaseException
    if failure == "conflict":
        error = flow.RevisionConflictError("x", 9, 8)
    else:
        error = flow.StoreError("append", InjectedFault("disk full"))
    runner, paused = await paused_run(store)
    faulty = FaultyStore(store, fail_append=1, error=error)
    graph: flow.Graph[Cnt] = flow.Graph("g", state=Cnt)
    tag(graph, "a")
    tag(graph, "b", body=pauser("b?"))
    graph.add_edge("a", "b")
    cancelling = graph.compile(entry="a", finish="b", store=faulty)
    recorder = Recorder()
    with pytest.raises(type(error)) as caught:
        await cancelling.cancel(paused.run.graph_run_id, "x", hooks=recorder.hooks)
    assert caught.value is error
    assert recorder.events == []
    status = await runner.status(paused.run.graph_run_id)
    assert status.status is RunStatus.INTERRUPTED
    assert status.revision == paused.run.revision


async def test_cancel_race_with_resume(store: Any) -> None:
    """§8.32/§5.2 cancel racing resume: exactly one of them wins."""
    runner, paused = await paused_run(store)
    run_id = paused.run.graph_run_id
    outcomes = await asyncio.gather(
        runner.resume(run_id, "go"), runner.cancel(run_id, "race"), return_exceptions=True
    )
    resumed, cancelled = outcomes
    latest = await runner.latest(run_id)
    if isinstance(cancelled, flow.RunRecord):  # the cancel landed: the resume observed it
        assert isinstance(resumed, flow.Result)
        assert resumed.run.status is RunStatus.CANCELLED
        assert latest.run.status is RunStatus.CANCELLED
    else:  # the resume got there first: the cancel was refused or lost the race
        assert isinstance(cancelled, flow.ResumeTerminalError | flow.RevisionConflictError)
        assert isinstance(resumed, flow.Result)
        assert resumed.run.status is RunStatus.COMPLETED
        assert latest.run.status is RunStatus.COMPLETED
    history = await runner.history(run_id)
    assert [cp.revision for cp in history] == list(range(len(history)))


async def test_get_halted_without_halt_record(store: Any) -> None:
    """§8.36 get on STEP_HALTED without a halt record: no halt, no crash."""
    runner = chain(["a", "b", "fin"], store)
    halted = await runner.run(Cnt(), max_steps=1)
    assert halted.halt is not None and halted.halt.kind is HaltKind.MAX_STEPS
    await inject(store, halted.run.graph_run_id, halt=None)
    got = await runner.get(halted.run.graph_run_id)
    assert got.halt is None and got.interrupts is None
    assert got.state == Cnt(["a"], 1)
