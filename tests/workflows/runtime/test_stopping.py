"""Stopping an owner at the next step boundary: the step in flight commits, nothing of
the next step begins, and the next owner continues from that checkpoint."""

from __future__ import annotations

import asyncio

import pytest

from flowledger.workflows.errors import SupervisorClosedError
from flowledger.workflows.records.run import RunStatus
from flowledger.workflows.runtime.stopping import SupervisorStoppingError

from ..conftest import Session


async def test_stop_lets_the_step_in_flight_commit_and_the_next_owner_continue(
    session: Session,
) -> None:
    session.gates.close("one")
    first = session.supervisor()
    await first.activate()
    run = await session.create_run()
    ticket = await first.start(run.id)
    await ticket.wait()
    await asyncio.wait_for(session.gates.entered["one"].wait(), 10)

    first.request_stop()  # while `one` is in flight
    assert first.stopping
    session.gates.open("one")
    left = await asyncio.wait_for(first.stop(), 10)
    await first.shutdown()

    assert [r.id for r in left] == [run.id]
    assert left[0].status is RunStatus.RUNNING
    assert session.gates.runs == {"one": 1}  # `two` never began
    latest = (await session.checkpoints.history(run.graph_run_id))[-1]
    assert left[0].checkpoint_revision == latest.revision > 0
    stored = await session.registry.get(session.session_id, run.id)
    assert stored.checkpoint_revision == latest.revision
    assert "vertex_completed" in await session.kinds(run.id)  # `one`'s activity is out

    second = session.supervisor()
    await second.activate()  # adopts the run it was left with
    assert await asyncio.wait_for(second.wait_idle(), 10) is None
    await second.shutdown()
    done = await session.registry.get(session.session_id, run.id)
    assert done.status is RunStatus.COMPLETED
    assert done.status_summary == "count=2"
    assert session.gates.runs == {"one": 1, "two": 1}  # `one` was not run again


async def test_stop_ends_a_segment_that_pauses_as_it_would_have(session: Session) -> None:
    session.gates.close("ask")
    owner = session.supervisor()
    await owner.activate()
    run = await session.create_run("asker")
    await (await owner.start(run.id)).wait()
    await asyncio.wait_for(session.gates.entered["ask"].wait(), 10)
    owner.request_stop()
    session.gates.open("ask")
    assert await asyncio.wait_for(owner.stop(), 10) == []  # nothing is left running
    await owner.shutdown()
    paused = await session.registry.get(session.session_id, run.id)
    assert paused.status is RunStatus.INTERRUPTED


async def test_a_stopping_owner_refuses_starts_and_resumes_and_changes_nothing(
    session: Session,
) -> None:
    owner = session.supervisor()
    await owner.activate()
    paused = await session.create_run("asker")
    await (await owner.start(paused.id)).wait()
    assert await asyncio.wait_for(owner.wait_idle(), 10) is None
    before = await session.registry.get(session.session_id, paused.id)
    assert before.status is RunStatus.INTERRUPTED

    owner.request_stop()
    fresh = await session.create_run()
    with pytest.raises(SupervisorStoppingError, match="nothing was changed"):
        await owner.start(fresh.id)
    with pytest.raises(SupervisorStoppingError):
        await owner.resume(paused.id, b'{"increment": 2}')
    assert isinstance(SupervisorStoppingError(), SupervisorClosedError)  # tools: same class
    left = await asyncio.wait_for(owner.stop(), 10)
    await owner.shutdown()
    assert [(r.id, r.status) for r in left] == [(fresh.id, RunStatus.PENDING)]
    assert await session.registry.get(session.session_id, paused.id) == before  # still paused
    assert session.gates.runs == {"ask": 1}


async def test_stop_at_once_cuts_the_step_and_the_next_owner_runs_it_again(
    session: Session,
) -> None:
    session.gates.close("one")  # never opened while the first owner runs
    first = session.supervisor()
    await first.activate()
    run = await session.create_run()
    await (await first.start(run.id)).wait()
    await asyncio.wait_for(session.gates.entered["one"].wait(), 10)
    left = await asyncio.wait_for(first.stop(at_once=True), 10)
    await first.shutdown()
    assert [(r.id, r.status, r.checkpoint_revision) for r in left] == [
        (run.id, RunStatus.RUNNING, 0)
    ]

    session.gates.open("one")
    second = session.supervisor()
    await second.activate()
    assert await asyncio.wait_for(second.wait_idle(), 10) is None
    await second.shutdown()
    assert (await session.registry.get(session.session_id, run.id)).status is RunStatus.COMPLETED
    assert session.gates.runs == {"one": 2, "two": 1}  # the cut step ran again
