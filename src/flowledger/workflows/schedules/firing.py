"""Firing one slot of a schedule: the firing record first, then the run, never twice.

Everything a firing writes is keyed by (session, schedule, slot):

1. the firing record, create-only (``expected=0``; `ScheduleStore.claim_firing`); if it is
   already there, the stored one is used;
2. the run record, whose run, graph run and tool execution IDs are UUIDv5 values derived
   from the firing key, created create-only by the registry (a ``run already exists``
   conflict means an earlier attempt created it);
3. the start of the pending run by the session's supervisor.

An owner that crashes between any two steps leaves a slot that its schedule's cursor has
not passed; the next owner decides the same slot again, finds the firing (and maybe the
run) already there and completes what is missing. So a slot starts exactly one run, under
any number of owners racing or restarting: the derived run ID is the start's idempotency
key, and the owner's writes carry its lease fence (a stale owner writes nothing).
"""

from __future__ import annotations

import contextlib
import uuid
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Final

from ..errors import ConflictError, NotFoundError
from ..records.inputs import canonical_json
from ..records.run import Run, RunStatus, ScheduledBy
from .record import Schedule
from .store import Firing, ScheduleStore
from .timing import slot_key

if TYPE_CHECKING:
    from ..runtime.session import WorkflowSession

__all__ = ["FIRING_NAMESPACE", "derived_id", "fire", "make_run"]

#: The UUIDv5 namespace of IDs derived from firings (fixed forever: it names stored runs).
FIRING_NAMESPACE: Final = uuid.UUID("5b0f7c1e-2a4d-4d8e-9c61-3f0e6c2b8a17")


def derived_id(session_id: str, schedule_id: str, slot: datetime, manual: bool, part: str) -> str:
    key = slot_key(slot) + ("-manual" if manual else "")
    return str(uuid.uuid5(FIRING_NAMESPACE, f"{session_id}/{schedule_id}/{key}/{part}"))


async def make_run(session: WorkflowSession, schedule: Schedule, firing: Firing) -> Run:
    """The firing's run record, created if an earlier attempt did not get that far."""
    session_id = session.session_id
    try:
        return await session.registry.get(session_id, firing.run_id)
    except NotFoundError:
        pass
    canonical = canonical_json(schedule.input, field="input")
    reference = await session.inputs.put(session_id, canonical)
    graph_run_id = derived_id(session_id, schedule.id, firing.slot, firing.manual, "graph")
    execution_id = derived_id(session_id, schedule.id, firing.slot, firing.manual, "execution")
    moment = firing.fired_at.astimezone(UTC)
    record = Run(
        session_id=session_id,
        tool_execution_id=execution_id,
        definition_name=schedule.definition_name,
        definition_version=schedule.definition_version,
        id=firing.run_id,
        graph_run_id=graph_run_id,
        input=reference,
        ledger_locator=f"flow/runs/{graph_run_id}",
        created_at=moment,
        updated_at=moment,
        status=RunStatus.PENDING,
        artifact_session_id=session_id,
        artifact_run_id=firing.run_id,
        scheduled_by=ScheduledBy(schedule.id, firing.slot, firing.manual),
    )
    try:
        run = await session.registry.create(record)
    except ConflictError:  # the earlier attempt created it after all
        run = await session.registry.get(session_id, firing.run_id)
    # a prune deleting this input meanwhile must not leave the run without it
    await session.inputs.keep(session_id, reference, canonical)
    return run


async def fire(
    session: WorkflowSession,
    store: ScheduleStore,
    schedule: Schedule,
    slot: datetime,
    now: datetime,
    *,
    manual: bool = False,
    start: bool = True,
) -> Firing:
    """Fire ``slot`` of ``schedule`` (steps 1-3 of the module docs); return the firing
    as stored. ``start=False`` leaves the pending run to the session's owner (a front
    door's ``trigger``)."""
    run_id = derived_id(session.session_id, schedule.id, slot, manual, "run")
    firing = await store.claim_firing(
        session.session_id, Firing(schedule.id, slot, run_id, now, manual)
    )
    run = await make_run(session, schedule, firing)
    if start and run.status is RunStatus.PENDING:
        # A worker's own poll may start it too; the supervisor starts a run once (a
        # second start of a run no longer pending is refused in the background).
        with contextlib.suppress(Exception):
            await session.supervisor.start(run.id)
    return firing
