"""A `Worker` in this process and schedules: it claims a session that has nothing but an
active schedule, fires its slots on the worker's clock, keeps the session while a
schedule is active, and lets it go once the schedule is paused (SQLite and PostgreSQL)."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from flowledger.clock import ManualClock
from flowledger.storage import open_store
from flowledger.workflows.runtime.session import WorkflowSession
from flowledger.workflows.runtime.worker import Worker, WorkerSettings
from flowledger.workflows.schedules import Schedules

from ..._postgres import postgres_url
from ..conftest import Gates
from .test_firing import app, scheduled_runs

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
FAST = WorkerSettings(lease_ttl=0.5, poll=0.02, idle_release=0.05)
DEADLINE = 30.0  # seconds: only catches hangs


@pytest.fixture(params=["sqlite", "postgres"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'w.db'}"
    else:
        with postgres_url() as found:
            yield found


async def test_a_worker_owns_a_scheduled_session_while_a_schedule_is_active(url: str) -> None:
    clock = ManualClock(T0)
    session_id = str(uuid.uuid4())
    async with open_store(url) as store:
        front = WorkflowSession.build(store, session_id, app(Gates()))
        schedules = Schedules(front, clock=clock)
        schedule = await schedules.add(
            definition_name="counter", definition_version="v1", input={"count": 0}, every=10
        )
        worker = Worker(store, app(Gates()), FAST, clock=clock)
        stop = asyncio.Event()
        task = asyncio.create_task(worker.run(stop))
        try:
            async with asyncio.timeout(DEADLINE):
                while clock.sleepers == 0:  # noqa: ASYNC110 - claimed, looked, asleep
                    await asyncio.sleep(0.01)
                assert worker.sessions == [session_id]
                clock.advance(10)
                while not await scheduled_runs(front):  # noqa: ASYNC110 - a database read
                    await asyncio.sleep(0.01)
                await asyncio.sleep(0.3)  # many ticks past idle_release: still owned
                assert worker.sessions == [session_id]
                await schedules.pause(schedule.id)
                while worker.sessions:  # noqa: ASYNC110 - released on a later tick
                    await asyncio.sleep(0.01)
            runs = await scheduled_runs(front)
            assert len(runs) == 1 and runs[0].scheduled_by is not None
            assert runs[0].scheduled_by.slot == datetime(2026, 3, 1, 12, 0, 10, tzinfo=UTC)
        finally:
            stop.set()
            await task
