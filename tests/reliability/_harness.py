"""Shared helpers for the reliability tests: sessions over a fault-injecting store, and
the consistency checks every recovered run must pass."""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass
from typing import Any

from flowledger import flow
from flowledger.storage import Store
from flowledger.tools import WorkflowTools
from flowledger.workflows.records.run import Run, RunStatus
from flowledger.workflows.runtime.supervisor import Supervisor
from tests.workflows.conftest import Gates, Session, build_session

from .faults import FaultyStore, faulty

TERMINAL_FLOW = {
    flow.RunStatus.COMPLETED: RunStatus.COMPLETED,
    flow.RunStatus.CANCELLED: RunStatus.CANCELLED,
}


@dataclass
class Rig:
    """A session over a fault-injecting view of one store, with its supervisor."""

    store: Store
    faults: FaultyStore
    session: Session
    supervisor: Supervisor
    tools: WorkflowTools

    @classmethod
    async def open(cls, real: Store, session_id: str | None = None) -> Rig:
        wrapped, faults = faulty(real)
        session = build_session(wrapped, session_id, Gates())
        supervisor = session.supervisor(shutdown_timeout=2.0)
        await supervisor.activate()
        return cls(wrapped, faults, session, supervisor, tools_for(session, supervisor))

    async def settle(self, seconds: float = 5.0) -> None:
        async with asyncio.timeout(seconds):
            await self.supervisor.wait_idle()

    async def stop(self) -> None:
        with contextlib.suppress(Exception):
            await self.settle()
        with contextlib.suppress(Exception):
            await self.supervisor.shutdown()

    async def restart(self) -> Rig:
        """Shut this supervisor down and activate a fresh one (new catalog, registry, ...)
        over the same store and session, as a new process would."""
        self.faults.disarm()
        await self.stop()
        return await Rig.open(self.faults.inner, self.session.session_id)


def tools_for(session: Session, supervisor: Supervisor) -> WorkflowTools:
    return WorkflowTools(
        session.session_id,
        catalog=session.catalog,
        registry=session.registry,
        inputs=session.inputs,
        supervisor=supervisor,
        start_timeout=5.0,
        pending=session.pending,
    )


async def runs_of(session: Session) -> list[Run]:
    page = await session.registry.list(session.session_id, limit=100)
    return list(page.runs)


async def check_consistent(session: Session, run: Run) -> dict[str, Any]:
    """Registry and checkpoints agree, revisions are contiguous, journal event ids are
    unique and every journal revision is durable. Returns the latest state (or {})."""
    try:
        history = await session.checkpoints.history(run.graph_run_id)
    except flow.CheckpointNotFoundError:
        history = []
    revisions = [cp.revision for cp in history]
    assert revisions == list(range(len(history))), f"revisions not contiguous: {revisions}"
    records = await session.journal.records(session.session_id, run.id)
    ids = [item.activity.event_id for item in records]
    assert len(ids) == len(set(ids)), f"duplicate activity event ids: {ids}"
    if not history:
        assert run.status in (RunStatus.PENDING, RunStatus.FAILED), run.status
        assert run.checkpoint_revision == 0
        return {}
    latest = history[-1]
    assert run.checkpoint_revision <= latest.revision
    assert all(item.revision <= latest.revision for item in records)
    terminal = TERMINAL_FLOW.get(latest.run.status)
    if run.status in (RunStatus.COMPLETED, RunStatus.CANCELLED):
        assert terminal is run.status, (run.status, latest.run.status)
    if terminal is not None and run.status is not RunStatus.FAILED:
        assert run.status is terminal, (run.status, latest.run.status)
    return dict(latest.state or {})


async def kinds(session: Session, run_id: str) -> list[str]:
    return await session.kinds(run_id)
