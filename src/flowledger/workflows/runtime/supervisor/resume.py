"""Resuming an interrupted run.

Every resume - `Supervisor.resume`, or a front door's request carried out by `poll` - is
checked by `resumption.prepare_resume` first, once in full, under the run's lock and inside
`Definition.resuming`: a blocked run, a request pause without a
valid payload, or an errored pause sent a payload is refused before anything is written.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ....storage import FencedWriteError
from ...activities.activity import RESUMING_SUMMARY
from ...activities.live import LiveActivities
from ...authoring.definition import Definition
from ...errors import AdoptionError, ConflictError, NotFoundError
from ...records.answers import Answer, AnswerKind, current_transport
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

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Answered:
    """Who or what answers the pause a resume continues (`records.answers`): recorded
    by `resume_locked` once the resume takes effect."""

    kind: AnswerKind
    transport: str
    payload: bytes | str | None = None  # the JSON text resumed with


async def _record_answer(sup: Supervisor, run: Run, answered: Answered) -> None:
    """Record the answer to ``run``'s pause. It is a record of what happened, so a
    storage error is logged rather than failing the resume that already took effect; a
    fenced write means ownership is lost, which the segment finds out for itself."""
    if sup.answers is None:
        return
    answer = Answer.of(
        run.checkpoint_revision,
        answered.kind,
        answered.transport,
        sup.session_id,
        sup._now(),
        answered.payload,
    )
    try:
        await sup.answers.add(sup.session_id, run.id, answer)
    except FencedWriteError:
        pass
    except Exception as exc:
        log.warning(
            "session %s: the answer to run %s was not recorded: %s", sup.session_id, run.id, exc
        )


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
                answered = Answered(
                    "retry" if payload is None else "request", current_transport(), payload
                )
                return await resume_locked(sup, controller, definition, run, token, answered)
    except NotFoundError:
        forget_if_idle(sup, run_id)
        raise


async def resume_locked(
    sup: Supervisor,
    controller: Controller,
    definition: Definition,
    run: Run,
    token: Any | None,
    answered: Answered,
    *,
    on_running: Callable[[], Awaitable[None]] | None = None,
) -> Run | None:
    """Mark the run running, record who ``answered`` its pause, call ``on_running``
    (what must follow that record durably, such as deleting the timer entry of the pause
    it left), then run the segment."""
    sup._boundary.refuse_new_work()  # before the run is marked running: it stays paused
    try:
        running = await transition(
            sup, run, RunStatus.RUNNING, RESUMING_SUMMARY, run.checkpoint_revision
        )
    except OwnershipLost:
        return None
    await _record_answer(sup, run, answered)
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
