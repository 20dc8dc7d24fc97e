"""The injectable clock: the real one is aware UTC; the manual one moves only when told."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import pytest

from flowledger.clock import ManualClock, system_clock


def test_system_clock_is_aware_utc() -> None:
    now = system_clock.now()
    assert now.tzinfo is not None and now.utcoffset() == timedelta(0)
    assert system_clock.monotonic() <= system_clock.monotonic()


async def test_manual_clock_wakes_sleepers_in_deadline_order() -> None:
    clock = ManualClock(datetime(2026, 3, 1, 12, tzinfo=UTC))
    woke: list[str] = []

    async def sleeper(name: str, seconds: float) -> None:
        await clock.sleep(seconds)
        woke.append(name)

    tasks = [asyncio.create_task(sleeper("late", 10)), asyncio.create_task(sleeper("early", 5))]
    await asyncio.sleep(0)
    assert clock.sleepers == 2
    clock.advance(4)
    await asyncio.sleep(0)
    assert woke == []
    clock.advance(1)
    await asyncio.sleep(0)
    assert woke == ["early"]
    clock.set(datetime(2026, 3, 1, 12, 0, 10, tzinfo=UTC))
    await asyncio.gather(*tasks)
    assert woke == ["early", "late"]
    assert clock.now() == datetime(2026, 3, 1, 12, 0, 10, tzinfo=UTC)
    assert clock.monotonic() == 10


def test_manual_clock_refuses_to_go_back_or_start_naive() -> None:
    clock = ManualClock()
    with pytest.raises(ValueError, match="does not go back"):
        clock.advance(-1)
    with pytest.raises(ValueError, match="timezone-aware"):
        ManualClock(datetime(2026, 1, 1))
