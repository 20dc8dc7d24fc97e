"""Firing one slot of a schedule: the firing record first, then the run, never twice.

Everything a firing writes is keyed by (session, schedule, slot):

1. the firing record, create-only (``expected=0``; `ScheduleStore.claim_firing`); if it is
   already there, the stored one is used;
2. the run record, whose run, graph run and tool execution IDs are UUIDv5 values derived
   from the firing key, created create-only by the registry (a ``run already exists``
   conflict means an earlier attempt created it);
3. the start of the pending run by the session's supervisor.

A deployment's firing (`deployments`) first asks the session's `DeploymentStarter` to
prepare the start (the live revision, the input checked again, the environment checked as
``run_deployment`` checks it) and writes the chosen revision into the firing record, or
the refusal (then no run is created and the slot is done). An attempt that finds the
firing claimed without its run prepares that same revision again, and the run's pin is
written before its record, as ``run_deployment`` writes it.

An owner that crashes between any two steps leaves a slot that its schedule's cursor has
not passed; the next owner decides the same slot again, finds the firing (and maybe the
run) already there and completes what is missing. So a slot starts exactly one run, under
any number of owners racing or restarting: the derived run ID is the start's idempotency
key, and the owner's writes carry its lease fence (a stale owner writes nothing).
"""

from __future__ import annotations

import contextlib
import uuid
from dataclasses import replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Final

from ..errors import ConflictError, NotFoundError
from ..records.inputs import canonical_json
from ..records.run import Run, RunStatus, ScheduledBy
from .deployments import (
    DeploymentsNotServedError,
    DeploymentStarter,
    DeploymentStartRefusedError,
    PreparedStart,
)
from .record import Schedule
from .store import Firing, FiringFailure, ScheduleStore
from .timing import slot_key

if TYPE_CHECKING:
    from ..runtime.session import WorkflowSession

__all__ = ["FIRING_NAMESPACE", "derived_id", "fire", "make_run"]

#: The UUIDv5 namespace of IDs derived from firings (fixed forever: it names stored runs).
FIRING_NAMESPACE: Final = uuid.UUID("5b0f7c1e-2a4d-4d8e-9c61-3f0e6c2b8a17")


def derived_id(session_id: str, schedule_id: str, slot: datetime, manual: bool, part: str) -> str:
    key = slot_key(slot) + ("-manual" if manual else "")
    return str(uuid.uuid5(FIRING_NAMESPACE, f"{session_id}/{schedule_id}/{key}/{part}"))


async def _existing_run(session: WorkflowSession, firing: Firing) -> Run | None:
    try:
        return await session.registry.get(session.session_id, firing.run_id)
    except NotFoundError:
        return None


async def make_run(
    session: WorkflowSession,
    schedule: Schedule,
    firing: Firing,
    prepared: PreparedStart | None = None,
) -> Run:
    """The firing's run record, created if an earlier attempt did not get that far
    (``prepared``: of a deployment, which pins it before the record exists)."""
    session_id = session.session_id
    existing = await _existing_run(session, firing)
    if existing is not None:
        return existing
    canonical = canonical_json(schedule.input, field="input")
    reference = await session.inputs.put(session_id, canonical)
    graph_run_id = derived_id(session_id, schedule.id, firing.slot, firing.manual, "graph")
    execution_id = derived_id(session_id, schedule.id, firing.slot, firing.manual, "execution")
    moment = firing.fired_at.astimezone(UTC)
    record = Run(
        session_id=session_id,
        tool_execution_id=execution_id,
        definition_name=schedule.definition_name
        if schedule.deployment is None
        else schedule.deployment,
        definition_version=schedule.definition_version
        if prepared is None
        else prepared.definition_version,
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
    if prepared is not None:
        await prepared.bind(record)
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
    deployments: DeploymentStarter | None = None,
) -> Firing:
    """Fire ``slot`` of ``schedule`` (steps 1-3 of the module docs); return the firing
    as stored. ``start=False`` leaves the pending run to the session's owner (a front
    door's ``trigger``). A deployment's firing uses ``deployments`` (default: the
    session's starter; `DeploymentsNotServedError` when there is none, nothing
    written)."""
    run_id = derived_id(session.session_id, schedule.id, slot, manual, "run")
    fresh = Firing(schedule.id, slot, run_id, now, manual)
    if schedule.deployment is None:
        firing = await store.claim_firing(session.session_id, fresh)
        run: Run | None = await make_run(session, schedule, firing)
    else:
        starter = deployments if deployments is not None else session.deployment_starter
        if starter is None:
            raise DeploymentsNotServedError(schedule.id)
        firing, run = await _fire_deployment(session, store, schedule, fresh, starter)
    if run is not None and start and run.status is RunStatus.PENDING:
        # A worker's own poll may start it too; the supervisor starts a run once (a
        # second start of a run no longer pending is refused in the background).
        with contextlib.suppress(Exception):
            await session.supervisor.start(run.id)
    return firing


async def _fire_deployment(
    session: WorkflowSession,
    store: ScheduleStore,
    schedule: Schedule,
    fresh: Firing,
    starter: DeploymentStarter,
) -> tuple[Firing, Run | None]:
    """Claim (or complete) a deployment's firing; the run, or None when it was refused."""
    assert schedule.deployment is not None
    sid = session.session_id
    canonical = canonical_json(schedule.input, field="input")
    stored = await store.stored_firing(sid, schedule.id, fresh.slot, manual=fresh.manual)
    while True:
        if stored is not None:
            if stored.failure is not None:
                return stored, None
            existing = await _existing_run(session, stored)
            if existing is not None:
                return stored, existing
        wanted = None if stored is None else stored.deployment_revision
        try:
            prepared = await starter.prepare(
                schedule.deployment,
                canonical,
                revision=wanted,
                inline_sources=schedule.inline_sources,
            )
        except DeploymentStartRefusedError as exc:
            failed = replace(
                fresh if stored is None else stored,
                failure=FiringFailure(exc.code, exc.reason),
            )
            if stored is None:
                claimed = await store.claim_firing(sid, failed)
            else:
                claimed = await store.record_failure(sid, failed)
            if claimed.failure is not None:
                return claimed, None
            stored = claimed  # another owner chose a revision first: start that one
            continue
        if stored is None:
            chosen = replace(fresh, deployment_revision=prepared.revision)
            claimed = await store.claim_firing(sid, chosen)
            if claimed != chosen:  # another owner claimed the slot first: follow it
                stored = claimed
                continue
            stored = claimed
        return stored, await make_run(session, schedule, stored, prepared)
