"""The wake-up channels of workflow work (see `storage.wakeups`).

* `WORK` - woken by every write that gives some session work: a pending run (a front
  door's start), a resume request, a cancel request. Workers listen to it: the work
  may be in a session nobody owns yet, which any of them may claim.
* ``session.<session id>`` (`session_channel`) - woken by the same writes, for that
  session only. A standalone owner (`Supervisor` with a ``poll_interval``) listens to it.
* ``replies.<session id>`` (`replies_channel`) - woken by an owner when it answered a
  front door of the session: a run's seed (revision 0) is durable (what a start waits
  for), a resume request was carried out or refused, a cancel request was carried out.
  Front doors listen to it (one listener each) and re-read what they wait for.
* `DUE` - for work that becomes due by time rather than by a write (timers, schedules):
  ``await wake_due(store)`` when something is due; workers and owners listen to it.

A writer of work in a session uses ``with waking_session(session_id):`` around the
write that makes the work visible (it wakes both channels when the write commits), or
``await wake_session(store, session_id)`` right after it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Final

from ...storage import Store, waking
from ...storage.wakeups import Wakeups
from .run import is_id

__all__ = [
    "DUE",
    "WORK",
    "replies_channel",
    "session_channel",
    "wake_due",
    "wake_session",
    "waking_session",
    "work_channels",
]

WORK: Final = "work"
DUE: Final = "due"


def session_channel(session_id: str) -> str:
    if not is_id(session_id):
        raise ValueError(f"session ID must be a nonzero lowercase UUID, not {session_id!r}")
    return f"session.{session_id}"


def replies_channel(session_id: str) -> str:
    if not is_id(session_id):
        raise ValueError(f"session ID must be a nonzero lowercase UUID, not {session_id!r}")
    return f"replies.{session_id}"


def work_channels(session_id: str) -> tuple[str, str]:
    """What a write giving ``session_id`` work wakes."""
    return (WORK, session_channel(session_id))


@contextlib.contextmanager
def waking_session(session_id: str) -> Iterator[None]:
    """KV writes in this context wake the session's workers and owner when they commit."""
    with waking(*work_channels(session_id)):
        yield


async def wake_session(wakeups: Wakeups, session_id: str) -> None:
    """Wake the session's workers and owner now (after a write outside `waking_session`)."""
    await wakeups.notify(*work_channels(session_id))


async def wake_due(store: Store) -> None:
    """Something became due by time (a timer, a schedule): wake workers and owners."""
    await store.wakeups.notify(DUE)
