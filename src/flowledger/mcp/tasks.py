"""Runs as MCP tasks: the ``io.modelcontextprotocol/tasks`` extension (SEP-2663, on the
2026-07-28 protocol revision), built on the SDK's extension API.

A task *is* a run. When a client declares the extension in its request capabilities and
calls a run-starting or run-resuming tool (``workflow_run_start``,
``workflow_run_resume``, ``run_deployment``, ``resume_run``) on a 2026-07-28
connection, the call does what it always does, and a successful answer is replaced by a
``CreateTaskResult`` (``resultType: "task"``) for the run the answer names. A failed
call keeps its ordinary ``isError`` answer: no run, no task. A client that does not
declare the extension, or speaks the handshake-era revision, gets today's answers.

The task ID is derived from the run ID: ``run-<run_id>`` for the ``workflow_*`` tools,
``deployed-run-<run_id>`` for the deploy tools (the prefix says which tool's answer is
the task's result). Nothing is kept in memory: ``tasks/get`` and ``tasks/cancel`` read
the run registry of the server's own session, so a task outlives the server that
created it and any server of the same session answers for it. A task ID of another
session, a nonexistent run or a malformed ID are the same protocol error
(``INVALID_PARAMS``, "unknown task"), and change nothing.

Status from the run: pending and running are ``working``; interrupted is
``input_required``: when the ``tasks/get`` request's client declares form elicitation
and the pause is a request pause whose resume schema makes a form
(`flowledger.mcp.forms`), ``inputRequests`` holds that form under ``resume-<checkpoint
revision>`` (a new key for every pause), else it is empty and the status message names
the resume tool; completed is ``completed`` with ``result``, the
ordinary answer of the family's reading tool (``workflow_run_get``, or ``inspect_run``
without revalidation); failed is ``failed`` with a JSON-RPC ``error`` whose ``data`` is
the ``workflow_run_get`` answer; cancelled is ``cancelled``.

``tasks/cancel`` is ``workflow_run_cancel``: durable, recorded before it is
acknowledged; cancelling a finished task changes nothing and is acknowledged too (the
extension's cancellation is eventually consistent and may end in another terminal
status). A read-only server refuses it.

``tasks/update`` answers the form: an ``accept`` resumes the run through the resume
tool (validated, durable); an invalid answer, or a response that is no elicitation
result, is ``INVALID_PARAMS`` with the error and changes nothing (the same form stays
outstanding); ``decline`` / ``cancel`` and keys not outstanding (never issued, answered
already) are acknowledged and change nothing.

Status notifications (``notifications/tasks`` on a ``subscriptions/listen`` stream whose
filter lists ``taskIds``) are `flowledger.mcp.listen` and `flowledger.mcp.task_watch`;
each carries `RunTasks.documents`, what ``tasks/get`` answers.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Protocol

import mcp_types as types
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.extension import Extension, MethodBinding
from mcp.shared.exceptions import MCPError
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from ..tools import ToolError, result_text
from ..workflows.errors import InvalidInputError, NotFoundError
from ..workflows.records.run import is_id
from .forms import declares_forms, pause_form

__all__ = [
    "POLL_INTERVAL_MS",
    "READING_TOOLS",
    "TASKS_EXTENSION",
    "TASK_TOOLS",
    "TERMINAL_TASK_STATUSES",
    "RunTasks",
    "TaskFamily",
    "TaskId",
    "ToolCaller",
    "UpdateTaskRequestParams",
    "answered_run",
    "missing_extension",
    "task_status",
]

TASKS_EXTENSION: Final = "io.modelcontextprotocol/tasks"
#: Suggested polling interval (the run registry is cheap to read, a person is slow).
POLL_INTERVAL_MS: Final = 1000
_MAX_MESSAGE: Final = 300


@dataclass(frozen=True)
class TaskFamily:
    """The tools of one kind of run: the prefix of its task IDs, the tool whose answer
    is a completed task's result, and the tool that resumes it."""

    prefix: str
    reader: str  # the tool whose answer is a completed task's result
    reader_arguments: Mapping[str, Any]
    resume_tool: str
    resume_field: str  # the resume tool's argument holding the answer


_WORKFLOW: Final = TaskFamily("run-", "workflow_run_get", {}, "workflow_run_resume", "resume")
_DEPLOYED: Final = TaskFamily(
    "deployed-run-", "inspect_run", {"revalidate": False}, "resume_run", "payload"
)
#: The tools whose calls become tasks, and the family of task each makes.
TASK_TOOLS: Final[Mapping[str, TaskFamily]] = {
    "workflow_run_start": _WORKFLOW,
    "workflow_run_resume": _WORKFLOW,
    "run_deployment": _DEPLOYED,
    "resume_run": _DEPLOYED,
}
#: The tools that read a run, by family.
READING_TOOLS: Final[Mapping[str, TaskFamily]] = {
    _WORKFLOW.reader: _WORKFLOW,
    _DEPLOYED.reader: _DEPLOYED,
}
_FAMILIES: Final = (_DEPLOYED, _WORKFLOW)  # longest prefix first


@dataclass(frozen=True)
class TaskId:
    """A task ID: the run it is and the family of tool that made it."""

    run_id: str
    family: TaskFamily

    def __str__(self) -> str:
        return self.family.prefix + self.run_id

    @staticmethod
    def parse(text: str) -> TaskId | None:
        """The task ``text`` names, or ``None`` if it is not a task ID of this server."""
        for family in _FAMILIES:
            if text.startswith(family.prefix):
                rest = text[len(family.prefix) :]
                # only a run ID's one spelling (nonzero, lowercase): one task has one ID
                return TaskId(rest, family) if is_id(rest) else None
        return None


class ToolCaller(Protocol):
    """What the extension needs of the session's tool bundle."""

    async def call(
        self, name: str, arguments: Mapping[str, Any] | str | bytes | None
    ) -> dict[str, Any]: ...


def _unknown(text: str) -> MCPError:
    quoted = repr(text[:64]) + ("..." if len(text) > 64 else "")
    return MCPError(types.INVALID_PARAMS, f"unknown task {quoted}")


def _bounded(text: str) -> str:
    return text if len(text) <= _MAX_MESSAGE else text[:_MAX_MESSAGE] + "..."


#: A task's status by its run's (pending and running are both ``working``).
_TASK_STATUS: Final[Mapping[str, str]] = {
    "pending": "working",
    "running": "working",
    "interrupted": "input_required",
    "completed": "completed",
    "failed": "failed",
    "cancelled": "cancelled",
}
#: The task statuses after which nothing changes.
TERMINAL_TASK_STATUSES: Final = frozenset({"completed", "failed", "cancelled"})


def task_status(run_status: str) -> str:
    """The status of the task that is a run whose status is ``run_status``."""
    return _TASK_STATUS[run_status]


class RunTasks(Extension):
    """The tasks extension over one session's tool bundle. ``read_only``: refuse
    ``tasks/cancel``."""

    identifier = TASKS_EXTENSION

    def __init__(self, tools: ToolCaller, *, read_only: bool = False) -> None:
        self._tools = tools
        self._read_only = read_only

    def methods(self) -> Sequence[MethodBinding]:
        modern = frozenset(MODERN_PROTOCOL_VERSIONS)
        return (
            MethodBinding("tasks/get", types.GetTaskRequestParams, self._get, modern),
            MethodBinding("tasks/cancel", types.CancelTaskRequestParams, self._cancel, modern),
            MethodBinding("tasks/update", UpdateTaskRequestParams, self._update, modern),
        )

    # -- tools/call -----------------------------------------------------------------------

    @staticmethod
    def declared(ctx: ServerRequestContext[Any, Any]) -> bool:
        """Whether this request may be answered with a task: a 2026-07-28 request whose
        client declares the extension (handshake-era results cannot carry one)."""
        if ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS:
            return False
        capabilities = ctx.session.client_capabilities
        extensions = capabilities.extensions if capabilities is not None else None
        return extensions is not None and TASKS_EXTENSION in extensions

    async def intercept_tool_call(
        self,
        params: types.CallToolRequestParams,
        ctx: ServerRequestContext[Any, Any],
        call_next: CallNext,
    ) -> HandlerResult:
        family = TASK_TOOLS.get(params.name)
        if family is None or not self.declared(ctx):
            return await call_next(ctx)
        answer = await call_next(ctx)
        run_id = answered_run(answer)
        if run_id is None:  # a failed call: no run, so no task; its ordinary answer
            return answer
        task = TaskId(run_id, family)
        document = await self._task(task)
        # A CreateTaskResult never carries the result, error or input requests.
        for key in ("result", "error", "inputRequests"):
            document.pop(key, None)
        return {"resultType": "task", **document}

    # -- tasks/get, tasks/cancel ----------------------------------------------------------

    async def _get(
        self, ctx: ServerRequestContext[Any, Any], params: types.GetTaskRequestParams
    ) -> dict[str, Any]:
        self._require_declared(ctx, "tasks/get")
        task = self._parse(params.task_id)
        forms = declares_forms(ctx) and not self._read_only  # read-only: it resumes nothing
        return {"resultType": "complete", **await self._task(task, forms=forms)}

    async def _update(
        self, ctx: ServerRequestContext[Any, Any], params: UpdateTaskRequestParams
    ) -> types.EmptyResult:
        """The person's answer to the pause's form: resumes the run through the resume
        tool (validated, durable). Keys not outstanding are ignored (SEP-2663)."""
        self._require_declared(ctx, "tasks/update")
        task = self._parse(params.task_id)
        if self._read_only:
            raise MCPError(types.INVALID_REQUEST, "tasks/update: this server is read-only")
        run = await self._read(task)
        key = _form_key(run)
        response = params.input_responses.get(key) if key is not None else None
        if response is None:
            return types.EmptyResult(result_type="complete")
        if not isinstance(response, types.ElicitResult):
            raise MCPError(
                types.INVALID_PARAMS, f"inputResponses[{key!r}] is not an elicitation result"
            )
        if response.action != "accept":  # declined: the run stays paused
            return types.EmptyResult(result_type="complete")
        arguments = {"run_id": task.run_id, task.family.resume_field: dict(response.content or {})}
        try:
            resumed = await self._tools.call(task.family.resume_tool, arguments)
        except ToolError as exc:
            if isinstance(exc.cause, InvalidInputError):  # the person's: answer it again
                raise MCPError(types.INVALID_PARAMS, _bounded(exc.message)) from exc
            if _form_key(await self._read(task)) != key:
                return types.EmptyResult(result_type="complete")  # answered meanwhile
            raise MCPError(types.INTERNAL_ERROR, _bounded(exc.message)) from exc
        refusals = [str(d.get("message", "")) for d in resumed.get("diagnostics") or ()]
        if refusals:  # a deployed run's refused resume: an answer, not an error
            raise MCPError(types.INVALID_PARAMS, _bounded("; ".join(refusals)))
        return types.EmptyResult(result_type="complete")

    async def _cancel(
        self, ctx: ServerRequestContext[Any, Any], params: types.CancelTaskRequestParams
    ) -> types.EmptyResult:
        self._require_declared(ctx, "tasks/cancel")
        task = self._parse(params.task_id)
        if self._read_only:
            raise MCPError(types.INVALID_REQUEST, "tasks/cancel: this server is read-only")
        run = await self._read(task)  # an unknown task is refused before anything is asked
        if run["run_status"] not in ("completed", "failed", "cancelled"):
            try:
                await self._tools.call("workflow_run_cancel", {"run_id": task.run_id})
            except ToolError as exc:
                # it finished meanwhile: acknowledged, as the extension allows; else an error
                current = await self._read(task)
                if current["run_status"] not in ("completed", "failed", "cancelled"):
                    raise MCPError(types.INTERNAL_ERROR, _bounded(exc.message)) from exc
        return types.EmptyResult(result_type="complete")

    def _require_declared(self, ctx: ServerRequestContext[Any, Any], method: str) -> None:
        """The extension's methods answer only clients that declared it (``-32021``)."""
        if not self.declared(ctx):
            raise missing_extension(method)

    @staticmethod
    def _parse(text: str) -> TaskId:
        task = TaskId.parse(text)
        if task is None:
            raise _unknown(text)
        return task

    async def known(self, text: str) -> TaskId:
        """The task ``text`` names if it is one of this session's; otherwise the same
        `MCPError` as ``tasks/get`` answers (an unknown, foreign or malformed ID)."""
        task = self._parse(text)
        await self._read(task)
        return task

    async def _read(self, task: TaskId) -> dict[str, Any]:
        """The run's ``workflow_run_get`` answer; an unknown run is an unknown task."""
        try:
            return await self._tools.call("workflow_run_get", {"run_id": task.run_id})
        except ToolError as exc:
            if isinstance(exc.cause, NotFoundError):
                raise _unknown(str(task)) from exc
            raise MCPError(types.INTERNAL_ERROR, _bounded(exc.message)) from exc

    async def _task(self, task: TaskId, *, forms: bool = False) -> dict[str, Any]:
        """The ``DetailedTask`` of ``task``, read from the run registry now; with
        ``forms``, a request pause's form is its ``inputRequests``."""
        plain, with_form = await self.documents(task)
        return with_form if forms else plain

    async def documents(self, task: TaskId) -> tuple[dict[str, Any], dict[str, Any]]:
        """The ``DetailedTask`` of ``task`` read from the run registry now, twice from one
        read: for a client that is not asked forms, and for one that is (they differ only
        at a request pause whose resume schema makes a form). `MCPError` for an unknown
        task."""
        run = await self._read(task)
        plain = await self._document(task, run, forms=False)
        if plain["status"] != "input_required" or not self.asks_forms:
            return plain, plain
        return plain, await self._document(task, run, forms=True)

    @property
    def asks_forms(self) -> bool:
        """Whether a pause may be asked as a form here (a read-only server resumes nothing)."""
        return not self._read_only

    async def _document(
        self, task: TaskId, run: Mapping[str, Any], *, forms: bool
    ) -> dict[str, Any]:
        status = str(run["run_status"])
        document: dict[str, Any] = {
            "taskId": str(task),
            "status": task_status(status),
            "createdAt": run["created_at"],
            "lastUpdatedAt": run["updated_at"],
            "ttlMs": None,  # as long as the run is kept (`workflow_run_prune` decides)
            "pollIntervalMs": POLL_INTERVAL_MS,
        }
        summary = str(run.get("status_summary") or "")
        if status == "interrupted":
            pending = run.get("pending") or {}
            waits = f"a {pending['kind']} pause" if "kind" in pending else "a resume"
            document["inputRequests"] = {}
            how = f"{task.family.resume_tool} {{run_id}}"
            form = pause_form(run) if forms else None
            key = _form_key(run)
            if form is not None and key is not None:
                document["inputRequests"] = {
                    key: form.model_dump(by_alias=True, mode="json", exclude_none=True)
                }
                how = f"tasks/update (inputResponses[{key!r}]) or " + how
            document["statusMessage"] = _bounded(
                f"run {task.run_id} waits for {waits}: answer it with {how}"
            )
        elif status == "completed":
            document["result"] = await self._result(task)
        elif status == "failed":
            document["error"] = {
                "code": types.INTERNAL_ERROR,
                "message": _bounded(
                    f"run {task.run_id} failed" + (f": {summary}" if summary else "")
                ),
                "data": dict(run),
            }
        if summary and "statusMessage" not in document:
            document["statusMessage"] = _bounded(summary)
        return document

    async def _result(self, task: TaskId) -> dict[str, Any]:
        """A completed task's result: the reading tool's ordinary answer, as a tool result."""
        arguments = {"run_id": task.run_id, **task.family.reader_arguments}
        try:
            answer = await self._tools.call(task.family.reader, arguments)
        except ToolError as exc:
            outcome = types.CallToolResult(
                content=[types.TextContent(text=exc.message)], is_error=True
            )
        else:
            outcome = types.CallToolResult(
                content=[types.TextContent(text=result_text(answer))], is_error=False
            )
        return outcome.model_dump(by_alias=True, mode="json", exclude_none=True)


def missing_extension(method: str) -> MCPError:
    """The extension's error for a client that did not declare it (``-32021``)."""
    return MCPError(
        types.MISSING_REQUIRED_CLIENT_CAPABILITY,
        f"{method}: missing required client capability {TASKS_EXTENSION}",
        data={"requiredCapabilities": {"extensions": {TASKS_EXTENSION: {}}}},
    )


def _form_key(run: Mapping[str, Any]) -> str | None:
    """The ``inputRequests`` key of the run's request pause: unique over the task's life,
    as each pause is a new checkpoint revision. ``None`` when it is not paused so."""
    pending = run.get("pending") if run.get("run_status") == "interrupted" else None
    if not isinstance(pending, Mapping) or pending.get("kind") != "request":
        return None
    return f"resume-{pending['checkpoint_revision']}"


class UpdateTaskRequestParams(types.RequestParams):
    """``tasks/update``: the task and the responses to its ``inputRequests``."""

    task_id: str
    input_responses: types.InputResponses


def answered_run(answer: HandlerResult) -> str | None:
    """The run a successful tool answer names, or ``None`` (an error, or no run)."""
    if not isinstance(answer, types.CallToolResult) or answer.is_error:
        return None
    if len(answer.content) != 1 or not isinstance(answer.content[0], types.TextContent):
        return None
    try:
        document = json.loads(answer.content[0].text)
    except ValueError:
        return None
    run_id = document.get("run_id") if isinstance(document, dict) else None
    if not isinstance(run_id, str):
        return None
    try:
        return str(uuid.UUID(run_id))
    except ValueError:
        return None
