"""`ToolTrial`: ``capability_call``, trying one tool of a registered source, for one session.

Who may call what: a tool the server annotates read-only (``readOnlyHint``), or one
the operator lists in the source's ``call_tools``; anything else is refused
(`CallRefusedError`, code ``call_refused``) with nothing sent. The decision is made
twice: against the catalog's listing (`CapabilityCatalog.listing`, refreshed first if
due) before the call's connection is opened, and against the listing the server gives
that connection (a tool that stopped claiming read-only since the last probe is refused
there, before the call). The arguments are checked the same way: against the catalog's
listing's input schema, then the live one; nothing is sent either way.

The call goes to the revision of the source the session sees now, with the secrets
granted to the session (``credential_missing`` otherwise), on a fresh connection that
is closed afterwards. It is bounded: ``connect_timeout`` to start and finish the
handshake, ``call_timeout`` for the listing check, and the caller's ``timeout``
(default ``call_timeout``, at most `MAX_CALL_TIMEOUT`) for the call; at most
``max_concurrent`` calls of the session run at a time (more are refused, code
``call_busy``). Arguments that do not match the input schema are
``tool_arguments_invalid``. A result larger than ``max_result_bytes`` is cut
(``truncated``).

Every attempt is recorded in the session's audit log (`CallAudit`): ``started``
before connecting, then the outcome; never the arguments or the result.
"""

from __future__ import annotations

import asyncio
import io
import json
import time
import uuid
from collections.abc import Mapping
from typing import Any, Final, NamedTuple, NoReturn

import jsonschema  # type: ignore[import-untyped, unused-ignore]
import jsonschema.validators  # type: ignore[import-untyped, unused-ignore]

from ..sources.connect import session_for
from ..sources.errors import (
    SourceUnreachableError,
    ToolArgumentsError,
    ToolCallTimeoutError,
    ToolNotFoundError,
)
from ..sources.session import ToolResult
from ..sources.tool_info import ToolInfo
from .access import SessionSources
from .audit import CallAudit, Outcome
from .catalog import CapabilityCatalog
from .errors import LaunchRefusedError, RegistryError
from .spec import CredentialMissingError
from .store import RegisteredSource

__all__ = [
    "DEFAULT_CALL_TIMEOUT",
    "DEFAULT_CONNECT_TIMEOUT",
    "DEFAULT_MAX_CONCURRENT",
    "MAX_CALL_TIMEOUT",
    "MAX_RESULT_BYTES",
    "CallBusyError",
    "CallRefusedError",
    "ToolTrial",
    "may_call",
]

DEFAULT_CONNECT_TIMEOUT: Final = 15.0
DEFAULT_CALL_TIMEOUT: Final = 30.0
MAX_CALL_TIMEOUT: Final = 120.0
DEFAULT_MAX_CONCURRENT: Final = 4
MAX_RESULT_BYTES: Final = 256 * 1024


class CallRefusedError(RegistryError):
    """The tool is neither annotated read-only nor on the source's ``call_tools``."""

    code = "call_refused"

    def __init__(self, source: str, tool: str) -> None:
        super().__init__(
            source,
            f"tool {tool!r} of source {source!r} is not annotated read-only and not on the "
            "source's call_tools: capability_call tries read-only tools only (the operator "
            "may allow others in the source's call_tools); nothing was sent",
        )
        self.tool = tool


class CallBusyError(RegistryError):
    code = "call_busy"

    def __init__(self, source: str, limit: int) -> None:
        super().__init__(
            source,
            f"this session already has {limit} capability calls in flight; wait for one "
            "to finish (nothing was sent)",
        )


def may_call(registered: RegisteredSource, tool: ToolInfo) -> bool:
    """Whether ``capability_call`` may try ``tool`` of ``registered``."""
    return tool.read_only or tool.name in registered.source.document.call_tools


class ToolTrial:
    """``capability_call`` for the session of ``sources`` (see the module)."""

    def __init__(
        self,
        sources: SessionSources,
        catalog: CapabilityCatalog,
        audit: CallAudit,
        *,
        connect_timeout: float = DEFAULT_CONNECT_TIMEOUT,
        call_timeout: float = DEFAULT_CALL_TIMEOUT,
        max_concurrent: int = DEFAULT_MAX_CONCURRENT,
        max_result_bytes: int = MAX_RESULT_BYTES,
    ) -> None:
        if not connect_timeout > 0 or not 0 < call_timeout <= MAX_CALL_TIMEOUT:
            raise ValueError(f"timeouts must be positive (a call's at most {MAX_CALL_TIMEOUT}s)")
        if max_concurrent < 1 or max_result_bytes < 1024:
            raise ValueError("max_concurrent must be >= 1 and max_result_bytes >= 1024")
        self.sources = sources
        self.catalog = catalog
        self.audit = audit
        self.connect_timeout = connect_timeout
        self.call_timeout = call_timeout
        self.max_concurrent = max_concurrent
        self.max_result_bytes = max_result_bytes
        self._active = 0

    async def call(
        self,
        source: str,
        tool: str,
        arguments: Mapping[str, Any],
        *,
        timeout: float | None = None,  # noqa: ASYNC109 - a bound the call reports as its outcome
    ) -> dict[str, Any]:
        """Try ``tool`` of ``source`` with ``arguments``; the result, or a typed error
        (`RegistryError`, `SourceError`, `CredentialMissingError`) saying why not."""
        limit = self.call_timeout if timeout is None else timeout
        if not 0 < limit <= MAX_CALL_TIMEOUT:
            raise ValueError(f"timeout must be in (0, {MAX_CALL_TIMEOUT:g}] seconds")
        if not self.sources.access.launch:
            raise LaunchRefusedError(source)
        call = str(uuid.uuid4())
        audit = self.audit

        async def refuse(outcome: Outcome, error: Exception, revision: int | None) -> NoReturn:
            await audit.record(call, source, revision, tool, outcome, code=_code(error))
            raise error

        try:
            registered = await self.sources.enabled(source)
        except RegistryError as exc:
            await refuse("unavailable", exc, None)
        revision = registered.revision
        if self._active >= self.max_concurrent:
            await refuse("busy", CallBusyError(source, self.max_concurrent), revision)
        # the catalog's listing (refreshed first if due): known refusals start no process
        listing = await self.catalog.listing(
            self.sources.registry, registered, environ=self.sources.environ, launch=True
        )
        current = listing.probe is not None and listing.probe.revision == revision
        listed = listing.tool(tool) if current else None
        if listed is not None:
            if not may_call(registered, listed):
                await refuse("refused", CallRefusedError(source, tool), revision)
            try:
                _check_arguments(source, listed, arguments)
            except ToolArgumentsError as exc:
                await refuse("invalid_arguments", exc, revision)
        try:
            concrete = self.sources.source(registered, source)
        except CredentialMissingError as exc:
            await refuse("unavailable", exc, revision)
        self._active += 1
        try:
            await audit.record(call, source, revision, tool, "started")
            started = time.monotonic()
            outcome: Outcome = "failed"
            code: str | None = None
            try:
                result = await self._call(registered, concrete, tool, arguments, limit)
                outcome = "tool_error" if result.is_error else "ok"
            except BaseException as exc:
                outcome, code = _outcome(exc)
                raise
            finally:
                elapsed = (time.monotonic() - started) * 1000
                # recorded even when the caller is cancelled meanwhile
                await asyncio.shield(
                    audit.record(
                        call, source, revision, tool, outcome, code=code, duration_ms=elapsed
                    )
                )
        finally:
            self._active -= 1
        return {
            "call": call,
            "source": source,
            "revision": revision,
            "tool": tool,
            "outcome": outcome,
            "duration_ms": round(elapsed, 1),
            **self._bounded(result),
        }

    async def _call(
        self,
        registered: RegisteredSource,
        concrete: Any,
        tool: str,
        arguments: Mapping[str, Any],
        limit: float,
    ) -> ToolResult:
        async with session_for(
            concrete,
            connect_timeout=self.connect_timeout,
            call_timeout=self.call_timeout,  # bounds the listing check
            errlog=io.StringIO(),  # a server's stderr is not the caller's to read
        ) as session:
            live = await session.tool(tool)
            if not may_call(registered, live):
                raise CallRefusedError(registered.name, tool)
            _check_arguments(registered.name, live, arguments)
            return await session.call_tool(tool, arguments, timeout=limit)

    def _bounded(self, result: ToolResult) -> dict[str, Any]:
        """The result as JSON, content blocks dropped from the end (and the structured
        content) beyond ``max_result_bytes``."""
        kept: list[dict[str, Any]] = []
        size = 0
        truncated = False
        for block in result.content:
            weight = len(json.dumps(block, separators=(",", ":")))
            if size + weight > self.max_result_bytes:
                truncated = True
                break
            kept.append(dict(block))
            size += weight
        structured = result.structured_content
        if structured is not None:
            weight = len(json.dumps(structured, separators=(",", ":"), default=str))
            if size + weight > self.max_result_bytes:
                structured, truncated = None, True
        return {
            "is_error": result.is_error,
            "content": kept,
            "structured_content": None if structured is None else dict(structured),
            "truncated": truncated,
        }


def _check_arguments(source: str, tool: ToolInfo, arguments: Mapping[str, Any]) -> None:
    """`ToolArgumentsError` naming the places (never the values) where ``arguments`` do
    not match the tool's input schema."""
    schema = dict(tool.input_schema)
    try:
        cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
        errors = sorted(
            cls(schema).iter_errors(dict(arguments)), key=lambda e: list(e.absolute_path)
        )
    except jsonschema.exceptions.SchemaError as exc:
        raise ToolArgumentsError(
            source, tool.name, f"its input schema is invalid: {exc.message}"
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
            source,
            tool.name,
            f"the arguments do not match its input schema ({reasons}{more}); nothing was sent",
        )


def _code(error: BaseException) -> str:
    if isinstance(error, CredentialMissingError):
        return "credential_missing"
    code = getattr(error, "code", None)
    return code if isinstance(code, str) else type(error).__name__


class _Ended(NamedTuple):
    outcome: Outcome
    code: str | None


def _outcome(error: BaseException) -> _Ended:
    """The audit outcome and code of a call that raised ``error``."""
    if isinstance(error, asyncio.CancelledError):
        return _Ended("cancelled", None)
    for kind, outcome in _OUTCOMES:
        if isinstance(error, kind):
            return _Ended(outcome, _code(error))
    return _Ended("failed", _code(error))


# the first that applies; any other error is "failed" with its code
_OUTCOMES: Final[tuple[tuple[type[BaseException], Outcome], ...]] = (
    (CallRefusedError, "refused"),
    (ToolArgumentsError, "invalid_arguments"),
    (ToolNotFoundError, "tool_missing"),
    (ToolCallTimeoutError, "timeout"),
    (SourceUnreachableError, "unreachable"),
)
