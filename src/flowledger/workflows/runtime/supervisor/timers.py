"""The owner's due-timer loop: resuming parked runs when their timer or deadline is due.

One `TimerLoop` per active supervisor. It never polls per run: it reads the head of the
session's `TimerIndex` (the entry due first: one key), sleeps on the supervisor's clock
until that time or until the bell rings (`ring`: this owner wrote a new entry, or a wake
finished), and then hands the due entry to a wake worker. Entries being woken, and
entries whose wake could not be carried out now (retried after `RETRY_DELAY`), are
stepped over by reading the next key after them.

A wake (`wake`) holds the run's lock, like every operation on a run, and continues the
run only if it still sits at the pause the entry was written for (interrupted, at the
entry's checkpoint revision): the move to running is a compare-and-swap on the run record,
so a timer fires once, and a resume racing a deadline has one winner - the other sees a
run that is no longer interrupted (`ConflictError` for a resume; a stale entry, deleted,
for the deadline). A resume request that an owner accepted for the pause wins over its
deadline even if that owner died before carrying it out (`_answer_accepted`): the
deadline is put off until the request has been carried out or refused. The entry is
deleted only after the run is recorded as running, so an owner killed in between leaves
a stale entry, never a lost wake.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Coroutine
from typing import TYPE_CHECKING, Any, Final

from .... import flow
from ...errors import InvalidInputError, NotFoundError, ResumeBlockedError
from ...records.run import Run, RunStatus
from ...records.timers import TimerEntry, TimerIndex
from ..resumption import NotDue, prepare_wake
from .adoption import resolve
from .cancel import cancel_locked
from .failures import definite
from .outcomes import checkpoint_read_error
from .resume import Answered, resume_locked
from .workers import controller_for, spawn
from .writes import OwnershipLost, transition

if TYPE_CHECKING:
    from .owner import Supervisor

__all__ = ["RETRY_DELAY", "TimerLoop"]

log = logging.getLogger(__name__)

RETRY_DELAY: Final = 30.0
"""Seconds before an entry whose wake failed (blocked run, storage error) is tried again."""


class TimerLoop:
    """Wakes the session's due runs; `start` with the supervisor, `stop` with it."""

    def __init__(self, sup: Supervisor, index: TimerIndex) -> None:
        self._sup = sup
        self._index = index
        self._bell = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._waking: set[str] = set()  # keys handed to a wake worker
        self._retry: dict[str, float] = {}  # key -> clock.monotonic() of the next try
        self.head_reads = 0  # index head reads, for tests and benches

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.ensure_future(self._run())

    def ring(self) -> None:
        """Look at the index head again now (a new entry may be due first)."""
        self._bell.set()

    def stop(self) -> asyncio.Task[None] | None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
        return task

    async def _run(self) -> None:
        clock = self._sup.clock
        while self._sup.active and not self._sup.stopping:
            self._bell.clear()
            try:
                delay = await self._step()
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.warning("session %s: reading due timers: %s", self._sup.session_id, exc)
                delay = RETRY_DELAY
            if delay is not None and delay <= 0:
                continue
            # Sleep until a point on the monotonic clock, measured when the sleep begins:
            # time that passed since the head was read is not slept again.
            until = None if delay is None else clock.monotonic() + delay
            await _first(self._bell.wait(), None if until is None else self._sleep(until))

    async def _sleep(self, until: float) -> None:
        clock = self._sup.clock
        await clock.sleep(until - clock.monotonic())

    async def _step(self) -> float | None:
        """Hand every due entry at the head to a worker; return the seconds until the next
        one is due (None: nothing indexed, wait for the bell)."""
        clock = self._sup.clock
        moment = clock.monotonic()
        # A retry whose time has come is no longer stepped over (nor waited for): its
        # entry is handed out again when it is at the head, and is gone if it was deleted.
        self._retry = {key: at for key, at in self._retry.items() if at > moment}
        retry_in = [at - moment for key, at in self._retry.items() if key not in self._waking]
        after = ""
        while True:
            self.head_reads += 1
            entry = await self._index.head(self._sup.session_id, after=after)
            if entry is None:
                break
            if entry.key in self._waking or entry.key in self._retry:
                after = entry.key
                continue
            wait = (entry.wake_at - clock.now()).total_seconds()  # now: after the read
            if wait > 0:
                return min([wait, *retry_in])
            self._waking.add(entry.key)
            spawn(self._sup, self._wake(entry), run_id=entry.run_id)
            after = entry.key
        return min(retry_in) if retry_in else None

    async def _wake(self, entry: TimerEntry) -> None:
        done = False
        try:
            done = await wake(self._sup, self._index, entry)
        finally:
            self._waking.discard(entry.key)
            if not done:
                self._retry[entry.key] = self._sup.clock.monotonic() + RETRY_DELAY
            self.ring()


async def wake(sup: Supervisor, index: TimerIndex, entry: TimerEntry) -> bool:
    """Carry out one due entry; whether it is settled (False: try again later)."""
    controller = controller_for(sup, entry.run_id)
    async with controller.lock:
        try:
            run = await sup.registry.get(sup.session_id, entry.run_id)
        except NotFoundError:
            await index.delete(entry.key)
            return True
        if run.status.terminal or (
            run.status is not RunStatus.INTERRUPTED
            or run.checkpoint_revision != entry.checkpoint_revision
        ):
            await index.delete(entry.key)  # stale: the run left that pause
            return True
        definition = await resolve(sup, run)
        if run.cancel_requested:
            await cancel_locked(sup, definition, run, "cancel requested")
            return True
        if entry.kind == "deadline" and await _answer_accepted(sup, run):
            return False  # the resume was accepted first: it wins; look again later
        async with definition.resuming(run.graph_run_id):
            try:
                token = await prepare_wake(definition, run, sup.clock.now())
            except NotDue:
                await index.delete(entry.key)  # e.g. a deadline of a pause since answered
                return True
            except ResumeBlockedError as exc:
                log.warning("session %s: due run %s is blocked: %s", sup.session_id, run.id, exc)
                return False
            except InvalidInputError as exc:
                # The declared on_timeout payload does not match the resume schema: the
                # run keeps waiting for an explicit resume, and says why.
                with contextlib.suppress(OwnershipLost):
                    await transition(
                        sup,
                        run,
                        RunStatus.INTERRUPTED,
                        f"deadline passed; its on_timeout payload was refused: {exc}",
                        run.checkpoint_revision,
                    )
                await index.delete(entry.key)
                return True
            except Exception as exc:
                if not definite(exc):
                    raise
                await checkpoint_read_error(sup, definition, run, "wake", exc)
                return True
            answered = (
                Answered("timer", "owner")
                if token is None
                else Answered("deadline", "owner", _json_text(token.value))
            )
            await resume_locked(
                sup,
                controller,
                definition,
                run,
                token,
                answered,
                on_running=lambda: index.delete(entry.key),
            )
    return True


def _json_text(value: Any) -> str | None:
    """A deadline's payload as JSON text for its answer (None if it is not plain JSON
    data, e.g. a typed value: the answer then says only that the deadline answered)."""
    if isinstance(value, flow.TimedOut):  # the deadline's mark; the payload is inside
        value = value.payload
    try:
        return json.dumps(value, ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError):
        return None


async def _answer_accepted(sup: Supervisor, run: Run) -> bool:
    """Whether a front door's resume request for this very pause was accepted by an owner
    (one that died before carrying it out: this one holds the run's lock). The owner
    polling requests carries it out; the resumer was told it won, so the deadline must
    not (the request would then be taken as done)."""
    requests = sup.requests
    if requests is None:
        return False
    request = await requests.resume_request(sup.session_id, run.id)
    return (
        request is not None
        and request.state == "accepted"
        and request.checkpoint_revision == run.checkpoint_revision
    )


async def _first(*waits: Coroutine[Any, Any, Any] | None) -> None:
    """Wait for the first of the given coroutines (None entries are skipped)."""
    tasks = [asyncio.ensure_future(w) for w in waits if w is not None]
    try:
        await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in tasks:
            task.cancel()
