"""`WorkWaiter`: wait until a wake-up says there is work, or the fallback poll is due.

Workers and standalone owners look for work (pending runs, resume and cancel requests,
work due by time) when they are woken (`storage.wakeups`; channels in
`records.wakeups`) and otherwise every ``fallback`` seconds, a slow poll that finds what
no wake-up announced: work written by a process that cannot wake this one (another
process on the same SQLite file), or a wake-up lost with a connection. While wake-ups
are not delivered at all (the PostgreSQL listener is reconnecting, or there is none
behind a transaction pooler) the waiter polls every ``FAST_POLL`` seconds instead (or
``fallback``, if that is shorter), as everything did before wake-ups.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Iterable
from typing import Final

from ...storage.wakeups import Listener, Wakeups

__all__ = ["FAST_POLL", "WorkWaiter"]

log = logging.getLogger(__name__)

FAST_POLL: Final = 0.5  # seconds between looks for work while wake-ups are not delivered


class WorkWaiter:
    """Waits on ``channels`` of ``wakeups`` (None: no wake-ups, always poll) with a
    ``fallback`` poll; `open` before the first look for work, `close` after the last."""

    def __init__(self, wakeups: Wakeups | None, channels: Iterable[str], fallback: float) -> None:
        self._wakeups = wakeups
        self._channels = tuple(channels)
        self.fallback = fallback
        self.listener: Listener | None = None

    async def open(self) -> None:
        if self._wakeups is None:
            return
        try:
            self.listener = await self._wakeups.listen(self._channels)
        except Exception as exc:  # the store may be away for a moment: poll instead
            log.warning("no wake-ups, polling every %gs: %s", self.interval, exc)
            return
        # A wake-up from before the caller's first look (the listener going live) is
        # answered by that look.
        await self.listener.wait(0)

    @property
    def live(self) -> bool:
        """Whether wake-ups are delivered now."""
        return self.listener is not None and self.listener.live

    @property
    def interval(self) -> float:
        """Seconds until the next look for work unless woken: the fallback poll, or the
        fast one while wake-ups are not delivered."""
        return self.fallback if self.live else min(self.fallback, FAST_POLL)

    async def wait(self, seconds: float, stop: asyncio.Event | None = None) -> bool:
        """Return True when woken (since the previous `wait` returned), False after
        ``seconds`` or once ``stop`` is set."""
        listener = self.listener
        if listener is None:
            if stop is None:
                await asyncio.sleep(seconds)
            else:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), seconds)
            return False
        if stop is None:
            return await listener.wait(seconds)
        woken = asyncio.ensure_future(listener.wait(seconds))
        stopped = asyncio.ensure_future(stop.wait())
        try:
            await asyncio.wait((woken, stopped), return_when=asyncio.FIRST_COMPLETED)
        finally:
            stopped.cancel()
            if not woken.done():
                woken.cancel()
        return woken.done() and not woken.cancelled() and woken.result()

    async def close(self) -> None:
        listener, self.listener = self.listener, None
        if listener is not None:
            with contextlib.suppress(Exception):
                await listener.close()
