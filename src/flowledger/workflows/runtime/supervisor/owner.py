"""`Supervisor`: the session-owned runtime that executes and adopts a session's runs.

One supervisor owns one session at a time, proven by the session lease
(``sessions/<session>/workflows/owner``); a second one gets `SessionOwnedError`. This
module holds the supervisor's state and lifecycle (activate, stop, shutdown, lease loss)
and its public operations; each operation's path lives in its own module of this package
(`start`, `adoption`, `resume`, `cancel`, `polling`, `history`), over the shared
`workers`, `writes`, `publication` and `outcomes`.

Lease loss, cancellation and ambiguous storage errors never fail a run: they leave the
record as it is for the next owner, and surface as `AdoptionError` in `last_error`. After
the lease is lost nothing more is written (every write carries the lease's fence, see
`workers.owner_writes`, and every vertex waits for ownership to be proven).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Sequence
from datetime import UTC, datetime
from typing import Any

from .... import flow, storage
from ....clock import Clock, system_clock
from ....storage import FencedWriteError, Integrity, Lease, LeaseHeldError, Leaser, Wakeups
from ...activities.history import HistoryPage
from ...activities.journal import ActivityJournal
from ...activities.projection import RunProjections
from ...admission import Admission
from ...errors import (
    NotFoundError,
    SessionOwnedError,
    ShutdownTimeoutError,
    SupervisorActiveError,
    SupervisorClosedError,
)
from ...records.answers import AnswerStore
from ...records.inputs import InputStore
from ...records.intent import record_cancel_intent
from ...records.pending import PendingStore
from ...records.registry import RunRegistry
from ...records.requests import RunRequests
from ...records.run import Run, RunStatus, owner_lease_name
from ...records.timers import TimerIndex
from ...records.unfinished import UnfinishedIndex
from ..catalog import Catalog
from ..stopping import BoundaryStop
from .adoption import park, reconcile_worker
from .cancel import cancel_run
from .history import read_history
from .polling import Watch, poll_loop, poll_once
from .publication import ActivityPublisher
from .resume import resume_run
from .start import StartTicket, start_worker
from .timers import TimerLoop
from .workers import Controller, controller_for, owner_writes, spawn

log = logging.getLogger(__name__)


def _utcnow() -> datetime:
    return datetime.now(UTC)


class Supervisor:
    def __init__(
        self,
        session_id: str,
        *,
        catalog: Catalog,
        registry: RunRegistry,
        inputs: InputStore,
        leases: Leaser,
        publisher: ActivityPublisher | ActivityJournal,
        now: Callable[[], datetime] = _utcnow,
        shutdown_timeout: float = 5.0,
        max_workers: int = 4,
        lease_ttl: float | None = None,
        requests: RunRequests | None = None,
        poll_interval: float | None = None,
        adopt_from_index: bool = False,
        pending: PendingStore | None = None,
        integrity: Integrity | None = None,
        timers: TimerIndex | None = None,
        clock: Clock | None = None,
        wakeups: Wakeups | None = None,
        answers: AnswerStore | None = None,
    ) -> None:
        owner_lease_name(session_id)  # validates the session id
        if not 1 <= max_workers <= 64:
            raise ValueError(f"max_workers must be in 1..64, not {max_workers}")
        if poll_interval is not None and not 0.01 <= poll_interval <= 3600:
            raise ValueError(f"poll_interval must be in 0.01..3600 seconds, not {poll_interval}")
        self._session_id = session_id
        self.catalog = catalog
        self.registry = registry
        self.inputs = inputs
        self.leases = leases
        self.publisher = publisher
        # Time that decides (timers, deadlines) comes from the clock; with one given it
        # also stamps the records.
        self.clock: Clock = clock or system_clock
        self._now = clock.now if clock is not None and now is _utcnow else now
        self._shutdown_timeout = shutdown_timeout if shutdown_timeout > 0 else 5.0
        self._slots = asyncio.Semaphore(max_workers)
        self._lease_ttl = lease_ttl
        self._state = "inactive"
        self._lease: Lease | None = None
        self._fenced_off = False  # a write carrying the lease's fence was refused
        self._vertex_guard = flow.Hooks(on_vertex_start=self._before_vertex)
        self._controllers: dict[str, Controller] = {}
        self._projections = RunProjections()  # per running run, between publications
        self._workers: set[asyncio.Task[Any]] = set()
        self._idle = asyncio.Event()
        self._idle.set()
        self._last_error: BaseException | None = None
        self._shutdown_result: BaseException | None = None
        self._shutdown_done = False
        self.requests = requests
        self.pending = pending
        self.answers = answers  # who answered each pause (None: not recorded)
        # Confirms a miss before a write rests on it (`misses`); None trusts every miss.
        self.integrity = integrity
        self.wakeups = wakeups  # what wakes the request poll (None: it only polls)
        # Called with (name, version) when a run names a definition the catalog lacks,
        # before that counts as unknown: definitions kept in the database (a deployment
        # revision saved by another process after this one took the session) register
        # themselves in the catalog here.
        self.definition_loader: Callable[[str, str], Awaitable[object]] | None = None
        self._poll_interval = poll_interval
        self._adopt_from_index = adopt_from_index
        self._poll_task: asyncio.Task[None] | None = None
        self._polling = asyncio.Lock()
        self._queued: dict[str, int] = {}
        self._handling: set[str] = set()  # request handlers in flight ("resume:<id>" etc.)
        self._watch: dict[str, Watch] = {}
        self._auto_started: set[str] = set()
        self._requests_open = False  # the last read found requests still to be settled
        self._requests_next = 0.0  # when to read the requests even without a bell
        self._refused: set[str] = set()  # resume requests refused, left for their callers
        self._boundary = BoundaryStop()
        # Runs parked on a timer or paused with a deadline, resumed by `TimerLoop`.
        self.timers = timers
        self._timer_loop: TimerLoop | None = None
        # Concurrency limits (`admission`), over the registry's own store.
        kv = getattr(registry, "kv", None)
        self.admission = Admission(kv, registry) if isinstance(kv, storage.KV) else None

    @property
    def index(self) -> UnfinishedIndex | None:
        """The unfinished-run index (the registry's), if it keeps one."""
        index = getattr(self.registry, "index", None)
        return index if isinstance(index, UnfinishedIndex) else None

    @property
    def session_id(self) -> str:
        return self._session_id

    @property
    def last_error(self) -> BaseException | None:
        """The first error a background worker met (sticky)."""
        return self._last_error

    @property
    def active(self) -> bool:
        return self._state == "active" and not self._ownership_lost()

    @property
    def idle(self) -> bool:
        """No start, adoption or request worker is queued or running."""
        return self._idle.is_set()

    async def activate(self) -> None:
        """Take the session lease and schedule adoption of every unfinished run."""
        if self._state == "active":
            raise SupervisorActiveError()
        if self._state == "closed":
            raise SupervisorClosedError()
        name = owner_lease_name(self._session_id)
        try:
            lease = await self.leases.acquire(name, ttl=self._lease_ttl)
        except LeaseHeldError as held:
            raise SessionOwnedError(self._session_id, held.holder_epoch) from held
        self._lease = lease
        self._state = "active"
        lease.on_lost(self._on_lease_lost)
        index = self.index
        try:
            if index is not None and (
                self._adopt_from_index or await index.complete(self._session_id)
            ):
                run_ids = await index.runs(self._session_id)
            else:
                runs = await self._all_runs()
                run_ids = [
                    run.id
                    for run in runs
                    if run.status not in (RunStatus.COMPLETED, RunStatus.CANCELLED)
                ]
                if index is not None:  # backfill runs created before the index existed
                    indexed = set(await index.runs(self._session_id))
                    for run in runs:
                        if not run.status.terminal and run.id not in indexed:
                            await index.add(self._session_id, run.id)
                    await index.mark_complete(self._session_id)  # the next owner reads it
        except BaseException as exc:
            self._state = "inactive"
            self._lease = None
            with contextlib.suppress(Exception):
                await asyncio.wait_for(lease.release(), self._shutdown_timeout)
            raise RuntimeError(f"list runs for activation: {exc}") from exc
        for run_id in run_ids:
            spawn(self, reconcile_worker(self, run_id), run_id=run_id)
        if self._poll_interval is not None:
            self._poll_task = asyncio.ensure_future(poll_loop(self, self._poll_interval))
        if self.timers is not None:
            self._timer_loop = TimerLoop(self, self.timers)
            self._timer_loop.start()

    @property
    def timer_loop(self) -> TimerLoop | None:
        """The loop that resumes due timers and deadlines while this supervisor is active."""
        return self._timer_loop

    def ring_timers(self) -> None:
        """A timer entry was written: the timer loop looks at the index head again."""
        if self._timer_loop is not None:
            self._timer_loop.ring()

    async def _all_runs(self) -> list[Run]:
        runs: list[Run] = []
        after = ""
        while True:
            page = await self.registry.list(self._session_id, after=after, limit=100)
            runs.extend(page.runs)
            if not page.next:
                return runs
            after = page.next

    def _on_lease_lost(self, reason: str) -> None:
        if self._state != "active" or self._fenced_off:  # `_on_fenced` saw to it
            return
        log.warning("session %s: ownership lost (%s)", self._session_id, reason)
        self._cancel_everything()

    def _cancel_everything(self) -> None:
        if self._poll_task is not None:
            self._poll_task.cancel()
        if self._timer_loop is not None:
            self._timer_loop.stop()
        for task in list(self._workers):
            task.cancel()
        for controller in self._controllers.values():
            if controller.execution is not None:
                controller.execution.cancel()

    def _on_fenced(self, error: FencedWriteError) -> None:
        """A write was refused because the lease's grant ended: ownership is lost now,
        even if the renewal that would say so has not run yet (the process stalled)."""
        if self._fenced_off:
            return
        self._fenced_off = True
        if self._state == "active":
            log.warning("session %s: ownership lost (%s)", self._session_id, error)
            self._cancel_everything()
        if self._lease is not None:  # lost, not released (the metrics count it)
            self._lease.refused(error)

    async def _before_vertex(self, _record: object) -> None:
        """Start a vertex only while ownership is proven: a stalled owner (whose last
        renewal is older than the TTL) waits here for its next renewal, and a loss found
        meanwhile ends the segment before the task starts."""
        lease = self._lease
        if lease is not None and await lease.wait_proven() and not self._fenced_off:
            return
        raise asyncio.CancelledError()  # hooks swallow exceptions; this ends the segment

    def _ownership_lost(self) -> bool:
        return (
            self._state != "active" or self._lease is None or self._lease.lost or self._fenced_off
        )

    async def wait_idle(self) -> BaseException | None:
        """Wait until no start or adoption worker is running; return `last_error`."""
        await self._idle.wait()
        return self._last_error

    @property
    def stopping(self) -> bool:
        """`request_stop` was called: executions end at their next step boundary."""
        return self._boundary.requested

    def request_stop(self) -> None:
        """Let every execution finish the step it is in, then end (see `BoundaryStop`);
        begin nothing new. Synchronous and idempotent, so a signal handler can call it;
        `stop` waits for the effect."""
        self._boundary.request()
        if self._poll_task is not None:
            self._poll_task.cancel()
        if self._timer_loop is not None:
            self._timer_loop.stop()

    async def stop(self, *, at_once: bool = False) -> list[Run]:
        """`request_stop`, wait until no worker runs (a step in flight runs to its end;
        ``at_once`` cuts it instead, and the next owner runs it again), bring the records
        of the runs it stopped up to their last durable checkpoint, and return the
        session's runs left unfinished for the next owner (pending or running), in run id
        order. Call `shutdown` afterwards to release the session."""
        self.request_stop()
        if at_once:
            self._cancel_everything()
        await self._idle.wait()
        left: list[Run] = []
        for run_id in await self._unfinished_ids():
            try:
                run = await self.registry.get(self._session_id, run_id)
            except NotFoundError:
                continue
            if run.status is RunStatus.RUNNING and not self._ownership_lost():
                try:
                    run = await park(self, run)
                except Exception as exc:  # the record stays behind; the next owner catches up
                    log.warning("session %s: recording run %s: %s", self._session_id, run_id, exc)
            if run.status in (RunStatus.PENDING, RunStatus.RUNNING):
                left.append(run)
        return left

    async def _unfinished_ids(self) -> list[str]:
        index = self.index
        if index is not None:
            return sorted(await index.runs(self._session_id))
        return [run.id for run in await self._all_runs() if not run.status.terminal]

    async def shutdown(self) -> None:
        """Stop (once): cancel work, wait for it (bounded), release the lease."""
        if self._shutdown_done:
            if self._shutdown_result is not None:
                raise self._shutdown_result
            return
        self._shutdown_done = True
        self._state = "closed"
        self._cancel_everything()
        result: BaseException | None = None
        try:
            await asyncio.wait_for(self._idle.wait(), self._shutdown_timeout)
        except TimeoutError:
            result = ShutdownTimeoutError()
        poll_task, self._poll_task = self._poll_task, None
        if poll_task is not None:
            with contextlib.suppress(BaseException):
                await asyncio.wait_for(poll_task, self._shutdown_timeout)
        lease, self._lease = self._lease, None
        if lease is not None:
            try:
                await asyncio.wait_for(lease.release(), self._shutdown_timeout)
            except TimeoutError:
                result = result or ShutdownTimeoutError()
            except Exception as exc:
                result = result or RuntimeError(f"release session ownership: {exc}")
        self._shutdown_result = result
        if result is not None:
            raise result

    async def start(self, run_id: str) -> StartTicket:
        """Begin executing a pending run in the background; see `StartTicket`."""
        controller = controller_for(self, run_id)
        self._boundary.refuse_new_work()
        loop = asyncio.get_running_loop()
        ticket = StartTicket(loop.create_future(), loop.create_future())
        spawn(self, start_worker(self, controller, run_id, ticket), run_id=run_id)
        return ticket

    @owner_writes
    async def resume(self, run_id: str, payload: bytes | str | None) -> Run | None:
        """Continue an interrupted run - a request pause with a payload the resume schema
        accepts, an errored pause with ``None`` (a retry) - and return the run record after
        the segment (None if ownership was lost on the way). `ResumeBlockedError` when the
        run cannot be continued now (see `resumption.prepare_resume`); nothing is written
        then."""
        return await resume_run(self, run_id, payload)

    async def request_cancel(self, run_id: str) -> bool:
        """Record the run's durable cancellation intent (as a front door does); whether this
        call was the one that recorded it. `cancel` then carries it out."""
        _, first = await record_cancel_intent(
            self.registry, self._session_id, run_id, now=self._now
        )
        return first

    @owner_writes
    async def cancel(self, run_id: str, reason: str = "") -> Run | None:
        """Cancel a run (idempotent for an already cancelled one); return its record."""
        return await cancel_run(self, run_id, reason)

    @owner_writes
    async def poll(
        self, unfinished: Sequence[str] | None = None, bells: Sequence[str] | None = None
    ) -> None:
        """One pass over the session's durable requests and unfinished runs (see the module
        documentation). ``unfinished`` and ``bells`` are the session's parts of the
        unfinished-run index and of the request bells if the caller has just read them
        (a worker lists both at once for all its sessions); otherwise they are read here
        (without an index, every run is listed). Does nothing unless the supervisor is
        active."""
        if not self.active:
            return
        async with self._polling:
            await poll_once(self, unfinished, bells)

    async def history(
        self,
        run_id: str,
        *,
        after_revision: int = 0,
        after_event_id: str | None = None,
        limit: int = 0,
    ) -> HistoryPage:
        """A page of the run's published activity history (see `ActivityJournal.page`).

        Only reads: it needs no lock and no ownership (the journal's appends are atomic,
        so a page never shows half a publication), and works before `activate`. One
        exception: when the journal is damaged (`CorruptRecordError`) and this supervisor
        owns the session and nothing is executing the run, the journal is rebuilt from
        the run's checkpoints (reported in the log) and the page read from the rebuilt
        one; otherwise the error is raised (an owner rebuilds the journal when its
        publication finds it damaged)."""
        return await read_history(
            self,
            run_id,
            after_revision=after_revision,
            after_event_id=after_event_id,
            limit=limit,
        )
