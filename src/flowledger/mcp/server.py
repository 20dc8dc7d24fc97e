"""The MCP server over one session's tools (official ``mcp`` SDK, low-level
`mcp.server.lowlevel.Server`): the ``workflow_*`` bundle, or that bundle combined with the
deploy, draft, capability, fork and prune tools (`flowledger.mcp._session`).

* The initialize result's ``instructions`` describe the tools; with the authoring tools
  (drafts, capabilities, deployments) also the authoring loop, the shape of a
  diagnostic and the resources.
* ``resources/list`` and ``resources/read`` serve the document formats' JSON Schemas
  (`flowledger.mcp.resources`): the same for every session, reading nothing stored.
* ``resources/templates/list`` and ``resources/read`` serve the session's runs
  (`flowledger.mcp.run_resources`); with ``registry``, ``subscriptions/listen``
  (`flowledger.mcp.listen`) notifies a run resource's changes and a task's status, and
  ``resources/subscribe`` (`flowledger.mcp.resource_subscribe`) a run resource's changes
  to a handshake-era client.

* Runs as MCP tasks (`flowledger.mcp.tasks`): a 2026-07-28 client declaring the
  ``io.modelcontextprotocol/tasks`` extension gets the run-starting and run-resuming
  tools' answers as tasks, and ``tasks/get`` / ``tasks/update`` / ``tasks/cancel`` on
  them; a client declaring form elicitation is asked a run's request pause as a form
  (`flowledger.mcp.elicit`, `flowledger.mcp.forms`).

* ``tools/list`` publishes the bundle's tools with their exact names, descriptions and
  input schemas (plus a ``readOnlyHint`` annotation). With ``read_only`` the mutating
  tools are hidden, and calling one is refused.
* ``tools/call`` answers with one text content block holding the compact JSON result.
  A failure - a `ToolError`, bad arguments, an unknown or hidden tool, even an
  unexpected exception - is a tool result with ``isError: true`` whose text is the
  model-safe message; it is never a protocol error and never takes the server down.
* While a call runs, the session's activities are forwarded to the client: as
  ``notifications/progress`` (progress = completed vertices, total = total vertices,
  message = ``"<kind> <vertex label>"``; in a graph with a loop every completion still
  advances progress by one, and once it passes the total no total is sent) when the
  request carries a progress token,
  otherwise as ``notifications/message`` log entries (level ``info``, data = the activity
  JSON without its session ID) where the protocol allows them (always on handshake-era
  connections, subject to ``logging/setLevel``; on 2026-07-28 connections only when the
  request opted in to ``info``). Activities never hold state, inputs or interrupt
  payloads, so neither do the notifications.

Which activities a call forwards: those of the run it is about - the ``run_id``
argument, or for ``workflow_run_start`` and ``workflow_run_fork`` the run it creates
(collected during the call, sent once the run ID is known) - and, for a call about no
particular run, every activity of the session. Progress must increase within a request,
so an activity that would not advance it (a terminal or paused activity after the last
completed vertex) is not sent as progress. Everything is sent before the call's result.

Where they come from: a server that executes the session's runs hears them live, as
its supervisor publishes them. A server that does not (``executes=False``: a front door
whose runs a worker executes, or a read-only server beside the owner) follows the run's
durable journal while the call waits (`JournalFollower`, a read every 0.1 s); a call
about no particular run then forwards nothing.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final, Protocol

import mcp_types as types
from mcp.server.connection import allowed_log_levels
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.lowlevel import Server
from mcp_types import LoggingLevel
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from .. import __version__
from ..tools import ToolError, ToolInfo, result_text
from ..workflows.activities.activity import ActivityKind, ActivityRecord
from ..workflows.activities.follow import JournalFollower
from ..workflows.activities.journal import ActivityJournal
from .elicit import PauseElicitation, request_state_boundary
from .extensions import install_extension
from .listen import RunListen
from .resource_subscribe import ResourceSubscriptions
from .resources import list_resources, read_resource
from .run_resources import RunResources, parse_run_uri, run_templates
from .run_watch import RunReader
from .tasks import RunTasks

__all__ = [
    "LOGGER_NAME",
    "SERVER_NAME",
    "START_TOOL",
    "ToolBundle",
    "WorkflowMcpServer",
    "activity_message",
    "build_server",
]

log = logging.getLogger(__name__)

SERVER_NAME: Final = "flowledger"
LOGGER_NAME: Final = "flowledger.activity"
#: The tool whose run is only known from its result.
START_TOOL: Final = "workflow_run_start"
#: The tools that make a new run: the run a call is about is the one its result names.
_CREATING_TOOLS: Final = frozenset({START_TOOL, "workflow_run_fork"})
INSTRUCTIONS: Final = (
    "Durable graph workflows. List definitions with workflow_definition_list, start a run "
    "with workflow_run_start, follow it with workflow_run_get / workflow_run_history, answer "
    "an interrupted run with workflow_run_resume, stop one with workflow_run_cancel."
)
#: Told when the server has the authoring tools (drafts, capabilities, deployments).
AUTHORING_INSTRUCTIONS: Final = (
    "Build and run declarative workflows (flowledger.artifact/v1) against the registered "
    "MCP sources: 1. find tools with capability_list {query} and read one with "
    "capability_inspect {source, tool}; 2. draft_create {name, from?} starts a draft "
    "(from a capability {source, tool} gives a one-node workflow calling it); 3. edit it "
    "with draft_add_tool, draft_connect, draft_set_output or draft_patch (RFC 6902), each "
    "with the draft's current revision; 4. draft_validate checks it against the "
    "catalog; 5. draft_publish {draft, revision, version, deploy: true} saves the "
    "artifact and a deployment; 6. run_deployment {deployment, input} starts a run; "
    "7. inspect_run, read_run_trace and resume_run {run_id, payload} follow and answer it. "
    "Every diagnostic is {place, code, message, hint, next_actions}: each next action is a "
    "tool call {tool, arguments} to make as it is, and explain {code} answers cause, fix "
    "and an example. The document formats' JSON Schemas are resources: "
    "flowledger://schemas/artifact, flowledger://schemas/deployment and "
    "flowledger://schemas/source (resources/read)."
)
_LEVELS: Final[tuple[LoggingLevel, ...]] = (
    "debug",
    "info",
    "notice",
    "warning",
    "error",
    "critical",
    "alert",
    "emergency",
)
_ACTIVITY_LEVEL: Final[LoggingLevel] = "info"
_MAX_LOG_LEVELS: Final = 4096
_DRAIN_TIMEOUT: Final = 10.0
_DISPATCH_GRACE: Final = 0.05


class ToolBundle(Protocol):
    """What the server needs of `flowledger.tools.WorkflowTools`."""

    def infos(self) -> list[ToolInfo]: ...

    async def call(
        self, name: str, arguments: Mapping[str, Any] | str | bytes | None
    ) -> dict[str, Any]: ...


def activity_message(record: ActivityRecord) -> str:
    """The progress message of an activity: ``"<kind> <vertex label>"``."""
    return f"{record.kind} {record.vertex_label}".strip()


def _activity_data(record: ActivityRecord) -> dict[str, Any]:
    data = record.to_json()
    data.pop("session_id", None)
    return data


def _text_result(text: str, *, error: bool) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(text=text)], is_error=error)


def _canonical_run_id(value: object) -> str | None:
    if not isinstance(value, str):
        return None
    try:
        return str(uuid.UUID(value))
    except ValueError:
        return value  # the call fails on it; nothing will match


# -- forwarding activities during one call -----------------------------------------------------


Sender = Callable[[ActivityRecord], Awaitable[None]]


class _Source(Protocol):
    """Where a call's activities come from: a live `ActivitySubscription` or a
    `JournalFollower`. ``close`` ends the iteration once what is pending is delivered."""

    def close(self) -> None: ...

    def __aiter__(self) -> AsyncIterator[ActivityRecord]: ...


@dataclass(eq=False)
class _Forwarder:
    """Forwards the activities of one call's source through ``send``.

    ``target`` is the run the call is about (``None``: every run). With ``deferred``
    (the run is only known from the result) activities are collected and sent by
    `finish`; without a ``subscription`` then, ``follow`` makes the source from the
    run's ID at the end. A send that fails stops forwarding for this call; the call goes
    on."""

    subscription: _Source | None
    send: Sender
    target: str | None
    deferred: bool
    follow: Callable[[str], _Source] | None = None

    def __post_init__(self) -> None:
        self._collected: list[ActivityRecord] = []
        self._broken = False
        self._pump: asyncio.Task[None] | None = None
        if not self.deferred:
            self._pump = asyncio.get_running_loop().create_task(self._run())

    async def _deliver(self, record: ActivityRecord) -> None:
        if self._broken or (self.target is not None and record.run_id != self.target):
            return
        try:
            await self.send(record)
        except Exception as exc:  # the client went away: stop, let the call finish
            self._broken = True
            log.debug("activity notification not sent: %s", exc)

    async def _run(self) -> None:
        assert self.subscription is not None
        async for record in self.subscription:
            await self._deliver(record)

    async def finish(self, run_id: str | None) -> None:
        """The call returned (``run_id``: the run its result names): deliver what is left."""
        if self.subscription is None:
            if run_id is None or self.follow is None:
                return
            self.subscription = self.follow(run_id)
        self.subscription.close()  # queued records are still delivered, then iteration ends
        if self._pump is not None:
            try:
                await asyncio.wait_for(asyncio.shield(self._pump), _DRAIN_TIMEOUT)
            except TimeoutError:
                self._pump.cancel()
            return
        async for record in self.subscription:
            self._collected.append(record)
        if run_id is None:
            return
        self.target = run_id
        for record in self._collected:
            await self._deliver(record)

    def abort(self) -> None:
        if self.subscription is not None:
            self.subscription.close()
        if self._pump is not None:
            self._pump.cancel()


# -- requests in flight ---------------------------------------------------------------------------


class _InFlight:
    """Server middleware counting the requests being handled, so a stdio server can
    answer everything a client sent before it closed stdin (`WorkflowMcpServer.drain`)."""

    def __init__(self) -> None:
        self.count = 0
        self.idle = asyncio.Event()
        self.idle.set()

    async def __call__(
        self, ctx: ServerRequestContext[Any, Any], call_next: CallNext
    ) -> HandlerResult:
        if ctx.request_id is None:  # a notification
            return await call_next(ctx)
        self.count += 1
        self.idle.clear()
        try:
            return await call_next(ctx)
        finally:
            self.count -= 1
            if not self.count:
                self.idle.set()


# -- the server -----------------------------------------------------------------------------------


class WorkflowMcpServer:
    """Builds and backs one low-level MCP `Server` for one session's tool bundle."""

    def __init__(
        self,
        tools: ToolBundle,
        *,
        journal: ActivityJournal | None = None,
        session_id: str | None = None,
        read_only: bool = False,
        executes: bool = True,
        name: str = SERVER_NAME,
        notice: str = "",
        registry: RunReader | None = None,
    ) -> None:
        if journal is not None and session_id is None:
            raise ValueError("forwarding activities needs the session ID")
        self.tools = tools
        self.journal = journal
        self.session_id = session_id
        self.read_only = read_only
        self.executes = executes
        # Why this server is read-only although it was asked to own the session (another
        # process owns it): told to the client in the initialize result's instructions
        # and in every refusal of a hidden tool.
        self.notice = notice
        infos = tools.infos()
        self._hidden = frozenset(i.name for i in infos if read_only and i.mutating)
        self._visible: dict[str, ToolInfo] = {
            i.name: i for i in infos if i.name not in self._hidden
        }
        # Minimum log level per connection, set by logging/setLevel (handshake era).
        self._log_levels: dict[str, LoggingLevel] = {}
        self._runs = RunResources(tools, self._visible)
        tasks = RunTasks(tools, read_only=read_only)
        # Subscriptions need the registry and the journal to hear changes from.
        self.listen: RunListen | None = None
        if registry is not None and journal is not None and session_id is not None:
            self.listen = RunListen(
                self._check_resource,
                registry,
                journal,
                session_id,
                executes=executes,
                tasks=tasks,
            )
        self.server: Server[Any] = Server(
            name,
            version=__version__,
            title="flowledger workflows",
            instructions=self._instructions(),
            on_list_tools=self._list_tools,
            on_list_resources=self._list_resources,
            on_read_resource=self._read_resource,
            on_list_resource_templates=self._list_templates,
            on_subscriptions_listen=self.listen,
            on_call_tool=self._call_tool,
            get_tool_input_schema=self._input_schema,
        )
        if self.listen is not None:  # handshake-era clients subscribe per connection
            subscriptions = ResourceSubscriptions(self._check_resource, self.listen)
            self.server.add_request_handler(
                "resources/subscribe", types.SubscribeRequestParams, subscriptions.subscribe
            )
            self.server.add_request_handler(
                "resources/unsubscribe", types.UnsubscribeRequestParams, subscriptions.unsubscribe
            )
        self._inflight = _InFlight()
        self.server.middleware.append(self._inflight)
        # Registered directly (not through the deprecated constructor argument) so the
        # handshake-era `logging` capability is advertised and honoured.
        self.server.add_request_handler(
            "logging/setLevel", types.SetLevelRequestParams, self._set_level
        )
        # Pauses are elicited inside the task interceptor: a call's form is answered
        # before it becomes a task (SEP-2663: multi round-trips resolve first).
        self.server.middleware.append(request_state_boundary(session_id))
        elicit = PauseElicitation(tools, self._call_tool, read_only=read_only)
        install_extension(self.server, tasks, elicit)

    def _instructions(self) -> str:
        parts = [INSTRUCTIONS]
        if "explain" in self._visible:  # the authoring tools are served
            parts.append(AUTHORING_INSTRUCTIONS)
        if self.notice:
            parts.append(f"This server is read-only because {self.notice}.")
        return "\n\n".join(parts)

    async def drain(self) -> None:
        """Wait until no request is being handled and a short grace has passed since: for
        requests received but not dispatched yet, and for the last responses to be written
        (a handler counts as done before its response is sent). Bound it with
        `asyncio.timeout`."""
        while True:
            await self._inflight.idle.wait()
            await asyncio.sleep(_DISPATCH_GRACE)
            if not self._inflight.count:
                return

    # -- tools/list --------------------------------------------------------------------------

    def tool_names(self) -> list[str]:
        return list(self._visible)

    def _tool(self, info: ToolInfo) -> types.Tool:
        return types.Tool(
            name=info.name,
            description=info.description,
            input_schema=info.schema_copy(),
            annotations=types.ToolAnnotations(read_only_hint=not info.mutating),
        )

    async def _list_tools(
        self, ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(tools=[self._tool(i) for i in self._visible.values()])

    def _input_schema(self, name: str) -> Mapping[str, Any] | None:
        info = self._visible.get(name)
        return None if info is None else info.schema_copy()

    # -- resources -------------------------------------------------------------------------

    async def _list_resources(
        self, ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListResourcesResult:
        return types.ListResourcesResult(resources=list_resources())

    async def _list_templates(
        self, ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListResourceTemplatesResult:
        return types.ListResourceTemplatesResult(resource_templates=run_templates())

    async def _read_resource(
        self, ctx: ServerRequestContext[Any], params: types.ReadResourceRequestParams
    ) -> types.ReadResourceResult:
        return await self._check_resource(str(params.uri))

    async def _check_resource(self, uri: str) -> types.ReadResourceResult:
        """The resource at ``uri`` (a schema or a run resource of this session's runs,
        `flowledger.mcp.run_resources`); `MCPError` (not found) for any other URI."""
        if parse_run_uri(uri) is not None:
            return await self._runs.read(uri)
        return read_resource(uri)

    # -- tools/call --------------------------------------------------------------------------

    async def _call_tool(
        self, ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        name = params.name
        if name in self._hidden:
            why = f" because {self.notice}" if self.notice else ""
            return _text_result(
                f"workflow tools: {name} is not available: this server is read-only{why}",
                error=True,
            )
        if name not in self._visible:
            return _text_result(f"workflow tools: unknown tool {name[:64]!r}", error=True)
        arguments = params.arguments
        forwarder = await self._forwarder(ctx, name, arguments)
        run_id: str | None = None
        try:
            try:
                result = await self.tools.call(name, arguments)
                text = result_text(result)
            except ToolError as exc:
                outcome = _text_result(exc.message, error=True)
            except Exception:
                log.exception("tool %s failed unexpectedly", name)
                outcome = _text_result(f"workflow tools: {name} failed: internal error", error=True)
            else:
                outcome = _text_result(text, error=False)
                run_id = _canonical_run_id(result.get("run_id"))
        except BaseException:
            if forwarder is not None:
                forwarder.abort()
            raise
        if forwarder is not None:
            await forwarder.finish(run_id)
        return outcome

    async def _forwarder(
        self, ctx: ServerRequestContext[Any], name: str, arguments: Mapping[str, Any] | None
    ) -> _Forwarder | None:
        journal, session_id = self.journal, self.session_id
        if journal is None or session_id is None:
            return None
        send = self._sender(ctx)
        if send is None:
            return None
        creates = name in _CREATING_TOOLS  # a fork's run_id argument names its origin
        target = _canonical_run_id(arguments.get("run_id")) if arguments and not creates else None
        deferred = creates and target is None
        if self.executes:
            return _Forwarder(journal.subscribe(session_id), send, target, deferred)

        def follow(run_id: str) -> JournalFollower:  # from the journal's beginning
            return JournalFollower(journal, session_id, run_id)

        if deferred:
            return _Forwarder(None, send, None, deferred, follow=follow)
        if target is None:
            return None
        try:
            source = await JournalFollower(journal, session_id, target).start()
        except Exception:  # no such run here, or the database is away: nothing to follow
            return None
        return _Forwarder(source, send, target, deferred)

    def _sender(self, ctx: ServerRequestContext[Any]) -> Sender | None:
        """How this request's activities reach the client, or None if they cannot."""
        meta = ctx.meta or {}
        if meta.get("progress_token") is not None:
            last = -1

            async def progress(record: ActivityRecord) -> None:
                nonlocal last
                done = record.completed_vertices
                if record.kind == ActivityKind.VERTEX_COMPLETED:
                    # A loop visits vertices again after the count reached the total:
                    # each completion still advances, past a total that no longer holds.
                    done = max(done, last + 1)
                if done <= last:
                    return  # progress must increase within a request
                last = done
                total = record.total_vertices if done <= record.total_vertices else 0
                await ctx.session.report_progress(
                    float(done), float(total) if total else None, activity_message(record)
                )

            return progress
        if not self._log_allowed(ctx, _ACTIVITY_LEVEL):
            return None

        async def message(record: ActivityRecord) -> None:
            await ctx.session.send_notification(
                types.LoggingMessageNotification(
                    params=types.LoggingMessageNotificationParams(
                        level=_ACTIVITY_LEVEL, logger=LOGGER_NAME, data=_activity_data(record)
                    )
                ),
                related_request_id=ctx.request_id,
            )

        return message

    # -- logging -----------------------------------------------------------------------------

    @staticmethod
    def _connection_key(ctx: ServerRequestContext[Any]) -> str:
        headers = getattr(ctx.request, "headers", None)
        if headers is None:
            return ""
        value = headers.get("mcp-session-id")
        return value if isinstance(value, str) else ""

    def _log_allowed(self, ctx: ServerRequestContext[Any], level: LoggingLevel) -> bool:
        if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
            return level in allowed_log_levels(ctx.protocol_version, ctx.meta)
        minimum = self._log_levels.get(self._connection_key(ctx), "debug")
        return _LEVELS.index(level) >= _LEVELS.index(minimum)

    async def _set_level(
        self, ctx: ServerRequestContext[Any], params: types.SetLevelRequestParams
    ) -> types.EmptyResult:
        key = self._connection_key(ctx)
        self._log_levels.pop(key, None)
        while len(self._log_levels) >= _MAX_LOG_LEVELS:  # bounded: forget the oldest
            self._log_levels.pop(next(iter(self._log_levels)))
        self._log_levels[key] = params.level
        return types.EmptyResult()


def build_server(
    tools: ToolBundle,
    *,
    journal: ActivityJournal | None = None,
    session_id: str | None = None,
    read_only: bool = False,
    executes: bool = True,
) -> Server[Any]:
    """The MCP server over ``tools``; with ``journal`` and ``session_id`` it forwards the
    session's activities during calls (live if ``executes``, else from the journal)."""
    return WorkflowMcpServer(
        tools, journal=journal, session_id=session_id, read_only=read_only, executes=executes
    ).server
