"""The durable cancellation intent: which caller asked first.

A run record's ``cancel_requested`` flips from false to true once, by compare-and-swap,
and every owner honours it. So of any number of concurrent cancels - front doors in
other processes, tool calls in the owner's own process - exactly one flips it, and that
one is the cancel that is not idempotent (``workflow_run_cancel`` says
``"idempotent": false`` to it and ``true`` to every other). `record_cancel_intent` is
that flip. The change is exactly what an owner tolerates from a front door mid-segment
(status, cursors and artifacts unchanged), so it needs no ownership.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from datetime import datetime
from typing import Final

from ..errors import ConflictError
from .registry import RunRegistry
from .run import Run

__all__ = ["CANCEL_INTENT_ATTEMPTS", "CANCEL_INTENT_SUMMARY", "record_cancel_intent"]

CANCEL_INTENT_ATTEMPTS: Final = 16
CANCEL_INTENT_SUMMARY: Final = "workflow cancellation requested"


async def record_cancel_intent(
    registry: RunRegistry, session_id: str, run_id: str, *, now: Callable[[], datetime]
) -> tuple[Run, bool]:
    """Set the run's cancellation intent unless it is set or the run is terminal; return
    the record and whether this call set it. ``now`` is the session's clock (the record's
    ``updated_at``, never earlier than it was). `NotFoundError` for an unknown run;
    `ConflictError` if the record kept changing under every attempt."""
    run = await registry.get(session_id, run_id)
    for _ in range(CANCEL_INTENT_ATTEMPTS):
        if run.cancel_requested or run.status.terminal:
            return run, False
        intent = replace(
            run,
            cancel_requested=True,
            status_summary=CANCEL_INTENT_SUMMARY,
            updated_at=max(now(), run.updated_at),
        )
        try:
            return await registry.compare_and_swap(run.revision, intent), True
        except ConflictError:
            run = await registry.get(session_id, run_id)  # the owner wrote: look again
    raise ConflictError(session_id, run_id, "the run record kept changing")
