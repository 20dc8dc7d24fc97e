"""Starting a run from its input: the seed (revision 0) and the first segment.

A start validates the run's input, records the run as running (summary
`START_SUMMARY`) and executes the first segment; whoever waits for the seed is told once
the seed's activities are published (`seeded`). An owner that dies in between leaves a
record `start_cut_short` recognises: it is started again, never failed.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Final

from .... import flow
from ...activities.live import LiveActivities
from ...authoring.definition import Definition
from ...errors import (
    AdoptionError,
    CorruptRecordError,
    DefinitionError,
    InvalidInputError,
    NotFoundError,
)
from ...records.run import Run, RunStatus
from .admitting import admitted
from .misses import confirm_input_missing
from .outcomes import apply_result, fail_definite
from .publication import reconcile_activities
from .replying import reply_to_front_doors
from .traces import segment_span
from .workers import Controller, execute
from .writes import OwnershipLost, transition

if TYPE_CHECKING:
    from .owner import Supervisor

log = logging.getLogger(__name__)

START_SUMMARY: Final = "workflow running"


def start_cut_short(run: Run) -> bool:
    """The run was moved to running by a start (`_start_with_seed`) whose owner died before
    the seed became durable: nothing ran yet, so it is started again rather than failed as
    "checkpoint missing" (the start's record is running, summary ``workflow running``,
    checkpoint revision and activity cursor 0)."""
    return (
        run.status is RunStatus.RUNNING
        and run.status_summary == START_SUMMARY
        and run.checkpoint_revision == 0
        and run.activity_cursor == 0
    )


def seeded(live: LiveActivities, ack: Callable[[], None]) -> Callable[[Any], Awaitable[None]]:
    """The ``on_run_start`` hook of a start: publish the seed's activities (``run_started``),
    then acknowledge the seed. So whoever waits for the acknowledgement (a start call, the
    MCP server forwarding its activities) finds ``run_started`` already published; that
    used to hold only when the journal's write happened to be faster than the answer."""

    async def hook(_record: Any) -> None:
        try:
            await live.publish_now()
        finally:
            ack()

    return hook


async def start_with_seed(
    sup: Supervisor,
    controller: Controller,
    definition: Definition,
    run: Run,
    ack: Callable[[], None] | None,
) -> Run | None:
    try:
        raw = await sup.inputs.get_for_start(
            sup._session_id, run.input, created_at=run.created_at, now=sup.clock.now()
        )
    except NotFoundError:
        await confirm_input_missing(sup, run)
        return await fail_definite(sup, definition, run, "workflow input unavailable")
    except CorruptRecordError:
        return await fail_definite(sup, definition, run, "workflow input unavailable")
    except Exception as exc:
        # Possibly transient (DESIGN §11.4): leave the run pending for a later attempt.
        raise AdoptionError(run.id, "load input", exc) from exc
    try:
        token = definition.validate_input(raw)
    except (InvalidInputError, DefinitionError):  # a definition changed since the start
        return await fail_definite(sup, definition, run, "workflow input invalid")
    if controller.cancels or sup._boundary.requested:
        return None  # a cancellation waits for the lock: it cancels the run unstarted
    if run.status is RunStatus.PENDING and not await admitted(sup, run):
        if ack is not None:
            ack()  # the start is answered: the run is durably queued (pending)
        return None
    try:
        running = await transition(
            sup, run, RunStatus.RUNNING, START_SUMMARY, run.checkpoint_revision
        )
    except OwnershipLost:
        return None
    live = LiveActivities(lambda current: reconcile_activities(sup, definition, current), running)
    hooks = segment_hooks(sup, live)
    if ack is not None:
        hooks.append(flow.Hooks(on_run_start=seeded(live, ack)))
    if sup.wakeups is not None:
        hooks.append(flow.Hooks(on_run_start=announce_seed(sup)))
    with segment_span("start", running, definition) as outcome:
        try:
            try:
                result = await execute(
                    sup,
                    controller,
                    definition.start(token, graph_run_id=run.graph_run_id, hooks=hooks),
                )
            finally:
                running = await live.finish()
        except Exception as exc:
            if sup._ownership_lost():
                return None
            raise AdoptionError(run.id, "start", exc) from exc
        if result is None:
            return None
        return outcome(await apply_result(sup, definition, running, result))


def announce_seed(sup: Supervisor) -> Callable[[Any], Awaitable[None]]:
    """The ``on_run_start`` hook that wakes front doors waiting for a seed of the session."""

    async def hook(_record: Any) -> None:
        await reply_to_front_doors(sup)

    return hook


def segment_hooks(sup: Supervisor, live: LiveActivities) -> list[flow.Hooks]:
    """What watches every segment this owner executes: live activities, the stop at
    the next step boundary, and the lease check before each vertex."""
    return [live.hook, sup._boundary.hook, sup._vertex_guard]
