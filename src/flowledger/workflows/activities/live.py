"""Live activity publication: a running segment's activities, published while it runs.

The supervisor publishes a segment's activities when the segment ends; `LiveActivities`
also publishes them while it runs, as its checkpoints become durable (at most every
`LIVE_INTERVAL` seconds), so progress is visible during a long segment.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from typing import Final

from ... import flow
from ..records.run import Run

__all__ = ["LIVE_INTERVAL", "LiveActivities"]

log = logging.getLogger(__name__)

LIVE_INTERVAL: Final = 0.1  # seconds between live publications of a running segment


class LiveActivities:
    """Publishes a running segment's activities and keeps the run record current.

    ``reconcile(run)`` publishes what is durable past the run's cursor and returns the
    updated record. Pass `hook` to the segment; call `finish` when it returns. It only
    runs between the segment's start and `finish`, under the run's lock; `finish` lets a
    publication in progress complete, so the record it returns is the latest. A failed
    live publication is only logged: the segment's end publishes again.
    """

    def __init__(self, reconcile: Callable[[Run], Awaitable[Run]], run: Run) -> None:
        self.run = run
        self._reconcile = reconcile
        self._due = asyncio.Event()
        self._busy = asyncio.Lock()
        self._task: asyncio.Task[None] | None = None
        self.hook = flow.Hooks(on_checkpoint=self._on_checkpoint)

    def _on_checkpoint(self, _run_id: str, _revision: int, _step: int) -> None:
        self._due.set()
        if self._task is None:
            self._task = asyncio.ensure_future(self._publish_while_running())

    async def _publish_while_running(self) -> None:
        while True:
            await self._due.wait()
            self._due.clear()
            if not await self._publish():
                return
            await asyncio.sleep(LIVE_INTERVAL)

    async def publish_now(self) -> None:
        """Publish what is durable now, before returning (a failure is only logged, as
        for a live publication: the segment's end publishes again)."""
        await self._publish()

    async def _publish(self) -> bool:
        """One publication; False (and logged) if it failed."""
        async with self._busy:
            try:
                self.run = await self._reconcile(self.run)
            except Exception as exc:
                log.debug("live activity publication failed: %s", exc)
                return False
        return True

    async def finish(self) -> Run:
        task, self._task = self._task, None
        if task is not None:
            async with self._busy:
                task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        return self.run
