"""What a fork means on the pages: its progress over its own steps, and which of the
steps it runs again need a person's confirmation.

Progress: a fork's activities count the vertices it completes itself; the steps its
origin finished before the fork point (`views.inherited_vertices`) are not its work, so
they leave its total too: a fork that ran its one remaining step reads 1/1, not 1/3.

Confirmation: running a step again calls its tools again. A deployed run's steps are
known by its origin's trace (which tool each vertex called) and its pin (each tool's
read-only annotation as pinned): a step that called only read-only tools, or none (a
``set``, a ``switch``, an ``end``), runs again without asking. A step that called a tool
not annotated read-only, a step the trace read does not cover, and every step of a
Python definition (whose calls the dashboard cannot know) need the confirmation.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Any, Final

from ..deploy import NotADeployedRunError
from ..deploy.deployments.definition import revision_of
from ..deploy.deployments.store import DeploymentNotFoundError
from ..deploy.runs.trace import MAX_TRACE_PAGE
from ..tools import ToolError
from .sessions import Served

__all__ = ["TRACE_PAGES", "asks_again", "own_progress"]

TRACE_PAGES: Final = 10  # trace pages read to learn what each vertex called


def own_progress(
    done: tuple[int, int] | None, inherited: Collection[str]
) -> tuple[int, int] | None:
    """(completed, total) over a fork's own steps: the total less what it inherited."""
    if done is None or not inherited:
        return done
    total = max(1, done[1] - len(inherited))
    return min(done[0], total), total


async def _calls_by_vertex(served: Served, run_id: str) -> tuple[dict[str, set[str]], bool]:
    """Each vertex's tool calls in the run's trace as ``dependency/tool`` (a vertex with
    no call has an empty set), and whether the whole trace was read."""
    calls: dict[str, set[str]] = {}
    start = 0
    for _ in range(TRACE_PAGES):
        page = await served.deploy.call(
            "read_run_trace", {"run_id": run_id, "start": start, "limit": MAX_TRACE_PAGE}
        )
        for entry in page["entries"]:
            tools = calls.setdefault(str(entry.get("vertex") or entry.get("node")), set())
            if entry.get("tool"):
                tools.add(f"{entry.get('dependency', '')}/{entry['tool']}")
        start += len(page["entries"])
        if not page["entries"] or start >= int(page["total"]):
            return calls, True
    return calls, False


async def asks_again(served: Served, run: Mapping[str, Any], again: Sequence[str]) -> list[str]:
    """Which of ``again`` (the steps a fork of ``run`` runs again) need a confirmation."""
    if not again or revision_of(str(run["definition_version"])) is None:
        return list(again)
    run_id = str(run["run_id"])
    try:
        calls, whole = await _calls_by_vertex(served, run_id)
    except ToolError as exc:
        if isinstance(exc.cause, NotADeployedRunError | DeploymentNotFoundError):
            return list(again)  # an app's definition whose version merely looks like one
        raise
    pin = await served.deploy.service.pin_of(run_id)
    read_only = set()
    if pin is not None:
        for dependency, found in pin.sources.items():
            for tool, prints in found["tools"].items():
                if prints.get("read_only") is True:
                    read_only.add(f"{dependency}/{tool}")
    asks = []
    for vertex in again:
        called = calls.get(vertex)
        if called is None and not whole:
            asks.append(vertex)  # not in the part of the trace read
        elif called and not called <= read_only:
            asks.append(vertex)
    return asks
