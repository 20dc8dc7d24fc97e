"""Typed errors of MCP capability sources: one family, one stable ``code`` per kind.

Every message names the source by its *label* (`StdioSource.label`, `HttpSource.label`)
and, where there is one, the tool; it never carries an environment-variable value, a
header value, URL credentials or a query string, so messages are safe for logs, run
diagnostics and CLI output. The ``code`` strings match the deploy layer's diagnostic
codes (``source_unreachable``, ``tool_missing``, ...) so a caller can turn an error into
a diagnostic without parsing text.

Whether a failed call may have had an effect matters to whoever decides about retrying:
`ConnectionLostError` and `ToolCallTimeoutError` leave the outcome *unknown* (the server
may have acted before the answer was lost), `ToolNotFoundError` and `SourceUnreachableError`
mean nothing was sent. ``outcome_unknown`` says which.

``failure_kind`` is the failure kind a tool node sees (deploy/artifacts/failures.py):
``unavailable`` (unreachable, closed, or the connection lost before the request was
written), ``outcome_unknown`` (lost after it may have been written, an unnamed
failure, an internal JSON-RPC error), ``timeout``, ``invalid_result``, ``tool_error``
(a request refused before it ran); ``None`` for errors no workflow should route (an
unknown tool, arguments that are no JSON, a misbehaving listing): those fail the run.
"""

from __future__ import annotations

from typing import ClassVar, Final

__all__ = [
    "ConnectionLostError",
    "OpenApiDocumentError",
    "OpenApiExtraMissingError",
    "OpenApiOperationError",
    "PythonSignatureError",
    "SessionClosedError",
    "SourceError",
    "SourceProtocolError",
    "SourceSpecError",
    "SourceUnreachableError",
    "ToolArgumentsError",
    "ToolCallError",
    "ToolCallFailedError",
    "ToolCallRejectedError",
    "ToolCallTimeoutError",
    "ToolNotFoundError",
    "ToolResultInvalidError",
]

MAX_DETAIL_CHARS: Final = 300
"""Server-supplied text (an error message) is cut to this many characters."""

MAX_LISTED_NAMES: Final = 10


def clip(text: str, limit: int = MAX_DETAIL_CHARS) -> str:
    """``text`` on one line, at most ``limit`` characters."""
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


def named(source: str) -> str:
    """How a message names a source by its label: ``MCP source LABEL``, or the label
    alone for a Python source (``python:MODULE``, ``builtin:std``), which speaks no MCP."""
    if source.startswith(("python:", "builtin:", "openapi:")):
        return f"source {source}"
    return f"MCP source {source}"


class SourceError(Exception):
    """Something about an MCP capability source failed. ``source`` is its label."""

    code: ClassVar[str] = "source_error"
    outcome_unknown: bool = False
    failure_kind: str | None = None

    def __init__(self, source: str, message: str) -> None:
        super().__init__(message)
        self.source = source


class SourceSpecError(SourceError, ValueError):
    """A source specification is invalid (raised when it is constructed)."""

    code = "source_invalid"

    def __init__(self, source: str, problem: str) -> None:
        super().__init__(source, f"invalid {named(source)}: {problem}")
        self.problem = problem


class SourceUnreachableError(SourceError):
    """No session could be opened: the command did not start, the URL did not answer,
    the handshake failed or did not finish within the connect timeout."""

    code = "source_unreachable"
    failure_kind = "unavailable"

    def __init__(self, source: str, reason: str) -> None:
        super().__init__(source, f"{named(source)} is unreachable: {reason}")
        self.reason = reason


class SourceProtocolError(SourceError):
    """The server answered, but not as the protocol requires (a malformed or endless
    tool listing, a server error answering tools/list)."""

    code = "source_protocol"

    def __init__(self, source: str, problem: str) -> None:
        super().__init__(source, f"{named(source)} misbehaved: {problem}")
        self.problem = problem


class PythonSignatureError(SourceProtocolError):
    """A function of a Python source cannot be a tool: its signature takes ``*args``,
    ``**kwargs`` or positional-only parameters, or its type hints have no JSON Schema.
    Nothing is listed for the source until the function is fixed or left out of its
    ``functions``."""

    code = "python_signature_unsupported"

    def __init__(self, source: str, function: str, problem: str) -> None:
        SourceError.__init__(
            self, source, f"function {function!r} of {source} cannot be a tool: {clip(problem)}"
        )
        self.problem = problem
        self.function = function


class OpenApiExtraMissingError(SourceError):
    """An OpenAPI source's document is read in a process without the ``openapi`` extra
    (its validator, ``openapi-spec-validator``): nothing is listed or called."""

    code = "openapi_extra_missing"

    def __init__(self, source: str) -> None:
        super().__init__(
            source,
            f"{named(source)} is an OpenAPI source, and this installation cannot read its "
            "document: install flowledger's openapi extra (pip install 'flowledger[openapi]')",
        )


class OpenApiDocumentError(SourceProtocolError):
    """The document of an OpenAPI source is not an OpenAPI 3.0 or 3.1 document (it does
    not parse, or the validator refuses it). Nothing is listed until it is fixed."""

    code = "openapi_document_invalid"

    def __init__(self, source: str, document: str, problem: str) -> None:
        SourceError.__init__(
            self, source, f"the OpenAPI document {document} of {source} is invalid: {clip(problem)}"
        )
        self.problem = problem


class OpenApiOperationError(SourceProtocolError):
    """An operation of an OpenAPI source cannot be a tool (a required cookie parameter,
    a parameter described by ``content``, a style that is not supported, two parameters
    of one name, a request body without JSON, a reference outside the document). Nothing
    is listed until it is fixed or left out of the source's ``operations``."""

    code = "openapi_operation_unsupported"

    def __init__(self, source: str, operation: str, problem: str) -> None:
        SourceError.__init__(
            self, source, f"operation {operation!r} of {source} cannot be a tool: {clip(problem)}"
        )
        self.problem = problem
        self.operation = operation


class SessionClosedError(SourceError):
    """The session was closed by its owner (or never opened) before this call."""

    code = "source_closed"
    failure_kind = "unavailable"

    def __init__(self, source: str) -> None:
        super().__init__(source, f"the session with {named(source)} is closed")


class ConnectionLostError(SourceError):
    """The connection ended while the session was open (the server exited or the HTTP
    stream broke). ``tool`` is the call that was in flight (``in_flight``: its effect is
    unknown) or that was refused because the connection was already gone (nothing was
    sent), if any."""

    code = "connection_lost"

    def __init__(
        self, source: str, tool: str | None, detail: str = "", *, in_flight: bool = True
    ) -> None:
        because = f" ({clip(detail)})" if detail else ""
        if tool is None:
            message = f"lost the connection to {named(source)}{because}"
        elif in_flight:
            message = (
                f"lost the connection to {named(source)} during a call of tool {tool!r}"
                f"{because}; the call may or may not have taken effect"
            )
        else:
            message = (
                f"cannot call tool {tool!r}: the connection to {named(source)} was "
                f"lost earlier{because}; nothing was sent"
            )
        super().__init__(source, message)
        self.tool = tool
        self.in_flight = in_flight
        self.outcome_unknown = in_flight and tool is not None
        self.failure_kind = "outcome_unknown" if self.outcome_unknown else "unavailable"


class ToolCallError(SourceError):
    """A call of one tool failed. ``tool`` is its name."""

    code = "tool_error"

    def __init__(self, source: str, tool: str, message: str) -> None:
        super().__init__(source, message)
        self.tool = tool


class ToolArgumentsError(ToolCallError, ValueError):
    """The arguments cannot be sent: not a JSON object of JSON values. Nothing was
    sent."""

    code = "tool_arguments_invalid"

    def __init__(self, source: str, tool: str, problem: str) -> None:
        super().__init__(source, tool, f"cannot call tool {tool!r} of {named(source)}: {problem}")


class ToolCallFailedError(ToolCallError):
    """The call failed in a way the protocol does not name (an unexpected error inside
    the SDK or the transport). Whether it took effect is unknown."""

    code = "tool_failed"

    def __init__(self, source: str, tool: str, detail: str) -> None:
        super().__init__(
            source,
            tool,
            f"the call of tool {tool!r} of {named(source)} failed: {clip(detail)} "
            "(it may or may not have taken effect)",
        )
        self.outcome_unknown = True
        self.failure_kind = "outcome_unknown"


class ToolNotFoundError(ToolCallError):
    """The source does not list the tool (checked against a fresh listing; nothing was
    sent)."""

    code = "tool_missing"

    def __init__(self, source: str, tool: str, available: tuple[str, ...]) -> None:
        shown = ", ".join(available[:MAX_LISTED_NAMES])
        if len(available) > MAX_LISTED_NAMES:
            shown += f", ... ({len(available)} in all)"
        listed = f"it lists {shown}" if available else "it lists no tools"
        super().__init__(source, tool, f"{named(source)} has no tool {tool!r} ({listed})")
        self.available = available


class ToolCallTimeoutError(ToolCallError):
    """The tool did not answer within the call timeout. The server was asked to cancel;
    whether the call took effect is unknown."""

    code = "tool_timeout"

    def __init__(self, source: str, tool: str, timeout: float) -> None:
        super().__init__(
            source,
            tool,
            f"tool {tool!r} of {named(source)} did not answer within {timeout:g}s "
            "(cancelled; it may or may not have taken effect)",
        )
        self.timeout = timeout
        self.outcome_unknown = True
        self.failure_kind = "timeout"


REFUSED_BEFORE_RUNNING: Final = frozenset({-32700, -32600, -32601, -32602})
"""JSON-RPC codes that say a request was refused before anything ran: parse error,
invalid request, method not found, invalid params."""


class ToolCallRejectedError(ToolCallError):
    """The server answered the call with a JSON-RPC error (not a tool error result).
    ``error_code`` is the JSON-RPC code; for the codes that refuse a request before it
    runs (`REFUSED_BEFORE_RUNNING`, e.g. invalid params) the call did not take effect,
    for any other (an internal error) its effect is unknown."""

    code = "tool_rejected"

    def __init__(self, source: str, tool: str, error_code: int, detail: str) -> None:
        super().__init__(
            source,
            tool,
            f"{named(source)} rejected the call of tool {tool!r}: {clip(detail)} "
            f"(JSON-RPC error {error_code})",
        )
        self.error_code = error_code
        self.outcome_unknown = error_code not in REFUSED_BEFORE_RUNNING
        self.failure_kind = "outcome_unknown" if self.outcome_unknown else "tool_error"


class ToolResultInvalidError(ToolCallError):
    """The tool answered with a result that breaks the protocol or its own declared
    output schema. The call did take effect."""

    code = "tool_result_invalid"
    failure_kind = "invalid_result"

    def __init__(self, source: str, tool: str, detail: str) -> None:
        super().__init__(
            source,
            tool,
            f"tool {tool!r} of {named(source)} returned an invalid result: {clip(detail)}",
        )
