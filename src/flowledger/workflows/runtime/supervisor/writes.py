"""The supervisor's writes to a run record: status transitions and compare-and-swap.

A swap that finds the record moved on only because a front door recorded a cancellation
intent meanwhile applies its change to that record instead (the intent is kept; the
cancel request is handled next). A change that leaves the record as it is writes nothing
(activating a session over paused runs must not touch them). Once ownership is lost a
transition raises `OwnershipLost`, which callers turn into silence.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from ....observability import metrics
from ...authoring.metadata import bound_summary
from ...errors import ConflictError
from ...records.run import Run, RunStatus
from .queue_wake import wake_next_in_line

if TYPE_CHECKING:
    from .owner import Supervisor


def only_intent_added(before: Run, after: Run) -> bool:
    """``after`` differs from ``before`` only by a (front door's) cancellation intent."""
    return (
        after.cancel_requested
        and not before.cancel_requested
        and after.status is before.status
        and after.checkpoint_revision == before.checkpoint_revision
        and after.activity_cursor == before.activity_cursor
        and after.artifacts == before.artifacts
    )


class OwnershipLost(Exception):
    """Raised at a write boundary once the lease is gone; callers turn it into silence."""


def stamp(sup: Supervisor, run: Run) -> datetime:
    moment = sup._now().astimezone(UTC)
    return max(moment, run.updated_at)


async def transition(
    sup: Supervisor, run: Run, status: RunStatus, summary: str, checkpoint: int
) -> Run:
    if sup._ownership_lost():
        raise OwnershipLost()
    if status is not RunStatus.RUNNING:  # no live publication until it runs again
        sup._projections.forget(run.id)

    def change(current: Run) -> Run:
        changed = replace(
            current,
            status=status,
            status_summary=bound_summary(summary),
            checkpoint_revision=max(checkpoint, current.checkpoint_revision),
        )
        if changed == current:  # e.g. a paused run adopted again: it stays as it was
            return current
        return replace(changed, updated_at=stamp(sup, current))

    try:
        changed = await swap(sup, run, change)
    except Exception as exc:
        raise RuntimeError(f"persist run transition: {exc}") from exc
    _count(run.status, changed)
    return changed


def _count(before: RunStatus, run: Run) -> None:
    """Metrics of a recorded transition: a start (pending to running) or a finish."""
    if before is run.status:
        return
    if before is RunStatus.PENDING and run.status is RunStatus.RUNNING:
        metrics.run_started(run.definition_name)
    elif run.status.terminal:
        metrics.run_finished(run.definition_name, str(run.status))


async def swap(sup: Supervisor, run: Run, change: Callable[[Run], Run]) -> Run:
    """Compare-and-swap ``change(run)``. If the record moved on only because a front
    door recorded a cancellation intent meanwhile, apply the change to that record
    instead (the intent is kept; the cancel request is handled next)."""
    changed = change(run)
    if changed == run:  # nothing to record: a write would only move revision and time
        return run
    try:
        recorded = await sup.registry.compare_and_swap(run.revision, changed)
    except ConflictError:
        fresh = await sup.registry.get(sup._session_id, run.id)
        if not only_intent_added(run, fresh) or sup._ownership_lost():
            raise
        changed = change(fresh)
        if changed == fresh:
            return fresh
        recorded = await sup.registry.compare_and_swap(fresh.revision, changed)
    await wake_next_in_line(sup, run, recorded)
    return recorded
