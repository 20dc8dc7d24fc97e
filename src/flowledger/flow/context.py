"""What a running task can ask the engine: `interrupt`, `continuation`, `run_info`.

These read a context variable that the engine sets around every vertex
execution; plain-function tasks run in a worker thread with a copy of that
context, so they work there too. Outside a task they raise `RuntimeError`.

Pausing works by raising `InterruptSignal`, a `BaseException` so that a
task's own ``except Exception`` does not swallow it. On resume the vertex runs
again from the top; this time the first `interrupt` call of the execution
returns the resume payload instead of raising. A vertex that must pause more
than once keeps its progress in the *continuation*::

    @graph.vertex("survey")
    def survey(state):
        answers = flow.continuation() or []
        while len(answers) < 3:
            answers.append(flow.interrupt(f"question {len(answers)}", continuation=answers))
        return {"answers": answers}

A resume with payload ``None`` delivers no payload: `interrupt` pauses again.

An interrupt may carry a deadline: ``interrupt(info, timeout=3600, on_timeout={...})``
records ``now + timeout`` (from the engine's clock) with the pause; whoever owns the run
(the workflow supervisor) resumes it with ``on_timeout`` as the payload once the deadline
passes, unless a resume came first. The deadline is kept across re-executions: a vertex
that pauses again at the same interrupt keeps its first deadline. The owner hands that
payload over wrapped in `TimedOut`, so `interrupt` returns it like any other and
`timed_out` tells the vertex which of the two it got (to route on it). `sleep` and
`sleep_until` (module `timers`) park the vertex the same way, with no payload at all.
"""

from __future__ import annotations

import math
from contextvars import ContextVar
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Final

from ..clock import Clock, system_clock
from .checkpoint import InterruptKind, InterruptRecord
from .errors import TimerError

__all__ = [
    "InterruptSignal",
    "RunInfo",
    "TimedOut",
    "continuation",
    "interrupt",
    "run_info",
    "timed_out",
]


@dataclass(frozen=True, slots=True)
class RunInfo:
    """Who is running: one logical execution of one vertex in one step of one run."""

    graph_id: str
    graph_run_id: str
    vertex: str
    vertex_run_id: str
    step: int

    @property
    def idempotency_key(self) -> str:
        """Stable across retries and crash recovery of the same step of the same vertex.

        Use it to make side effects idempotent (e.g. as a payment API's idempotency key):
        a vertex is skipped after a crash only once its completion is durable, so its task
        may run more than once."""
        return (
            f"graph={self.graph_id}/run={self.graph_run_id}/step={self.step}/vertex={self.vertex}"
        )


class InterruptSignal(BaseException):
    """Raised by `interrupt` to pause the vertex; never retried, never an error."""

    def __init__(
        self,
        info: Any,
        continuation: Any,
        stateful: bool,
        *,
        wake_at: datetime | None = None,
        on_timeout: Any = None,
        timer: bool = False,
    ) -> None:
        super().__init__("flow: vertex interrupt")
        self.info = info
        self.continuation = continuation
        self.stateful = stateful
        self.wake_at = wake_at  # a timer's wake time, or an awaiting pause's deadline
        self.on_timeout = on_timeout
        self.timer = timer  # `sleep`: a timer pause, not an awaiting one


@dataclass(frozen=True, slots=True)
class TimedOut:
    """A resume payload sent because the pause's deadline passed, not by whoever answers
    it: pass ``TimedOut(on_timeout)`` to `Runner.resume`. `interrupt` returns
    ``payload``; `timed_out` is then True in that execution."""

    payload: Any


_ABSENT: Final[Any] = object()


class VertexScope:
    """Per-execution values; one instance per vertex execution (shared by its attempts)."""

    __slots__ = (
        "clock",
        "continuation",
        "info",
        "payload",
        "payload_used",
        "resumed",
        "timed_out",
        "timer_used",
    )

    def __init__(
        self,
        info: RunInfo,
        payload: Any = None,
        continuation: Any = _ABSENT,
        *,
        clock: Clock = system_clock,
        resumed: InterruptRecord | None = None,
    ) -> None:
        self.info = info
        self.payload = payload
        self.continuation = continuation
        self.payload_used = False
        self.clock = clock
        self.resumed = resumed  # the stored pause this execution resumes, if any
        self.timer_used = False  # a `sleep` of this execution returned
        self.timed_out = False  # `interrupt` returned a deadline's payload


current_scope: ContextVar[VertexScope] = ContextVar("flowledger_vertex_scope")


def scope(name: str) -> VertexScope:
    """The running execution's scope; `RuntimeError` naming ``flow.<name>()`` outside one."""
    return _scope(name)


def _scope(name: str) -> VertexScope:
    try:
        return current_scope.get()
    except LookupError:
        raise RuntimeError(f"flow.{name}() can only be called inside a running task") from None


def interrupt(
    info: Any = None,
    *,
    continuation: Any = _ABSENT,
    timeout: float | None = None,
    on_timeout: Any = None,
) -> Any:
    """Pause this vertex with ``info`` (JSON data for whoever resumes it).

    Returns the resume payload when the vertex is re-run by a resume that carried one;
    otherwise raises `InterruptSignal`. ``continuation`` (JSON data, may be ``None``) is
    stored with the pause and read back with `continuation` on the next execution.

    ``timeout`` (seconds, > 0) gives the pause a deadline; ``on_timeout`` (JSON data, not
    None, required with a timeout) is the payload the run is resumed with when it passes.
    Bad values raise `TimerError` naming ``timeout`` or ``on_timeout``."""
    scope = _scope("interrupt")
    if scope.payload is not None and not scope.payload_used:
        scope.payload_used = True
        if isinstance(scope.payload, TimedOut):
            scope.timed_out = True
            return scope.payload.payload
        return scope.payload
    stateful = continuation is not _ABSENT
    wake_at = None
    if timeout is not None or on_timeout is not None:
        if timeout is None:
            raise TimerError("timeout", "on_timeout needs a timeout (seconds)")
        seconds = check_seconds(timeout, "timeout")
        if seconds == 0:
            raise TimerError("timeout", "must be more than 0 seconds")
        if on_timeout is None:
            raise TimerError("on_timeout", "a timeout needs the payload to resume with")
        resumed = scope.resumed
        if (
            resumed is not None
            and resumed.kind is InterruptKind.AWAITING
            and resumed.wake_at is not None
        ):
            wake_at = resumed.wake_at  # paused here before: the first deadline stands
        else:
            wake_at = scope.clock.now() + timedelta(seconds=seconds)
    raise InterruptSignal(
        info,
        continuation if stateful else None,
        stateful,
        wake_at=wake_at,
        on_timeout=on_timeout,
    )


def timed_out() -> bool:
    """Whether this execution's `interrupt` returned its ``on_timeout`` payload because
    the deadline passed (False when a person or a model answered, or nothing returned).
    A vertex routes on it by writing it to a state field that a route reads."""
    return _scope("timed_out").timed_out


def check_seconds(value: object, field: str) -> float:
    """``value`` as a finite, non-negative number of seconds, or `TimerError` naming
    ``field``."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TimerError(field, f"expected a number of seconds, not {type(value).__name__}")
    seconds = float(value)
    if not math.isfinite(seconds):
        raise TimerError(field, f"expected a finite number of seconds, not {value}")
    if seconds < 0:
        raise TimerError(field, f"must not be negative, not {value}")
    if seconds > MAX_WAIT_SECONDS:
        raise TimerError(field, f"must be at most {MAX_WAIT_SECONDS} seconds (about 100 years)")
    return seconds


MAX_WAIT_SECONDS: Final = 100 * 366 * 86_400


def continuation(default: Any = None) -> Any:
    """The continuation stored by this vertex's last pause, or ``default`` if none was."""
    value = _scope("continuation").continuation
    return default if value is _ABSENT else value


def run_info() -> RunInfo:
    """Identity of the running vertex execution, including its idempotency key."""
    return _scope("run_info").info


def now() -> datetime:
    """The wall time (aware UTC) of the running task's clock: the runner's clock, the
    one its checkpoints are stamped with, so a task that records a time agrees with them."""
    return _scope("now").clock.now()


def absent() -> Any:
    return _ABSENT
