"""Publication of a run's activities from its durable checkpoints.

* A run's activities are published (durably, idempotently by event id) *before* the
  registry records the status they lead to; the activity cursor then advances. A crash in
  between republishes the same event ids, which the journal treats as duplicates.
* Publication is incremental (`activities.projection`): only the checkpoints after the
  cursor are read, in pages, by a per-run projector kept between publications and rebuilt
  from revision 0 when missing. A journal found damaged is rebuilt from the checkpoints
  (`ActivityJournal.rebuild`, reported in the log) and the publication carries on, so the
  run's status follows its checkpoints.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Protocol

from ...activities.activity import ActivityKind, ProjectedActivity, Projector
from ...activities.journal import ActivityJournal
from ...activities.projection import PROJECTION_PAGE, HistoryReadError, checkpoint_pages
from ...authoring.definition import Definition
from ...errors import CorruptRecordError, ReconciliationError
from ...records.run import Run, RunStatus
from .failures import definite
from .writes import stamp, swap

if TYPE_CHECKING:
    from .owner import Supervisor

log = logging.getLogger(__name__)


class ActivityPublisher(Protocol):
    """Durable, idempotent by event id: a duplicate is success and is not delivered twice."""

    async def publish(self, items: Sequence[ProjectedActivity]) -> int: ...


async def rebuild_journal(sup: Supervisor, definition: Definition, run: Run) -> None:
    """Replace the run's damaged activity journal with one projected anew from its
    checkpoints, up to its activity cursor (what had been published), and report it.
    Event IDs are deterministic, so the rebuilt records are the published ones (see
    `Projector` ``replay`` for the one activity that is re-derived)."""
    journal = sup.publisher
    if not isinstance(journal, ActivityJournal) or sup._ownership_lost():
        raise CorruptRecordError(run.id, "activity journal damaged")
    cursor = run.activity_cursor

    async def pages() -> AsyncIterator[list[ProjectedActivity]]:
        projector = Projector(
            run,
            definition.metadata(),
            fail_on_error=definition.on_error == "fail",
            replay=True,
        )
        async for chunk in checkpoint_pages(definition, run.graph_run_id, 0, upto=cursor):
            yield [item for item in projector.advance(run, chunk) if item.revision < cursor]
        yield [item for item in projector.finish(run) if item.revision < cursor]

    generation = await journal.rebuild(sup._session_id, run.id, pages())
    log.warning(
        "session %s: activity journal of run %s was damaged; rebuilt from its "
        "checkpoints (generation %d)",
        sup._session_id,
        run.id,
        generation,
    )


async def reconcile_activities(sup: Supervisor, definition: Definition, run: Run) -> Run:
    """Publish the activities of every durable checkpoint past the cursor, then advance
    the cursor. Only the checkpoints after the cursor are read, in pages (see
    `projection`); each full page is published and the cursor advanced before the
    next is read, so memory stays bounded by a page however long the backlog."""
    try:
        return await reconcile_pages(sup, definition, run)
    except BaseException:
        sup._projections.forget(run.id)  # rebuilt from the checkpoints next time
        raise


def projection_error(run: Run, exc: Exception) -> ReconciliationError:
    if isinstance(exc, HistoryReadError):
        return ReconciliationError(run.id, "read checkpoint history", exc.cause)
    return ReconciliationError(run.id, "project durable history", exc)


async def reconcile_pages(sup: Supervisor, definition: Definition, run: Run) -> Run:
    failure_revision = None
    projector = sup._projections.take(definition, run)
    pending: list[ProjectedActivity] = []
    try:
        if projector is None:
            projector = await sup._projections.rebuild(definition, run)
        async for page in checkpoint_pages(definition, run.graph_run_id, projector.revision):
            pending.extend(projector.advance(run, page))
            if len(page) == PROJECTION_PAGE and pending:
                run = await publish(
                    sup, definition, run, pending, projector.revision, projector.revision
                )
                pending = []
    except ReconciliationError:
        raise
    except HistoryReadError as exc:
        # A failed run whose checkpoints are missing or corrupt (that is why it failed)
        # still records its failure, at the first revision not yet published.
        if run.status is not RunStatus.FAILED or not definite(exc.cause):
            raise projection_error(run, exc) from exc.cause
        if await failure_published(sup, run):
            return run  # its run_failed is the journal's last record: said once is enough
        failure_revision = run.activity_cursor
        try:
            projector = Projector(
                run,
                definition.metadata(),
                fail_on_error=definition.on_error == "fail",
                emit_from=run.activity_cursor,
            )
        except Exception as error:
            raise projection_error(run, error) from error
        pending = []
    except Exception as exc:
        raise projection_error(run, exc) from exc
    try:
        finished = projector.finish(run, failure_revision=failure_revision)
    except Exception as exc:
        raise projection_error(run, exc) from exc
    end = max([projector.revision, *(item.revision + 1 for item in finished)])
    if run.activity_cursor > end:
        raise ReconciliationError(run.id, "validate cursor", "cursor exceeds history")
    pending.extend(item for item in finished if item.revision >= run.activity_cursor)
    if run.activity_cursor < end:
        seen = 0 if failure_revision is not None else projector.revision
        run = await publish(sup, definition, run, pending, end, seen)
    if not finished and failure_revision is None and run.activity_cursor == projector.revision:
        sup._projections.keep(definition, run.id, projector)
    return run


async def failure_published(sup: Supervisor, run: Run) -> bool:
    """The journal already ends with the run's ``run_failed``. A failed run whose
    checkpoints cannot be read records its failure at the first revision not yet published,
    which moves the cursor on; without this, every later reconciliation of the run (the
    next poll, another owner) published one more ``run_failed`` one revision further."""
    journal = sup.publisher
    if not isinstance(journal, ActivityJournal):
        return False
    try:
        position = await journal.position(sup._session_id, run.id)
        if position == 0:
            return False
        last = await journal.read_after(sup._session_id, run.id, position - 1, limit=1)
    except Exception as exc:
        raise ReconciliationError(run.id, "read published activities", exc) from exc
    return bool(last) and last[-1].activity.kind == ActivityKind.RUN_FAILED


async def publish(
    sup: Supervisor,
    definition: Definition,
    run: Run,
    pending: Sequence[ProjectedActivity],
    end: int,
    seen: int,
) -> Run:
    """Publish ``pending`` durably, then move the run's activity cursor to ``end``, and
    its checkpoint revision to the last of the ``seen`` checkpoints read, with
    ``updated_at``: the same write, so a running run's record (the runs list, the run page)
    follows its progress at no extra cost. A journal found damaged is rebuilt from the
    checkpoints first (`_rebuild_journal`)."""
    if pending:
        try:
            try:
                await sup.publisher.publish(pending)
            except CorruptRecordError:
                await rebuild_journal(sup, definition, run)
                await sup.publisher.publish(pending)
        except Exception as exc:
            raise ReconciliationError(run.id, "publish durable activity", exc) from exc
    if sup._ownership_lost():
        return run
    try:
        return await swap(
            sup,
            run,
            lambda current: replace(
                current,
                activity_cursor=end,
                checkpoint_revision=max(current.checkpoint_revision, seen - 1),
                updated_at=stamp(sup, current),
            ),
        )
    except Exception as exc:
        raise ReconciliationError(run.id, "advance activity cursor", exc) from exc
