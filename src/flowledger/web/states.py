"""Each vertex's state in one run, from what the owning session may see: the run's
activity history (``vertex_completed`` entries name their vertex), its status, and its
pending pause (the paused or errored vertex), and, when given, the latest checkpoint's
per-vertex records (``latest``: each vertex's status in its latest execution, and the
next step's frontier). No checkpoint *state* is read.

A vertex re-entered in a loop has completed before, yet runs again: the checkpoint's
record of its latest execution, not the history, says what it is doing now.

* ``done``: completed at least once in this run, or, in a fork, by its origin before
  the fork point (``inherited``);
* ``paused``: the vertex a pending request waits at;
* ``failed``: the vertex of an errored pause, or of the error that failed the run;
* ``running``: while the run runs, its frontier: the entry before anything completed,
  and each not-yet-completed vertex whose edge predecessors have all completed (a join
  waits for all of its branches), or that is a target of a completed route source (each
  target is a candidate until one completes);
* ``cancelled``: in a cancelled run, each vertex its latest checkpoint has under way
  (running, pending or paused) or about to run (the routed frontier) when the cancel
  came: the step the cancel interrupted;
* ``not_reached``: everything else.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from .graph import GraphShape

__all__ = ["STATES", "Latest", "vertex_states"]

STATES: Final = ("not_reached", "running", "done", "paused", "failed", "cancelled")
# a checkpoint's vertex status (`flow.VertexStatus` names, lower case) as a picture state
_RECORDED: Final = {
    "pending": "running",
    "running": "running",
    "done": "done",
    "interrupted": "paused",
    "failed": "failed",
}


@dataclass(frozen=True)
class Latest:
    """What the latest checkpoint says of the vertices: each one's status in its latest
    execution (`flow.VertexStatus` names, lower case) and, once its step has routed, the
    next step's frontier (``next``)."""

    statuses: Mapping[str, str] = field(default_factory=dict)
    next: Sequence[str] = ()


def vertex_states(
    shape: GraphShape,
    run: Mapping[str, Any],
    entries: Sequence[Mapping[str, Any]],
    latest: Latest | None = None,
    inherited: Collection[str] = (),
) -> dict[str, str]:
    """``{vertex_id: state}`` for every vertex of ``shape``; ``run`` is a
    ``workflow_run_get`` result, ``entries`` the run's history entries in order and
    ``latest`` its latest checkpoint's vertex records (without: the history alone)."""
    names = [name for name, _ in shape.vertices]
    states = dict.fromkeys(names, "not_reached")
    done = {str(e["vertex_id"]) for e in entries if e.get("kind") == "vertex_completed"}
    done |= set(inherited)
    for name in done & states.keys():
        states[name] = "done"
    status = str(run.get("run_status", ""))
    if latest is not None and (latest.statuses or latest.next):
        for name, recorded in latest.statuses.items():
            if name in states:
                state = _RECORDED.get(recorded, "done")
                # a record left by a run that has since stopped is no longer under way
                if (state == "running" and status != "running") or (
                    state == "paused" and status != "interrupted"
                ):
                    state = "done" if name in done else "not_reached"
                states[name] = state
        if status == "running":
            for name in latest.next:
                if name in states:
                    states[name] = "running"
        if status == "cancelled":
            for name, recorded in latest.statuses.items():
                if name in states and _RECORDED.get(recorded) in ("running", "paused"):
                    states[name] = "cancelled"
            for name in latest.next:
                if states.get(name) == "not_reached":
                    states[name] = "cancelled"
    elif status == "running":
        frontier = {shape.entry} if not done else set()
        for name in names:
            before = [a for a, b in shape.edges if b == name]
            routed = [a for a, b in shape.routes if b == name]
            if (before and all(a in done for a in before)) or any(a in done for a in routed):
                frontier.add(name)
        for name in frontier - done:
            states[name] = "running"
    pending = run.get("pending")
    if isinstance(pending, Mapping):
        paused = "failed" if pending.get("kind") == "error" else "paused"
        for item in pending.get("vertices") or [pending]:
            vertex = item.get("vertex_id") if isinstance(item, Mapping) else None
            if vertex in states:
                states[str(vertex)] = paused
    error = run.get("error")
    if status == "failed" and isinstance(error, Mapping):
        vertex = error.get("vertex_id")
        if vertex in states:
            states[str(vertex)] = "failed"
    return states
