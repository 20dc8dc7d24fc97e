"""Resuming an interrupted run.

Every resume - `Supervisor.resume`, or a front door's request carried out by `poll` - is
checked by `resumption.prepare_resume` first, once in full, under the run's lock and inside
`Definition.resuming`: a blocked run, a request pause without a
valid payload, or an errored pause sent a payload is refused before anything is written.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from ...activities.activity import RESUMING_SUMMARY
from ...activities.live import LiveActivities
from ...authoring.definition import Definition
from ...errors import AdoptionError, ConflictError, NotFoundError
from ...records.run import Run, RunStatus
from ..resumption import prepare_resume
from .failures import definite
from .outcomes import apply_result, checkpoint_read_error
from .publication import reconcile_activities
from .traces import segment_span
from .workers import Controller, controller_for, execute, forget_if_idle
from .writes import OwnershipLost, transition

if TYPE_CHECKING:
    from .owner import Supervisor


async def resume_run(sup: Supervisor, run_id: str, payload: bytes | str | None) -> Run | None:
    """Continue an interrupted run - a request pause with a payload the resume schema
    accepts, an errored pause with ``None`` (a retry) - and return the run record after
    the segment (None if ownership was lost on the way). `ResumeBlockedError` when the
    run cannot be continued now (see `resumption.prepare_resume`); nothing is written
    then."""
    controller = controller_for(sup, run_id)
    try:
        async with controller.lock:
            run = await sup.registry.get(sup._session_id, run_id)
            if run.status is not RunStatus.INTERRUPTED:
                raise ConflictError(
                    sup._session_id, run_id, "run is not interrupted", actual=run.revision
                )
            definition = sup.catalog.resolve(run.definition_name, run.definition_version)
            # The one full check of this resume, and the segment it admits, in one span
            # (what the check opened may serve the segment).
            async with definition.resuming(run.graph_run_id):
                try:
                    token = await prepare_resume(definition, run, payload)
                except Exception as exc:
                    if not definite(exc):
                        raise
                    # Its checkpoint cannot be read: that fails the run, as a resume would.
                    await checkpoint_read_error(sup, definition, run, "resume", exc)
                    return await sup.registry.get(sup._session_id, run.id)
                return await resume_locked(sup, controller, definition, run, token)
    except NotFoundError:
        forget_if_idle(sup, run_id)
        raise


async def resume_locked(
    sup: Supervisor,
    controller: Controller,
    definition: Definition,
    run: Run,
    token: Any | None,
    *,
    on_running: Callable[[], Awaitable[None]] | None = None,
) -> Run | None:
    """Mark the run running, call ``on_running`` (what must follow that record durably,
    such as deleting the timer entry of the pause it left), then run the segment."""
    sup._boundary.refuse_new_work()  # before the run is marked running: it stays paused
    try:
        running = await transition(
            sup, run, RunStatus.RUNNING, RESUMING_SUMMARY, run.checkpoint_revision
        )
    except OwnershipLost:
        return None
    if on_running is not None:
        await on_running()
    live = LiveActivities(lambda current: reconcile_activities(sup, definition, current), running)
    with segment_span("resume", running, definition) as outcome:
        try:
            try:
                result = await execute(
                    sup,
                    controller,
                    definition.resume(
                        run.graph_run_id,
                        token,
                        hooks=[live.hook, sup._boundary.hook, sup._vertex_guard],
                    ),
                )
            finally:
                running = await live.finish()
        except Exception as exc:
            if sup._ownership_lost():
                return None
            if definite(exc):
                await checkpoint_read_error(sup, definition, running, "resume", exc)
                return outcome(await sup.registry.get(sup._session_id, run.id))
            raise AdoptionError(run.id, "resume", exc) from exc
        if result is None:
            return outcome(await sup.registry.get(sup._session_id, run.id))
        return outcome(await apply_result(sup, definition, running, result))
