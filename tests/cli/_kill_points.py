"""Self-inflicted SIGKILLs at the writes around timer wakes, deadline expiries and
schedule firings, for the fault tests of ``tests/cli/test_time_faults.py``.

`arm` (called by the fault tests' app module when a worker process imports it) wraps
the method named by ``FLOWLEDGER_KILL_POINT`` (one of `POINTS`, as ``Class.method``) so
that the process SIGKILLs itself at its ``FLOWLEDGER_KILL_AT``-th *point*: each call is
two, just before it and just after it returned. The test draws both from its seeded
random generator per worker it starts, so the kill lands at a random one of the writes
that matter here (one method per worker: otherwise the re-indexing of parked runs that
every new owner does first would take most kills), and a failing seed replays the same
choices. Before dying the process appends ``<pid> <point>`` to ``FLOWLEDGER_KILL_LOG``,
so the test can say where it died.

Only a process whose environment names ``FLOWLEDGER_KILL_AT`` is armed: the test
process, which imports the same app module to start runs, never is.
"""

from __future__ import annotations

import functools
import os
import signal
from collections.abc import Awaitable, Callable
from typing import Any

from flowledger.flow.ledger_store import LedgerCheckpointStore
from flowledger.workflows.records.registry import RunRegistry
from flowledger.workflows.records.requests import RunRequests
from flowledger.workflows.records.timers import TimerIndex
from flowledger.workflows.schedules.store import ScheduleStore

KILL_POINT = "FLOWLEDGER_KILL_POINT"
KILL_AT = "FLOWLEDGER_KILL_AT"
KILL_LOG = "FLOWLEDGER_KILL_LOG"

# (class, method): the writes that decide a wake, a deadline or a firing, and the
# checkpoint appends and run-record swaps on either side of them
POINTS: tuple[tuple[type, str], ...] = (
    (TimerIndex, "put"),
    (TimerIndex, "delete"),
    (RunRegistry, "compare_and_swap"),
    (RunRegistry, "create"),
    (LedgerCheckpointStore, "append"),
    (ScheduleStore, "claim_firing"),
    (ScheduleStore, "swap"),
    (RunRequests, "accept_resume"),
    (RunRequests, "delete_resume"),
)


class _Countdown:
    def __init__(self, at: int, log: str | None) -> None:
        self.left = at
        self.log = log

    def tick(self, point: str) -> None:
        self.left -= 1
        if self.left != 0:
            return
        if self.log:
            with open(self.log, "a", encoding="utf-8") as file:
                file.write(f"{os.getpid()} {point}\n")
        os.kill(os.getpid(), signal.SIGKILL)


def _wrap(
    countdown: _Countdown, name: str, method: Callable[..., Awaitable[Any]]
) -> Callable[..., Awaitable[Any]]:
    @functools.wraps(method)
    async def wrapped(*args: Any, **kwargs: Any) -> Any:
        countdown.tick(f"before:{name}")
        result = await method(*args, **kwargs)
        countdown.tick(f"after:{name}")
        return result

    return wrapped


def names() -> list[str]:
    return [f"{cls.__name__}.{method}" for cls, method in POINTS]


def arm() -> None:
    """Arm this process if its environment asks for it (idempotent)."""
    at = os.environ.get(KILL_AT)
    if not at or getattr(arm, "armed", False):
        return
    arm.armed = True  # type: ignore[attr-defined]
    chosen = os.environ[KILL_POINT]
    countdown = _Countdown(int(at), os.environ.get(KILL_LOG))
    for cls, method in POINTS:
        name = f"{cls.__name__}.{method}"
        if name == chosen:
            setattr(cls, method, _wrap(countdown, name, getattr(cls, method)))
            return
    raise ValueError(f"{KILL_POINT}={chosen!r} is none of the kill points")
