"""The run's time page (``GET /runs/{id}/time``): its duration, each vertex's time,
executions, attempts and retries, and its timeline (`gantt`), read through the
session's own tools and registry (`timing`), so another session's run is not found."""

from __future__ import annotations

from typing import Any, Final

from ..deploy import NotADeployedRunError
from ..deploy.deployments.definition import revision_of
from ..deploy.deployments.store import DeploymentNotFoundError
from ..deploy.runs.trace import MAX_TRACE_PAGE
from ..tools import ToolError
from .gantt import MAX_BARS, render_gantt
from .sessions import Served
from .timing import read_time
from .views import GraphCache, get_run

__all__ = ["MAX_CALLS", "time_view"]

MAX_CALLS: Final = MAX_TRACE_PAGE  # a deployed run's tool calls drawn: its trace's first page


async def _calls(served: Served, run: dict[str, Any]) -> list[dict[str, Any]]:
    """A deployed run's first trace entries (none for any other run)."""
    if revision_of(str(run["definition_version"])) is None:
        return []
    try:
        page = await served.deploy.call(
            "read_run_trace", {"run_id": run["run_id"], "start": 0, "limit": MAX_CALLS}
        )
    except ToolError as exc:
        if isinstance(exc.cause, NotADeployedRunError | DeploymentNotFoundError):
            return []
        raise
    return list(page["entries"])


async def time_view(served: Served, graphs: GraphCache, run_id: str) -> dict[str, Any]:
    run = await get_run(served.tools, run_id)
    picture = graphs.picture(
        served.session.catalog, str(run["definition_name"]), str(run["definition_version"])
    )
    labels = dict(picture.shape.vertices) if picture is not None else {}
    calls = await _calls(served, run)
    time = await read_time(served.session, run, labels, served.session.clock.now(), calls=calls)
    return {
        "run": run,
        "time": time,
        "gantt": render_gantt(time, title=f"timeline of run {run_id[:8]}") if time.bars else None,
        "more_bars": len(time.bars) > MAX_BARS,
        "calls_cut": len(calls) >= MAX_CALLS,
    }
