"""Each tool call a deployed run makes, as operators see it: a span and a metric.

The ``flowledger.tool_call`` span (when traces are on) is current while the MCP SDK sends
``tools/call``, so the SDK's own client span is its child and the SDK injects that context
into the request's ``params._meta`` (``traceparent``): the called server continues the
run's trace. The call is also counted and timed in the process's metrics (when they are
on). Both name the dependency (as the artifact declares it), the tool, and the outcome:
``ok``, ``tool_error`` (the tool answered with an error result), a source failure's kind
(``unavailable``, ``outcome_unknown``, ``timeout``, ...), ``failed`` for a failure no
workflow routes, ``cancelled``; the span also the attempt. Never the arguments or the
result (`flowledger.observability`).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Mapping
from typing import Any

from ...observability import metrics, tracing
from ..sources.connect import AnySession
from ..sources.errors import SourceError
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
    """``session.call_tool(tool, arguments, timeout=timeout)``, in a span when traces are
    on, recorded in the metrics."""
    began = time.perf_counter()
    outcome = "failed"
    with contextlib.ExitStack() as scope:
        span = None
        if tracing.ENABLED:
            attributes: tracing.Attributes = {
                "flowledger.tool.source": dependency,
                "flowledger.tool.name": tool,
                "flowledger.tool.attempt": attempt,
            }
            span = scope.enter_context(tracing.span("flowledger.tool_call", attributes))
        try:
            result = await session.call_tool(tool, arguments, timeout=timeout)
            outcome = "tool_error" if result.is_error else "ok"
            if span is not None:
                span.set_attribute("flowledger.outcome", outcome)
            return result
        except SourceError as exc:
            outcome = exc.failure_kind or "failed"
            raise
        except asyncio.CancelledError:
            outcome = "cancelled"
            raise
        finally:
            metrics.tool_called(dependency, tool, outcome, time.perf_counter() - began)
