"""Deciding whether, and how, an interrupted run may be resumed.

Every resume path (the supervisor's own `resume`, a front door's request, a request a
worker carries out) goes through `prepare_resume` before anything is written, so the
rules hold everywhere:

1. readiness first: a blocked run (its checkpoint was written by another graph, or a
   layer above says so) is refused with `ResumeBlockedError` - the run stays
   interrupted at the same checkpoint, the payload is not consumed;
   A caller that hands the resume on to the owner (``precheck=True``: the tool, a
   front door) checks without the environment (`environment_deferred`); the owner
   checks everything under the run's lock, inside `Definition.resuming`;
2. then the pause kind decides what the payload is: a *request* pause needs a payload
   its definition's resume schema accepts (`InvalidInputError` otherwise, field
   ``resume``); an *error* pause takes none (resuming retries the failed step), and a
   payload sent to one is refused rather than silently dropped; a *timer* pause is
   resumed by its owner alone once it is due (`prepare_wake`), so a resume sent to one
   is refused (`InvalidInputError`, field ``resume``, naming the wake time).

`prepare_wake` is the owner's own resume of a due timer or an expired deadline: the same
readiness check, then no payload for a timer, or the interrupt's ``on_timeout`` payload,
validated by the resume schema like any resume, for a deadline.

`assess` computes a run's readiness; `assess_stored` is what readers (`workflow_run_get`,
`runs show`) use: for them an interrupted run whose checkpoints are not found is a
damaged store (`CorruptRecordError`), never a readiness - the run record says where it
paused.
"""

from __future__ import annotations

import json
from datetime import datetime

from ... import flow
from ..authoring.definition import Definition, ValidatedResume
from ..authoring.readiness import (
    DEFINITION_MISSING,
    Diagnostic,
    ResumeReadiness,
    environment_deferred,
)
from ..errors import CorruptRecordError, InvalidInputError, ResumeBlockedError
from ..records.pending import PauseKind, pause_kind, requests
from ..records.run import Run, RunStatus, format_time

__all__ = [
    "NO_PAYLOAD_FOR_ERROR",
    "PARKED_ON_TIMER",
    "PAYLOAD_REQUIRED",
    "NotDue",
    "assess",
    "assess_stored",
    "prepare_resume",
    "prepare_wake",
]

PAYLOAD_REQUIRED = (
    "this run waits for a payload: send one that matches its definition's resume schema"
)
PARKED_ON_TIMER = "this run is parked on a timer until"
"""How a refused resume of a timer pause begins (the wake time and what to do follow)."""
NO_PAYLOAD_FOR_ERROR = (
    "this run paused because a task raised; resuming retries it and takes no payload"
)


async def assess(definition: Definition | None, run: Run) -> ResumeReadiness:
    """The run's readiness as of now; ``definition`` is the catalog's definition of the
    run's name and version (``None`` when none is registered)."""
    if run.status is not RunStatus.INTERRUPTED:
        return ResumeReadiness.not_applicable()
    if definition is None:
        found: tuple[Diagnostic, ...] = (_missing(run),)
    else:
        found = tuple(await definition.check_resume(run.graph_run_id))
    # The run is known here, not where each diagnostic was made: its next actions name it.
    return ResumeReadiness.of([item.with_context(run_id=str(run.id)) for item in found])


async def assess_stored(definition: Definition | None, run: Run) -> ResumeReadiness:
    """`assess` for a reader: an interrupted run whose checkpoints are not found
    contradicts its own record (a lost log, or a damaged index that misses it), so it is
    `CorruptRecordError`. A resume still sees the miss itself (`assess`): the supervisor
    confirms it with the store before it fails the run on the strength of it."""
    try:
        return await assess(definition, run)
    except flow.CheckpointNotFoundError as exc:
        raise CorruptRecordError(
            run.ledger_locator, "the run is interrupted, but its checkpoints were not found"
        ) from exc


def _missing(run: Run) -> Diagnostic:
    return Diagnostic(
        DEFINITION_MISSING,
        f"no definition {run.definition_name} version {run.definition_version} is registered",
        "load the application that registers it (for the CLI: --app module:catalog)",
    )


async def prepare_resume(
    definition: Definition, run: Run, payload: bytes | str | None, *, precheck: bool = False
) -> ValidatedResume | None:
    """Check that ``run`` (interrupted) may be resumed with ``payload`` and return the
    token to resume it with (``None``: retry an errored pause). Reads only. With
    ``precheck``, the environment is left to the owner's check (see the module)."""
    if precheck:
        with environment_deferred():
            readiness = await assess(definition, run)
    else:
        readiness = await assess(definition, run)
    if readiness.blocked:
        raise ResumeBlockedError(run.id, readiness, readiness.explain())
    current = await definition.get(run.graph_run_id)
    kind = pause_kind(current.interrupts, current.halt)
    if kind is PauseKind.TIMER:
        wake_at = max(i.wake_at for i in current.interrupts or () if i.wake_at is not None)
        raise InvalidInputError(
            "resume",
            f"{PARKED_ON_TIMER} {format_time(wake_at)}; its owner resumes it then "
            "(cancel it to stop it)",
        )
    if kind is PauseKind.REQUEST:
        if payload is None:
            raise InvalidInputError("resume", PAYLOAD_REQUIRED)
        return definition.validate_resume(payload, vertices=requests(current.interrupts))
    if payload is not None:
        raise InvalidInputError("resume", NO_PAYLOAD_FOR_ERROR)
    return None


class NotDue(Exception):
    """`prepare_wake`: the run's pause has no timer or deadline that is due at ``now``."""


async def prepare_wake(definition: Definition, run: Run, now: datetime) -> ValidatedResume | None:
    """The token to resume ``run`` (interrupted) with because a timer or a deadline of
    its pause is due at ``now``: None for a timer pause (every timer of the step due),
    the validated ``on_timeout`` payload of the first expired deadline for a request
    pause (marked as the deadline's: the vertex sees `flow.timed_out`). `NotDue` when
    nothing is due (or the pause has no times), `ResumeBlockedError` when the run cannot
    be continued now, `InvalidInputError` (field ``resume``) when the declared payload
    does not match the resume schema. Reads only."""
    readiness = await assess(definition, run)
    if readiness.blocked:
        raise ResumeBlockedError(run.id, readiness, readiness.explain())
    current = await definition.get(run.graph_run_id)
    interrupts = current.interrupts or []
    kind = pause_kind(interrupts, current.halt)
    if kind is PauseKind.TIMER:
        if all(i.wake_at is not None and i.wake_at <= now for i in interrupts):
            return None
        raise NotDue()
    if kind is PauseKind.REQUEST:
        expired = [
            i
            for i in interrupts
            if i.kind is flow.InterruptKind.AWAITING
            and i.wake_at is not None
            and i.wake_at <= now
            and i.on_timeout is not None
        ]
        if expired:
            first = min(expired, key=lambda i: (i.wake_at, i.vertex))
            payload = json.dumps(first.on_timeout, ensure_ascii=False, allow_nan=False)
            return definition.validate_resume(payload, vertices=requests(interrupts), deadline=True)
    raise NotDue()
