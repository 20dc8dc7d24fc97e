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
"""

from __future__ import annotations

from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, Final

__all__ = ["InterruptSignal", "RunInfo", "continuation", "interrupt", "run_info"]


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

    def __init__(self, info: Any, continuation: Any, stateful: bool) -> None:
        super().__init__("flow: vertex interrupt")
        self.info = info
        self.continuation = continuation
        self.stateful = stateful


_ABSENT: Final[Any] = object()


class VertexScope:
    """Per-execution values; one instance per vertex execution (shared by its attempts)."""

    __slots__ = ("continuation", "info", "payload", "payload_used")

    def __init__(self, info: RunInfo, payload: Any = None, continuation: Any = _ABSENT) -> None:
        self.info = info
        self.payload = payload
        self.continuation = continuation
        self.payload_used = False


current_scope: ContextVar[VertexScope] = ContextVar("flowledger_vertex_scope")


def _scope(name: str) -> VertexScope:
    try:
        return current_scope.get()
    except LookupError:
        raise RuntimeError(f"flow.{name}() can only be called inside a running task") from None


def interrupt(info: Any = None, *, continuation: Any = _ABSENT) -> Any:
    """Pause this vertex with ``info`` (JSON data for whoever resumes it).

    Returns the resume payload when the vertex is re-run by a resume that carried one;
    otherwise raises `InterruptSignal`. ``continuation`` (JSON data, may be ``None``) is
    stored with the pause and read back with `continuation` on the next execution."""
    scope = _scope("interrupt")
    if scope.payload is not None and not scope.payload_used:
        scope.payload_used = True
        return scope.payload
    stateful = continuation is not _ABSENT
    raise InterruptSignal(info, continuation if stateful else None, stateful)


def continuation(default: Any = None) -> Any:
    """The continuation stored by this vertex's last pause, or ``default`` if none was."""
    value = _scope("continuation").continuation
    return default if value is _ABSENT else value


def run_info() -> RunInfo:
    """Identity of the running vertex execution, including its idempotency key."""
    return _scope("run_info").info


def absent() -> Any:
    return _ABSENT
