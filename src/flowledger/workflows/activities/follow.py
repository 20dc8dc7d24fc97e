"""`JournalFollower`: one run's activities as any process publishes them.

A live `ActivitySubscription` only hears what is published through the same journal
object, that is, by runs this process executes. A front door (``--no-execute``) or a
read-only server executes nothing: a worker elsewhere publishes the activities. The
follower reads them from the run's durable journal instead, every ``interval`` seconds,
starting where the journal stood when `start` returned (or at its beginning).

It iterates like a subscription: ``async for record in follower``, in journal order,
each record once. `close` makes the iteration end after one last read, so whatever was
durable when `close` was called is still delivered. A read that fails ends the
iteration quietly (following is best effort; the run is not affected).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import deque
from typing import Final

from ...storage import MAX_READ_LIMIT
from .activity import ActivityRecord
from .journal import ActivityJournal

__all__ = ["DEFAULT_INTERVAL", "JournalFollower"]

log = logging.getLogger(__name__)

DEFAULT_INTERVAL: Final = 0.1  # seconds between reads while following


class JournalFollower:
    def __init__(
        self,
        journal: ActivityJournal,
        session_id: str,
        run_id: str,
        *,
        interval: float = DEFAULT_INTERVAL,
    ) -> None:
        if not 0 < interval <= 60:
            raise ValueError(f"interval must be in (0, 60] seconds, not {interval}")
        self.session_id = session_id
        self.run_id = run_id
        self._journal = journal
        self._interval = interval
        self._position = 0
        self._ready: deque[ActivityRecord] = deque()
        self._closed = asyncio.Event()
        self._done = False

    async def start(self) -> JournalFollower:
        """Follow from the journal's current end (without it: from its beginning)."""
        self._position = await self._journal.position(self.session_id, self.run_id)
        return self

    def close(self) -> None:
        self._closed.set()

    def __aiter__(self) -> JournalFollower:
        return self

    async def __anext__(self) -> ActivityRecord:
        while not self._ready:
            if self._done:
                raise StopAsyncIteration
            last = self._closed.is_set()
            await self._read()
            if last:
                self._done = True
            elif not self._ready:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._closed.wait(), self._interval)
        return self._ready.popleft()

    async def _read(self) -> None:
        """Everything stored after the position (page by page)."""
        while True:
            try:
                items = await self._journal.read_after(
                    self.session_id, self.run_id, self._position, limit=MAX_READ_LIMIT
                )
            except Exception as exc:
                log.debug("following run %s stopped: %s", self.run_id, exc)
                self._done = True
                return
            self._position += len(items)
            self._ready.extend(item.activity for item in items)
            if len(items) < MAX_READ_LIMIT:
                return
