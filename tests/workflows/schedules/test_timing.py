"""Slot computation: cron in time zones across DST transitions, intervals, bad input."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from flowledger.workflows.schedules import InvalidScheduleError, Timing


def utc(*parts: int) -> datetime:
    return datetime(*parts, tzinfo=UTC)  # type: ignore[arg-type, misc]


def test_daily_cron_follows_local_time_across_spring_forward() -> None:
    # Europe/Riga: 2026-03-29 03:00 local becomes 04:00 (UTC+2 -> UTC+3)
    timing = Timing.cron_in("30 9 * * *", "Europe/Riga")
    slots = timing.upcoming(utc(2026, 3, 28, 0, 0), 3)
    assert slots == [utc(2026, 3, 28, 7, 30), utc(2026, 3, 29, 6, 30), utc(2026, 3, 30, 6, 30)]


def test_a_local_time_skipped_by_spring_forward_fires_after_the_gap() -> None:
    timing = Timing.cron_in("30 3 * * *", "Europe/Riga")
    slots = timing.upcoming(utc(2026, 3, 28, 0, 0), 2)
    # 03:30 does not exist on the 29th: cron fires at 04:00 local (01:00 UTC), once
    assert slots == [utc(2026, 3, 28, 1, 30), utc(2026, 3, 29, 1, 0)]


def test_fall_back_fires_a_fixed_local_time_once_and_steps_in_both_hours() -> None:
    # 2026-10-25 04:00 local (UTC+3) becomes 03:00 (UTC+2): 03:xx happens twice
    fixed = Timing.cron_in("30 3 * * *", "Europe/Riga")
    assert fixed.upcoming(utc(2026, 10, 24, 12, 0), 2) == [
        utc(2026, 10, 25, 0, 30),
        utc(2026, 10, 26, 1, 30),
    ]
    stepping = Timing.cron_in("*/30 3 * * *", "Europe/Riga")
    assert stepping.upcoming(utc(2026, 10, 24, 12, 0), 4) == [
        utc(2026, 10, 25, 0, 0),
        utc(2026, 10, 25, 0, 30),
        utc(2026, 10, 25, 1, 0),
        utc(2026, 10, 25, 1, 30),
    ]


def test_due_returns_the_newest_slots_and_counts_the_rest_without_walking_them() -> None:
    timing = Timing.cron_in("* * * * *", "UTC")
    slots, older = timing.due(utc(2026, 1, 1), utc(2026, 1, 2), 3)
    assert slots == [utc(2026, 1, 1, 23, 58), utc(2026, 1, 1, 23, 59), utc(2026, 1, 2, 0, 0)]
    assert older == 24 * 60 - 3
    interval = Timing.interval(10, utc(2026, 1, 1))
    slots, older = interval.due(utc(2026, 1, 1), utc(2026, 1, 1, 0, 1, 5), 2)
    assert slots == [utc(2026, 1, 1, 0, 0, 50), utc(2026, 1, 1, 0, 1)]
    assert older == 4
    assert interval.due(utc(2026, 1, 1, 0, 1), utc(2026, 1, 1, 0, 1, 9), 5) == ([], 0)


def test_interval_slots_are_anchored() -> None:
    timing = Timing.interval(60, utc(2026, 1, 1, 0, 0, 30))
    assert timing.next_after(utc(2025, 12, 31)) == utc(2026, 1, 1, 0, 0, 30)
    assert timing.next_after(utc(2026, 1, 1, 0, 0, 30)) == utc(2026, 1, 1, 0, 1, 30)
    assert timing.next_after(utc(2026, 1, 1, 0, 5, 0)) == utc(2026, 1, 1, 0, 5, 30)


@pytest.mark.parametrize(
    ("cron", "zone", "field"),
    [
        ("61 * * * *", "UTC", "cron"),
        ("* * *", "UTC", "cron"),
        ("", "UTC", "cron"),
        ("0 0 31 2 *", "UTC", "cron"),
        ("0 9 * * *", "Mars/Olympus_Mons", "timezone"),
        ("0 9 * * *", "../etc/passwd", "timezone"),
    ],
)
def test_bad_cron_or_zone_names_the_field(cron: str, zone: str, field: str) -> None:
    with pytest.raises(InvalidScheduleError) as caught:
        Timing.cron_in(cron, zone)
    assert caught.value.field == field


@pytest.mark.parametrize("every", [0, -5, 1.5, True, "60", 10**9])
def test_bad_interval_names_the_field(every: object) -> None:
    with pytest.raises(InvalidScheduleError) as caught:
        Timing.interval(every, utc(2026, 1, 1))
    assert caught.value.field == "every"
