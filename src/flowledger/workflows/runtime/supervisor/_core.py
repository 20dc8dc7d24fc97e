"""`Supervisor`: the session-owned runtime that executes and adopts a session's runs.

One supervisor owns one session at a time, proven by the session lease
(``sessions/<session>/workflows/owner``); a second one gets `SessionOwnedError`.
On activation it adopts every unfinished run from durable state: a pending
run with no checkpoint is started, one whose checkpoint exists is adopted
instead (never started twice), a running run is continued from its last
checkpoint, an interrupted run waits for an explicit `resume`, and a failed
run only has its activities reconciled. With the registry's `UnfinishedIndex`, the runs
to adopt are read from it once the session's index is complete (`UnfinishedIndex`: the
first activation lists every run, indexes the ones written before the index, and marks
it), so activation reads the unfinished runs only, however many finished ones there are;
a failed run stays indexed until its activities are published for that reason.

Ordering and atomicity:

* Every operation on a run (start, adoption, resume, cancel, history) holds
  that run's lock for its whole duration, so 16 concurrent resumes of one
  interrupted run execute exactly one; the others see it is no longer
  interrupted and get `ConflictError`.
* A run's activities are published (durably, idempotently by event id)
  *before* the registry records the status they lead to; the activity cursor
  then advances. A crash in between republishes the same event ids, which the
  journal treats as duplicates.
* Publication is incremental (`projection`): only the checkpoints after the
  cursor are read, in pages, by a per-run projector kept between publications
  and rebuilt from revision 0 when missing. A journal found damaged is rebuilt
  from the checkpoints (`ActivityJournal.rebuild`, reported in the log) and the
  publication carries on, so the run's status follows its checkpoints.
* Cancellation first signals an in-flight execution, then takes the lock,
  records a durable cancel intent (so the next owner finishes the job if this
  one dies) and appends Flow's cancelled checkpoint, retrying revision
  conflicts at most 8 times.

Failure semantics: a run becomes ``failed`` only for definite problems (its
input is missing, corrupt or invalid; its checkpoint is missing, corrupt or
belongs to another run), and, for a definition with ``on_error="fail"``, when a
task raises. The summary says which. A checkpoint written by another graph than
the registered one is never a failure: the run keeps its status, its readiness is
``blocked`` (see `resumption`), and registering the old graph lets it continue.
Lease loss, cancellation and ambiguous storage errors never fail a run: they
leave the record as it is for the next owner, and surface as `AdoptionError` in
`last_error`. After the lease is lost nothing more is written.

A fork (`forks`) is a pending run whose seed was written when it was made: `start` and
adoption continue it from that checkpoint, never start it from its input (and one whose
seed is missing fails, "workflow fork checkpoint missing").

Every resume - `resume`, or a front door's request carried out by `poll` - is
checked by `resumption.prepare_resume` first: a blocked run, a request pause
without a valid payload, or an errored pause sent a payload is refused before
anything is written.

When a run pauses (or fails under ``on_error="fail"``), the owner stores what it
waits for in the `PendingStore` before the registry records the status, so a
reader sees the question of every interrupted run without loading its definition.

Requests from front doors (`poll`): a session owned by a worker is changed by
processes that do not own it through durable requests (`RunRequests`): new
pending runs (found through the `UnfinishedIndex`), resume requests and cancel
requests. `poll` is one pass over them; a worker calls it on every tick, and a
standalone owner gets a loop that calls it every ``poll_interval`` seconds. A
pass starts pending runs, re-adopts running runs nobody is executing (after an
error; with backoff), cancels runs whose cancellation was requested (at once,
even mid-segment), carries out resume requests, and removes index entries of
terminal runs.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import inspect
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any, Concatenate, Final, ParamSpec, Protocol, TypeVar

from .... import flow
from ....storage import FencedWriteError, Lease, LeaseHeldError, Leaser, fencing
from ...activities.activity import RESUMING_SUMMARY, ProjectedActivity, Projector
from ...activities.history import HistoryPage
from ...activities.journal import ActivityJournal
from ...activities.live import LiveActivities
from ...activities.projection import (
    PROJECTION_PAGE,
    HistoryReadError,
    RunProjections,
    checkpoint_pages,
)
from ...authoring.definition import Definition, WorkflowResult
from ...authoring.metadata import bound_summary
from ...errors import (
    AdoptionError,
    ConflictError,
    CorruptRecordError,
    DefinitionError,
    InvalidInputError,
    NotFoundError,
    ReconciliationError,
    ResumeBlockedError,
    SessionOwnedError,
    ShutdownTimeoutError,
    SupervisorActiveError,
    SupervisorClosedError,
    UnknownDefinitionError,
)
from ...records.inputs import InputStore
from ...records.intent import record_cancel_intent
from ...records.pending import PauseKind, PendingStore, describe_pause, requests
from ...records.registry import RunRegistry
from ...records.requests import ResumeRequest, RunRequests
from ...records.run import Run, RunStatus, owner_lease_name
from ...records.unfinished import UnfinishedIndex
from ..catalog import Catalog
from ..resumption import prepare_resume
from ..stopping import BoundaryStop

__all__ = ["ActivityPublisher", "StartTicket", "Supervisor"]

log = logging.getLogger(__name__)

T = TypeVar("T")
P = ParamSpec("P")


def _owner_writes(
    method: Callable[Concatenate[Supervisor, P], Coroutine[Any, Any, T]],
) -> Callable[Concatenate[Supervisor, P], Coroutine[Any, Any, T]]:
    """Run ``method`` with the session lease's fence on every write it (and every task it
    starts) makes, so a stale owner's first write fails inside its own transaction."""

    @functools.wraps(method)
    async def fenced(self: Supervisor, /, *args: P.args, **kwargs: P.kwargs) -> T:
        lease = self._lease
        with fencing(None if lease is None else lease.fence, on_refused=self._on_fenced):
            return await method(self, *args, **kwargs)

    return fenced


MAX_CANCEL_ATTEMPTS: Final = 8
START_SUMMARY: Final = "workflow running"
INTERRUPTED_RECHECK: Final = 30.0  # seconds between re-reads of an idle interrupted run
MAX_RETRY_DELAY: Final = 30.0  # the longest backoff before re-adopting a stuck run
REQUEST_RESCAN: Final = 10.0  # seconds between request reads without a bell (a safety net)
FAILED_REQUEST_TTL: Final = 600.0  # seconds a refused resume request is kept for its caller

_FLOW_STATUS: Final = {
    flow.RunStatus.RUNNING: RunStatus.RUNNING,
    flow.RunStatus.INTERRUPTED: RunStatus.INTERRUPTED,
    flow.RunStatus.COMPLETED: RunStatus.COMPLETED,
    flow.RunStatus.CANCELLED: RunStatus.CANCELLED,
}
_DEFINITE: Final = (
    flow.CheckpointNotFoundError,
    flow.CheckpointDecodeError,
    flow.GraphRunMismatchError,
)
# A checkpoint of another graph blocks a run; it never fails it.
_GRAPH_CHANGED: Final = (
    flow.GraphMismatchError,
    flow.GraphVersionMismatchError,
    flow.UnknownVertexError,
)


class ActivityPublisher(Protocol):
    """Durable, idempotent by event id: a duplicate is success and is not delivered twice."""

    async def publish(self, items: Sequence[ProjectedActivity]) -> int: ...


def _utcnow() -> datetime:
    return datetime.now(UTC)


def _definite(error: BaseException) -> bool:
    """A checkpoint problem that retrying cannot cure (missing, corrupt, another run's)."""
    if isinstance(error, _DEFINITE):
        return True
    return isinstance(error, flow.StoreError) and isinstance(error.cause, flow.FlowError)


def _failure_summary(error: BaseException) -> str:
    """Which definite checkpoint problem failed a run, for its status summary."""
    if isinstance(error, flow.CheckpointNotFoundError):
        return "workflow checkpoint missing"
    if isinstance(error, flow.GraphRunMismatchError):
        return "workflow checkpoint belongs to another run"
    return "workflow checkpoint corrupt"


def _start_cut_short(run: Run) -> bool:
    """The run was moved to running by a start (`_start_with_seed`) whose owner died before
    the seed became durable: nothing ran yet, so it is started again rather than failed as
    "checkpoint missing" (the start's record is running, summary ``workflow running``,
    checkpoint revision and activity cursor 0)."""
    return (
        run.status is RunStatus.RUNNING
        and run.status_summary == START_SUMMARY
        and run.checkpoint_revision == 0
        and run.activity_cursor == 0
    )


def _only_intent_added(before: Run, after: Run) -> bool:
    """``after`` differs from ``before`` only by a (front door's) cancellation intent."""
    return (
        after.cancel_requested
        and not before.cancel_requested
        and after.status is before.status
        and after.checkpoint_revision == before.checkpoint_revision
        and after.activity_cursor == before.activity_cursor
        and after.artifacts == before.artifacts
    )


class _OwnershipLost(Exception):
    """Raised at a write boundary once the lease is gone; callers turn it into silence."""


@dataclass(eq=False)
class StartTicket:
    """What `Supervisor.start` returns: ``seeded`` resolves once revision 0 is durable;
    ``failed`` resolves with the error if the run could not be started."""

    seeded: asyncio.Future[None]
    failed: asyncio.Future[BaseException]

    async def wait(self) -> None:
        """Return once seeded, or raise the start failure (bound it with `asyncio.timeout`)."""
        futures: set[asyncio.Future[Any]] = {self.seeded, self.failed}
        await asyncio.wait(futures, return_when=asyncio.FIRST_COMPLETED)
        if not self.seeded.done():
            raise self.failed.result()

    def _seed(self) -> None:
        if not self.seeded.done():
            self.seeded.set_result(None)

    def _fail(self, error: BaseException) -> None:
        if not self.failed.done() and not self.seeded.done():
            self.failed.set_result(error)


@dataclass(eq=False)
class _Controller:
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    execution: asyncio.Task[Any] | None = None
    cancels: int = 0  # cancellations waiting for the lock


@dataclass(eq=False)
class _Watch:
    """What `Supervisor.poll` remembers about one unfinished run between passes."""

    revision: int = 0
    attempts: int = 0
    next_check: float = 0.0


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
        self._now = now
        self._shutdown_timeout = shutdown_timeout if shutdown_timeout > 0 else 5.0
        self._slots = asyncio.Semaphore(max_workers)
        self._lease_ttl = lease_ttl
        self._state = "inactive"
        self._lease: Lease | None = None
        self._fenced_off = False  # a write carrying the lease's fence was refused
        self._vertex_guard = flow.Hooks(on_vertex_start=self._before_vertex)
        self._controllers: dict[str, _Controller] = {}
        self._projections = RunProjections()  # per running run, between publications
        self._workers: set[asyncio.Task[Any]] = set()
        self._idle = asyncio.Event()
        self._idle.set()
        self._last_error: BaseException | None = None
        self._shutdown_result: BaseException | None = None
        self._shutdown_done = False
        self.requests = requests
        self.pending = pending
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
        self._watch: dict[str, _Watch] = {}
        self._auto_started: set[str] = set()
        self._requests_open = False  # the last read found requests still to be settled
        self._requests_next = 0.0  # when to read the requests even without a bell
        self._refused: set[str] = set()  # resume requests refused, left for their callers
        self._boundary = BoundaryStop()

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

    # -- lifecycle -------------------------------------------------------------------------

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
            self._spawn(self._reconcile_worker(run_id), run_id=run_id)
        if self._poll_interval is not None:
            self._poll_task = asyncio.ensure_future(self._poll_loop(self._poll_interval))

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
        if self._state != "active":
            return
        log.warning("session %s: ownership lost (%s)", self._session_id, reason)
        self._cancel_everything()

    def _cancel_everything(self) -> None:
        if self._poll_task is not None:
            self._poll_task.cancel()
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
                    run = await self._park(run)
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

    async def _park(self, run: Run) -> Run:
        """A running run nobody executes any more: publish its durable activities and
        record its latest checkpoint revision (the status stays running)."""
        definition = self.catalog.resolve(run.definition_name, run.definition_version)
        run = await self._reconcile_activities(definition, run)
        try:
            history = await definition.history(run.graph_run_id)
        except flow.CheckpointNotFoundError:
            return run
        if not history or history[-1].revision <= run.checkpoint_revision:
            return run
        latest = history[-1].revision
        return await self._swap(
            run,
            lambda current: replace(
                current,
                checkpoint_revision=max(latest, current.checkpoint_revision),
                updated_at=self._stamp(current),
            ),
        )

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

    # -- workers and controllers -----------------------------------------------------------

    def _spawn(
        self, work: Coroutine[Any, Any, None], *, run_id: str | None = None, slot: bool = True
    ) -> None:
        """Run ``work`` as a background worker (in a slot of ``max_workers`` unless
        ``slot`` is false); while it is queued or running, ``run_id`` counts as busy."""
        task = asyncio.ensure_future(self._in_slot(work) if slot else self._contained(work))
        self._workers.add(task)
        self._idle.clear()
        if run_id is not None:
            self._queued[run_id] = self._queued.get(run_id, 0) + 1

        def done(task: asyncio.Task[Any]) -> None:
            work.close()  # a worker cancelled before it began never awaited its work
            if run_id is not None:
                left = self._queued.get(run_id, 1) - 1
                if left > 0:
                    self._queued[run_id] = left
                else:
                    self._queued.pop(run_id, None)
            self._worker_done(task)

        task.add_done_callback(done)

    def _busy(self, run_id: str) -> bool:
        """A worker for the run is queued or running, or an operation holds its lock."""
        if self._queued.get(run_id, 0) > 0:
            return True
        controller = self._controllers.get(run_id)
        return controller is not None and controller.lock.locked()

    @_owner_writes
    async def _contained(self, work: Coroutine[Any, Any, None]) -> None:
        try:
            await work
        except asyncio.CancelledError:
            pass
        except Exception as exc:
            log.warning("session %s: request handler failed: %s", self._session_id, exc)

    @_owner_writes
    async def _in_slot(self, work: Coroutine[Any, Any, None]) -> None:
        try:
            async with self._slots:
                await work
        except asyncio.CancelledError:
            pass  # ownership lost or shutting down: the next owner carries on
        except Exception as exc:
            log.warning("session %s: workflow worker failed: %s", self._session_id, exc)
            if self._last_error is None:
                self._last_error = exc

    def _worker_done(self, task: asyncio.Task[Any]) -> None:
        self._workers.discard(task)
        if not self._workers:
            self._idle.set()

    def _controller(self, run_id: str) -> _Controller:
        if self._state == "closed":
            raise SupervisorClosedError()
        if self._state != "active" or self._ownership_lost():
            raise RuntimeError("supervisor is not accepting work")
        controller = self._controllers.get(run_id)
        if controller is None:
            controller = self._controllers[run_id] = _Controller()
        return controller

    def _forget_if_idle(self, run_id: str) -> None:
        controller = self._controllers.get(run_id)
        if controller is not None and not controller.lock.locked():
            del self._controllers[run_id]
            self._projections.forget(run_id)

    async def _execute(self, controller: _Controller, work: Awaitable[T]) -> T | None:
        """Run one Flow segment as the run's cancellable execution; None if it was cancelled
        (by `cancel`, lease loss or shutdown) rather than finished, or not begun because a
        cancellation is waiting."""
        if controller.cancels or self._boundary.requested:
            if inspect.iscoroutine(work):
                work.close()
            return None
        task: asyncio.Task[T] = asyncio.ensure_future(work)
        controller.execution = task
        try:
            return await asyncio.shield(task)
        except asyncio.CancelledError:
            current = asyncio.current_task()
            if current is not None and current.cancelling():
                task.cancel()
                raise
            return None
        finally:
            controller.execution = None

    # -- start -----------------------------------------------------------------------------

    async def start(self, run_id: str) -> StartTicket:
        """Begin executing a pending run in the background; see `StartTicket`."""
        controller = self._controller(run_id)
        self._boundary.refuse_new_work()
        loop = asyncio.get_running_loop()
        ticket = StartTicket(loop.create_future(), loop.create_future())
        self._spawn(self._start_worker(controller, run_id, ticket), run_id=run_id)
        return ticket

    async def _start_worker(
        self, controller: _Controller, run_id: str, ticket: StartTicket
    ) -> None:
        try:
            async with controller.lock:
                try:
                    run = await self.registry.get(self._session_id, run_id)
                    if run_id in self._auto_started and run.status in (
                        RunStatus.RUNNING,
                        RunStatus.INTERRUPTED,
                        RunStatus.COMPLETED,
                        RunStatus.CANCELLED,
                    ):
                        ticket._seed()  # `poll` started it first: its seed is durable
                        return
                    if run.status is not RunStatus.PENDING:
                        raise ConflictError(self._session_id, run_id, "run is not pending")
                    definition = self.catalog.resolve(run.definition_name, run.definition_version)
                except Exception as exc:
                    ticket._fail(exc)
                    return
                if run.forked_from is not None:
                    # A fork's seed became durable when it was made: adopt it, never start
                    # it; the ticket resolves once the adoption has made it running.
                    try:
                        await self._reconcile(controller, run_id, adopting=ticket._seed)
                    except Exception as exc:
                        ticket._fail(exc)
                        raise
                    ticket._fail(RuntimeError("the fork was not adopted"))
                    return
                try:
                    await self._start_with_seed(controller, definition, run, ticket._seed)
                except Exception as exc:
                    ticket._fail(exc)
                    raise
                ticket._fail(RuntimeError("durable seed acknowledgement was not observed"))
        except asyncio.CancelledError:
            ticket._fail(RuntimeError("workflow supervisor ownership lost"))
            raise

    async def _start_with_seed(
        self,
        controller: _Controller,
        definition: Definition,
        run: Run,
        ack: Callable[[], None] | None,
    ) -> Run | None:
        try:
            raw = await self.inputs.get_for_start(
                self._session_id, run.input, created_at=run.created_at
            )
        except (NotFoundError, CorruptRecordError):
            return await self._fail_definite(definition, run, "workflow input unavailable")
        except Exception as exc:
            # Possibly transient (DESIGN §11.4): leave the run pending for a later attempt.
            raise AdoptionError(run.id, "load input", exc) from exc
        try:
            token = definition.validate_input(raw)
        except (InvalidInputError, DefinitionError):  # a definition changed since the start
            return await self._fail_definite(definition, run, "workflow input invalid")
        if controller.cancels or self._boundary.requested:
            return None  # a cancellation waits for the lock: it cancels the run unstarted
        try:
            running = await self._transition(
                run, RunStatus.RUNNING, START_SUMMARY, run.checkpoint_revision
            )
        except _OwnershipLost:
            return None
        live = LiveActivities(
            lambda current: self._reconcile_activities(definition, current), running
        )
        hooks = self._segment_hooks(live)
        if ack is not None:
            hooks.append(flow.Hooks(on_run_start=_seeded(live, ack)))
        try:
            try:
                result = await self._execute(
                    controller, definition.start(token, graph_run_id=run.graph_run_id, hooks=hooks)
                )
            finally:
                running = await live.finish()
        except Exception as exc:
            if self._ownership_lost():
                return None
            raise AdoptionError(run.id, "start", exc) from exc
        if result is None:
            return None
        return await self._apply_result(definition, running, result)

    # -- adoption --------------------------------------------------------------------------

    async def _reconcile_worker(self, run_id: str) -> None:
        controller = self._controller(run_id)
        async with controller.lock:
            await self._reconcile(controller, run_id)

    async def _resolve(self, run: Run) -> Definition:
        """The run's definition, through `definition_loader` when the catalog lacks it."""
        name, version = run.definition_name, run.definition_version
        if self.definition_loader is not None and (name, version) not in self.catalog:
            await self.definition_loader(name, version)
        return self.catalog.resolve(name, version)

    async def _reconcile(
        self, controller: _Controller, run_id: str, *, adopting: Callable[[], None] | None = None
    ) -> None:
        """Bring the run's record in line with its checkpoints and continue it if it is
        running; ``adopting`` is called once a pending run with a checkpoint (a fork) has
        been moved to running."""
        try:
            run = await self.registry.get(self._session_id, run_id)
        except NotFoundError:
            # Only an index entry names it: an orphan (or a record being written now).
            index = self.index
            if index is not None:
                await index.remove_orphan(self._session_id, run_id)
            self._forget_if_idle(run_id)
            return
        if run.status in (RunStatus.COMPLETED, RunStatus.CANCELLED):
            index = self.index
            if index is not None:  # a stale entry: the run became terminal before a crash
                await index.remove(self._session_id, run_id)
        try:
            definition = await self._resolve(run)
        except UnknownDefinitionError as exc:
            raise AdoptionError(run.id, "resolve definition", exc) from exc
        if run.cancel_requested and not run.status.terminal:
            await self._cancel_locked(definition, run, "cancel requested")
            return
        status = run.status
        if status in (RunStatus.COMPLETED, RunStatus.CANCELLED):
            return
        if status is RunStatus.FAILED:
            await self._failed_published(await self._reconcile_activities(definition, run))
            return
        try:
            history = await definition.history(run.graph_run_id)
        except flow.CheckpointNotFoundError:
            history = []
        except Exception as exc:
            await self._checkpoint_read_error(definition, run, "load history", exc)
            return
        if status is RunStatus.PENDING or (not history and _start_cut_short(run)):
            if not history and run.forked_from is not None:
                await self._fail_definite(definition, run, "workflow fork checkpoint missing")
                return
            if not history:
                self._auto_started.add(run.id)
                await self._start_with_seed(controller, definition, run, None)
                return
            try:
                run = await self._transition(
                    run, RunStatus.RUNNING, "workflow adopting", history[-1].revision
                )
            except _OwnershipLost:
                return
            if adopting is not None:
                adopting()
        await self._adopt_with_history(controller, definition, run, history)

    async def _adopt_with_history(
        self,
        controller: _Controller,
        definition: Definition,
        run: Run,
        history: Sequence[flow.RunRecord],
    ) -> None:
        if not history:
            await self._fail_definite(definition, run, "workflow checkpoint missing")
            return
        try:
            result: WorkflowResult | None = await definition.get(run.graph_run_id)
        except Exception as exc:
            await self._checkpoint_read_error(definition, run, "reconstruct checkpoint", exc)
            return
        assert result is not None
        if run.status is RunStatus.RUNNING and result.run.status is flow.RunStatus.RUNNING:
            blocked = await definition.check_resume(run.graph_run_id)
            if blocked:
                await self._adoption_blocked(run, blocked[0].message)
                return
            live = LiveActivities(
                lambda current: self._reconcile_activities(definition, current), run
            )
            try:
                try:
                    result = await self._execute(
                        controller,
                        definition.adopt(
                            run.graph_run_id,
                            hooks=[live.hook, self._boundary.hook, self._vertex_guard],
                        ),
                    )
                finally:
                    run = await live.finish()
            except Exception as exc:
                await self._checkpoint_read_error(definition, run, "adopt running checkpoint", exc)
                return
            if result is None:
                return
        await self._apply_result(definition, run, result)

    def _segment_hooks(self, live: LiveActivities) -> list[flow.Hooks]:
        """What watches every segment this owner executes: live activities, the stop at
        the next step boundary, and the lease check before each vertex."""
        return [live.hook, self._boundary.hook, self._vertex_guard]

    async def _adoption_blocked(self, run: Run, reason: str) -> None:
        """Leave a running run whose checkpoint this definition cannot continue as it is,
        saying why; it continues once an owner has the right graph registered."""
        summary = f"workflow adoption blocked: {reason}"
        if run.status_summary == bound_summary(summary):
            return
        with contextlib.suppress(_OwnershipLost):
            await self._transition(run, RunStatus.RUNNING, summary, run.checkpoint_revision)

    async def _checkpoint_read_error(
        self, definition: Definition, run: Run, op: str, error: BaseException
    ) -> None:
        if self._ownership_lost():
            return
        if isinstance(error, _GRAPH_CHANGED) and run.status is RunStatus.RUNNING:
            await self._adoption_blocked(run, str(error))
            return
        if not _definite(error):
            raise AdoptionError(run.id, op, error) from error
        await self._fail_definite(definition, run, _failure_summary(error))

    # -- resume ----------------------------------------------------------------------------

    @_owner_writes
    async def resume(self, run_id: str, payload: bytes | str | None) -> Run | None:
        """Continue an interrupted run - a request pause with a payload the resume schema
        accepts, an errored pause with ``None`` (a retry) - and return the run record after
        the segment (None if ownership was lost on the way). `ResumeBlockedError` when the
        run cannot be continued now (see `resumption.prepare_resume`); nothing is written
        then."""
        controller = self._controller(run_id)
        try:
            async with controller.lock:
                run = await self.registry.get(self._session_id, run_id)
                if run.status is not RunStatus.INTERRUPTED:
                    raise ConflictError(
                        self._session_id, run_id, "run is not interrupted", actual=run.revision
                    )
                definition = self.catalog.resolve(run.definition_name, run.definition_version)
                try:
                    token = await prepare_resume(definition, run, payload)
                except Exception as exc:
                    if not _definite(exc):
                        raise
                    # Its checkpoint cannot be read: that fails the run, as a resume would.
                    await self._checkpoint_read_error(definition, run, "resume", exc)
                    return await self.registry.get(self._session_id, run.id)
                return await self._resume_locked(controller, definition, run, token)
        except NotFoundError:
            self._forget_if_idle(run_id)
            raise

    async def _resume_locked(
        self, controller: _Controller, definition: Definition, run: Run, token: Any | None
    ) -> Run | None:
        self._boundary.refuse_new_work()  # before the run is marked running: it stays paused
        try:
            running = await self._transition(
                run, RunStatus.RUNNING, RESUMING_SUMMARY, run.checkpoint_revision
            )
        except _OwnershipLost:
            return None
        live = LiveActivities(
            lambda current: self._reconcile_activities(definition, current), running
        )
        try:
            try:
                result = await self._execute(
                    controller,
                    definition.resume(
                        run.graph_run_id,
                        token,
                        hooks=[live.hook, self._boundary.hook, self._vertex_guard],
                    ),
                )
            finally:
                running = await live.finish()
        except Exception as exc:
            if self._ownership_lost():
                return None
            if _definite(exc):
                await self._checkpoint_read_error(definition, running, "resume", exc)
                return await self.registry.get(self._session_id, run.id)
            raise AdoptionError(run.id, "resume", exc) from exc
        if result is None:
            return await self.registry.get(self._session_id, run.id)
        return await self._apply_result(definition, running, result)

    # -- cancel ----------------------------------------------------------------------------

    async def request_cancel(self, run_id: str) -> bool:
        """Record the run's durable cancellation intent (as a front door does); whether this
        call was the one that recorded it. `cancel` then carries it out."""
        _, first = await record_cancel_intent(self.registry, self._session_id, run_id)
        return first

    @_owner_writes
    async def cancel(self, run_id: str, reason: str = "") -> Run | None:
        """Cancel a run (idempotent for an already cancelled one); return its record."""
        controller = self._controller(run_id)
        controller.cancels += 1  # an execution about to begin does not begin
        if controller.execution is not None:
            controller.execution.cancel()  # let the cancellation reach Flow without waiting
        try:
            async with controller.lock:
                run = await self.registry.get(self._session_id, run_id)
                definition = self.catalog.resolve(run.definition_name, run.definition_version)
                return await self._cancel_locked(definition, run, reason)
        except NotFoundError:
            self._forget_if_idle(run_id)
            raise
        finally:
            controller.cancels -= 1

    async def _never_seeded(self, definition: Definition, run: Run) -> bool:
        """A running run whose start was cut short before its seed: Flow has nothing to
        cancel (it is cancelled like a pending run)."""
        if not (
            run.status is RunStatus.RUNNING
            and run.checkpoint_revision == 0
            and run.activity_cursor == 0
        ):
            return False
        try:
            return not await definition.history(run.graph_run_id)
        except flow.CheckpointNotFoundError:
            return True
        except Exception:
            return False  # Flow's own cancellation decides

    async def _cancel_locked(self, definition: Definition, run: Run, reason: str) -> Run | None:
        if run.status is RunStatus.CANCELLED:
            return run
        if run.status in (RunStatus.COMPLETED, RunStatus.FAILED):
            raise ConflictError(self._session_id, run.id, "run is terminal", actual=run.revision)
        if not run.cancel_requested:
            if self._ownership_lost():
                return None
            intent = replace(
                run,
                cancel_requested=True,
                status_summary="workflow cancellation requested",
                updated_at=self._stamp(run),
            )
            try:
                run = await self.registry.compare_and_swap(run.revision, intent)
            except Exception as exc:
                raise RuntimeError(f"persist cancellation intent: {exc}") from exc
        if run.status is RunStatus.PENDING or await self._never_seeded(definition, run):
            try:
                return await self._transition(
                    run, RunStatus.CANCELLED, "workflow cancelled", run.checkpoint_revision
                )
            except _OwnershipLost:
                return None
        reason = bound_summary(reason) or "cancel requested"
        for _ in range(MAX_CANCEL_ATTEMPTS):
            if self._ownership_lost():
                return None
            try:
                await definition.cancel(run.graph_run_id, reason)
                error: BaseException | None = None
            except Exception as exc:
                error = exc
            try:
                result = await definition.get(run.graph_run_id)
            except Exception as exc:
                if error is None or isinstance(error, flow.RevisionConflictError):
                    await self._checkpoint_read_error(definition, run, "read cancellation", exc)
                    return None
                raise AdoptionError(run.id, "cancel", error) from error
            status = result.run.status
            if status is flow.RunStatus.CANCELLED:
                return await self._apply_result(definition, run, result)
            if status is flow.RunStatus.COMPLETED:
                await self._apply_result(definition, run, result)
                raise ConflictError(
                    self._session_id, run.id, "workflow completed before cancellation"
                )
            if error is not None and not isinstance(error, flow.RevisionConflictError):
                raise AdoptionError(run.id, "cancel", error) from error
            # A revision conflict (another writer appended first): Flow's cancel reads the
            # new latest checkpoint on the next attempt.
        raise AdoptionError(
            run.id, "cancel", f"revision conflict retry limit {MAX_CANCEL_ATTEMPTS} reached"
        )

    # -- requests and polling --------------------------------------------------------------

    async def _poll_loop(self, interval: float) -> None:
        while self.active:
            await asyncio.sleep(interval)
            try:
                await self.poll()
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.warning("session %s: polling for requests failed: %s", self._session_id, exc)

    @_owner_writes
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
            await self._poll_once(unfinished, bells)

    async def _requests_due(self, bells: Sequence[str] | None) -> bool:
        """Whether to read the request records now: a bell rings (it is silenced first),
        requests seen last time are still being worked on, or the safety net is due."""
        assert self.requests is not None
        if bells is None:
            bells = await self.requests.bells(self._session_id)
        if bells:
            await self.requests.silence(self._session_id, bells)
            return True
        return self._requests_open or time.monotonic() >= self._requests_next

    async def _poll_once(
        self, unfinished: Sequence[str] | None, bells: Sequence[str] | None
    ) -> None:
        sid = self._session_id
        index = self.index
        if unfinished is None:
            if index is not None:
                unfinished = await index.runs(sid)
            else:
                unfinished = [run.id for run in await self._all_runs() if not run.status.terminal]
        cancels: list[str] = []
        resumes: list[str] = []
        if self.requests is not None and await self._requests_due(bells):
            cancels = await self.requests.cancel_ids(sid)
            resumes = await self.requests.resume_ids(sid)
            self._requests_open = bool(cancels) or any(r not in self._refused for r in resumes)
            self._requests_next = time.monotonic() + REQUEST_RESCAN
            self._refused &= set(resumes)
        for run_id in cancels:
            self._handle(f"cancel:{run_id}", self._cancel_request(run_id))
        cancelling = set(cancels)
        for run_id in resumes:
            if run_id not in cancelling:
                self._handle(f"resume:{run_id}", self._resume_request(run_id))
        now = time.monotonic()
        for run_id in unfinished:
            if not self.active:
                return
            if self._busy(run_id) or self._handling & {f"cancel:{run_id}", f"resume:{run_id}"}:
                continue
            watch = self._watch.get(run_id)
            if watch is not None and now < watch.next_check:
                continue
            try:
                run = await self.registry.get(sid, run_id)
            except NotFoundError:
                if index is not None:
                    await index.remove_orphan(sid, run_id)
                continue
            if run.status in (RunStatus.COMPLETED, RunStatus.CANCELLED):
                self._watch.pop(run_id, None)
                self._auto_started.discard(run_id)
                if index is not None:
                    await index.remove(sid, run_id)
                continue
            if self._busy(run_id):
                continue
            if watch is None or watch.revision != run.revision:
                watch = self._watch[run_id] = _Watch(revision=run.revision)
            if run.status is RunStatus.INTERRUPTED and not run.cancel_requested:
                watch.next_check = now + INTERRUPTED_RECHECK
                continue
            # Pending, running with nobody executing it (an earlier attempt failed, or the
            # record fell behind), failed with its activities not yet published, or
            # cancellation requested: reconcile, with backoff.
            watch.next_check = now + min(MAX_RETRY_DELAY, 0.5 * 2**watch.attempts)
            watch.attempts += 1
            self._spawn(self._reconcile_worker(run_id), run_id=run_id)
        self._forget_finished(set(unfinished))

    def _forget_finished(self, unfinished: set[str]) -> None:
        """Drop what is kept per run for runs that are finished and idle (a worker owns a
        session for a long time)."""
        for run_id in [r for r in self._watch if r not in unfinished]:
            del self._watch[run_id]
        self._auto_started &= unfinished | set(self._queued)
        for run_id, controller in list(self._controllers.items()):
            if (
                run_id not in unfinished
                and not self._busy(run_id)
                and controller.execution is None
                and not controller.cancels
            ):
                del self._controllers[run_id]

    def _handle(self, key: str, work: Coroutine[Any, Any, None]) -> None:
        """Run a request handler unless one for the same request is in flight."""
        if key in self._handling or not self.active:
            work.close()
            return
        self._handling.add(key)

        async def handled() -> None:
            try:
                await work
            finally:
                self._handling.discard(key)

        self._spawn(handled(), slot=False)

    async def _cancel_request(self, run_id: str) -> None:
        assert self.requests is not None
        request = await self.requests.cancel_request(self._session_id, run_id)
        if request is None:
            return
        try:
            run = await self.cancel(run_id, request.reason)
        except NotFoundError:
            run = None
            await self.requests.delete_cancel(self._session_id, run_id)
            return
        except ConflictError:
            pass  # terminal before it could be cancelled: the caller reads the outcome
        else:
            if run is None:
                return  # ownership lost: the next owner finds the doorbell
        await self.requests.delete_cancel(self._session_id, run_id)

    async def _resume_request(self, run_id: str) -> None:
        requests = self.requests
        assert requests is not None
        request = await requests.resume_request(self._session_id, run_id)
        if request is None:
            return
        if request.state == "failed":
            self._refused.add(run_id)
            if time.time() - request.requested_at > FAILED_REQUEST_TTL:
                await requests.delete_resume(self._session_id, run_id)
            return
        self._refused.discard(run_id)
        controller = self._controller(run_id)
        async with controller.lock:
            try:
                run = await self.registry.get(self._session_id, run_id)
            except NotFoundError:
                await requests.delete_resume(self._session_id, run_id)
                return
            verdict = self._resume_verdict(request, run)
            if verdict == "wait":
                return
            if verdict == "done":
                await requests.delete_resume(self._session_id, run_id)
                return
            if verdict != "resume":
                with contextlib.suppress(ConflictError):
                    await requests.refuse_resume(request, verdict)
                    self._refused.add(run_id)
                return
            try:
                definition = await self._resolve(run)
                payload = request.payload or None  # empty: the retry of an errored pause
                token = await prepare_resume(definition, run, payload)
            except (
                InvalidInputError,
                DefinitionError,
                UnknownDefinitionError,
                ResumeBlockedError,
            ) as exc:
                # Still interrupted at the same checkpoint: nothing took effect, so even an
                # accepted request can be refused.
                code = "blocked" if isinstance(exc, ResumeBlockedError) else "invalid"
                with contextlib.suppress(ConflictError):
                    await requests.refuse_resume(request, code)
                    self._refused.add(run_id)
                return
            if self._ownership_lost():
                return
            if request.state != "accepted":
                try:
                    request = await requests.accept_resume(request)
                except ConflictError:
                    return  # withdrawn or replaced meanwhile: look again next time
            after = await self._resume_locked(controller, definition, run, token)
            if after is None:
                return  # ownership lost: the next owner carries the accepted request out
            await requests.delete_resume(self._session_id, run_id)

    @staticmethod
    def _resume_verdict(request: ResumeRequest, run: Run) -> str:
        """What to do with a resume request given the run: ``resume``, ``wait`` (a resume
        is under way or must be reconciled first), ``done`` (an accepted request took
        effect), or the error code to refuse it with."""
        moved = run.checkpoint_revision > request.checkpoint_revision
        if moved:
            return "done" if request.state == "accepted" else "stale"
        if run.checkpoint_revision < request.checkpoint_revision:
            return "stale"
        if run.status is RunStatus.INTERRUPTED and not run.cancel_requested:
            return "resume"
        if run.status is RunStatus.RUNNING:
            return "wait"
        if run.status is RunStatus.FAILED and request.state == "accepted":
            return "failed"
        return "not_interrupted"

    # -- history ---------------------------------------------------------------------------

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
        if self._state == "closed":
            raise SupervisorClosedError()
        await self.registry.get(self._session_id, run_id)  # NotFoundError if foreign
        if not isinstance(self.publisher, ActivityJournal):
            raise RuntimeError("history needs the activity journal as publisher")
        options: dict[str, Any] = {
            "after_revision": after_revision,
            "after_event_id": after_event_id,
            "limit": limit,
        }
        try:
            return await self.publisher.page(self._session_id, run_id, **options)
        except CorruptRecordError:
            if not self.active or self._busy(run_id):
                raise
            await self._history_repaired(run_id)
        return await self.publisher.page(self._session_id, run_id, **options)

    async def _rebuild_journal(self, definition: Definition, run: Run) -> None:
        """Replace the run's damaged activity journal with one projected anew from its
        checkpoints, up to its activity cursor (what had been published), and report it.
        Event IDs are deterministic, so the rebuilt records are the published ones (see
        `Projector` ``replay`` for the one activity that is re-derived)."""
        journal = self.publisher
        if not isinstance(journal, ActivityJournal) or self._ownership_lost():
            raise CorruptRecordError(run.id, "activity journal damaged")
        cursor = run.activity_cursor

        async def pages() -> AsyncIterator[list[ProjectedActivity]]:
            projector = Projector(
                run,
                definition.metadata(),
                fail_on_error=definition.on_error == "fail",
                replay=True,
            )
            async for chunk in checkpoint_pages(definition, run.graph_run_id, 0, upto=cursor):
                yield [item for item in projector.advance(run, chunk) if item.revision < cursor]
            yield [item for item in projector.finish(run) if item.revision < cursor]

        generation = await journal.rebuild(self._session_id, run.id, pages())
        log.warning(
            "session %s: activity journal of run %s was damaged; rebuilt from its "
            "checkpoints (generation %d)",
            self._session_id,
            run.id,
            generation,
        )

    async def _history_repaired(self, run_id: str) -> None:
        """`history` found the run's journal damaged: as the owner, rebuild it."""
        controller = self._controller(run_id)
        try:
            async with controller.lock:
                run = await self.registry.get(self._session_id, run_id)
                definition = self.catalog.resolve(run.definition_name, run.definition_version)
                await self._rebuild_journal(definition, run)
        finally:
            if not self._busy(run_id):
                self._forget_if_idle(run_id)

    # -- writes ----------------------------------------------------------------------------

    def _stamp(self, run: Run) -> datetime:
        moment = self._now().astimezone(UTC)
        return max(moment, run.updated_at)

    async def _transition(self, run: Run, status: RunStatus, summary: str, checkpoint: int) -> Run:
        if self._ownership_lost():
            raise _OwnershipLost()
        if status is not RunStatus.RUNNING:  # no live publication until it runs again
            self._projections.forget(run.id)

        def change(current: Run) -> Run:
            return replace(
                current,
                status=status,
                status_summary=bound_summary(summary),
                checkpoint_revision=max(checkpoint, current.checkpoint_revision),
                updated_at=self._stamp(current),
            )

        try:
            return await self._swap(run, change)
        except Exception as exc:
            raise RuntimeError(f"persist run transition: {exc}") from exc

    async def _swap(self, run: Run, change: Callable[[Run], Run]) -> Run:
        """Compare-and-swap ``change(run)``. If the record moved on only because a front
        door recorded a cancellation intent meanwhile, apply the change to that record
        instead (the intent is kept; the cancel request is handled next)."""
        try:
            return await self.registry.compare_and_swap(run.revision, change(run))
        except ConflictError:
            fresh = await self.registry.get(self._session_id, run.id)
            if not _only_intent_added(run, fresh) or self._ownership_lost():
                raise
            return await self.registry.compare_and_swap(fresh.revision, change(fresh))

    async def _fail_definite(self, definition: Definition, run: Run, summary: str) -> Run | None:
        if self._ownership_lost():
            return None
        try:
            failed = await self._transition(run, RunStatus.FAILED, summary, run.checkpoint_revision)
        except _OwnershipLost:
            return None
        return await self._failed_published(await self._reconcile_activities(definition, failed))

    async def _apply_result(
        self, definition: Definition, run: Run, result: WorkflowResult
    ) -> Run | None:
        if self._ownership_lost():
            return None
        if result.run.graph_run_id and result.run.graph_run_id != run.graph_run_id:
            return await self._fail_definite(
                definition, run, "workflow checkpoint identity mismatch"
            )
        status = _FLOW_STATUS.get(result.run.status)
        if status is None:
            return await self._fail_definite(definition, run, "workflow checkpoint status invalid")
        summary = bound_summary(result.summary) or f"workflow {status}"
        if status is RunStatus.INTERRUPTED and (result.interrupts or result.halt):
            pending = describe_pause(
                definition.metadata(),
                result.run.revision,
                result.interrupts,
                result.halt,
                resume_schema=definition.resume_schema_for(requests(result.interrupts)),
            )
            if definition.on_error == "fail" and any(
                item.kind is PauseKind.ERROR for item in pending.vertices
            ):
                pending = replace(pending, failed=True)
                status, summary = RunStatus.FAILED, f"workflow failed: {pending.error_line()}"
            if self.pending is not None and not self._ownership_lost():
                await self.pending.put(self._session_id, run.id, pending)
        if status is not RunStatus.FAILED:
            run = await self._reconcile_activities(definition, run)
        try:
            run = await self._transition(run, status, summary, result.run.revision)
        except _OwnershipLost:
            return None
        if status is RunStatus.FAILED:
            return await self._failed_published(await self._reconcile_activities(definition, run))
        return run

    async def _failed_published(self, run: Run) -> Run:
        """A failed run's activities are published: its index entry (kept until now, so
        that an owner dying before this point leaves the work to the next) goes."""
        index = self.index
        if index is not None and not self._ownership_lost():
            try:
                await index.remove(self._session_id, run.id)
            except Exception as exc:  # the next owner's poll publishes (nothing) and retries
                log.warning("run %s is failed; unindexing it failed: %s", run.id, exc)
        return run

    async def _reconcile_activities(self, definition: Definition, run: Run) -> Run:
        """Publish the activities of every durable checkpoint past the cursor, then advance
        the cursor. Only the checkpoints after the cursor are read, in pages (see
        `projection`); each full page is published and the cursor advanced before the
        next is read, so memory stays bounded by a page however long the backlog."""
        try:
            return await self._reconcile_pages(definition, run)
        except BaseException:
            self._projections.forget(run.id)  # rebuilt from the checkpoints next time
            raise

    def _projection_error(self, run: Run, exc: Exception) -> ReconciliationError:
        if isinstance(exc, HistoryReadError):
            return ReconciliationError(run.id, "read checkpoint history", exc.cause)
        return ReconciliationError(run.id, "project durable history", exc)

    async def _reconcile_pages(self, definition: Definition, run: Run) -> Run:
        failure_revision = None
        projector = self._projections.take(definition, run)
        pending: list[ProjectedActivity] = []
        try:
            if projector is None:
                projector = await self._projections.rebuild(definition, run)
            async for page in checkpoint_pages(definition, run.graph_run_id, projector.revision):
                pending.extend(projector.advance(run, page))
                if len(page) == PROJECTION_PAGE and pending:
                    run = await self._publish(definition, run, pending, projector.revision)
                    pending = []
        except ReconciliationError:
            raise
        except HistoryReadError as exc:
            # A failed run whose checkpoints are missing or corrupt (that is why it failed)
            # still records its failure, at the first revision not yet published.
            if run.status is not RunStatus.FAILED or not _definite(exc.cause):
                raise self._projection_error(run, exc) from exc.cause
            failure_revision = run.activity_cursor
            try:
                projector = Projector(
                    run,
                    definition.metadata(),
                    fail_on_error=definition.on_error == "fail",
                    emit_from=run.activity_cursor,
                )
            except Exception as error:
                raise self._projection_error(run, error) from error
            pending = []
        except Exception as exc:
            raise self._projection_error(run, exc) from exc
        try:
            finished = projector.finish(run, failure_revision=failure_revision)
        except Exception as exc:
            raise self._projection_error(run, exc) from exc
        end = max([projector.revision, *(item.revision + 1 for item in finished)])
        if run.activity_cursor > end:
            raise ReconciliationError(run.id, "validate cursor", "cursor exceeds history")
        pending.extend(item for item in finished if item.revision >= run.activity_cursor)
        if run.activity_cursor < end:
            run = await self._publish(definition, run, pending, end)
        if not finished and failure_revision is None and run.activity_cursor == projector.revision:
            self._projections.keep(definition, run.id, projector)
        return run

    async def _publish(
        self, definition: Definition, run: Run, pending: Sequence[ProjectedActivity], end: int
    ) -> Run:
        """Publish ``pending`` durably, then move the run's activity cursor to ``end``. A
        journal found damaged is rebuilt from the checkpoints first (`_rebuild_journal`)."""
        if pending:
            try:
                try:
                    await self.publisher.publish(pending)
                except CorruptRecordError:
                    await self._rebuild_journal(definition, run)
                    await self.publisher.publish(pending)
            except Exception as exc:
                raise ReconciliationError(run.id, "publish durable activity", exc) from exc
        if self._ownership_lost():
            return run
        try:
            return await self._swap(run, lambda current: replace(current, activity_cursor=end))
        except Exception as exc:
            raise ReconciliationError(run.id, "advance activity cursor", exc) from exc


def _seeded(live: LiveActivities, ack: Callable[[], None]) -> Callable[[Any], Awaitable[None]]:
    """The ``on_run_start`` hook of a start: publish the seed's activities (``run_started``),
    then acknowledge the seed. So whoever waits for the acknowledgement (a start call, the
    MCP server forwarding its activities) finds ``run_started`` already published; that
    used to hold only when the journal's write happened to be faster than the answer."""

    async def hook(_record: Any) -> None:
        try:
            await live.publish_now()
        finally:
            ack()

    return hook
