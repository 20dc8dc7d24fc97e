"""`RetentionSchedule`: a worker's periodic retention passes over the sessions it owns.

A worker with a `RetentionPolicy` (``WorkerSettings.retention``, else its catalog's
``retention``) calls `poke` every tick with the sessions it owns; a session whose pass is
due (``policy.every`` seconds after its last one, and at once after the worker claims
it) gets one `prune` pass in the background, at most one at a time per session, so
serving runs never waits for it. A worker that stops lets a pass under way finish for a
few seconds before it cancels it. A pass that fails (the store away for a moment,
another prune of the session running) is logged and tried again when next due.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime

from ...storage import Store
from .pruning import PruneBusyError, PruneReport, RetentionPolicy, RunLogs, prune

__all__ = ["RetentionSchedule"]

log = logging.getLogger(__name__)


class RetentionSchedule:
    def __init__(
        self,
        store: Store,
        policy: RetentionPolicy,
        *,
        run_logs: Sequence[RunLogs] = (),
        clock: Callable[[], datetime] | None = None,
    ) -> None:
        self.store = store
        self.policy = policy
        self.run_logs = run_logs
        self.clock = clock
        self.reports: dict[str, PruneReport] = {}  # each session's last finished pass
        self._due: dict[str, float] = {}
        self._tasks: dict[str, asyncio.Task[None]] = {}

    def poke(self, session_ids: Iterable[str]) -> None:
        """Start the passes that are due (never two of one session at once)."""
        now = time.monotonic()
        for session_id in session_ids:
            task = self._tasks.get(session_id)
            if task is not None and not task.done():
                continue
            if self._due.get(session_id, 0.0) > now:
                continue
            self._due[session_id] = now + self.policy.every
            self._tasks[session_id] = asyncio.create_task(self._pass(session_id))

    async def _pass(self, session_id: str) -> None:
        moment = self.clock() if self.clock is not None else None
        try:
            report = await prune(
                self.store, session_id, self.policy, now=moment, run_logs=self.run_logs
            )
        except PruneBusyError:
            log.info("retention of session %s: another prune is running", session_id)
            return
        except Exception as exc:
            log.warning("retention of session %s failed: %s", session_id, exc)
            return
        self.reports[session_id] = report
        if report.runs or report.leftover_runs:
            log.info(
                "retention of session %s: pruned %d run(s), %d byte(s)",
                session_id,
                len(report.runs),
                report.total_bytes,
            )

    async def idle(self) -> None:
        """Wait for the passes under way."""
        tasks = [t for t in self._tasks.values() if not t.done()]
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)

    async def close(self, *, grace: float = 10.0) -> None:
        """Let the passes under way finish for ``grace`` seconds, then cancel the rest (a
        cancelled pass leaves its tombstone; the next pass finishes its work)."""
        running = [t for t in self._tasks.values() if not t.done()]
        if running:
            await asyncio.wait(running, timeout=grace)
        for task in self._tasks.values():
            task.cancel()
        for task in self._tasks.values():
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        self._tasks.clear()
