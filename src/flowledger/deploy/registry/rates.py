"""Per-source call rate limits: at most ``calls`` tool calls to a registered source in any
``per`` seconds, as cost control for paid APIs (docs/sources.md, "Call rate limits").

**Scope: global per source.** A limit counts every call that any deployed run makes to
the registered source, from every session, owner and worker of the database. The
source is the account that is billed (its secrets are the API key), so a limit per
session would let N sessions spend N times the budget. A session that wants its own
budget is given its own registered source.

**A sliding window kept in storage.** The source's window record
``deploy/rates/windows/<source>`` holds the start times (µs since the epoch, by the
reserving process's clock) of the calls made in the last ``per`` seconds. A call
reserves its place by compare-and-swap on that record, with the owner's fence: it may
go when fewer than ``calls`` start times lie in ``(now - per, now]``, and it adds its
own. Two reservations racing for the last place cannot both win (one's swap fails, and
it reads again), so no ``per``-long window ever holds more than ``calls`` reservations,
across any number of processes. A reservation whose call then never happens (a crash
between the two) wastes a place: capacity is under-used, never exceeded.

**Waiting.** A call over the limit waits in the process that runs the node, on the
injectable clock, until the oldest start time in its way leaves the window (re-reading
the limit at least every `RECHECK` seconds, so a raised or cleared limit takes effect);
it never fails the run. The wait holds the run's segment (a slot of its owner), not a
timer: the run is still running, and an owner that dies while it waits leaves it to be
adopted like any running run. It happens before the call's intent is written, so a
crash while waiting leaves nothing ambiguous. Start times come from each process's
clock: clocks that disagree between machines shift the window by their skew.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

from ... import storage
from ...clock import Clock, system_clock
from ..sources.spec import Source
from .errors import SourceNotRegisteredError
from .store import SourceRegistry

__all__ = [
    "MAX_CALLS",
    "MAX_PER_SECONDS",
    "RATES_PREFIX",
    "RECHECK",
    "CallRate",
    "GatedSource",
    "InvalidRateError",
    "RateLimits",
    "check_calls",
    "parse_per",
]

RATES_PREFIX: Final = "deploy/rates/"
_LIMITS: Final = RATES_PREFIX + "limits/"
_WINDOWS: Final = RATES_PREFIX + "windows/"
MAX_CALLS: Final = 10_000  # the window record holds one start time per call in it
MAX_PER_SECONDS: Final = 86_400.0  # a day
RECHECK: Final = 2.0  # seconds a waiting call goes without re-reading its limit
_UNITS: Final = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86_400.0}
_DURATION: Final = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d)?")


class InvalidRateError(ValueError):
    """A rate limit that cannot be set; ``field`` names the offending input (``source``,
    ``calls`` or ``per``). Nothing was written."""

    code = "invalid_rate_limit"

    def __init__(self, field: str, message: str) -> None:
        self.field = field
        super().__init__(f"{field}: {message}")


@dataclass(frozen=True, slots=True)
class CallRate:
    """At most ``calls`` calls in any ``per`` seconds."""

    calls: int
    per: float

    def to_json(self) -> dict[str, int | float]:
        return {"calls": self.calls, "per_seconds": self.per}


def check_calls(value: object) -> int:
    """``value`` as a number of calls, or `InvalidRateError` naming ``calls``."""
    if not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= MAX_CALLS:
        raise InvalidRateError("calls", f"must be an integer in 1..{MAX_CALLS}, not {value!r}")
    return value


def parse_per(value: object) -> float:
    """``per`` in seconds: a number of seconds or text such as ``500ms``, ``60s``, ``1m``,
    ``1h``, ``1d``; longer than zero and at most a day (`InvalidRateError` naming ``per``)."""
    if isinstance(value, bool):
        seconds = None
    elif isinstance(value, int | float):
        seconds = float(value)
    elif isinstance(value, str) and (match := _DURATION.fullmatch(value.strip().lower())):
        seconds = float(match.group(1)) * _UNITS[match.group(2) or "s"]
    else:
        seconds = None
    if seconds is None or not 0 < seconds <= MAX_PER_SECONDS or seconds != seconds:
        raise InvalidRateError(
            "per",
            f"must be a duration longer than zero and at most a day (60s, 1m, 1h), not {value!r}",
        )
    return seconds


def _name(source: object) -> str:
    if not isinstance(source, str) or not source:
        raise InvalidRateError("source", f"must be a registered source's name, not {source!r}")
    try:
        storage.validate_name(_LIMITS + source)
    except storage.InvalidNameError:
        raise InvalidRateError("source", f"{source!r} is not a source name") from None
    return source


def _micros(clock: Clock) -> int:
    return int(clock.now().timestamp() * 1_000_000)


class RateLimits:
    """The operator's call rate limits of ``registry``'s sources, and the reservations
    deployed runs make against them (over the registry's KV)."""

    def __init__(self, registry: SourceRegistry, clock: Clock | None = None) -> None:
        self.registry = registry
        self._kv = registry.kv
        self.clock = clock or system_clock
        self.waits = 0  # reservations that had to wait
        self.waiting = 0  # calls waiting for a place now (in this process)

    # -- the operator's side -----------------------------------------------------------

    async def set(self, source: object, calls: object, per: object) -> CallRate:
        """Limit ``source`` (a registered source) to ``calls`` per ``per``; validated
        before anything is written."""
        name = _name(source)
        rate = CallRate(check_calls(calls), parse_per(per))
        try:
            await self.registry.get(name)
        except SourceNotRegisteredError:
            raise InvalidRateError("source", f"no registered source is named {name!r}") from None
        data = json.dumps(rate.to_json(), separators=(",", ":")).encode()
        await storage.overwrite(self._kv, _LIMITS + name, data)
        return rate

    async def get(self, source: str) -> CallRate | None:
        """The limit of ``source``, or None when calls to it are not limited."""
        try:
            entry = await self._kv.get(_LIMITS + _name(source))
        except storage.KeyNotFoundError:
            return None
        try:
            data = json.loads(entry.value)
            return CallRate(check_calls(data["calls"]), parse_per(data["per_seconds"]))
        except (ValueError, KeyError, TypeError) as exc:
            raise storage.CorruptDataError(f"rate limit of {source}", str(exc)) from exc

    async def clear(self, source: object) -> bool:
        """Remove ``source``'s limit; True if there was one (its window is kept: it
        empties by itself)."""
        key = _LIMITS + _name(source)
        try:
            await self._kv.get(key)
        except storage.KeyNotFoundError:
            return False
        await self._kv.delete(key)
        return True

    async def all(self) -> list[tuple[str, CallRate]]:
        """Every limit, by source name."""
        found: list[tuple[str, CallRate]] = []
        for key in sorted(await self._kv.keys(_LIMITS)):
            rate = await self.get(key[len(_LIMITS) :])
            if rate is not None:
                found.append((key[len(_LIMITS) :], rate))
        return found

    async def in_window(self, source: str) -> int:
        """How many calls to ``source`` lie in its current window (0 without a limit)."""
        rate = await self.get(source)
        if rate is None:
            return 0
        stamps, _ = await self._window(source)
        return sum(1 for t in stamps if t > _micros(self.clock) - int(rate.per * 1_000_000))

    # -- a deployed run's side ----------------------------------------------------------

    async def acquire(self, source: str) -> None:
        """Reserve a place for one call to ``source``, waiting (on the clock) while its
        window is full; at once when it has no limit."""
        waited = False
        while True:
            rate = await self.get(source)
            if rate is None:
                return
            now = _micros(self.clock)
            span = int(rate.per * 1_000_000)
            stamps, revision = await self._window(source)
            recent = sorted(t for t in stamps if t > now - span)
            if len(recent) < rate.calls:
                recent.append(now)
                recent.sort()
                data = json.dumps({"at": recent}, separators=(",", ":")).encode()
                try:
                    await self._kv.put(
                        _WINDOWS + source, data, expected=revision, **storage.fence_arg()
                    )
                except storage.ConflictError:
                    continue  # another reservation won the race: read again
                if waited:
                    self.waits += 1
                return
            waited = True
            free_at = recent[-rate.calls] + span  # when the oldest in the way leaves
            self.waiting += 1
            try:
                await self.clock.sleep(min(RECHECK, max(0.001, (free_at - now) / 1_000_000)))
            finally:
                self.waiting -= 1

    async def _window(self, source: str) -> tuple[list[int], int]:
        try:
            entry = await self._kv.get(_WINDOWS + source)
        except storage.KeyNotFoundError:
            return [], 0
        try:
            stamps = json.loads(entry.value)["at"]
            if not isinstance(stamps, list) or not all(isinstance(t, int) for t in stamps):
                raise TypeError("start times are not integers")
        except (ValueError, KeyError, TypeError) as exc:
            raise storage.CorruptDataError(f"call window of {source}", str(exc)) from exc
        return stamps, entry.revision


class GatedSource:
    """A run's registered source whose every tool call first reserves a place under the
    source's rate limit (`RateLimits.acquire`). Called, it is the source itself, so it
    stands wherever a source reference does."""

    def __init__(self, source: Source | Callable[[], Source], name: str, limits: RateLimits):
        self._source = source
        self.name = name
        self.limits = limits

    def __call__(self) -> Source:
        return self._source() if callable(self._source) else self._source

    async def before_call(self) -> None:
        await self.limits.acquire(self.name)
