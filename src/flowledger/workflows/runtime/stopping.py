"""Stopping an owner's executions at their next step boundary.

When a process that owns a session has to go (Ctrl-C, SIGTERM, its output pipe closed),
cancelling its executions at once would throw away the steps in flight: the next owner
runs them again. `BoundaryStop` lets each execution finish the step it is in instead:
its hook runs when a step's boundary checkpoint is durable (Flow's ``on_step``, fired
after the commit) and, once a stop is requested, cancels the execution right there,
before anything of the next step has begun. A step that pauses, completes or halts ends
its segment anyway, so only a run that would go on running is cut, and it is cut where
its checkpoint already says everything: the next owner adopts it from that revision.
"""

from __future__ import annotations

import asyncio

from ... import flow
from ..errors import SupervisorClosedError

__all__ = ["BoundaryStop", "SupervisorStoppingError"]


class SupervisorStoppingError(SupervisorClosedError):
    """A start or resume reached an owner that is stopping: nothing was changed."""

    def __init__(self) -> None:
        super(SupervisorClosedError, self).__init__(
            "workflow supervisor is stopping (its process is leaving the session); nothing "
            "was changed: try again when another process owns the session"
        )


class BoundaryStop:
    """A stop request shared by every execution of one supervisor; pass `hook` to each."""

    def __init__(self) -> None:
        self._requested = False
        self.hook = flow.Hooks(on_step=self._on_step)

    @property
    def requested(self) -> bool:
        return self._requested

    def refuse_new_work(self) -> None:
        """Raise `SupervisorStoppingError` once a stop was requested."""
        if self._requested:
            raise SupervisorStoppingError()

    def request(self) -> None:
        """Ask every execution to stop at its next step boundary (idempotent; signal-safe
        in the asyncio sense: it only sets a flag)."""
        self._requested = True

    async def _on_step(self, run: flow.RunRecord, _activated: int) -> None:
        if not self._requested or run.status is not flow.RunStatus.RUNNING:
            return
        task = asyncio.current_task()  # the execution: hooks fire in its coordinator
        if task is None:
            return
        task.cancel()
        # The cancellation is delivered here, so it escapes the hook (hooks only contain
        # exceptions) and ends the segment with the step's commit already durable.
        await asyncio.sleep(0)
