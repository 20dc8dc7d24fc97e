"""The one way time enters flowledger: an injectable clock.

Anything that *decides* by time (a timer's wake, a pause's deadline, a schedule's slot, a
rate limit's window) reads it from a :class:`Clock` rather than from :mod:`time` or
:mod:`datetime` directly, so a test can drive it with :class:`ManualClock` instead of
sleeping. Wall time (:meth:`Clock.now`) is what is persisted and compared across processes:
always timezone-aware UTC. Monotonic time (:meth:`Clock.monotonic`) measures intervals within
one process and is never persisted.

Only decisions go through here; measuring durations for traces and benches may keep using
:func:`time.perf_counter`.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import time
from datetime import UTC, datetime, timedelta
from typing import Protocol

__all__ = ["Clock", "ManualClock", "SystemClock", "system_clock"]


class Clock(Protocol):
    """Where time comes from."""

    def now(self) -> datetime:
        """The current wall time, timezone-aware, in UTC."""
        ...

    def monotonic(self) -> float:
        """Seconds on a clock that never goes back (meaningful only within one process)."""
        ...

    async def sleep(self, seconds: float) -> None:
        """Wait ``seconds`` of this clock's time (at once when ``seconds <= 0``)."""
        ...


class SystemClock:
    """The real clock: UTC `datetime.now`, `time.monotonic` and `asyncio.sleep`."""

    def now(self) -> datetime:
        return datetime.now(UTC)

    def monotonic(self) -> float:
        return time.monotonic()

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(max(0.0, seconds))


system_clock: Clock = SystemClock()
"""The process-wide real clock; the default wherever a clock may be injected."""


class ManualClock:
    """A clock that moves only when told to, for tests.

    Sleepers wake, in deadline order, when :meth:`advance` (or :meth:`set`) moves the clock
    to or past their deadline. Wall and monotonic time move together.
    """

    def __init__(self, start: datetime | None = None) -> None:
        if start is None:
            start = datetime(2026, 1, 1, tzinfo=UTC)
        if start.tzinfo is None:
            raise ValueError("ManualClock needs a timezone-aware start time")
        self._start = start.astimezone(UTC)
        self._elapsed = 0.0
        self._sleepers: list[tuple[float, int, asyncio.Future[None]]] = []
        self._order = itertools.count()

    def now(self) -> datetime:
        return self._start + timedelta(seconds=self._elapsed)

    def monotonic(self) -> float:
        return self._elapsed

    async def sleep(self, seconds: float) -> None:
        if seconds <= 0:
            await asyncio.sleep(0)
            return
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        heapq.heappush(self._sleepers, (self._elapsed + seconds, next(self._order), future))
        await future

    def advance(self, seconds: float) -> None:
        """Move the clock forward ``seconds`` and wake every sleeper now due."""
        if seconds < 0:
            raise ValueError("a clock does not go back")
        self._elapsed += seconds
        while self._sleepers and self._sleepers[0][0] <= self._elapsed:
            _, _, future = heapq.heappop(self._sleepers)
            if not future.done():
                future.set_result(None)

    def set(self, when: datetime) -> None:
        """Move the clock forward to ``when`` (timezone-aware)."""
        self.advance((when - self.now()).total_seconds())

    @property
    def sleepers(self) -> int:
        """How many sleeps are waiting (cancelled ones excluded)."""
        return sum(1 for _, _, future in self._sleepers if not future.done())
