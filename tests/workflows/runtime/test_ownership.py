"""`run_owner`: whether anyone holds a run's session lease, read without holding it."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from datetime import datetime

from flowledger.workflows.activities.activity import format_time
from flowledger.workflows.records.run import RunStatus
from flowledger.workflows.runtime.ownership import left_message, run_owner

from ..conftest import Session


def moment(text: str) -> datetime:
    return datetime.fromisoformat(text)


async def test_owner_of_pending_running_and_paused_runs(session: Session) -> None:
    leases = session.store.leases
    run = await session.create_run()
    never = await run_owner(leases, run)  # no owner ever: since the run last changed
    assert never == {"live": False, "since": format_time(run.updated_at)}

    owner = session.supervisor()
    await owner.activate()
    held = await run_owner(leases, run)
    assert held is not None and held["live"] is True
    assert isinstance(held["lease_epoch"], int) and moment(held["until"]) > run.updated_at
    assert await asyncio.wait_for(owner.wait_idle(), 10) is None
    await owner.shutdown()

    running = replace(run, status=RunStatus.RUNNING)
    gone = await run_owner(leases, running)  # since the release, later than the run's change
    assert gone is not None and gone["live"] is False
    assert moment(gone["since"]) >= run.updated_at
    for status in (RunStatus.INTERRUPTED, RunStatus.COMPLETED, RunStatus.FAILED):
        assert await run_owner(leases, replace(run, status=status)) is None


async def test_left_message_names_the_command_that_continues_the_run(session: Session) -> None:
    run = await session.create_run()
    pending = left_message(run, ["--db", "sqlite:///my db.db"])
    assert pending.startswith(f"run {run.id} left pending")
    assert f"(flowledger resume {run.id} --db 'sqlite:///my db.db')" in pending
    running = left_message(replace(run, status=RunStatus.RUNNING, checkpoint_revision=4))
    assert running == (
        f"run {run.id} left running at revision 4; it continues when any owner opens the "
        f"session (flowledger resume {run.id})"
    )
