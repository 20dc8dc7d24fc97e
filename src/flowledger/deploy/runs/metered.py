"""A deployed run's tool call, counted and timed in the process's metrics.

Labels are the dependency's logical name (as the artifact declares it), the tool's name
and the outcome: ``ok``, ``tool_error`` (the tool answered with an error result), a
source failure's kind (``unavailable``, ``outcome_unknown``, ``timeout``, ...),
``failed`` for a failure no workflow routes, ``cancelled``. Never the arguments or the
result (`flowledger.observability.metrics`).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping
from typing import Any

from ...observability import metrics
from ..sources.connect import AnySession
from ..sources.errors import SourceError
from ..sources.session import ToolResult

__all__ = ["call_metered"]


async def call_metered(
    session: AnySession,
    dependency: str,
    tool: str,
    arguments: Mapping[str, Any],
    timeout: float | None,  # noqa: ASYNC109 - the session's own bound, passed on
) -> ToolResult:
    """``session.call_tool(tool, arguments, timeout=timeout)``, recorded in the metrics."""
    began = time.perf_counter()
    outcome = "failed"
    try:
        result = await session.call_tool(tool, arguments, timeout=timeout)
        outcome = "tool_error" if result.is_error else "ok"
        return result
    except SourceError as exc:
        outcome = exc.failure_kind or "failed"
        raise
    except asyncio.CancelledError:
        outcome = "cancelled"
        raise
    finally:
        metrics.tool_called(dependency, tool, outcome, time.perf_counter() - began)
