"""One tool call of a compiled artifact, as tool nodes and foreach tool bodies make it.

A `ToolCall` is a call site: the node's name (in errors), the dependency, the tool, the
timeout of each call and the source the artifact was compiled with. Both kinds of call
site go through it: `ToolCall.connect` (the run's pinned source, its session in the
run's pool, the pinned contract), `ToolCall.checked` (the arguments are an object that
matches the tool's input schema; otherwise the tool is not called), then either
`ToolCall.attempt` (one attempt of a tool node: intents per attempt, failures recorded
with their kind for retries; the node's retry loop and routing are the compiler's) or
`ToolCall.item` (one foreach item: an intent per item for a tool that is not read-only
or idempotent). The intent rules are those of docs/deploy.md ("Failures" and "foreach").
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

import jsonschema  # type: ignore[import-untyped, unused-ignore]
import jsonschema.validators  # type: ignore[import-untyped, unused-ignore]

from ... import flow
from ...workflows.authoring.metadata import bound_text
from ..sources.connect import AnySession
from ..sources.errors import SourceError, ToolArgumentsError
from ..sources.session import ToolResult
from ..sources.tool_info import ToolInfo
from .errors import (
    ToolContractChangedError,
    ToolErrorResult,
    ToolOutcomeUnknownError,
    ToolResultTooLargeError,
)
from .failures import Failure
from .foreach import item_key_suffix
from .intents import MAX_RESULT_BYTES, attempt_key
from .nesting import owner_run
from .runtime import Runtime, SourceRef
from .tool_calls import call_tool

__all__ = ["ToolCall", "stored_result"]

_ERROR_TEXT_BYTES: Final = 300


def stored_result(data: Mapping[str, Any]) -> ToolResult:
    """The `ToolResult` of a ``done`` intent's recorded result."""
    structured = data.get("structuredContent")
    return ToolResult(
        content=tuple(dict(block) for block in data.get("content") or ()),
        structured_content=dict(structured) if isinstance(structured, Mapping) else None,
        is_error=bool(data.get("isError")),
    )


def _result_bytes(data: Mapping[str, Any]) -> int:
    return len(json.dumps(data, ensure_ascii=False, separators=(",", ":")).encode())


@dataclass(frozen=True)
class ToolCall:
    """A call site: ``tool`` of ``dependency``, called by node ``name``."""

    name: str
    dependency: str
    tool: str
    timeout: float
    source: SourceRef  # what the artifact was compiled with (a run's pin may replace it)

    def checked(self, arguments: Any) -> dict[str, Any]:
        """``arguments`` when they are an object (`ToolArgumentsError` otherwise)."""
        if not isinstance(arguments, dict):
            raise ToolArgumentsError(
                self.dependency,
                self.tool,
                f"the arguments are {type(arguments).__name__}, not an object",
            )
        return arguments

    async def connect(self, runtime: Runtime, run: str) -> tuple[AnySession, ToolInfo]:
        """The session of the run's source for the dependency (the run's pinned source,
        or the compiled one) and the tool's listing; `ToolContractChangedError` when the
        listed contract is not the one the run pinned (the tool is not called)."""
        chosen = runtime.run_sources.get(run, {}).get(self.dependency, self.source)
        concrete = chosen() if callable(chosen) else chosen
        session = await runtime.pool(run).session(concrete)
        tool = await session.tool(self.tool)
        contract = runtime.contracts.get(run, {}).get(self.dependency, {}).get(self.tool)
        if contract is not None and tool.contract_fingerprint != contract:
            raise ToolContractChangedError(
                self.name,
                f"the contract of {self.dependency}.{self.tool} changed since the run "
                "was pinned; the tool was not called",
            )
        return session, tool

    async def _call(
        self, session: AnySession, arguments: dict[str, Any], attempt: int = 1
    ) -> ToolResult:
        """The call itself (every call site's, so what wraps a call is written once): in
        its span, counted in the metrics (`tool_calls`)."""
        return await call_tool(
            session, self.dependency, self.tool, arguments, timeout=self.timeout, attempt=attempt
        )

    def error_result(self, result: ToolResult) -> ToolErrorResult:
        text = bound_text(result.text or "no text", _ERROR_TEXT_BYTES)
        return ToolErrorResult(
            self.name, f"{self.dependency}.{self.tool} answered with an error: {text}"
        )

    def check_arguments(self, schema: Mapping[str, Any], arguments: Any) -> None:
        """`ToolArgumentsError` unless ``arguments`` match the tool's input ``schema``."""
        try:
            cls = jsonschema.validators.validator_for(
                schema, default=jsonschema.Draft202012Validator
            )
            validator = cls(dict(schema))
            errors = sorted(validator.iter_errors(arguments), key=lambda e: list(e.absolute_path))
        except jsonschema.exceptions.SchemaError as exc:
            raise ToolArgumentsError(
                self.dependency, self.tool, f"its input schema is invalid: {exc.message}"
            ) from None
        if errors:
            reasons = "; ".join(
                f"{error.json_path}: {error.validator} {error.validator_value!r}"
                if error.validator in ("required", "type", "additionalProperties", "enum")
                else f"{error.json_path}: fails {error.validator}"
                for error in errors[:5]
            )
            more = f" and {len(errors) - 5} more" if len(errors) > 5 else ""
            raise ToolArgumentsError(
                self.dependency,
                self.tool,
                f"the arguments do not match its input schema ({reasons}{more}); "
                "the tool was not called",
            )

    async def attempt(
        self,
        runtime: Runtime,
        arguments: dict[str, Any],
        key: str,
        attempt: int,
        pinned: bool | None,
        retrying: bool,
        known: list[bool],
    ) -> ToolResult:
        """One attempt of a tool node's call: connect (or reuse the segment's session),
        check the contract and the arguments, call. For a tool that is not read-only or
        idempotent the attempt's intent is written before the call and its outcome after;
        for one that is, only a failed attempt of a retrying node is recorded. ``pinned``
        is whether the run pinned the tool as read-only or idempotent (``None``: the
        listing says); ``known`` receives what was decided, once known."""
        name = self.name
        run = owner_run(flow.run_info())
        session, tool = await self.connect(runtime, run)
        self.check_arguments(tool.input_schema, arguments)
        repeatable = tool.repeatable if pinned is None else pinned
        known.append(repeatable)
        akey = attempt_key(key, attempt)
        # A call that must not be repeated after a crash is guarded by started/done
        # records; a repeatable one only records a failed attempt, and only when the node
        # retries (what the attempt count is read from): nothing on the way to a success.
        guarded = not repeatable
        await runtime.before_call(run, self.dependency)  # a rate limit waits before the intent
        if guarded:
            await runtime.intents.record(run, akey, "started", node=name, tool=self.tool)
        try:
            result = await self._call(session, arguments, attempt)
        except SourceError as exc:
            if guarded or retrying:
                failure = Failure.of(exc, exc.failure_kind or "", self.tool, attempt)
                await runtime.intents.record(
                    run,
                    akey,
                    "failed",
                    node=name,
                    tool=self.tool,
                    failure=failure.to_json(),
                    repeatable=repeatable,
                )
            raise
        if result.is_error:
            error = self.error_result(result)
            if guarded or retrying:
                failure = Failure.of(error, "tool_error", self.tool, attempt)
                await runtime.intents.record(
                    run,
                    akey,
                    "failed",
                    node=name,
                    tool=self.tool,
                    failure=failure.to_json(),
                    repeatable=repeatable,
                )
            raise error
        if not guarded:
            return result
        data = result.to_json()
        size = _result_bytes(data)
        if size > MAX_RESULT_BYTES:
            raise ToolResultTooLargeError(
                name, f"the result is {size} bytes; the limit is {MAX_RESULT_BYTES}"
            )
        await runtime.intents.record(run, akey, "done", node=name, tool=self.tool, result=data)
        return result

    async def item(self, runtime: Runtime, arguments: Any, index: int) -> dict[str, Any]:
        """Item ``index``'s call of a foreach tool body: the item's result ``{structured,
        text}``. A tool that is not read-only or idempotent keeps an intent per item
        (keyed by the step's idempotency key and the index): a call that returned is not
        made again (its recorded result is reused), and one that was under way is
        `ToolOutcomeUnknownError`, whatever ``on_item_error`` says."""
        name = self.name
        arguments = self.checked(arguments)
        info = flow.run_info()
        run = owner_run(info)
        session, tool = await self.connect(runtime, run)
        self.check_arguments(tool.input_schema, arguments)
        key = info.idempotency_key + item_key_suffix(index)
        intent = None if tool.repeatable else await runtime.intents.get(run, key)
        if intent is not None and intent.state == "done" and intent.result is not None:
            result = stored_result(intent.result)
        elif tool.repeatable:
            await runtime.before_call(run, self.dependency)
            result = await self._call(session, arguments)
            if result.is_error:
                raise self.error_result(result)
        else:
            if intent is not None and intent.state == "started":
                raise ToolOutcomeUnknownError(
                    name,
                    f"item {index}: a call of {self.dependency}.{self.tool} was under way "
                    "when the run stopped, and the tool is not read-only or idempotent: "
                    "it is not called again",
                )
            await runtime.before_call(run, self.dependency)  # before the intent, as above
            await runtime.intents.record(run, key, "started", node=name, tool=self.tool)
            result = await self._call(session, arguments)
            data = result.to_json()
            if result.is_error:
                await runtime.intents.record(run, key, "failed", node=name, tool=self.tool)
                raise self.error_result(result)
            size = _result_bytes(data)
            if size > MAX_RESULT_BYTES:
                raise ToolResultTooLargeError(
                    name, f"the result is {size} bytes; the limit is {MAX_RESULT_BYTES}"
                )
            await runtime.intents.record(run, key, "done", node=name, tool=self.tool, result=data)
        structured = result.structured_content
        return {
            "structured": None if structured is None else dict(structured),
            "text": result.text,
        }
