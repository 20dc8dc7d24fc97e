"""What the pages show, read through the session's tool bundle only: nothing a tool
result excludes (inputs, state, session internals) can reach these pages. The one page
that shows a run's state, input and payloads to its own session is `run_data`'s.

The runs page reads one page of runs (``workflow_run_list`` newest first, filtered by
the storage index), whatever the session holds. The live runs table reads the runs whole
(up to `MAX_RUNS`) once, then only those that can have changed (`streams.RowEvents`).
"""

from __future__ import annotations

import json
import weakref
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Final

from .. import flow
from ..deploy.deployments.definition import unchecked_environment
from ..deploy.deployments.service import DeployService
from ..deploy.runs.compile import compile_saved
from ..deploy.sources.spec import Source
from ..tools import ToolError, WorkflowTools
from ..tools.queued import QUEUED
from ..workflows import Catalog
from ..workflows.errors import UnknownDefinitionError
from ..workflows.records.run import RunStatus
from ..workflows.runtime.session import WorkflowSession
from .graph import Picture, graph_shape, layout
from .states import Latest

__all__ = [
    "MAX_RUNS",
    "PAUSE_FILTERS",
    "RUNS_PAGE",
    "TIMELINE_PAGE",
    "Cursor",
    "GraphCache",
    "RunFilter",
    "all_history",
    "all_runs",
    "get_run",
    "inherited_vertices",
    "latest_vertices",
    "moment",
    "parse_cursor",
    "pause_kind",
    "pretty_json",
    "progress",
    "recent_history",
]

MAX_RUNS: Final = 5000
RUNS_PAGE: Final = 25
TIMELINE_PAGE: Final = 50
_MAX_HISTORY_PAGES: Final = 200  # 20 000 entries: the vertex states of longer runs are cut
# The run page and the runs table read the history of a run's last RECENT_REVISIONS
# checkpoint revisions only, so a page costs the same however long the run is; vertices
# last completed before that window show as not reached on very long runs.
RECENT_REVISIONS: Final = 100


@dataclass(frozen=True)
class Cursor:
    """A history position: entries after ``event_id`` of ``revision`` (or, without
    ``event_id``, from ``revision`` on)."""

    revision: int = 0
    event_id: str = ""

    def arguments(self) -> dict[str, Any]:
        out: dict[str, Any] = {"after_revision": self.revision}
        if self.event_id:
            out["after_event_id"] = self.event_id
        return out

    def text(self) -> str:
        return f"{self.revision}:{self.event_id}" if self.event_id else ""

    @staticmethod
    def after(entry: Mapping[str, Any]) -> Cursor:
        return Cursor(int(entry["revision"]), str(entry["event_id"]))


def parse_cursor(text: str | None) -> Cursor | None:
    """``"<revision>:<event id>"`` (an SSE event ID, a timeline link); None if malformed.
    The empty text is the start of the history."""
    if not text:
        return Cursor()
    revision, sep, event_id = text.partition(":")
    if not sep or not revision.isdigit() or len(revision) > 19 or not event_id:
        return None
    return Cursor(int(revision), event_id)


_EPOCH: Final = datetime(1970, 1, 1, tzinfo=UTC)


def moment(text: object) -> datetime:
    """A result's RFC 3339 time as an instant (the text is not comparable as text: its
    fractional seconds have no fixed width); the epoch for anything else."""
    try:
        value = datetime.fromisoformat(str(text))
    except ValueError:
        return _EPOCH
    return value if value.tzinfo is not None else _EPOCH


def pretty_json(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=False)


async def all_runs(tools: WorkflowTools) -> list[dict[str, Any]]:
    runs: list[dict[str, Any]] = []
    after = ""
    while len(runs) < MAX_RUNS:
        arguments: dict[str, Any] = {"limit": 100}
        if after:
            arguments["after"] = after
        page = await tools.call("workflow_run_list", arguments)
        runs.extend(page["runs"])
        after = page.get("next", "")
        if not after:
            break
    return runs[:MAX_RUNS]


async def all_history(
    tools: WorkflowTools, run_id: str, cursor: Cursor | None = None
) -> list[dict[str, Any]]:
    """The run's history entries after ``cursor`` (all of them without)."""
    entries: list[dict[str, Any]] = []
    position = cursor or Cursor()
    for _ in range(_MAX_HISTORY_PAGES):
        page = await tools.call(
            "workflow_run_history", {"run_id": run_id, "limit": 100, **position.arguments()}
        )
        entries.extend(page["entries"])
        if "next_revision" not in page or not page["entries"]:
            break
        position = Cursor.after(page["entries"][-1])
    return entries


async def recent_history(tools: WorkflowTools, run: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The run's history entries of its last `RECENT_REVISIONS` checkpoint revisions."""
    start = max(0, int(run["checkpoint_revision"]) - RECENT_REVISIONS)
    return await all_history(tools, str(run["run_id"]), Cursor(start))


async def get_run(tools: WorkflowTools, run_id: str) -> dict[str, Any]:
    """``workflow_run_get``, its readiness checking the graph only: for a deployed run
    the full check connects to every pinned source, which a page load or a stream's
    wake must not do (the Revalidate button asks for it)."""
    with unchecked_environment():
        return await tools.call("workflow_run_get", {"run_id": run_id})


_MAX_FORK_DEPTH: Final = 8  # origins of origins read for a fork's inherited vertices


async def inherited_vertices(
    tools: WorkflowTools, run: Mapping[str, Any], *, depth: int = 0
) -> frozenset[str]:
    """The vertices a fork's origin completed up to the revision it was forked from (and
    its own origin's, up to `_MAX_FORK_DEPTH` forks back): a fork's history starts at its
    seed, so without these the steps it inherited finished would read "not reached".
    Empty for a run that is not a fork, and for an origin no longer there (pruned).
    Read through the session's tools: another session's run is never read."""
    origin = run.get("forked_from")
    if not isinstance(origin, Mapping) or depth >= _MAX_FORK_DEPTH:
        return frozenset()
    origin_id, revision = str(origin["run_id"]), int(origin["revision"])
    try:
        parent = await get_run(tools, origin_id)
    except ToolError:
        return frozenset()
    done = set(await inherited_vertices(tools, parent, depth=depth + 1))
    position = Cursor()
    for _ in range(_MAX_HISTORY_PAGES):
        page = await tools.call(
            "workflow_run_history", {"run_id": origin_id, "limit": 100, **position.arguments()}
        )
        for entry in page["entries"]:
            if int(entry["revision"]) > revision:
                return frozenset(done)
            if entry.get("kind") == "vertex_completed" and entry.get("vertex_id"):
                done.add(str(entry["vertex_id"]))
        if "next_revision" not in page or not page["entries"]:
            break
        position = Cursor.after(page["entries"][-1])
    return frozenset(done)


async def latest_vertices(session: WorkflowSession, run_id: str) -> Latest | None:
    """The vertex records of the run's latest checkpoint (statuses only: the checkpoint's
    state is not read out); None before its first checkpoint. The registry lookup is the
    session's own, so another session's run is not found."""
    try:
        run = await session.registry.get(session.session_id, run_id)
        checkpoint = await session.checkpoints.latest(run.graph_run_id)
    except (LookupError, flow.CheckpointNotFoundError):
        return None
    statuses: dict[str, str] = {}
    for record in sorted(checkpoint.vertices, key=lambda r: r.step):
        statuses[record.vertex] = record.status.name.lower()
    routed = checkpoint.phase is flow.StepPhase.ROUTED
    return Latest(statuses, tuple(checkpoint.frontier) if routed else ())


async def progress(tools: WorkflowTools, run: Mapping[str, Any]) -> tuple[int, int] | None:
    """(completed, total) vertices from the run's latest activities, if they say."""
    page = await tools.call(
        "workflow_run_history",
        {"run_id": run["run_id"], "after_revision": int(run["checkpoint_revision"]), "limit": 100},
    )
    for entry in reversed(page["entries"]):
        if entry.get("total_vertices"):
            return int(entry.get("completed_vertices", 0)), int(entry["total_vertices"])
    if page["entries"] or run["checkpoint_revision"] == 0:
        return None
    latest = await recent_history(tools, run)  # the cursor ran ahead: read the window
    for entry in reversed(latest):
        if entry.get("total_vertices"):
            return int(entry.get("completed_vertices", 0)), int(entry["total_vertices"])
    return None


PAUSE_FILTERS: Final = {"interrupted:request": "request", "interrupted:error": "error"}
"""The status filter's values that tell an interrupted run's pause kinds apart: a request
pause waits for an answer, an errored pause for a retry (`pause_kind`)."""


@dataclass(frozen=True)
class RunFilter:
    """The runs list's filters. ``status`` is a run status, a `PAUSE_FILTERS` value
    (interrupted runs of one pause kind) or ``queued`` (pending runs waiting for a slot of
    a ``max_running`` limit, as ``workflow_run_list``'s filter of that name)."""

    status: str = ""
    definition: str = ""
    search: str = ""

    @property
    def run_status(self) -> str:
        """The run status the list is filtered by (``interrupted`` for a pause kind,
        ``pending`` for queued runs)."""
        if self.status == QUEUED:
            return str(RunStatus.PENDING)
        return "interrupted" if self.status in PAUSE_FILTERS else self.status

    @property
    def pause(self) -> str:
        """The pause kind the list is filtered by, or ``""``."""
        return PAUSE_FILTERS.get(self.status, "")

    def matches(self, run: Mapping[str, Any]) -> bool:
        """Whether a ``workflow_run_list`` run passes the filters other than the pause
        kind, which the run does not say (`matches_pause` checks it on the row)."""
        if self.run_status and run["run_status"] != self.run_status:
            return False
        if self.definition and run["definition_name"] != self.definition:
            return False
        return not (self.search and not str(run["run_id"]).startswith(self.search.strip().lower()))

    def matches_pause(self, row: Mapping[str, Any]) -> bool:
        """Whether a row (a run with its ``pause_kind``, `pause_kind`, and its ``queued``
        place if it waits for a slot) has the pause kind, or the place in a queue, the
        list is filtered by."""
        if self.status == QUEUED:
            return bool(row.get("queued"))
        return not self.pause or row.get("pause_kind") == self.pause

    def arguments(self) -> dict[str, str]:
        """The ``workflow_run_list`` arguments of this filter's newest-first pages (a run ID
        search lists the IDs that start with it, in run-ID order)."""
        out = {"order": "newest"}
        if self.run_status:
            out["status"] = QUEUED if self.status == QUEUED else self.run_status
        if self.definition:
            out["definition"] = self.definition
        if self.search:
            out["run_id_prefix"] = self.search.lower()
        return out

    def query(self) -> dict[str, str]:
        return {
            key: value
            for key, value in (
                ("status", self.status),
                ("definition", self.definition),
                ("q", self.search),
            )
            if value
        }


async def pause_kind(tools: WorkflowTools, run: Mapping[str, Any]) -> str:
    """An interrupted run's pause kind (``request`` or ``error``, its pending pause's
    ``kind``); ``""`` for any other run, or one that is no longer interrupted."""
    if run.get("run_status") != "interrupted":
        return ""
    pending = (await get_run(tools, str(run["run_id"]))).get("pending")
    return str(pending.get("kind", "")) if isinstance(pending, Mapping) else ""


class GraphCache:
    """Each definition's laid-out picture, computed once per session catalog (definitions
    are immutable, but a deployment revision's name and version mean another definition
    in another session, so the pictures are kept per catalog)."""

    def __init__(self) -> None:
        self._pictures: weakref.WeakKeyDictionary[
            Catalog, dict[tuple[str, str], Picture | None]
        ] = weakref.WeakKeyDictionary()
        self._artifacts: dict[str, Picture | None] = {}

    def picture(self, catalog: Catalog, name: str, version: str) -> Picture | None:
        pictures = self._pictures.setdefault(catalog, {})
        key = (name, version)
        if key not in pictures:
            try:
                definition = catalog.resolve(name, version)
            except UnknownDefinitionError:
                return None
            shape = graph_shape(definition)
            pictures[key] = None if shape is None else layout(shape)
        return pictures[key]

    async def artifact_picture(
        self, service: DeployService, closure_digest: str, name: str, version: str
    ) -> Picture | None:
        """A saved artifact's picture, by the digest of its closure (the same bytes draw
        the same graph in every session). It is compiled with sources that are never
        connected: the definition is only looked at, never run."""
        if closure_digest not in self._artifacts:
            closure = await service.artifacts.closure(service.session.session_id, name, version)
            dependencies = {
                dependency
                for stored in closure.values()
                for dependency in stored.validated.artifact.dependencies
            }
            definition = await compile_saved(
                service.artifacts,
                service.session.session_id,
                name,
                version,
                sources={dependency: _never_connected for dependency in dependencies},
            )
            shape = graph_shape(definition)
            self._artifacts[closure_digest] = None if shape is None else layout(shape)
        return self._artifacts[closure_digest]


def _never_connected() -> Source:
    raise RuntimeError("an artifact drawn for the dashboard is never run")
