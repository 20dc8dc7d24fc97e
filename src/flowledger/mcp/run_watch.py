"""Watching a run's resources for subscriptions (``subscriptions/listen``,
`flowledger.mcp.listen`; ``resources/subscribe``, `flowledger.mcp.resource_subscribe`).

Limits per served session (documented in docs/mcp.md), beyond which a request is refused
with ``INVALID_REQUEST`` naming the limit: `MAX_STREAMS` open listen streams, `MAX_URIS`
URIs (and task IDs) in one listen request or subscribed by one handshake-era connection,
`MAX_WATCHED_RUNS` distinct runs watched at once.

Each watched run has one `RunWatch` (shared by every subscriber that lists it) that follows
what the server already hears of the run - its activities live when the server executes
the session's runs, otherwise its durable journal (`JournalFollower`, a read every
0.1 s) - and, after each activity, reads the run's registry record. Activities are
published *before* the registry records the status they lead to, so after a status
activity the record is read again at the follower's interval until it shows that status
(at most `SETTLE_READS` reads). Whenever the record's revision has changed since the
last notification, ``notifications/resources/updated`` is published for the run's three
URIs (a subscriber gets only the ones it listed), in order. A watch ends when the run is
finished (after notifying that) or when nobody lists it any more.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable
from typing import Any, Final, Protocol

from ..workflows.activities.activity import ActivityKind, ActivityRecord
from ..workflows.activities.follow import DEFAULT_INTERVAL, JournalFollower
from ..workflows.activities.journal import ActivityJournal
from ..workflows.records.run import Run
from .run_resources import run_uris

__all__ = [
    "MAX_STREAMS",
    "MAX_URIS",
    "MAX_WATCHED_RUNS",
    "SETTLE_READS",
    "RunReader",
    "RunWatch",
    "Source",
    "open_source",
]

log = logging.getLogger(__name__)

MAX_STREAMS: Final = 32
MAX_URIS: Final = 64
MAX_WATCHED_RUNS: Final = 256
SETTLE_READS: Final = 100


class RunReader(Protocol):
    """What a watch needs of the run registry."""

    async def get(self, session_id: str, run_id: str) -> Run: ...


class Source(Protocol):
    """What a watch hears a run from: a live subscription or a `JournalFollower`."""

    def close(self) -> None: ...

    def __aiter__(self) -> AsyncIterator[ActivityRecord]: ...


async def open_source(
    journal: ActivityJournal, session_id: str, run_id: str, *, executes: bool
) -> Source:
    """Start hearing ``run_id``'s activities from now on: live when this server executes
    the session's runs (every run of the session: filter by run), else from its journal."""
    if executes:
        return journal.subscribe(session_id)
    return await JournalFollower(journal, session_id, run_id).start()


class RunWatch:
    """Publishes ``ResourceUpdated`` for one run's URIs on each change of its record."""

    def __init__(
        self,
        registry: RunReader,
        journal: ActivityJournal,
        session_id: str,
        run_id: str,
        publish: Callable[[str], Any],
        *,
        executes: bool,
    ) -> None:
        self._registry = registry
        self._journal = journal
        self._session_id = session_id
        self.run_id = run_id
        self._publish = publish
        self._executes = executes
        self._source: Source | None = None
        self.users = 0
        self.task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        """Start hearing the run, read its record, then follow it in a task: a change
        after `start` returns is notified (a finished run is not followed)."""
        # Listen first, then read: a change between the two is heard, not lost.
        self._source = await open_source(
            self._journal, self._session_id, self.run_id, executes=self._executes
        )
        try:
            run = await self._registry.get(self._session_id, self.run_id)
        except BaseException:
            self._source.close()
            raise
        if run.status.terminal:
            self._source.close()
            return
        self.task = asyncio.get_running_loop().create_task(self._run(run.revision))

    def stop(self) -> None:
        if self._source is not None:
            self._source.close()
        if self.task is not None:
            self.task.cancel()

    async def _run(self, last: int) -> None:
        try:
            await self._follow(last)
        except asyncio.CancelledError:
            raise
        except Exception:  # the database went away: the stream stays, without updates
            log.warning("watching run %s stopped", self.run_id, exc_info=True)
        finally:
            if self._source is not None:
                self._source.close()

    async def _follow(self, last: int) -> None:
        assert self._source is not None
        async for record in self._source:
            if record.run_id != self.run_id:
                continue
            run = await self._settled(record)
            if run.revision != last:
                last = run.revision
                for uri in run_uris(self.run_id):
                    await self._publish(uri)
            if run.status.terminal:
                return

    async def _settled(self, record: ActivityRecord) -> Run:
        """The record once it shows the status ``record`` leads to (bounded)."""
        run = await self._registry.get(self._session_id, self.run_id)
        if record.kind == ActivityKind.VERTEX_COMPLETED:
            return run
        for _ in range(SETTLE_READS):
            if str(run.status) == record.status:
                break
            await asyncio.sleep(DEFAULT_INTERVAL)
            run = await self._registry.get(self._session_id, self.run_id)
        return run
