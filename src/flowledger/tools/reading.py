"""`ReadingControl`: the supervisor's reading half, for hosts that do not own a session.

The tool bundle needs a supervisor port; a process that only reads (a CLI reading
command, a read-only dashboard) gives it this instead. `history` is `Supervisor.history`
without the session lease: the run must belong to the session (`NotFoundError`
otherwise), then a page is read from the durable journal. Everything that would change a
run raises the host's own refusal, made by ``refuse``.
"""

from __future__ import annotations

from collections.abc import Callable

from flowledger.workflows.activities.history import HistoryPage
from flowledger.workflows.runtime.session import WorkflowSession

from .bundle import StartTicketPort

__all__ = ["ReadingControl"]


class ReadingControl:
    def __init__(self, session: WorkflowSession, refuse: Callable[[], Exception]) -> None:
        self._session = session
        self._refuse = refuse

    @property
    def session_id(self) -> str:
        return self._session.session_id

    async def history(
        self,
        run_id: str,
        *,
        after_revision: int = 0,
        after_event_id: str | None = None,
        limit: int = 0,
    ) -> HistoryPage:
        run = await self._session.registry.get(self._session.session_id, run_id)
        return await self._session.journal.page(
            self._session.session_id,
            run_id,
            after_revision=after_revision,
            after_event_id=after_event_id,
            limit=limit,
            activity_cursor=run.activity_cursor,
        )

    async def start(self, run_id: str) -> StartTicketPort:
        raise self._refuse()

    async def resume(self, run_id: str, payload: bytes | None) -> object:
        raise self._refuse()

    async def cancel(self, run_id: str, reason: str) -> object:
        raise self._refuse()
