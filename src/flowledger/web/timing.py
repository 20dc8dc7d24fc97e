"""Time in a run: how long it and each vertex took, how many attempts each vertex made,
and the bars of its timeline (Gantt) picture.

Read from the checkpoints' per-vertex records (when each execution started and ended,
and its attempt count: ``flow.VertexRecord``), never their state, through the session's
own registry lookup, so another session's run is not found. A deployed run adds its
tool calls (``read_run_trace`` entries: start, end, tool). The run page's window rule
applies: the last `WINDOW` checkpoints are read, so a page costs the same however long
the run is; a longer run says its timeline is cut.

Attempts and retries: an execution's ``attempt`` is the tries its retry policy made
(``flow.Retry``); retries are a vertex's attempts beyond one per execution. An errored
pause retried from the dashboard is a further execution of the same vertex.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Final

from .. import flow
from ..workflows.runtime.session import WorkflowSession
from .views import moment

__all__ = [
    "WINDOW",
    "Bar",
    "RunTime",
    "VertexTime",
    "duration_of",
    "duration_text",
    "read_time",
    "run_seconds",
]

#: Checkpoints read for a run's timeline (its last ones).
WINDOW: Final = 200
_TERMINAL: Final = frozenset({"completed", "failed", "cancelled"})


@dataclass(frozen=True)
class Bar:
    """One bar of the timeline: a vertex execution or a tool call."""

    lane: str  # what the bar's row is named by (a vertex's label, a tool)
    kind: str  # "vertex" or "tool"
    vertex: str
    start: datetime
    end: datetime | None  # None: not ended (still running, or cut by the run's end)
    status: str
    attempts: int = 1


@dataclass(frozen=True)
class VertexTime:
    """One vertex's executions in the run, summed."""

    vertex: str
    label: str
    executions: int
    attempts: int
    seconds: float  # the ended executions' time
    open: bool  # an execution has not ended

    @property
    def retries(self) -> int:
        return max(0, self.attempts - self.executions)


@dataclass(frozen=True)
class RunTime:
    """A run's time: its duration (to now while it is unfinished), its vertices in the
    order they first started, and its timeline's bars."""

    seconds: float
    finished: bool
    start: datetime
    end: datetime  # the run's end, or the read's now
    vertices: tuple[VertexTime, ...]
    bars: tuple[Bar, ...]
    cut: bool  # the run has more checkpoints than the window read


def run_seconds(run: Mapping[str, Any], now: datetime) -> tuple[float, bool]:
    """(seconds, finished) of a ``workflow_run_get`` / ``workflow_run_list`` run: from its
    creation to its last update when it is finished, else to ``now``."""
    start = moment(run.get("created_at"))
    finished = run.get("run_status") in _TERMINAL
    end = moment(run.get("updated_at")) if finished else now
    return max(0.0, (end - start).total_seconds()), finished


def duration_of(run: Mapping[str, Any]) -> str:
    """A run's duration in words, "so far" while it is unfinished."""
    seconds, finished = run_seconds(run, datetime.now(UTC))
    return duration_text(seconds) + ("" if finished else " so far")


def duration_text(seconds: float) -> str:
    """``850 ms``, ``4.2 s``, ``3 min 5 s``, ``2 h 4 min``, ``3 d 1 h``: two units at most."""
    if seconds < 1:
        return f"{round(seconds * 1000)} ms"
    if seconds < 10:
        return f"{seconds:.1f} s"
    whole = int(seconds)
    days, rest = divmod(whole, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    if days:
        return f"{days} d {hours} h"
    if hours:
        return f"{hours} h {minutes} min"
    if minutes:
        return f"{minutes} min {secs} s"
    return f"{secs} s"


def _ended(record: flow.VertexRecord) -> datetime | None:
    return record.completed_at or record.failed_at or record.interrupted_at


async def read_time(
    session: WorkflowSession,
    run: Mapping[str, Any],
    labels: Mapping[str, str],
    now: datetime,
    *,
    calls: Sequence[Mapping[str, Any]] = (),
) -> RunTime:
    """The run's time (``run`` is its ``workflow_run_get`` result; ``labels`` its
    vertices' labels; ``calls`` a deployed run's trace entries)."""
    seconds, finished = run_seconds(run, now)
    start = moment(run.get("created_at"))
    end = moment(run.get("updated_at")) if finished else now
    records: dict[tuple[int, str], flow.VertexRecord] = {}
    cut = False
    try:
        record = await session.registry.get(session.session_id, str(run["run_id"]))
        latest = int(record.checkpoint_revision)
        after = max(-1, latest - WINDOW)
        cut = after >= 0
        for checkpoint in await session.checkpoints.history(
            record.graph_run_id, after=after, limit=WINDOW + 1
        ):
            for vertex in checkpoint.vertices:  # a later checkpoint's record is newer
                records[(vertex.step, vertex.vertex_run_id or vertex.vertex)] = vertex
    except (LookupError, flow.CheckpointNotFoundError):
        pass
    drawn = [_vertex_bar(item, labels) for item in records.values()]
    drawn += [_call_bar(call) for call in calls]
    bars = [bar for bar in drawn if bar is not None]
    bars.sort(key=lambda bar: (bar.start, bar.kind != "vertex", bar.lane))
    return RunTime(
        seconds=seconds,
        finished=finished,
        start=start,
        end=end,
        vertices=_per_vertex(records.values(), labels),
        bars=tuple(bars),
        cut=cut,
    )


def _vertex_bar(record: flow.VertexRecord, labels: Mapping[str, str]) -> Bar | None:
    began = record.started_at or record.created_at
    if began is None:
        return None
    return Bar(
        lane=labels.get(record.vertex) or record.vertex,
        kind="vertex",
        vertex=record.vertex,
        start=began,
        end=_ended(record),
        status=record.status.name.lower(),
        attempts=max(1, record.attempt),
    )


def _call_bar(call: Mapping[str, Any]) -> Bar | None:
    if not call.get("tool"):
        return None
    began, ended = moment(call.get("started_at")), moment(call.get("ended_at"))
    if began.year == 1970:
        return None
    return Bar(
        lane=f"{call.get('dependency', '')}/{call['tool']}",
        kind="tool",
        vertex=str(call.get("vertex", "")),
        start=began,
        end=None if ended.year == 1970 else ended,
        status=str(call.get("status", "")),
        attempts=max(1, int(call.get("attempt") or 1)),
    )


def _per_vertex(
    records: Sequence[flow.VertexRecord] | Any, labels: Mapping[str, str]
) -> tuple[VertexTime, ...]:
    first: dict[str, datetime] = {}
    executions: dict[str, int] = {}
    attempts: dict[str, int] = {}
    seconds: dict[str, float] = {}
    still: dict[str, bool] = {}
    for record in records:
        began = record.started_at or record.created_at
        name = record.vertex
        if began is not None and (name not in first or began < first[name]):
            first[name] = began
        executions[name] = executions.get(name, 0) + 1
        attempts[name] = attempts.get(name, 0) + max(1, record.attempt)
        ended = _ended(record)
        if began is not None and ended is not None:
            seconds[name] = seconds.get(name, 0.0) + max(0.0, (ended - began).total_seconds())
        elif ended is None:
            still[name] = True
    order = sorted(executions, key=lambda name: (name not in first, first.get(name), name))
    return tuple(
        VertexTime(
            vertex=name,
            label=labels.get(name) or name,
            executions=executions[name],
            attempts=attempts[name],
            seconds=seconds.get(name, 0.0),
            open=still.get(name, False),
        )
        for name in order
    )
