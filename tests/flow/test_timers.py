"""`flow.sleep`, `flow.sleep_until` and interrupt deadlines in the engine, on a ManualClock:
what the checkpoint records, when a resume wakes the vertex, and the typed errors of bad
values (each names its field, and nothing is parked)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from flowledger import flow
from flowledger.clock import ManualClock
from flowledger.storage import open_store


@dataclass
class S:
    value: Any = None
    woke: int = 0
    answer: Any = None


def sleeper(clock: ManualClock, call: Any, store: Any = None) -> flow.Runner[S]:
    graph: flow.Graph[S] = flow.Graph("sleeper", state=S)

    @graph.vertex("nap")
    def nap(state: S) -> dict[str, Any]:
        call()
        return {"woke": state.woke + 1}

    return graph.compile(entry="nap", finish="nap", clock=clock, store=store)


async def test_sleep_parks_until_the_wake_time_and_an_early_resume_parks_again() -> None:
    clock = ManualClock()
    runner = sleeper(clock, lambda: flow.sleep(90))
    result = await runner.run(S())
    assert result.run.status is flow.RunStatus.INTERRUPTED
    assert result.interrupts is not None
    (pause,) = result.interrupts
    wake_at = clock.now() + timedelta(seconds=90)
    assert (pause.kind, pause.wake_at) == (flow.InterruptKind.TIMER, wake_at)
    stored = (await runner.latest(result.run.graph_run_id)).interrupts[0]
    assert (stored.kind, stored.wake_at) == (flow.InterruptKind.TIMER, wake_at)

    clock.advance(60)
    early = await runner.resume(result.run.graph_run_id)
    assert early.interrupts is not None and early.interrupts[0].wake_at == wake_at  # kept
    clock.advance(30)
    done = await runner.resume(result.run.graph_run_id)
    assert done.run.status is flow.RunStatus.COMPLETED
    assert done.state.woke == 1


async def test_sleep_until_and_zero_seconds() -> None:
    clock = ManualClock()
    when = clock.now() + timedelta(days=1)
    runner = sleeper(clock, lambda: flow.sleep_until(when))
    result = await runner.run(S())
    assert result.interrupts is not None and result.interrupts[0].wake_at == when
    clock.set(when)
    assert (await runner.resume(result.run.graph_run_id)).run.status is flow.RunStatus.COMPLETED
    at_once = await sleeper(clock, lambda: flow.sleep(0)).run(S())
    assert at_once.run.status is flow.RunStatus.COMPLETED


@pytest.mark.parametrize(
    ("call", "value", "field", "words"),
    [
        (flow.sleep, -1, "seconds", "must not be negative"),
        (flow.sleep, math.nan, "seconds", "finite"),
        (flow.sleep, math.inf, "seconds", "finite"),
        (flow.sleep, "10", "seconds", "not str"),
        (flow.sleep, True, "seconds", "not bool"),
        (flow.sleep, 10**12, "seconds", "at most"),
        (flow.sleep_until, datetime(2026, 6, 1), "until", "naive datetime"),
        (flow.sleep_until, datetime(2025, 12, 31, tzinfo=UTC), "until", "is not after now"),
        (flow.sleep_until, datetime(2026, 1, 1, tzinfo=UTC), "until", "is not after now"),
        (flow.sleep_until, "2026-06-01T00:00:00Z", "until", "expected a datetime"),
    ],
)
async def test_bad_timer_values_are_typed_errors_naming_the_field(
    call: Any, value: Any, field: str, words: str
) -> None:
    result = await sleeper(ManualClock(), lambda: call(value)).run(S())
    assert result.interrupts is not None
    (pause,) = result.interrupts
    assert pause.kind is flow.InterruptKind.ERRORED  # failed, not parked
    assert pause.wake_at is None
    cause = pause.cause
    assert isinstance(cause, flow.VertexError)
    error = cause.cause
    assert isinstance(error, flow.TimerError) and isinstance(error, ValueError)
    assert error.field == field and words in str(error), str(error)


async def test_one_timer_per_vertex_execution() -> None:
    clock = ManualClock()

    def twice() -> None:
        flow.sleep(5)
        flow.sleep(5)

    runner = sleeper(clock, twice)
    result = await runner.run(S())
    clock.advance(5)
    again = await runner.resume(result.run.graph_run_id)
    assert again.interrupts is not None
    error = again.interrupts[0].cause
    assert isinstance(error, flow.VertexError) and isinstance(error.cause, flow.TimerError)
    assert "one timer per vertex execution" in str(error.cause)


def asker(clock: ManualClock, **deadline: Any) -> flow.Runner[S]:
    graph: flow.Graph[S] = flow.Graph("asker", state=S)

    @graph.vertex("ask")
    def ask(state: S) -> dict[str, Any]:
        return {"answer": flow.interrupt({"q": "ok?"}, **deadline)}

    return graph.compile(entry="ask", finish="ask", clock=clock)


async def test_an_interrupt_deadline_is_recorded_and_kept_across_re_pauses() -> None:
    clock = ManualClock()
    runner = asker(clock, timeout=30, on_timeout={"ok": False})
    result = await runner.run(S())
    assert result.interrupts is not None
    (pause,) = result.interrupts
    deadline = clock.now() + timedelta(seconds=30)
    assert pause.kind is flow.InterruptKind.AWAITING
    assert (pause.wake_at, pause.on_timeout) == (deadline, {"ok": False})
    clock.advance(10)
    again = await runner.resume(result.run.graph_run_id)  # no payload: pauses again
    assert again.interrupts is not None and again.interrupts[0].wake_at == deadline
    got = await runner.get(result.run.graph_run_id)
    assert got.interrupts is not None
    assert (got.interrupts[0].wake_at, got.interrupts[0].on_timeout) == (deadline, {"ok": False})
    # the owner's expiry is a resume with on_timeout
    done = await runner.resume(result.run.graph_run_id, got.interrupts[0].on_timeout)
    assert done.state.answer == {"ok": False}


@pytest.mark.parametrize(
    ("deadline", "field", "words"),
    [
        ({"timeout": -5, "on_timeout": {}}, "timeout", "must not be negative"),
        ({"timeout": 0, "on_timeout": {}}, "timeout", "more than 0"),
        ({"timeout": "soon", "on_timeout": {}}, "timeout", "not str"),
        ({"timeout": 5}, "on_timeout", "needs the payload"),
        ({"on_timeout": {"ok": False}}, "timeout", "needs a timeout"),
    ],
)
async def test_bad_deadlines_are_typed_errors_naming_the_field(
    deadline: dict[str, Any], field: str, words: str
) -> None:
    result = await asker(ManualClock(), **deadline).run(S())
    assert result.interrupts is not None
    (pause,) = result.interrupts
    assert pause.kind is flow.InterruptKind.ERRORED
    cause = pause.cause
    assert isinstance(cause, flow.VertexError) and isinstance(cause.cause, flow.TimerError)
    assert cause.cause.field == field and words in str(cause.cause)


async def test_wake_times_and_defaults_survive_a_sqlite_checkpoint_store(tmp_path: Path) -> None:
    clock = ManualClock()
    async with open_store(f"sqlite:///{tmp_path / 'f.db'}") as store:
        runner = sleeper(clock, lambda: flow.sleep(3600), store)
        result = await runner.run(S())
        graph: flow.Graph[S] = flow.Graph("asker", state=S)

        @graph.vertex("ask")
        def ask(state: S) -> dict[str, Any]:
            return {"answer": flow.interrupt(None, timeout=5, on_timeout=[1, {"a": None}])}

        ask_runner = graph.compile(entry="ask", finish="ask", clock=clock, store=store)
        asked = await ask_runner.run(S())
    async with open_store(f"sqlite:///{tmp_path / 'f.db'}") as store:
        reopened = sleeper(clock, lambda: flow.sleep(3600), store)
        latest = await reopened.latest(result.run.graph_run_id)
        assert latest.interrupts[0].wake_at == clock.now() + timedelta(hours=1)
        asked_cp = await flow.LedgerCheckpointStore(store.ledger).latest(asked.run.graph_run_id)
        assert asked_cp.interrupts[0].on_timeout == [1, {"a": None}]
        assert asked_cp.interrupts[0].wake_at == clock.now() + timedelta(seconds=5)
