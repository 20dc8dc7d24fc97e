"""`ScheduleLoop`: the session owner's loop that fires its schedules' due slots.

Whoever owns a session (a `flowledger worker`, or any process holding the session lease
through `Supervisor.activate`) runs one loop for it. Each pass reads the session's
schedules and, for each active one, decides the slots in ``(cursor, now]`` in order:

* ``catch_up`` picks which of several due slots fire (the others count as ``skipped``):
  ``all`` the newest `MAX_CATCH_UP`, ``latest`` the newest one, ``none`` the newest one
  only if it is at most `grace` late (half the schedule's period, between 1 s and 60 s);
* ``overlap`` looks at the run the previous firing started: ``allow`` fires anyway,
  ``skip`` skips the slot while that run is unfinished, ``queue`` leaves the slot (and
  the cursor) where it is until that run has ended; a queued slot is late by design, so
  ``none`` then acts as ``latest``;
* each firing goes through `firing.fire`, then the cursor moves past the slot by
  compare-and-swap. Every write of the pass carries the owner's lease fence;
* a deployment's firing that could not start its run (the deployment was deleted, a
  source disabled, the input no longer fits) is recorded with its reason and counted as
  ``failed``; the schedule keeps firing later slots. A process that does not serve
  deployments leaves a deployment's slots undecided for one that does.

Then the loop sleeps (`Clock.sleep`) until the earliest next slot of its schedules, at
most ``rescan`` seconds (5): a schedule added, paused or resumed by another process is
seen within that, and at once where someone calls `poke` (the `Schedules` of this
process; a worker, which sees the set of active schedules change on its tick).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import replace
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Final

from ...clock import Clock
from ..errors import ConflictError, NotFoundError
from ..runtime.supervisor.workers import owner_writes
from .deployments import DeploymentsNotServedError
from .firing import fire
from .record import CatchUp, Overlap, Schedule
from .store import ScheduleStore

if TYPE_CHECKING:
    from ..runtime.session import WorkflowSession
    from ..runtime.supervisor import Supervisor

__all__ = ["MAX_CATCH_UP", "ScheduleLoop", "grace"]

log = logging.getLogger(__name__)

MAX_CATCH_UP: Final = 100  # slots fired at most after downtime with ``catch_up: all``
DEFAULT_RESCAN: Final = 5.0


def grace(schedule: Schedule, slot: datetime) -> timedelta:
    """How late a slot may fire under ``catch_up: none``."""
    period = (schedule.timing.next_after(slot) - slot).total_seconds()
    return timedelta(seconds=min(60.0, max(1.0, period / 2)))


class ScheduleLoop:
    def __init__(
        self,
        session: WorkflowSession,
        *,
        clock: Clock | None = None,
        rescan: float = DEFAULT_RESCAN,
    ) -> None:
        if not rescan > 0:
            raise ValueError(f"rescan must be > 0 seconds, not {rescan}")
        self.session = session
        self.store = ScheduleStore(session.store.kv)
        self.clock = clock or session.clock  # the slots' and the firings' times
        self.rescan = rescan
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self.passes = 0

    def start(self) -> None:
        """Run the loop in the background until the supervisor stops owning the session
        (or `close`)."""
        if self._task is None:
            self._task = asyncio.ensure_future(self.run())

    def poke(self) -> None:
        """Look at the schedules now (one was added, paused or resumed here)."""
        self._wake.set()

    async def close(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(BaseException):
                await task

    async def run(self) -> None:
        supervisor = self.session.supervisor
        while supervisor.active and not supervisor.stopping:
            try:
                earliest = await _fenced_pass(supervisor, self)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # the database may be away for a moment
                log.warning("session %s: firing schedules: %s", supervisor.session_id, exc)
                earliest = None
            delay = self.rescan
            if earliest is not None:
                delay = min(delay, (earliest - self.clock.now()).total_seconds())
            await self._sleep(delay)

    async def _sleep(self, seconds: float) -> None:
        self._wake.clear()
        sleeper = asyncio.ensure_future(self.clock.sleep(seconds))
        poked = asyncio.ensure_future(self._wake.wait())
        try:
            await asyncio.wait({sleeper, poked}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in (sleeper, poked):
                task.cancel()

    async def fire_due(self) -> datetime | None:
        """One pass over the session's schedules (the caller holds the fence); return the
        earliest next slot of the active ones (None: there are none)."""
        self.passes += 1
        earliest: datetime | None = None
        for schedule in await self.store.list(self.session.session_id):
            if schedule.paused:
                continue
            try:
                schedule = await self._decide(schedule)
            except ConflictError:
                continue  # changed meanwhile (paused, resumed): the next pass sees it
            except DeploymentsNotServedError as exc:
                log.warning("session %s: %s", self.session.session_id, exc)
                continue
            following = schedule.timing.next_after(max(schedule.cursor, self.clock.now()))
            if earliest is None or following < earliest:
                earliest = following
        return earliest

    async def _decide(self, schedule: Schedule) -> Schedule:
        now = self.clock.now()
        limit = MAX_CATCH_UP if schedule.catch_up is CatchUp.ALL else 1
        due, older = schedule.timing.due(schedule.cursor, now, limit)
        if not due:
            return schedule
        skipped, newest = older, due[-1]
        late = now - newest > grace(schedule, newest)
        if schedule.catch_up is CatchUp.NONE and schedule.overlap is not Overlap.QUEUE and late:
            skipped += len(due)
            due = []
        for slot in due:
            if schedule.overlap is not Overlap.ALLOW and await self._previous_unfinished(schedule):
                if schedule.overlap is Overlap.QUEUE:
                    break  # the slot waits; the cursor stays before it
                skipped += 1
                schedule = await self._advance(schedule, slot, skipped=skipped)
                skipped = 0
                continue
            firing = await fire(self.session, self.store, schedule, slot, self.clock.now())
            if firing.failure is not None:
                log.warning(
                    "session %s: schedule %s slot %s started no run: %s",
                    schedule.session_id,
                    schedule.id,
                    slot,
                    firing.failure.code,
                )
                schedule = await self._advance(schedule, slot, skipped=skipped, failed=True)
            else:
                schedule = await self._advance(
                    schedule, slot, skipped=skipped, run_id=firing.run_id
                )
            skipped = 0
            await self.store.trim_firings(schedule.session_id, schedule.id)
        else:
            if skipped:  # every due slot was skipped by catch_up: move the cursor past them
                schedule = await self._advance(schedule, newest, skipped=skipped)
        return schedule

    async def _previous_unfinished(self, schedule: Schedule) -> bool:
        if schedule.last_run_id is None:
            return False
        try:
            run = await self.session.registry.get(schedule.session_id, schedule.last_run_id)
        except NotFoundError:  # pruned: it finished long ago
            return False
        return not run.status.terminal

    async def _advance(
        self,
        schedule: Schedule,
        slot: datetime,
        *,
        skipped: int,
        run_id: str | None = None,
        failed: bool = False,
    ) -> Schedule:
        """Move the cursor to ``slot`` (compare-and-swap; re-read once if only someone
        else's pause or resume moved the record)."""
        for _ in range(3):
            after = replace(
                schedule,
                cursor=max(schedule.cursor, slot),
                skipped=schedule.skipped + skipped,
                fired=schedule.fired + (run_id is not None),
                failed=schedule.failed + failed,
                last_run_id=run_id if run_id is not None else schedule.last_run_id,
            )
            try:
                return await self.store.swap(schedule, after)
            except ConflictError:
                fresh = await self.store.get(schedule.session_id, schedule.id)
                if fresh.cursor != schedule.cursor:
                    raise  # another owner decided it: never twice
                schedule = fresh
        raise ConflictError(schedule.session_id, None, f"schedule {schedule.id} keeps changing")


@owner_writes
async def _fenced_pass(supervisor: Supervisor, loop: ScheduleLoop) -> datetime | None:
    if not supervisor.active:  # no lease, no fence: an unowned session fires nothing
        return None
    return await loop.fire_due()
