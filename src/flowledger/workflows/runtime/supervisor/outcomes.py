"""Recording what a segment ended with: the run's status, what it waits for, or its failure.

When a run pauses (or fails under ``on_error="fail"``), the owner stores what it waits
for in the `PendingStore` before the registry records the status, so a reader sees the
question of every interrupted run without loading its definition. A run's activities are
published before the status they lead to is recorded (see `publication`); a failed run's
index entry goes only once its activities are published.
"""

from __future__ import annotations

import contextlib
import logging
from dataclasses import replace
from typing import TYPE_CHECKING, Final

from .... import flow
from ...authoring.definition import Definition, WorkflowResult
from ...authoring.metadata import bound_summary
from ...errors import AdoptionError
from ...records.pending import PauseKind, Pending, describe_pause, requests
from ...records.run import Run, RunStatus
from ...records.timers import TimerKind, timer_key
from .failures import GRAPH_CHANGED, definite, failure_summary
from .misses import confirm_checkpoints_missing
from .publication import reconcile_activities
from .writes import OwnershipLost, transition

if TYPE_CHECKING:
    from .owner import Supervisor

log = logging.getLogger(__name__)


FLOW_STATUS: Final = {
    flow.RunStatus.RUNNING: RunStatus.RUNNING,
    flow.RunStatus.INTERRUPTED: RunStatus.INTERRUPTED,
    flow.RunStatus.COMPLETED: RunStatus.COMPLETED,
    flow.RunStatus.CANCELLED: RunStatus.CANCELLED,
}


async def adoption_blocked(sup: Supervisor, run: Run, reason: str) -> None:
    """Leave a running run whose checkpoint this definition cannot continue as it is,
    saying why; it continues once an owner has the right graph registered."""
    summary = f"workflow adoption blocked: {reason}"
    if run.status_summary == bound_summary(summary):
        return
    with contextlib.suppress(OwnershipLost):
        await transition(sup, run, RunStatus.RUNNING, summary, run.checkpoint_revision)


async def checkpoint_read_error(
    sup: Supervisor, definition: Definition, run: Run, op: str, error: BaseException
) -> None:
    if sup._ownership_lost():
        return
    if isinstance(error, GRAPH_CHANGED) and run.status is RunStatus.RUNNING:
        await adoption_blocked(sup, run, str(error))
        return
    if not definite(error):
        raise AdoptionError(run.id, op, error) from error
    if isinstance(error, flow.CheckpointNotFoundError):
        await confirm_checkpoints_missing(sup, run)
    await fail_definite(sup, definition, run, failure_summary(error))


async def fail_definite(
    sup: Supervisor, definition: Definition, run: Run, summary: str
) -> Run | None:
    if sup._ownership_lost():
        return None
    try:
        failed = await transition(sup, run, RunStatus.FAILED, summary, run.checkpoint_revision)
    except OwnershipLost:
        return None
    return await failed_published(sup, await reconcile_activities(sup, definition, failed))


async def apply_result(
    sup: Supervisor, definition: Definition, run: Run, result: WorkflowResult
) -> Run | None:
    if sup._ownership_lost():
        return None
    if result.run.graph_run_id and result.run.graph_run_id != run.graph_run_id:
        return await fail_definite(sup, definition, run, "workflow checkpoint identity mismatch")
    status = FLOW_STATUS.get(result.run.status)
    if status is None:
        return await fail_definite(sup, definition, run, "workflow checkpoint status invalid")
    summary = bound_summary(result.summary) or f"workflow {status}"
    if status is RunStatus.INTERRUPTED and (result.interrupts or result.halt):
        pending = describe_pause(
            definition.metadata(),
            result.run.revision,
            result.interrupts,
            result.halt,
            resume_schema=definition.resume_schema_for(requests(result.interrupts)),
        )
        if definition.on_error == "fail" and any(
            item.kind is PauseKind.ERROR for item in pending.vertices
        ):
            pending = replace(pending, failed=True)
            status, summary = RunStatus.FAILED, f"workflow failed: {pending.error_summary()}"
        if sup.pending is not None and not sup._ownership_lost():
            await sup.pending.put(sup._session_id, run.id, pending)
        if status is RunStatus.INTERRUPTED:
            await index_wake(sup, run.id, pending)
    if status is RunStatus.CANCELLED:
        await forget_wake(sup, run.id)
    if status is not RunStatus.FAILED:
        run = await reconcile_activities(sup, definition, run)
    try:
        run = await transition(sup, run, status, summary, result.run.revision)
    except OwnershipLost:
        return None
    if status is RunStatus.FAILED:
        return await failed_published(sup, await reconcile_activities(sup, definition, run))
    return run


async def index_wake(sup: Supervisor, run_id: str, pending: Pending) -> None:
    """Index a pause the owner resumes by itself (a timer, a deadline) before the run is
    recorded as interrupted, and ring the owner's timer loop."""
    wake_at = pending.wake_at
    if sup.timers is None or wake_at is None or sup._ownership_lost():
        return
    kind: TimerKind = "timer" if pending.kind is PauseKind.TIMER else "deadline"
    await sup.timers.put(sup._session_id, run_id, wake_at, pending.checkpoint_revision, kind)
    sup.ring_timers()


async def forget_wake(sup: Supervisor, run_id: str) -> None:
    """Delete the timer entry of the run's last pause, if it had one (a cancelled run);
    an entry left behind is stale and deleted when it comes due."""
    if sup.timers is None or sup.pending is None or sup._ownership_lost():
        return
    try:
        pending = await sup.pending.get(sup._session_id, run_id)
        if pending is not None and pending.wake_at is not None:
            await sup.timers.delete(timer_key(sup._session_id, run_id, pending.wake_at))
    except Exception as exc:
        log.warning("run %s: deleting its timer entry failed: %s", run_id, exc)


async def failed_published(sup: Supervisor, run: Run) -> Run:
    """A failed run's activities are published: its index entry (kept until now, so
    that an owner dying before this point leaves the work to the next) goes."""
    index = sup.index
    if index is not None and not sup._ownership_lost():
        try:
            await index.remove(sup._session_id, run.id)
        except Exception as exc:  # the next owner's poll publishes (nothing) and retries
            log.warning("run %s is failed; unindexing it failed: %s", run.id, exc)
    return run
