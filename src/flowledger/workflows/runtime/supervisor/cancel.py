"""Cancellation of a run.

Cancellation first signals an in-flight execution, then takes the lock, records a durable
cancel intent (so the next owner finishes the job if this one dies) and appends Flow's
cancelled checkpoint, retrying revision conflicts at most `MAX_CANCEL_ATTEMPTS` times. A
pending run (or one whose start was cut short before its seed) is cancelled unstarted.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Final

from .... import flow
from ...authoring.definition import Definition
from ...authoring.metadata import bound_summary
from ...errors import AdoptionError, ConflictError, NotFoundError
from ...records.run import Run, RunStatus
from .misses import confirm_checkpoints_missing
from .outcomes import apply_result, checkpoint_read_error
from .workers import controller_for, forget_if_idle
from .writes import OwnershipLost, stamp, transition

if TYPE_CHECKING:
    from .owner import Supervisor

MAX_CANCEL_ATTEMPTS: Final = 8


async def cancel_run(sup: Supervisor, run_id: str, reason: str = "") -> Run | None:
    """Cancel a run (idempotent for an already cancelled one); return its record."""
    controller = controller_for(sup, run_id)
    controller.cancels += 1  # an execution about to begin does not begin
    if controller.execution is not None:
        controller.execution.cancel()  # let the cancellation reach Flow without waiting
    try:
        async with controller.lock:
            run = await sup.registry.get(sup._session_id, run_id)
            definition = sup.catalog.resolve(run.definition_name, run.definition_version)
            return await cancel_locked(sup, definition, run, reason)
    except NotFoundError:
        forget_if_idle(sup, run_id)
        raise
    finally:
        controller.cancels -= 1


async def never_seeded(sup: Supervisor, definition: Definition, run: Run) -> bool:
    """A running run whose start was cut short before its seed: Flow has nothing to
    cancel (it is cancelled like a pending run)."""
    if not (
        run.status is RunStatus.RUNNING
        and run.checkpoint_revision == 0
        and run.activity_cursor == 0
    ):
        return False
    try:
        seeded = bool(await definition.history(run.graph_run_id))
    except flow.CheckpointNotFoundError:
        seeded = False
    except Exception:
        return False  # Flow's own cancellation decides
    if not seeded:
        await confirm_checkpoints_missing(sup, run)  # a seed not found may be there
    return not seeded


async def cancel_locked(
    sup: Supervisor, definition: Definition, run: Run, reason: str
) -> Run | None:
    if run.status is RunStatus.CANCELLED:
        return run
    if run.status in (RunStatus.COMPLETED, RunStatus.FAILED):
        raise ConflictError(sup._session_id, run.id, "run is terminal", actual=run.revision)
    if not run.cancel_requested:
        if sup._ownership_lost():
            return None
        intent = replace(
            run,
            cancel_requested=True,
            status_summary="workflow cancellation requested",
            updated_at=stamp(sup, run),
        )
        try:
            run = await sup.registry.compare_and_swap(run.revision, intent)
        except Exception as exc:
            raise RuntimeError(f"persist cancellation intent: {exc}") from exc
    if run.status is RunStatus.PENDING or await never_seeded(sup, definition, run):
        try:
            return await transition(
                sup, run, RunStatus.CANCELLED, "workflow cancelled", run.checkpoint_revision
            )
        except OwnershipLost:
            return None
    reason = bound_summary(reason) or "cancel requested"
    for _ in range(MAX_CANCEL_ATTEMPTS):
        if sup._ownership_lost():
            return None
        try:
            await definition.cancel(run.graph_run_id, reason)
            error: BaseException | None = None
        except Exception as exc:
            error = exc
        try:
            result = await definition.get(run.graph_run_id)
        except Exception as exc:
            if error is None or isinstance(error, flow.RevisionConflictError):
                await checkpoint_read_error(sup, definition, run, "read cancellation", exc)
                return None
            raise AdoptionError(run.id, "cancel", error) from error
        status = result.run.status
        if status is flow.RunStatus.CANCELLED:
            return await apply_result(sup, definition, run, result)
        if status is flow.RunStatus.COMPLETED:
            await apply_result(sup, definition, run, result)
            raise ConflictError(sup._session_id, run.id, "workflow completed before cancellation")
        if error is not None and not isinstance(error, flow.RevisionConflictError):
            raise AdoptionError(run.id, "cancel", error) from error
        # A revision conflict (another writer appended first): Flow's cancel reads the
        # new latest checkpoint on the next attempt.
    raise AdoptionError(
        run.id, "cancel", f"revision conflict retry limit {MAX_CANCEL_ATTEMPTS} reached"
    )
