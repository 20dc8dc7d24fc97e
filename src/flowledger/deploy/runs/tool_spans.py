"""The ``flowledger.tool_call`` span of each tool call a run makes.

The span is current while the MCP SDK sends ``tools/call``, so the SDK's own client span
is its child and the SDK injects that context into the request's ``params._meta``
(``traceparent``): the called server continues the run's trace. Attributes name the
dependency, the tool, the attempt and the outcome, never the arguments or the result.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ...observability import tracing
from ..sources.connect import AnySession
from ..sources.session import ToolResult

__all__ = ["call_tool"]


async def call_tool(
    session: AnySession,
    dependency: str,
    tool: str,
    arguments: Mapping[str, Any],
    *,
    timeout: float | None,  # noqa: ASYNC109 - passed through to the session's call_tool
    attempt: int = 1,
) -> ToolResult:
    """``session.call_tool(tool, arguments, timeout=timeout)``, in a span when traces are on."""
    if not tracing.ENABLED:
        return await session.call_tool(tool, arguments, timeout=timeout)
    attributes: tracing.Attributes = {
        "flowledger.tool.source": dependency,
        "flowledger.tool.name": tool,
        "flowledger.tool.attempt": attempt,
    }
    with tracing.span("flowledger.tool_call", attributes) as span:
        result = await session.call_tool(tool, arguments, timeout=timeout)
        span.set_attribute("flowledger.outcome", "tool_error" if result.is_error else "ok")
        return result
