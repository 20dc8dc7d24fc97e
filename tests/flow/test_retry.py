"""Retry, timeouts and error policy through the engine: flow-spec §5.4-5.7 and checklist
§8.69-72, 74-78, 157-169."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

import pytest

from flowledger import flow
from flowledger.flow import InterruptKind, RunStatus, StepPhase, VertexStatus

from .conftest import Calls, Cnt, Recorder, tag

#: Deadline that only catches hangs (never a latency bound: the machine may be busy).
HANG = 120.0


class Flaky:
    """A task body failing with ``errors`` (in order), then with ``forever()`` if given,
    else succeeding. ``raised`` lists what it raised."""

    def __init__(
        self, *errors: BaseException, forever: Callable[[], BaseException] | None = None
    ) -> None:
        self.errors = list(errors)
        self.forever = forever
        self.calls = 0
        self.raised: list[BaseException] = []

    def __call__(self, _: Any) -> None:
        self.calls += 1
        if self.errors or self.forever is not None:
            error = self.errors.pop(0) if self.errors else self.forever()  # type: ignore[misc]
            self.raised.append(error)
            raise error


def always(make: Callable[[], BaseException]) -> Flaky:
    return Flaky(forever=make)


def one_vertex(body: Any, store: Any, **options: Any) -> flow.Runner[Cnt]:
    graph: flow.Graph[Cnt] = flow.Graph("g", state=Cnt)
    tag(graph, "work", body=body, **options)
    return graph.compile(entry="work", finish="work", store=store)


async def final_record(runner: flow.Runner[Any], run_id: str, vertex: str) -> flow.VertexRecord:
    latest = await runner.latest(run_id)
    return next(v for v in latest.vertices if v.vertex == vertex)


def vertex_error(result: flow.Result[Any]) -> flow.VertexError:
    assert result.run.status is RunStatus.INTERRUPTED
    assert result.halt is None
    assert result.interrupts is not None and len(result.interrupts) == 1
    (interruption,) = result.interrupts
    assert interruption.kind is InterruptKind.ERRORED
    assert isinstance(interruption.cause, flow.VertexError)
    return interruption.cause


# -- retry through the engine (§8.69-71, 157-169) -------------------------------------------


async def test_retry_then_success(store: Any) -> None:
    """§8.69/158 two failures, 3 attempts: COMPLETED at attempt 3, backoff [2, 3]."""
    asked: list[int] = []

    def backoff(attempt: int) -> float:
        asked.append(attempt)
        return 0.0

    flaky = Flaky(RuntimeError("1"), RuntimeError("2"))
    recorder = Recorder()
    runner = one_vertex(flaky, store, retry=flow.Retry(3, backoff))
    result = await runner.run(Cnt(), hooks=recorder.hooks)
    assert result.run.status is RunStatus.COMPLETED
    assert result.interrupts is None
    assert result.state == Cnt(["work"], 1)
    assert flaky.calls == 3
    assert asked == [2, 3]
    record = await final_record(runner, result.run.graph_run_id, "work")
    assert record.attempt == 3 and record.status is VertexStatus.DONE and record.error == ""
    assert recorder.of("on_vertex_finish")[0][0].attempt == 3


async def test_immediate_success(store: Any) -> None:
    """§8.157 immediate success: attempt 1, one call."""
    flaky = Flaky()
    runner = one_vertex(flaky, store, retry=flow.Retry(5))
    result = await runner.run(Cnt())
    assert result.state == Cnt(["work"], 1)
    assert flaky.calls == 1
    assert (await final_record(runner, result.run.graph_run_id, "work")).attempt == 1


async def test_retry_exhausted_with_error_route(store: Any) -> None:
    """§8.70 exhausted retries + error route: COMPLETED via handler."""
    calls = Calls()
    flaky = always(lambda: RuntimeError("still down"))

    def record(state: Cnt, error: BaseException) -> None:
        state.vals.append(f"recorded:{error}")

    graph: flow.Graph[Cnt] = flow.Graph("g", state=Cnt)
    tag(
        graph,
        "entry",
        body=flaky,
        retry=flow.Retry(2),
        on_error=flow.ErrorRoute("handler", record),
    )
    tag(graph, "handler", calls)
    runner = graph.compile(entry="entry", finish="handler", store=store)
    result = await runner.run(Cnt())
    assert result.run.status is RunStatus.COMPLETED
    assert result.interrupts is None
    assert flaky.calls == 2
    assert len(result.state.vals) == 2
    assert result.state.vals[0].startswith("recorded:") and "still down" in result.state.vals[0]
    assert result.state.vals[1] == "handler"
    history = await runner.history(result.run.graph_run_id)
    routes = [r for cp in history for r in cp.routes]
    assert routes == [flow.RouteRecord("entry", ("handler",), False)]


async def test_retry_exhausted_pauses(store: Any) -> None:
    """§8.71/159 exhausted retries, no route: ERRORED pause, VertexError attempt 3."""
    flaky = always(lambda: RuntimeError("nope"))
    recorder = Recorder()
    runner = one_vertex(flaky, store, retry=flow.Retry(3))
    result = await runner.run(Cnt(), hooks=recorder.hooks)
    error = vertex_error(result)
    assert error.attempt == 3 and error.vertex == "work"
    assert error.cause is flaky.raised[-1] and error.__cause__ is error.cause
    assert flaky.calls == 3
    latest = await runner.latest(result.run.graph_run_id)
    assert latest.phase is StepPhase.PAUSED
    (stored,) = latest.interrupts
    assert stored.kind is InterruptKind.ERRORED and stored.cause
    assert "nope" in stored.cause
    assert latest.vertices[0].vertex_run_id == error.vertex_run_id
    assert latest.run.interrupted_at is not None
    assert len(recorder.of("on_interrupt")) == 1


async def test_failure_text_in_vertex_records(store: Any) -> None:
    """§8.72 a FAILED record carries the failure text, paused or routed; DONE has none."""
    paused = one_vertex(always(lambda: ValueError("bad input")), store)
    result = await paused.run(Cnt())
    record = await final_record(paused, result.run.graph_run_id, "work")
    assert record.status is VertexStatus.FAILED and "bad input" in record.error
    assert record.failed_at is not None and record.completed_at is None

    graph: flow.Graph[Cnt] = flow.Graph("g", state=Cnt)
    tag(graph, "entry", body=always(lambda: ValueError("routed")), on_error=flow.ErrorRoute("h"))
    tag(graph, "h")
    routed = graph.compile(entry="entry", finish="h", store=store)
    result = await routed.run(Cnt())
    history = await routed.history(result.run.graph_run_id)
    records = {v.vertex: v for cp in history for v in cp.vertices}
    assert records["entry"].status is VertexStatus.FAILED and "routed" in records["entry"].error
    assert records["h"].status is VertexStatus.DONE and records["h"].error == ""


async def test_no_policy_single_attempt(store: Any) -> None:
    """§8.160 no policy: one call, VertexError attempt 1 wrapping the cause."""
    flaky = always(lambda: KeyError("k"))
    result = await one_vertex(flaky, store).run(Cnt())
    error = vertex_error(result)
    assert error.attempt == 1 and flaky.calls == 1
    assert error.cause is flaky.raised[0]


async def test_interrupt_never_retried(store: Any) -> None:
    """§8.161 an interrupt is not a failure: one call despite 5 attempts, AWAITING."""
    calls = Calls()
    graph: flow.Graph[Cnt] = flow.Graph("g", state=Cnt)
    tag(graph, "work", calls, body=lambda n: flow.interrupt("wait"), retry=flow.Retry(5))
    runner = graph.compile(entry="work", finish="work", store=store)
    result = await runner.run(Cnt())
    assert result.interrupts is not None
    assert result.interrupts[0].kind is InterruptKind.AWAITING
    assert calls.count["work"] == 1
    assert (await final_record(runner, result.run.graph_run_id, "work")).attempt == 1


async def test_raising_task_retried(store: Any) -> None:
    """§8.162 raise then success at attempt 2; always raising: attempt 2 error."""
    flaky = Flaky(ZeroDivisionError("first"))
    runner = one_vertex(flaky, store, retry=flow.Retry(2))
    result = await runner.run(Cnt())
    assert result.run.status is RunStatus.COMPLETED
    assert (await final_record(runner, result.run.graph_run_id, "work")).attempt == 2
    failing = always(lambda: ZeroDivisionError("always"))
    result = await one_vertex(failing, store, retry=flow.Retry(2)).run(Cnt())
    error = vertex_error(result)
    assert error.attempt == 2 and "always" in str(error)


async def test_raising_retryable_stops(store: Any) -> None:
    """§8.163 a raising retryable predicate stops at attempt 1 with a VertexError."""

    def retryable(error: BaseException) -> bool:
        raise RuntimeError("predicate broke")

    flaky = always(lambda: ValueError("task"))
    result = await one_vertex(flaky, store, retry=flow.Retry(5, 0, retryable)).run(Cnt())
    error = vertex_error(result)
    assert error.attempt == 1 and flaky.calls == 1
    assert "predicate broke" in str(error)


async def test_raising_backoff_stops(store: Any) -> None:
    """§8.164 a raising backoff stops at attempt 1 with a VertexError."""

    def backoff(attempt: int) -> float:
        raise RuntimeError("backoff broke")

    flaky = always(lambda: ValueError("task"))
    result = await one_vertex(flaky, store, retry=flow.Retry(5, backoff)).run(Cnt())
    error = vertex_error(result)
    assert error.attempt == 1 and flaky.calls == 1
    assert "backoff broke" in str(error)


async def test_non_retryable_stops(store: Any) -> None:
    """§8.165 retryable returning False stops after attempt 1; it saw the task's error."""
    seen: list[BaseException] = []

    def retryable(error: BaseException) -> bool:
        seen.append(error)
        return False

    flaky = always(lambda: PermissionError("denied"))
    result = await one_vertex(flaky, store, retry=flow.Retry(5, 0, retryable)).run(Cnt())
    error = vertex_error(result)
    assert error.attempt == 1 and flaky.calls == 1
    assert seen == [flaky.raised[0]] and error.cause is flaky.raised[0]


async def test_selective_retry(store: Any) -> None:
    """§8.165 the predicate decides per error: retried while it says so."""
    flaky = Flaky(ConnectionError("net"), ConnectionError("net"), ValueError("bad"))
    retry = flow.Retry(10, 0, lambda e: isinstance(e, ConnectionError))
    result = await one_vertex(flaky, store, retry=retry).run(Cnt())
    error = vertex_error(result)
    assert error.attempt == 3 and isinstance(error.cause, ValueError)


async def test_deadline_cuts_backoff(store: Any) -> None:
    """§8.166 a backoff past the deadline is skipped; cause is the task error. (An hour's
    backoff: were it taken, the hang deadline would catch it.)"""
    flaky = always(lambda: RuntimeError("task error"))
    runner = one_vertex(flaky, store, retry=flow.Retry(3, 3600.0), timeout=0.05)
    async with asyncio.timeout(HANG):
        result = await runner.run(Cnt())
    error = vertex_error(result)
    assert error.attempt == 1 and flaky.calls == 1
    assert error.cause is flaky.raised[0]


async def test_zero_and_negative_delays_never_block(store: Any) -> None:
    """§8.167 zero or negative delays never block; all 3 attempts run."""
    for backoff in (0.0, lambda attempt: -3600.0):
        flaky = always(lambda: RuntimeError("x"))
        async with asyncio.timeout(HANG):  # a delay taken as its magnitude would hang
            result = await one_vertex(flaky, store, retry=flow.Retry(3, backoff)).run(Cnt())
        assert vertex_error(result).attempt == 3 and flaky.calls == 3


def test_retry_policy_validation() -> None:
    """§8.167-168/§5.5 (ours) attempts < 1 or a negative delay is refused at build."""
    with pytest.raises(ValueError):
        flow.Retry(0)
    with pytest.raises(ValueError):
        flow.Retry(2, -0.5)
    with pytest.raises(TypeError):
        flow.Retry(True)
    assert flow.Retry(1).attempts == 1


async def test_default_policy_retries_three_times(store: Any) -> None:
    """§8.168 Retry() with defaults: 3 attempts, then VertexError."""
    flaky = always(lambda: RuntimeError("x"))
    result = await one_vertex(flaky, store, retry=flow.Retry()).run(Cnt())
    assert vertex_error(result).attempt == 3 and flaky.calls == 3


async def test_real_backoff_elapses(store: Any) -> None:
    """§8.169 a real 2 ms backoff elapses before the retry, which succeeds at attempt 2."""
    stamps: list[float] = []

    def body(_: Any) -> None:
        stamps.append(time.monotonic())
        if len(stamps) == 1:
            raise RuntimeError("once")

    runner = one_vertex(body, store, retry=flow.Retry(2, 0.002))
    result = await runner.run(Cnt())
    assert result.run.status is RunStatus.COMPLETED
    assert stamps[1] - stamps[0] >= 0.0019
    assert (await final_record(runner, result.run.graph_run_id, "work")).attempt == 2


# -- timeouts (§8.74-75) --------------------------------------------------------------------


async def test_timeout_pauses(store: Any) -> None:
    """§8.74 a 5 ms timeout over 2 attempts: ERRORED pause wrapping a timeout."""
    runs = 0

    async def waiting(state: Cnt) -> None:
        nonlocal runs
        runs += 1
        await asyncio.sleep(3600)

    graph: flow.Graph[Cnt] = flow.Graph("g", state=Cnt)
    graph.add_vertex("work", waiting, retry=flow.Retry(2), timeout=0.005)
    runner = graph.compile(entry="work", finish="work", store=store)
    async with asyncio.timeout(HANG):  # the task sleeps an hour: only the timeout ends it
        result = await runner.run(Cnt())
    error = vertex_error(result)
    assert isinstance(error.cause, TimeoutError)
    assert runs >= 1


async def test_timeout_error_retried_by_default(store: Any) -> None:
    """§8.75 a first-attempt timeout error is retried by default: COMPLETED after 2 runs."""
    flaky = Flaky(TimeoutError("upstream deadline"))
    runner = one_vertex(flaky, store, retry=flow.Retry(2), timeout=5.0)
    result = await runner.run(Cnt())
    assert result.run.status is RunStatus.COMPLETED
    assert flaky.calls == 2


async def test_thread_task_timeout(store: Any) -> None:
    """§8.74/§5.6 a plain-function task past its deadline fails with a timeout."""

    def slow(state: Cnt) -> None:
        time.sleep(0.1)

    graph: flow.Graph[Cnt] = flow.Graph("g", state=Cnt)
    graph.add_vertex("work", slow, timeout=0.01)
    runner = graph.compile(entry="work", finish="work", store=store)
    result = await runner.run(Cnt())
    assert isinstance(vertex_error(result).cause, TimeoutError)


# -- failures outside the task (§8.76-78) ---------------------------------------------------


@pytest.mark.parametrize("mutate", [False, True])
async def test_failing_record_reducer_pauses(store: Any, mutate: bool) -> None:
    """§8.76 a failing record reducer: ERRORED pause, state kept, no handler."""
    calls = Calls()
    task_error = RuntimeError("task failed")

    def record(state: Cnt, error: BaseException) -> None:
        if mutate:
            state.vals.append("half")
            state.n = 99
        raise ValueError("record failed")

    graph: flow.Graph[Cnt] = flow.Graph("g", state=Cnt)
    tag(graph, "v")
    tag(
        graph,
        "entry",
        calls,
        body=always(lambda: task_error),
        on_error=flow.ErrorRoute("handler", record),
    )
    tag(graph, "handler", calls)
    graph.add_edge("v", "entry")
    runner = graph.compile(entry="v", finish="handler", store=store)
    result = await runner.run(Cnt())
    error = vertex_error(result)
    assert error.cause is task_error
    assert result.state == Cnt(["v"], 1)
    assert calls.count == {"entry": 1}
    latest = await runner.latest(result.run.graph_run_id)
    assert latest.state == {"vals": ["v"], "n": 1}
    assert [i.vertex for i in latest.interrupts] == ["entry"]


async def test_failing_reducer_pauses(store: Any) -> None:
    """§8.77 a failing reducer after success: ERRORED pause, state unchanged."""
    recorder = Recorder()

    def reduce(state: Cnt, out: Any) -> None:
        raise LookupError("cannot fold")

    graph: flow.Graph[Cnt] = flow.Graph("g", state=Cnt)
    graph.add_vertex("work", lambda n: "out", select=lambda s: s.n, reduce=reduce)
    runner = graph.compile(entry="work", finish="work", store=store)
    result = await runner.run(Cnt(["seed"], 7), hooks=recorder.hooks)
    assert result.run.status is RunStatus.INTERRUPTED
    assert result.interrupts is not None
    assert result.interrupts[0].kind is InterruptKind.ERRORED
    assert isinstance(result.interrupts[0].cause, LookupError)
    assert result.state == Cnt(["seed"], 7)
    assert len(recorder.of("on_interrupt")) == 1


async def test_invalid_update_pauses(store: Any) -> None:
    """§8.77 a default-reducer update naming an unknown field is a reducer failure."""
    graph: flow.Graph[Cnt] = flow.Graph("g", state=Cnt)
    graph.add_vertex("work", lambda s: {"nonexistent": 1})
    runner = graph.compile(entry="work", finish="work", store=store)
    result = await runner.run(Cnt())
    assert result.interrupts is not None
    assert result.interrupts[0].kind is InterruptKind.ERRORED
    assert "nonexistent" in str(result.interrupts[0].cause)
    assert result.state == Cnt()


@pytest.mark.parametrize("where", ["selector", "reducer"])
async def test_selector_or_reducer_raising_pauses(store: Any, where: str) -> None:
    """§8.78 a raising selector or reducer: ERRORED pause, seed state."""
    recorder = Recorder()
    task_runs = 0

    def select(state: Cnt) -> int:
        if where == "selector":
            raise IndexError("selector exploded")
        return state.n

    def reduce(state: Cnt, out: Any) -> None:
        state.vals.append("partial")
        state.n += 100
        raise IndexError("reducer exploded")

    def task(n: int) -> str:
        nonlocal task_runs
        task_runs += 1
        return "x"

    graph: flow.Graph[Cnt] = flow.Graph("g", state=Cnt)
    graph.add_vertex("work", task, select=select, reduce=reduce)
    runner = graph.compile(entry="work", finish="work", store=store)
    result = await runner.run(Cnt([], 7), hooks=recorder.hooks)
    assert result.interrupts is not None and len(result.interrupts) == 1
    assert f"{where} exploded" in str(result.interrupts[0].cause)
    assert result.state == Cnt([], 7)
    assert len(recorder.of("on_interrupt")) == 1
    record = await final_record(runner, result.run.graph_run_id, "work")
    if where == "selector":
        assert task_runs == 0
        assert record.attempt == 0  # the task never launched
        assert isinstance(result.interrupts[0].cause, flow.VertexError)
    else:
        assert task_runs == 1 and record.attempt == 1
