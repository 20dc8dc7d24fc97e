"""Durable timers inside a task: `sleep` and `sleep_until`.

A timer parks the vertex the way `interrupt` does: it raises `InterruptSignal`, and the
step's checkpoint records a pause of kind `InterruptKind.TIMER` with its ``wake_at``
(computed from the engine's clock). Nothing waits in memory: whoever owns the run (the
workflow supervisor of its session) resumes it once ``wake_at`` has passed. On that
resume the vertex runs again from the top and the same `sleep` call returns ``None``;
a resume before ``wake_at`` parks it again until the same time.

One timer per vertex execution: the vertex re-runs from the top after every pause, so a
second `sleep` after a woken one would park it forever; it raises `TimerError` instead.
Put each wait in its own vertex (graph edges are the loop).
"""

from __future__ import annotations

from datetime import datetime, timedelta

from .checkpoint import InterruptKind
from .context import InterruptSignal, VertexScope, check_seconds, scope
from .errors import TimerError

__all__ = ["sleep", "sleep_until"]


def sleep(seconds: float) -> None:
    """Park this vertex for ``seconds`` (a finite number >= 0; 0 returns at once).

    `TimerError` (field ``seconds``) for a negative, infinite or non-number value."""
    current = scope("sleep")
    if _woken(current, "seconds"):
        return
    delay = check_seconds(seconds, "seconds")
    if delay == 0:
        return
    _park(current, current.clock.now() + timedelta(seconds=delay))


def sleep_until(when: datetime) -> None:
    """Park this vertex until ``when`` (a timezone-aware `datetime` in the future).

    `TimerError` (field ``until``) for a naive datetime, one not after the engine clock's
    now, or anything that is not a datetime."""
    current = scope("sleep_until")
    if _woken(current, "until"):
        return
    if not isinstance(when, datetime):
        raise TimerError("until", f"expected a datetime, not {type(when).__name__}")
    if when.tzinfo is None or when.utcoffset() is None:
        raise TimerError("until", "a naive datetime: give it a time zone (e.g. UTC)")
    now = current.clock.now()
    if when <= now:
        raise TimerError("until", f"{when.isoformat()} is not after now ({now.isoformat()})")
    _park(current, when)


def _woken(current: VertexScope, field: str) -> bool:
    """Whether this call returns because the timer this execution resumes is due; parks
    again (same wake time) when it is not due yet."""
    if current.timer_used:
        raise TimerError(field, "one timer per vertex execution: give the next its own vertex")
    resumed = current.resumed
    if resumed is None or resumed.kind is not InterruptKind.TIMER or resumed.wake_at is None:
        return False
    if current.clock.now() < resumed.wake_at:
        _park(current, resumed.wake_at)
    current.timer_used = True
    return True


def _park(current: VertexScope, wake_at: datetime) -> None:
    info = {"wake_at": wake_at.isoformat()}
    raise InterruptSignal(info, None, False, wake_at=wake_at, timer=True)
