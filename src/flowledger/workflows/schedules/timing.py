"""When a schedule's slots are: a cron expression in a time zone, or a fixed interval.

A *slot* is an instant (UTC, whole seconds) at which a schedule is due. Cron slots come
from `cronsim` evaluated in the schedule's IANA time zone (`zoneinfo`), so daylight-saving
transitions follow cron's own rules (Debian cron, as cronsim implements them): a local time
skipped by a spring-forward transition fires at the first instant after the gap, and a
fixed local time repeated by a fall-back transition fires once; expressions whose minute or
hour field is a wildcard or a step (``*/30 * * * *``) fire in both repeated hours, because
each is a distinct instant. Interval slots are ``anchor + k * every`` for whole seconds
``every`` >= 1, independent of time zones.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Final
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from cronsim import CronSim, CronSimError

from .errors import InvalidScheduleError

__all__ = ["MAX_EVERY", "Timing", "slot_key", "utc_seconds"]

MAX_EVERY: Final = 366 * 24 * 3600  # one (leap) year, in seconds
_MAX_CRON_CHARS: Final = 200


def utc_seconds(moment: datetime) -> datetime:
    """``moment`` in UTC, truncated to the whole second (slots have second resolution)."""
    if moment.tzinfo is None:
        raise ValueError("a naive datetime has no defined instant")
    return moment.astimezone(UTC).replace(microsecond=0)


def slot_key(slot: datetime) -> str:
    """A slot as one storage-name segment that sorts in time order: ``20260101-000000``
    (UTC; storage names are lowercase)."""
    return f"{slot.astimezone(UTC):%Y%m%d-%H%M%S}"


@dataclass(frozen=True, slots=True)
class Timing:
    """Either ``cron`` (with ``timezone``, an IANA name) or ``every`` seconds from
    ``anchor``. Build with `Timing.cron_in` or `Timing.interval`, which validate."""

    cron: str | None
    timezone: str
    every: int | None
    anchor: datetime | None

    @classmethod
    def cron_in(cls, expression: object, timezone: object = "UTC") -> Timing:
        if not isinstance(expression, str) or not expression.strip():
            raise InvalidScheduleError("cron", "must be a non-empty string such as '0 9 * * 1-5'")
        if len(expression) > _MAX_CRON_CHARS:
            raise InvalidScheduleError("cron", f"is longer than {_MAX_CRON_CHARS} characters")
        if not isinstance(timezone, str) or not timezone:
            raise InvalidScheduleError("timezone", "must be an IANA time zone name such as UTC")
        try:
            zone = ZoneInfo(timezone)
        except (ZoneInfoNotFoundError, ValueError) as exc:
            raise InvalidScheduleError(
                "timezone", f"unknown time zone {timezone!r} (an IANA name such as Europe/Riga)"
            ) from exc
        expression = " ".join(expression.split())
        try:
            next(CronSim(expression, datetime(2026, 1, 1, tzinfo=zone)))
        except CronSimError as exc:
            raise InvalidScheduleError("cron", f"{expression!r}: {exc}") from exc
        except StopIteration:
            raise InvalidScheduleError("cron", f"{expression!r} never fires") from None
        return cls(expression, timezone, None, None)

    @classmethod
    def interval(cls, every: object, anchor: datetime) -> Timing:
        if isinstance(every, bool) or not isinstance(every, int | float):
            raise InvalidScheduleError("every", "must be a whole number of seconds")
        if every <= 0:
            raise InvalidScheduleError("every", f"must be > 0 seconds, not {every}")
        if every != int(every):
            raise InvalidScheduleError("every", f"must be a whole number of seconds, not {every}")
        if every > MAX_EVERY:
            raise InvalidScheduleError("every", f"must be at most {MAX_EVERY} seconds (a year)")
        return cls(None, "UTC", int(every), utc_seconds(anchor))

    def describe(self) -> str:
        if self.cron is not None:
            return f"cron {self.cron!r} in {self.timezone}"
        return f"every {self.every}s"

    def next_after(self, moment: datetime) -> datetime:
        """The first slot strictly after ``moment``."""
        moment = moment.astimezone(UTC)
        if self.every is not None:
            assert self.anchor is not None
            if moment < self.anchor:
                return self.anchor
            elapsed = int((moment - self.anchor).total_seconds() // self.every)
            return self.anchor + timedelta(seconds=(elapsed + 1) * self.every)
        assert self.cron is not None
        zone = ZoneInfo(self.timezone)
        return utc_seconds(next(CronSim(self.cron, moment.astimezone(zone))))

    def upcoming(self, moment: datetime, count: int) -> list[datetime]:
        """The next ``count`` slots strictly after ``moment``."""
        slots: list[datetime] = []
        for _ in range(count):
            moment = self.next_after(moment)
            slots.append(moment)
        return slots

    def due(self, after: datetime, until: datetime, limit: int) -> tuple[list[datetime], int]:
        """The slots in ``(after, until]``: the newest ``limit`` of them (oldest first), and
        how many older ones there were besides. Costs O(limit), not O(slots in the gap)."""
        after, until = after.astimezone(UTC), until.astimezone(UTC)
        if until <= after:
            return [], 0
        if self.every is not None:
            assert self.anchor is not None
            first = self.next_after(after)
            if first > until:
                return [], 0
            total = int((until - first).total_seconds() // self.every) + 1
            newest = first + timedelta(seconds=(total - 1) * self.every)
            kept = min(total, limit)
            slots = [newest - timedelta(seconds=i * self.every) for i in range(kept)]
            return slots[::-1], total - kept
        assert self.cron is not None
        zone = ZoneInfo(self.timezone)
        # cronsim walks backwards from just after ``until`` (its reverse iteration yields
        # times strictly before the start), so the gap since ``after`` is never walked.
        backwards: Iterator[datetime] = CronSim(
            self.cron, (until + timedelta(seconds=1)).astimezone(zone), reverse=True
        )
        newest_first: list[datetime] = []
        for found in backwards:
            slot = utc_seconds(found)
            if slot <= after:
                return newest_first[::-1], 0
            if slot > until:
                continue
            if len(newest_first) == limit:
                return newest_first[::-1], self._count_between(after, slot)
            newest_first.append(slot)
        return newest_first[::-1], 0

    def _count_between(self, after: datetime, through: datetime) -> int:
        """How many slots lie in ``(after, through]`` (the skipped ones; walks them, but
        stops counting at a large bound: the number is only reported)."""
        count, moment = 0, after
        while count < 100_000:
            moment = self.next_after(moment)
            if moment > through:
                break
            count += 1
        return count
