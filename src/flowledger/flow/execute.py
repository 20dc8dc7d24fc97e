"""Running one vertex: its task under the retry policy and the timeout.

The timeout is one deadline over all attempts. Cancellation of a plain
function running in a worker thread is cooperative: the engine stops waiting
for it, the thread runs to its end.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable
from typing import Any

from .context import InterruptSignal
from .errors import VertexError
from .policy import Retry

__all__ = ["is_async", "run_task"]


def is_async(fn: Callable[..., Any]) -> bool:
    return inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(
        getattr(fn, "__call__", None)  # noqa: B004 - async callable objects
    )


async def _call(task: Callable[[Any], Any], value: Any) -> Any:
    if is_async(task):
        return await task(value)
    result = await asyncio.to_thread(task, value)
    if inspect.isawaitable(result):
        return await result
    return result


async def run_task(
    task: Callable[[Any], Any],
    value: Any,
    *,
    vertex: str,
    vertex_run_id: str,
    retry: Retry | None,
    time_limit: float | None,
    on_attempt: Callable[[int], None],
) -> tuple[Any, int, BaseException | None]:
    """Return ``(output, attempts, failure)``; ``failure`` is None, an `InterruptSignal`
    (passed through, never retried) or a `VertexError` wrapping the final cause."""
    loop = asyncio.get_running_loop()
    deadline = None if time_limit is None else loop.time() + time_limit
    attempts = 1 if retry is None else retry.attempts
    attempt = 0
    while True:
        attempt += 1
        on_attempt(attempt)
        try:
            if deadline is None:
                return await _call(task, value), attempt, None
            remaining = deadline - loop.time()
            if remaining <= 0:
                raise TimeoutError(f"vertex {vertex} timed out after {time_limit} s")
            try:
                return await asyncio.wait_for(_call(task, value), remaining), attempt, None
            except TimeoutError:
                raise TimeoutError(f"vertex {vertex} timed out after {time_limit} s") from None
        except InterruptSignal as signal:
            return None, attempt, signal
        except Exception as exc:
            cause: BaseException = exc
        if attempt >= attempts or retry is None:
            return None, attempt, VertexError(vertex, vertex_run_id, attempt, cause)
        try:
            again = True if retry.retryable is None else bool(retry.retryable(cause))
            if not again:
                return None, attempt, VertexError(vertex, vertex_run_id, attempt, cause)
            backoff = retry.backoff
            delay = float(backoff(attempt + 1) if callable(backoff) else backoff)
        except Exception as exc:
            return None, attempt, VertexError(vertex, vertex_run_id, attempt, exc)
        if deadline is not None and loop.time() + max(delay, 0.0) >= deadline:
            return None, attempt, VertexError(vertex, vertex_run_id, attempt, cause)
        if delay > 0:
            await asyncio.sleep(delay)
