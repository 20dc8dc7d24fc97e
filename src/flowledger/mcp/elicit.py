"""Pauses answered through the client's own elicitation (2026-07-28 multi round-trip).

When a tool that starts, resumes or reads a run (``workflow_run_start``,
``workflow_run_resume``, ``workflow_run_get``, ``run_deployment``, ``resume_run``,
``inspect_run``) answers with a run stopped at a *request* pause, and the calling client
declares form elicitation, the answer is an ``InputRequiredResult`` instead: one
``elicitation/create`` form request whose message is the pause's question (the
interrupt's ``question`` text, else its info as JSON; bounded) and whose
``requestedSchema`` is derived from the pause's resume schema. Only a flat object of
primitives and string enums can be a form (`form_schema`); any richer resume schema, an
error pause, a client without form elicitation, a handshake-era connection or a read-
only server get today's answer.

The client retries the same call with its response and the echoed ``requestState``:

* ``accept``: the content resumes the run through the ordinary resume tool - validated
  and durable. An invalid answer is asked again, the message starting with the error.
* ``decline`` / ``cancel``: the run stays paused; the answer is the reading tool's
  (``workflow_run_get`` / ``inspect_run`` without revalidation) for it.
* The state names the run and the checkpoint revision it paused at. A retry whose run
  is no longer paused at that revision (answered already, say before a crash) resumes
  nothing again: it gets the reading tool's answer.

The state is sealed by the SDK's `RequestStateBoundary` (AES-GCM, a key generated per
server instance, the audience naming the session, bound to the tool and its
arguments): a tampered, foreign or expired state is the protocol error ``-32602``
"Invalid or expired requestState", and a malformed response to the form is ``-32602``
too; neither changes anything.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Final

import mcp_types as types
from mcp.server.context import HandlerResult, ServerRequestContext
from mcp.server.extension import RequestHandler
from mcp.server.request_state import RequestStateBoundary, RequestStateSecurity
from mcp.shared.exceptions import MCPError
from pydantic import ValidationError

from ..tools import ToolError, result_text
from ..workflows.errors import InvalidInputError
from .forms import declares_forms, pause_form
from .tasks import READING_TOOLS, TASK_TOOLS, TaskId, ToolCaller, answered_run

__all__ = ["PauseElicitation", "request_state_boundary"]

_KEY: Final = "resume"
#: The calls whose answer may be a form: those that start, resume or read a run.
_ELICITING: Final = {**TASK_TOOLS, **READING_TOOLS}


def request_state_boundary(session_id: str | None) -> RequestStateBoundary:
    """The middleware sealing this server's request states: a key held by this server
    instance only, the audience naming its session."""
    audience = f"flowledger/{session_id or 'default'}"
    return RequestStateBoundary(RequestStateSecurity.ephemeral(), default_audience=audience)


def _text(document: dict[str, Any]) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(text=result_text(document))])


def _error(exc: ToolError) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(text=exc.message)], is_error=True)


class PauseElicitation:
    """Wraps the server's ``tools/call`` handler (see the module doc)."""

    def __init__(
        self, tools: ToolCaller, call_tool: RequestHandler, *, read_only: bool = False
    ) -> None:
        self._tools = tools
        self._call_tool = call_tool
        self._read_only = read_only  # it resumes nothing, so it asks nothing

    async def __call__(
        self, ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams
    ) -> HandlerResult:
        family = _ELICITING.get(params.name)
        if family is None or self._read_only or not declares_forms(ctx):
            if params.request_state is not None:
                raise MCPError(types.INVALID_PARAMS, "this call takes no requestState")
            return await self._call_tool(ctx, params)
        if params.request_state is not None:
            return await self._answered(params)
        answer = await self._call_tool(ctx, params)
        run_id = answered_run(answer)
        if run_id is None:
            return answer
        return await self._ask(TaskId(run_id, family), answer)

    async def _ask(self, task: TaskId, answer: HandlerResult, error: str = "") -> HandlerResult:
        """The form for the run's request pause, or ``answer`` if there is none to ask."""
        try:
            run = await self._tools.call("workflow_run_get", {"run_id": task.run_id})
        except ToolError:
            return answer
        request = pause_form(run, error)
        if request is None:
            return answer  # today's answer: the model reads the resume schema itself
        state = {
            "run_id": task.run_id,
            "family": task.family.prefix,
            "revision": run["pending"]["checkpoint_revision"],
        }
        return types.InputRequiredResult(
            input_requests={_KEY: request},
            request_state=json.dumps(state, separators=(",", ":")),
        )

    async def _answered(self, params: types.CallToolRequestParams) -> HandlerResult:
        """The retry carrying the person's answer (its state already verified)."""
        assert params.request_state is not None
        state = json.loads(params.request_state)  # minted by `_ask`, sealed since
        task = TaskId.parse(state["family"] + state["run_id"])
        assert task is not None
        response = (params.input_responses or {}).get(_KEY)
        if response is None:
            raise MCPError(types.INVALID_PARAMS, f"inputResponses must answer {_KEY!r}")
        try:
            answer = types.ElicitResult.model_validate(
                response.model_dump(by_alias=True, mode="json", exclude_none=True)
                if not isinstance(response, Mapping)
                else response
            )
        except ValidationError as exc:
            raise MCPError(
                types.INVALID_PARAMS, f"inputResponses[{_KEY!r}] is not an elicitation result"
            ) from exc
        run = await self._read(task)
        pending = run.get("pending") or {}
        still = (
            run.get("run_status") == "interrupted"
            and pending.get("checkpoint_revision") == state["revision"]
        )
        if answer.action != "accept" or not still:
            return await self._reading(task)  # nothing (more) to resume
        arguments = {"run_id": task.run_id, task.family.resume_field: dict(answer.content or {})}
        try:
            resumed = await self._tools.call(task.family.resume_tool, arguments)
        except ToolError as exc:
            if isinstance(exc.cause, InvalidInputError):  # the person's answer: ask again
                return await self._ask(task, _error(exc), error=exc.message)
            return _error(exc)
        # a deployed run's refused resume is an answer with diagnostics, not an error
        refusals = [str(d.get("message", "")) for d in resumed.get("diagnostics") or ()]
        # it may stop at the next pause (or, refused, still at this one: ask again)
        return await self._ask(task, _text(resumed), error="; ".join(refusals))

    async def _read(self, task: TaskId) -> dict[str, Any]:
        try:
            return await self._tools.call("workflow_run_get", {"run_id": task.run_id})
        except ToolError as exc:
            raise MCPError(types.INVALID_PARAMS, exc.message) from exc

    async def _reading(self, task: TaskId) -> types.CallToolResult:
        arguments = {"run_id": task.run_id, **task.family.reader_arguments}
        try:
            return _text(await self._tools.call(task.family.reader, arguments))
        except ToolError as exc:
            return _error(exc)
