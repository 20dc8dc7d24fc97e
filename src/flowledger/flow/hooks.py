"""Observational hooks. They never change what the engine does.

Every callback is optional and may be a plain function or a coroutine
function. All hook calls for one run come from its coordinator, one at a
time, in a fixed order; an exception in a hook is logged and swallowed, and
the remaining hooks still fire. A hook fires only after the checkpoint that
records the event is durable (``on_run_start`` after revision 0, and so on).
Hooks receive copies: mutating what a hook gets never changes the run.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["Hooks", "fire"]

log = logging.getLogger("flowledger.flow.hooks")

Callback = Callable[..., Any] | None


@dataclass(frozen=True, slots=True)
class Hooks:
    on_run_start: Callback = None  # (RunRecord) after revision 0 is durable
    on_run_finish: Callback = None  # (RunRecord) on completion and on cancel
    on_vertex_start: Callback = None  # (VertexRecord) before the task is launched
    on_vertex_finish: Callback = None  # (VertexRecord) after classification
    on_edge: Callback = None  # (source, target, RunRecord) per routed edge
    on_step: Callback = None  # (RunRecord, activated) once per routed step
    on_checkpoint: Callback = None  # (graph_run_id, revision, step) per durable append
    on_interrupt: Callback = None  # (Interruption) per paused vertex
    on_halt: Callback = None  # (Halt) per run-level halt


async def fire(hooks: Sequence[Hooks], event: str, *args: Any) -> None:
    """Call ``event`` on every hook set, in registration order, containing exceptions."""
    for hook_set in hooks:
        callback = getattr(hook_set, event)
        if callback is None:
            continue
        try:
            result = callback(*args)
            if inspect.isawaitable(result):
                await result
        except Exception:
            log.exception("flow hook %s raised; ignored", event)
