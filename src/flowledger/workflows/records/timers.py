"""`TimerIndex`: the runs a session's owner resumes by itself, ordered by when.

A run parked on a timer (`flow.sleep`) or paused with a deadline (`flow.interrupt` with
``timeout``) has one entry per session, keyed by its due time::

    sessions/<session>/workflows/timers/<micros since the epoch, 20 digits>/<run>

Keys sort by byte order, and the zero-padded time makes that the order of due times, so
"what is due next" is the first key under the prefix: one page of one key
(`PagedKV.keys_page`), however many runs are parked. The value says which pause the entry
is for (``{"checkpoint_revision": N, "kind": "timer" | "deadline"}``): an entry whose run
has moved on (resumed, cancelled, paused again elsewhere) is *stale*, and whoever finds it
due deletes it.

Only the session's owner writes entries (under its lease's fence), before it records the
run as interrupted, so a crash in between leaves an entry for a run that the next owner
adopts (and indexes again), never a parked run without an entry. Entries are deleted
after the run left the pause (`delete`), so a crash in between leaves a stale entry.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Final, Literal

from ...storage import KV, CorruptDataError, KeyNotFoundError, PagedKV, fence_arg, validate_name
from ..errors import CorruptRecordError
from .run import is_id

__all__ = ["TimerEntry", "TimerIndex", "TimerKind", "timer_key", "timers_prefix"]

_EPOCH: Final = datetime(1970, 1, 1, tzinfo=UTC)
_DIGITS: Final = 20

TimerKind = Literal["timer", "deadline"]


def _micros(when: datetime) -> int:
    delta = when.astimezone(UTC) - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def timers_prefix(session_id: str) -> str:
    """``sessions/<sid>/workflows/timers/``."""
    if not is_id(session_id):
        raise ValueError("timers_prefix needs a session ID")
    return f"sessions/{session_id}/workflows/timers/"


def timer_key(session_id: str, run_id: str, wake_at: datetime) -> str:
    if not is_id(run_id):
        raise ValueError("timer_key needs a run ID")
    micros = _micros(wake_at)
    if micros < 0:
        raise ValueError("a due time before 1970")
    return validate_name(f"{timers_prefix(session_id)}{micros:0{_DIGITS}d}/{run_id}")


@dataclass(frozen=True, slots=True)
class TimerEntry:
    """One due run: when, which run, and the pause (checkpoint revision, kind) it is for."""

    key: str
    run_id: str
    wake_at: datetime
    checkpoint_revision: int
    kind: TimerKind


class TimerIndex:
    """The session-scoped due-time index over a KV store that pages its keys."""

    def __init__(self, kv: KV) -> None:
        if not isinstance(kv, PagedKV):
            raise TypeError("the timer index needs a KV store that pages its keys")
        self._kv = kv
        self._paged: PagedKV = kv

    async def put(
        self,
        session_id: str,
        run_id: str,
        wake_at: datetime,
        checkpoint_revision: int,
        kind: TimerKind,
    ) -> TimerEntry:
        """Record (or keep) the entry; idempotent for the same pause."""
        key = timer_key(session_id, run_id, wake_at)
        value = json.dumps(
            {"checkpoint_revision": checkpoint_revision, "kind": kind}, separators=(",", ":")
        ).encode()
        fence = fence_arg()
        try:
            current = await self._kv.get(key)
        except KeyNotFoundError:
            await self._kv.put(key, value, expected=0, **fence)
        except CorruptDataError:
            await self._kv.delete(key, **fence)
            await self._kv.put(key, value, expected=0, **fence)
        else:
            if current.value != value:
                await self._kv.put(key, value, expected=current.revision, **fence)
        return TimerEntry(key, run_id, wake_at.astimezone(UTC), checkpoint_revision, kind)

    async def head(self, session_id: str, *, after: str = "") -> TimerEntry | None:
        """The entry due first (after the key ``after``, when given), or None: reads one
        key of the index and its value."""
        while True:
            keys = await self._paged.keys_page(timers_prefix(session_id), start=after, limit=1)
            if not keys:
                return None
            try:
                entry = await self._kv.get(keys[0])
            except KeyNotFoundError:  # deleted between the two reads: look again
                continue
            except CorruptDataError as exc:
                raise CorruptRecordError(keys[0], str(exc)) from exc
            return _decode(keys[0], entry.value)

    async def delete(self, key: str) -> None:
        await self._kv.delete(key, **fence_arg())


def _decode(key: str, data: bytes) -> TimerEntry:
    try:
        micros_text, run_id = key.rsplit("/", 2)[-2:]
        doc = json.loads(data)
        revision = doc["checkpoint_revision"]
        kind = doc["kind"]
        if not isinstance(revision, int) or isinstance(revision, bool) or revision < 0:
            raise ValueError("bad checkpoint revision")
        if kind not in ("timer", "deadline") or not is_id(run_id):
            raise ValueError("bad kind or run ID")
        wake_at = _EPOCH + timedelta(microseconds=int(micros_text))
    except (ValueError, KeyError, TypeError) as exc:
        raise CorruptRecordError(key, str(exc)) from exc
    return TimerEntry(key, run_id, wake_at, revision, kind)
