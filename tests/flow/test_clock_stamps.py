"""Every time a runner writes into a checkpoint comes from its clock (`graph.compile(clock=)`),
and so does `flow.now()` inside a task: on a ManualClock set to a fixed instant, the run's
and the vertices' times are that instant, however far it is from the machine's time."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from flowledger import flow
from flowledger.clock import ManualClock
from flowledger.storage import open_store

# Years away from any machine's clock, so a time read from the system clock cannot match.
T0 = datetime(2031, 3, 1, 9, 30, tzinfo=UTC)


@dataclass
class S:
    approved: bool | None = None
    decided_at: str = ""


def asker(clock: ManualClock, store: Any = None) -> flow.Runner[S]:
    graph: flow.Graph[S] = flow.Graph("asker", state=S)

    @graph.vertex("ask")
    def ask(state: S) -> dict[str, Any]:
        answer = flow.interrupt({"question": "approve?"}, timeout=60, on_timeout={"ok": False})
        return {"approved": answer["ok"], "decided_at": flow.now().isoformat()}

    return graph.compile(entry="ask", finish="ask", clock=clock, store=store)


def stamps(cp: flow.Checkpoint) -> set[datetime]:
    """Every time the checkpoint carries, run and vertices alike."""
    run = cp.run
    times = {run.created_at, run.started_at, run.updated_at}
    times |= {t for t in (run.completed_at, run.interrupted_at, run.cancelled_at) if t}
    for vertex in cp.vertices:
        moments = (
            vertex.created_at,
            vertex.started_at,
            vertex.completed_at,
            vertex.interrupted_at,
            vertex.failed_at,
        )
        times |= {t for t in moments if t is not None}
    return times


@pytest.fixture(params=["memory", "sqlite"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    return "memory://" if request.param == "memory" else f"sqlite:///{tmp_path / 'c.db'}"


async def test_a_paused_run_is_stamped_by_the_runner_clock_and_resumed_on_it(url: str) -> None:
    clock = ManualClock(T0)
    async with open_store(url) as store:
        runner = asker(clock, flow.LedgerCheckpointStore(store.ledger))
        paused = await runner.run(S())
        run_id = paused.run.graph_run_id
        assert paused.run.status is flow.RunStatus.INTERRUPTED
        assert paused.run.interrupted_at == T0
        assert (paused.run.created_at, paused.run.started_at, paused.run.updated_at) == (T0,) * 3
        assert paused.interrupts is not None
        assert paused.interrupts[0].wake_at == T0 + timedelta(seconds=60)
        paused_history = await runner.history(run_id)
        assert {t for cp in paused_history for t in stamps(cp)} == {T0}

        clock.advance(60)
        done = await runner.resume(run_id, {"ok": True})
        later = T0 + timedelta(seconds=60)
        assert done.run.status is flow.RunStatus.COMPLETED
        assert (done.run.completed_at, done.run.updated_at) == (later, later)
        assert done.run.created_at == T0  # kept from the seed
        assert done.state.decided_at == later.isoformat()  # flow.now() reads the same clock
        resumed = (await runner.history(run_id))[len(paused_history) :]
        assert {t for cp in resumed for t in stamps(cp)} - {T0} == {later}


async def test_cancel_and_fork_are_stamped_by_the_runner_clock() -> None:
    clock = ManualClock(T0)
    runner = asker(clock)
    paused = await runner.run(S())
    run_id = paused.run.graph_run_id
    clock.advance(5)
    forked = await runner.fork(run_id, 0)
    seed = (await runner.latest(forked)).run
    assert (seed.created_at, seed.started_at, seed.updated_at) == (T0 + timedelta(seconds=5),) * 3
    clock.advance(5)
    cancelled = await runner.cancel(run_id, "no longer needed")
    assert cancelled.cancelled_at == cancelled.updated_at == T0 + timedelta(seconds=10)


async def test_flow_now_outside_a_task_names_itself() -> None:
    with pytest.raises(RuntimeError, match=r"flow\.now\(\)"):
        flow.now()
