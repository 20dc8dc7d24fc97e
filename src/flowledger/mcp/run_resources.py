"""A session's runs as MCP resources, reached through templates (``resources/list`` keeps
only the schemas):

* ``flowledger://runs/{run_id}`` - the run: for a deployed run the ``inspect_run`` JSON
  (status, deployment, resume readiness *not* revalidated, interrupt, error, trace
  count), for any other run the ``workflow_run_get`` JSON (status, pending, readiness).
  Reading never connects to a source (`unchecked_environment`). Both carry ``owner``:
  whether some process executes the run now, as ``workflow_run_get`` says it
  (`flowledger.workflows.runtime.ownership.run_owner`: the run's own session lease,
  ``{"live": true, "lease_epoch", "until"}`` or ``{"live": false, "since"}``, never the
  holder's identity), and ``null`` for a paused or finished run, which needs no owner.
* ``flowledger://runs/{run_id}/history`` - the first page (100 activities) of the run's
  activity history, the ``workflow_run_history`` JSON: state-free, as the tool's.
* ``flowledger://runs/{run_id}/trace`` - the first page (100 entries) of a deployed run's
  trace, the ``read_run_trace`` JSON; a run that is not deployed has no trace resource.

Everything is read through the served session's own tools, so a run of another session
is "no resource", exactly as a nonexistent one. A URI that is not of these shapes (not a
canonical lowercase UUID, a path segment more or less, over `MAX_URI` characters) is
refused the same way, quoted to at most 64 characters.
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any, Final, Literal, Protocol

import mcp_types as types
from mcp.shared.exceptions import MCPError

from ..deploy import NotADeployedRunError
from ..deploy.deployments.definition import revision_of, unchecked_environment
from ..tools import ToolError

__all__ = [
    "MAX_URI",
    "RUNS_PREFIX",
    "RUN_MIME_TYPE",
    "RunResources",
    "RunUri",
    "no_resource",
    "parse_run_uri",
    "run_templates",
    "run_uris",
]

RUNS_PREFIX: Final = "flowledger://runs/"
RUN_MIME_TYPE: Final = "application/json"
#: Longer URIs are refused before anything is parsed or read.
MAX_URI: Final = 128
_MAX_QUOTED: Final = 64
_PAGE: Final = 100  # the history and trace pages' size (both tools' maximum)
_UUID: Final = "[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
_RUN_URI: Final = re.compile(rf"flowledger://runs/({_UUID})(?:/(history|trace))?")

View = Literal["run", "history", "trace"]


class ToolCaller(Protocol):
    async def call(
        self, name: str, arguments: Mapping[str, Any] | str | bytes | None
    ) -> dict[str, Any]: ...


@dataclass(frozen=True)
class RunUri:
    """A parsed run resource URI."""

    run_id: str
    view: View


def parse_run_uri(uri: str) -> RunUri | None:
    """The run and view ``uri`` names, or None if it is not a run resource URI."""
    if len(uri) > MAX_URI:
        return None
    match = _RUN_URI.fullmatch(uri)
    if match is None:
        return None
    view: View = "run" if match.group(2) is None else match.group(2)  # type: ignore[assignment]
    return RunUri(match.group(1), view)


def run_uris(run_id: str) -> tuple[str, str, str]:
    """The three resource URIs of one run."""
    base = RUNS_PREFIX + run_id
    return base, base + "/history", base + "/trace"


def no_resource(uri: str, why: str = "") -> MCPError:
    """The protocol's "resource not found" (``INVALID_PARAMS``), quoting ``uri`` boundedly."""
    quoted = repr(uri[:_MAX_QUOTED]) + ("..." if len(uri) > _MAX_QUOTED else "")
    return MCPError(types.INVALID_PARAMS, f"no resource {quoted}" + (f": {why}" if why else ""))


def run_templates() -> list[types.ResourceTemplate]:
    return [
        types.ResourceTemplate(
            uri_template=RUNS_PREFIX + "{run_id}",
            name="run",
            title="A workflow run",
            description=(
                "One run of this session: status, pending request or error, resume "
                "readiness (not revalidated); a deployed run's deployment and pin."
            ),
            mime_type=RUN_MIME_TYPE,
        ),
        types.ResourceTemplate(
            uri_template=RUNS_PREFIX + "{run_id}/history",
            name="run-history",
            title="A run's activity history",
            description="The first 100 activities of the run (workflow_run_history).",
            mime_type=RUN_MIME_TYPE,
        ),
        types.ResourceTemplate(
            uri_template=RUNS_PREFIX + "{run_id}/trace",
            name="run-trace",
            title="A deployed run's trace",
            description="The first 100 trace entries of a deployed run (read_run_trace).",
            mime_type=RUN_MIME_TYPE,
        ),
    ]


class RunResources:
    """Reads the run resources of one session through its tools (``visible``: the tool
    names the server serves; ``inspect_run``/``read_run_trace`` may be absent)."""

    def __init__(self, tools: ToolCaller, visible: Collection[str]) -> None:
        self._tools = tools
        self._deploy = "inspect_run" in visible and "read_run_trace" in visible

    async def read(self, uri: str) -> types.ReadResourceResult:
        """The resource at ``uri`` (a run resource URI); `MCPError` if there is none."""
        parsed = parse_run_uri(uri)
        if parsed is None:
            raise no_resource(uri)
        body = await self.body(uri, parsed)
        text = json.dumps(body, ensure_ascii=False, separators=(",", ":"))
        return types.ReadResourceResult(
            contents=[types.TextResourceContents(uri=uri, mime_type=RUN_MIME_TYPE, text=text)]
        )

    async def body(self, uri: str, parsed: RunUri) -> dict[str, Any]:
        run_id = parsed.run_id
        with unchecked_environment():  # a reader never starts a source process
            if parsed.view == "history":
                return await self._call(uri, "workflow_run_history", run_id, limit=_PAGE)
            got = await self._call(uri, "workflow_run_get", run_id)
            deployed = self._deploy and revision_of(str(got.get("definition_version"))) is not None
            if parsed.view == "trace":
                if not deployed:
                    raise no_resource(uri, "the run is not a deployed run")
                return await self._call(uri, "read_run_trace", run_id, start=0, limit=_PAGE)
            owner = got.get("owner")
            if not deployed:
                return {**got, "owner": owner}
            try:
                inspected = await self._tools.call(
                    "inspect_run", {"run_id": run_id, "revalidate": False}
                )
            except ToolError as exc:
                if isinstance(exc.cause, NotADeployedRunError):
                    # an app's definition whose version merely looks like one
                    return {**got, "owner": owner}
                raise no_resource(uri, exc.message) from exc
            return {**inspected, "owner": owner}

    async def _call(self, uri: str, tool: str, run_id: str, **extra: Any) -> dict[str, Any]:
        try:
            return await self._tools.call(tool, {"run_id": run_id, **extra})
        except ToolError as exc:
            raise no_resource(uri, exc.message) from exc
