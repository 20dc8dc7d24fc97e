"""A session over memory, SQLite and PostgreSQL whose clock the test drives."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from flowledger.clock import ManualClock
from flowledger.storage import Store, open_store
from flowledger.tools.bundle import WorkflowTools
from flowledger.workflows.runtime.session import WorkflowSession

from ..._postgres import postgres_url
from ._app import catalog

HANG = 30.0  # seconds: only catches a hang, never a timing bound


@dataclass
class Env:
    store: Store
    clock: ManualClock
    session: WorkflowSession
    tools: WorkflowTools

    async def call(self, name: str, **arguments: Any) -> dict[str, Any]:
        return await self.tools.call(name, arguments)

    async def start(self, name: str, document: dict[str, Any]) -> str:
        result = await self.call(
            "workflow_run_start", definition_name=name, definition_version="v1", input=document
        )
        run_id = str(result["run_id"])
        await self.until(lambda: self.status_is(run_id, "interrupted", "completed", "failed"))
        return run_id

    async def get(self, run_id: str) -> dict[str, Any]:
        return await self.call("workflow_run_get", run_id=run_id)

    async def status_is(self, run_id: str, *statuses: str) -> bool:
        return (await self.get(run_id))["run_status"] in statuses

    async def until(self, condition: Callable[[], Awaitable[bool]]) -> None:
        """Wait until ``condition()`` holds; a hang fails after `HANG` seconds."""
        for _ in range(int(HANG / 0.005)):
            if await condition():
                return
            await asyncio.sleep(0.005)
        assert await condition()


@pytest.fixture(params=["memory", "sqlite", "postgres"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "memory":
        yield "memory://"
    elif request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'timers.db'}"
    else:
        with postgres_url() as url:
            yield url


@pytest.fixture
async def env(store_url: str) -> AsyncIterator[Env]:
    clock = ManualClock()
    async with open_store(store_url) as store:
        session = WorkflowSession.build(store, str(uuid.uuid4()), catalog(clock), clock=clock)
        await session.supervisor.activate()
        try:
            yield Env(store, clock, session, WorkflowTools.for_session(session))
        finally:
            await session.supervisor.shutdown()
