"""`Runner.fork_plan`: what a fork of a revision - or *after* it, of the end of its step
- would do, written before nothing (see `flow.fork`): the revision it is made from, its
first step and every vertex the origin ran from that step on. Checked against what the
fork then runs, on the memory store and a SQLite file."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from flowledger import flow
from flowledger.flow import StepPhase
from flowledger.storage import open_store


def _runner(store: Any, calls: list[str]) -> flow.Runner[dict[str, Any]]:
    graph: flow.Graph[dict[str, Any]] = flow.Graph("plan", state=dict)

    def make(name: str) -> Any:
        def task(state: dict[str, Any]) -> dict[str, Any]:
            calls.append(name)
            return {name: True}

        return task

    for name in ("first", "second", "third"):
        graph.add_vertex(name, make(name))
    graph.add_edge("first", "second")
    graph.add_edge("second", "third")
    return graph.compile(entry="first", finish="third", store=store, version="1")


@pytest.mark.parametrize("url", ["memory://", "sqlite"])
async def test_after_a_vertex_the_fork_continues_with_the_next_step(
    url: str, tmp_path: Path
) -> None:
    async with open_store(
        f"sqlite:///{tmp_path / 'plan.db'}" if url == "sqlite" else url
    ) as bundle:
        calls: list[str] = []
        runner = _runner(flow.LedgerCheckpointStore(bundle.ledger), calls)
        result = await runner.run({})
        origin = result.run.graph_run_id
        history = await runner.history(origin)
        # the revision that records "second" done, inside its step
        inside = next(
            cp.revision
            for cp in history
            if cp.phase is StepPhase.RUNNING and any(v.vertex == "second" for v in cp.vertices)
        )
        plan = await runner.fork_plan(origin, inside, after=True)
        assert history[plan.revision].phase is StepPhase.ROUTED and plan.revision > inside
        assert plan.first == ("third",) and plan.again == ("third",)
        restart = await runner.fork_plan(origin, inside)
        assert restart.revision == inside and restart.again == ("second", "third")
        assert (await runner.fork_plan(origin, 0)).again == ("first", "second", "third")
        assert (await runner.fork_plan(origin, 0, after=True)).revision == 0  # a boundary
        calls.clear()
        fork = await runner.fork(origin, plan.revision)
        await runner.resume(fork)
        assert calls == list(plan.again)  # what the plan said runs again, and only that
        with pytest.raises(flow.ForkRevisionError):
            await runner.fork_plan(origin, history[-1].revision + 1)
        assert len(await runner.history(origin)) == len(history)  # a plan writes nothing
