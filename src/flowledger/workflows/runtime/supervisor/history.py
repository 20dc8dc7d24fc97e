"""Reading a run's published activity history, and repairing a damaged journal on the way."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ...activities.history import HistoryPage
from ...activities.journal import ActivityJournal
from ...errors import CorruptRecordError, SupervisorClosedError
from .publication import rebuild_journal
from .workers import busy, controller_for, forget_if_idle

if TYPE_CHECKING:
    from .owner import Supervisor


async def read_history(
    sup: Supervisor,
    run_id: str,
    *,
    after_revision: int = 0,
    after_event_id: str | None = None,
    limit: int = 0,
) -> HistoryPage:
    """A page of the run's published activity history (see `ActivityJournal.page`).

    Only reads: it needs no lock and no ownership (the journal's appends are atomic,
    so a page never shows half a publication), and works before `activate`. One
    exception: when the journal is damaged (`CorruptRecordError`) and this supervisor
    owns the session and nothing is executing the run, the journal is rebuilt from
    the run's checkpoints (reported in the log) and the page read from the rebuilt
    one; otherwise the error is raised (an owner rebuilds the journal when its
    publication finds it damaged)."""
    if sup._state == "closed":
        raise SupervisorClosedError()
    run = await sup.registry.get(sup._session_id, run_id)  # NotFoundError if foreign
    if not isinstance(sup.publisher, ActivityJournal):
        raise RuntimeError("history needs the activity journal as publisher")
    options: dict[str, Any] = {
        "after_revision": after_revision,
        "after_event_id": after_event_id,
        "limit": limit,
        "activity_cursor": run.activity_cursor,
    }
    try:
        return await sup.publisher.page(sup._session_id, run_id, **options)
    except CorruptRecordError:
        if not sup.active or busy(sup, run_id):
            raise
        await history_repaired(sup, run_id)
    return await sup.publisher.page(sup._session_id, run_id, **options)


async def history_repaired(sup: Supervisor, run_id: str) -> None:
    """`history` found the run's journal damaged: as the owner, rebuild it."""
    controller = controller_for(sup, run_id)
    try:
        async with controller.lock:
            run = await sup.registry.get(sup._session_id, run_id)
            definition = sup.catalog.resolve(run.definition_name, run.definition_version)
            await rebuild_journal(sup, definition, run)
    finally:
        if not busy(sup, run_id):
            forget_if_idle(sup, run_id)
