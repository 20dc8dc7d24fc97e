"""`FrontDoor`: start, resume and cancel runs of a session that another process owns.

A front door (``flowledger mcp --no-execute``, the CLI's ``--no-execute`` commands, any
application process) never takes the session lease and never executes a run. It has the
same ``start`` / ``resume`` / ``cancel`` / ``history`` interface as the `Supervisor`, so
the workflow tools work unchanged on top of it, but every change is a durable request
that the session's owner - a ``flowledger worker`` - carries out:

* ``start``: the tools have already written the pending run record (and, through the
  registry, its unfinished-index entry). The returned ticket waits until a worker has
  made the run's first checkpoint (revision 0) durable, reading the registry and the
  checkpoint store; `FrontDoorTimeoutError` if nobody did within ``start_timeout``
  seconds (the run stays pending, and starts when a worker comes).
* ``resume``: writes a resume request bound to the interrupt it answers (`RunRequests`)
  and waits until the owner has carried it out (the request is gone: the resumed
  segment ended) and returns the run record once it is paused or terminal (never
  ``running``: a cancel that cut the segment short is waited for). If no worker
  accepted it within ``request_timeout`` seconds the request is withdrawn
  (compare-and-swap, so it is either withdrawn or being executed, never both) and
  `FrontDoorTimeoutError` raised.
  A refused request becomes the error the owner would have raised.
* ``cancel``: records the durable intent (``cancel_requested``, by registry
  compare-and-swap, which any owner's reconciliation honours; `request_cancel` alone
  says whether this caller was the first to ask), rings the cancel doorbell (it carries
  the reason, and makes the owner act at once), and waits until the run is cancelled.

Waiting polls with a growing delay (``poll`` up to ``max_poll`` seconds), and is also
woken by the owner when it answered a front door of the session (`replies_channel`: a
seed is durable, a resume or cancel request carried out or refused; one listener per
front door, opened on its first wait): the door then re-reads what it waits for.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from ... import flow
from ...clock import Clock, system_clock
from ...storage import Listener, Wakeups
from ..activities.history import HistoryPage
from ..activities.journal import ActivityJournal
from ..errors import (
    AdoptionError,
    ConflictError,
    FrontDoorTimeoutError,
    InvalidInputError,
    ResumeBlockedError,
)
from ..records.answers import current_transport
from ..records.intent import record_cancel_intent
from ..records.registry import RunRegistry
from ..records.requests import ResumeRequest, RunRequests
from ..records.run import Run, RunStatus, owner_lease_name
from ..records.wakeups import replies_channel, wake_session
from .catalog import Catalog
from .resumption import assess, prepare_resume

if TYPE_CHECKING:
    from .session import WorkflowSession

__all__ = ["FrontDoor", "FrontDoorTicket"]

log = logging.getLogger(__name__)

DEFAULT_START_TIMEOUT: Final = 20.0
DEFAULT_REQUEST_TIMEOUT: Final = 20.0
DEFAULT_OUTCOME_TIMEOUT: Final = 300.0


class _Backoff:
    def __init__(self, first: float, longest: float) -> None:
        self._delay = first
        self._longest = longest

    async def sleep(self, listener: Listener | None = None, seen: int = 0) -> None:
        """Sleep the next delay, or until ``listener`` has had a wake-up after ``seen``."""
        if listener is not None and listener.live:
            await listener.changed(seen, self._delay)
        else:
            await asyncio.sleep(self._delay)
        self._delay = min(self._delay * 1.5, self._longest)


@dataclass(eq=False)
class FrontDoorTicket:
    """What `FrontDoor.start` returns; `wait` returns once the run's seed is durable."""

    door: FrontDoor
    run_id: str

    async def wait(self) -> None:
        await self.door._wait_seeded(self.run_id)


class FrontDoor:
    def __init__(
        self,
        session_id: str,
        *,
        catalog: Catalog,
        registry: RunRegistry,
        checkpoints: flow.CheckpointStore,
        journal: ActivityJournal,
        requests: RunRequests,
        start_timeout: float = DEFAULT_START_TIMEOUT,
        request_timeout: float = DEFAULT_REQUEST_TIMEOUT,
        outcome_timeout: float = DEFAULT_OUTCOME_TIMEOUT,
        poll: float = 0.02,
        max_poll: float = 0.5,
        wakeups: Wakeups | None = None,
        clock: Clock = system_clock,
    ) -> None:
        owner_lease_name(session_id)  # validates the session id
        for name, value in (
            ("start_timeout", start_timeout),
            ("request_timeout", request_timeout),
            ("outcome_timeout", outcome_timeout),
            ("poll", poll),
            ("max_poll", max_poll),
        ):
            if not value > 0:
                raise ValueError(f"{name} must be a positive number of seconds, not {value}")
        self._session_id = session_id
        self.catalog = catalog
        self.registry = registry
        self.checkpoints = checkpoints
        self.journal = journal
        self.requests = requests
        self.start_timeout = float(start_timeout)
        self.request_timeout = float(request_timeout)
        self.outcome_timeout = float(outcome_timeout)
        self._poll = poll
        self._max_poll = max_poll
        self.wakeups = wakeups  # woken by `start` (requests wake on their own commit)
        self._answers: Listener | None = None
        self.clock = clock  # the session's: stamps the cancellation intents it records

    @classmethod
    def for_session(
        cls,
        session: WorkflowSession,
        *,
        start_timeout: float = DEFAULT_START_TIMEOUT,
        request_timeout: float = DEFAULT_REQUEST_TIMEOUT,
        outcome_timeout: float = DEFAULT_OUTCOME_TIMEOUT,
    ) -> FrontDoor:
        """The front door of a built (not activated) `WorkflowSession`."""
        return cls(
            session.session_id,
            catalog=session.catalog,
            registry=session.registry,
            checkpoints=session.checkpoints,
            journal=session.journal,
            requests=session.requests,
            start_timeout=start_timeout,
            request_timeout=request_timeout,
            outcome_timeout=outcome_timeout,
            wakeups=session.store.wakeups,
            clock=session.clock,
        )

    @property
    def session_id(self) -> str:
        return self._session_id

    def _backoff(self) -> _Backoff:
        return _Backoff(self._poll, self._max_poll)

    # -- start -----------------------------------------------------------------------------

    async def start(self, run_id: str) -> FrontDoorTicket:
        """The pending run is already written: wake the session's workers and owner, and
        return a ticket that waits for its seed."""
        await self.registry.get(self._session_id, run_id)  # NotFoundError if foreign
        if self.wakeups is not None:
            try:
                await wake_session(self.wakeups, self._session_id)
            except Exception as exc:  # the run is written: the fallback poll finds it
                log.warning("run %s: waking its workers failed: %s", run_id, exc)
        return FrontDoorTicket(self, run_id)

    async def _seeded(self, run: Run) -> bool:
        try:
            return bool(await self.checkpoints.history(run.graph_run_id, limit=1))
        except flow.CheckpointNotFoundError:
            return False

    async def _answers_listener(self) -> Listener | None:
        """The listener for the owner's replies in this session (`replies_channel`),
        opened on first use and kept (the store closes it); None without wake-ups."""
        if self._answers is None and self.wakeups is not None:
            try:
                self._answers = await self.wakeups.listen([replies_channel(self._session_id)])
            except Exception as exc:  # polling alone still finds the answer
                log.warning("session %s: no wake-ups for answers: %s", self._session_id, exc)
                self.wakeups = None
        return self._answers

    async def _wait_seeded(self, run_id: str) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.start_timeout
        backoff = self._backoff()
        listener = await self._answers_listener()
        while True:
            seen = listener.wakes if listener is not None else 0
            run = await self.registry.get(self._session_id, run_id)
            if run.status is RunStatus.FAILED:
                raise AdoptionError(run_id, "start", run.status_summary or "the run failed")
            if run.status is not RunStatus.PENDING and await self._seeded(run):
                return
            if run.status is RunStatus.CANCELLED:
                raise ConflictError(self._session_id, run_id, "run was cancelled before it started")
            if loop.time() >= deadline:
                raise FrontDoorTimeoutError(
                    "start",
                    run_id,
                    self.start_timeout,
                    picked_up=run.status is not RunStatus.PENDING,
                )
            # Woken by an owner's seed (of any run of the session: look again), or the
            # next poll of the backoff, whichever comes first.
            await backoff.sleep(listener, seen)

    # -- resume ----------------------------------------------------------------------------

    async def resume(self, run_id: str, payload: bytes | str | None) -> Run:
        """Request a resume of the interrupted run (``None``: retry an errored pause) and
        wait for the resumed segment to end; return the run record then. The checks of
        `prepare_resume` that need nothing outside this process (the graph, the payload)
        run here first; the owner runs all of them under the run's lock."""
        raw = b"" if payload is None else payload.encode() if isinstance(payload, str) else payload
        run = await self.registry.get(self._session_id, run_id)
        if run.status is not RunStatus.INTERRUPTED:
            raise ConflictError(
                self._session_id, run_id, "run is not interrupted", actual=run.revision
            )
        definition = self.catalog.resolve(run.definition_name, run.definition_version)
        try:
            await prepare_resume(definition, run, payload, precheck=True)
        except (InvalidInputError, ResumeBlockedError):
            raise
        except Exception:
            pass  # an unreadable checkpoint is the owner's to act on (it fails the run)
        listener = await self._answers_listener()  # before the request: no answer is missed
        mine = await self.requests.request_resume(
            self._session_id, run_id, raw, run.checkpoint_revision, transport=current_transport()
        )
        loop = asyncio.get_running_loop()
        pickup_deadline = loop.time() + self.request_timeout
        outcome_deadline = loop.time() + self.outcome_timeout
        backoff = self._backoff()
        accepted = False
        while True:
            seen = listener.wakes if listener is not None else 0
            current = await self.requests.resume_request(self._session_id, run_id)
            if current is None or not _same_request(current, mine):
                # Carried out. A cancel may have cut the segment short and still be
                # finishing it: the answer is the run once it is paused or terminal.
                run = await self.registry.get(self._session_id, run_id)
                if run.status not in (RunStatus.RUNNING, RunStatus.PENDING):
                    return run
                if loop.time() >= outcome_deadline:
                    raise FrontDoorTimeoutError(
                        "resume", run_id, self.outcome_timeout, picked_up=True
                    )
                await backoff.sleep(listener, seen)
                continue
            if current.state == "failed":
                if current.error == "blocked":
                    # the owner's check found the run blocked; its diagnostics are not
                    # carried by the request, so the refusal says them from a check here
                    readiness = await assess(definition, run)
                    if readiness.blocked:
                        raise ResumeBlockedError(run_id, readiness, readiness.explain())
                raise self._refusal(current)
            accepted = accepted or current.state == "accepted"
            now = loop.time()
            if not accepted and now >= pickup_deadline:
                try:
                    await self.requests.refuse_resume(current, "withdrawn")
                except ConflictError:
                    continue  # it changed (most likely accepted): look again
                raise FrontDoorTimeoutError("resume", run_id, self.request_timeout, picked_up=False)
            if accepted and now >= outcome_deadline:
                raise FrontDoorTimeoutError("resume", run_id, self.outcome_timeout, picked_up=True)
            await backoff.sleep(listener, seen)

    def _refusal(self, request: ResumeRequest) -> Exception:
        run_id = request.run_id
        if request.error == "invalid":
            return InvalidInputError("resume", "the owner's definition refused the payload")
        if request.error == "blocked":
            return ConflictError(
                self._session_id, run_id, "the owner found the run cannot be resumed now"
            )
        if request.error == "failed":
            return AdoptionError(run_id, "resume", "the resumed run failed")
        if request.error == "withdrawn":
            return ConflictError(self._session_id, run_id, "the resume request was withdrawn")
        return ConflictError(self._session_id, run_id, "run is not interrupted")

    # -- cancel ----------------------------------------------------------------------------

    async def request_cancel(self, run_id: str) -> bool:
        """Record the run's durable cancellation intent; whether this call was the one that
        recorded it (False: it was already requested, or the run is terminal). `cancel`
        then carries it out."""
        _, first = await record_cancel_intent(
            self.registry, self._session_id, run_id, now=self.clock.now
        )
        return first

    async def cancel(self, run_id: str, reason: str = "") -> Run:
        """Request cancellation (doorbell and durable intent) and wait until the run is
        cancelled; `ConflictError` if it is, or becomes, completed or failed."""
        run = await self.registry.get(self._session_id, run_id)
        if run.status is RunStatus.CANCELLED:
            return run
        if run.status.terminal:
            raise ConflictError(self._session_id, run_id, "run is terminal", actual=run.revision)
        # The intent before the doorbell: the owner then finds it set rather than setting
        # it itself, so the caller that set it is known (`request_cancel`).
        run, _ = await record_cancel_intent(
            self.registry, self._session_id, run_id, now=self.clock.now
        )
        listener = await self._answers_listener()  # before the request: no answer is missed
        seen = listener.wakes if listener is not None else 0
        await self.requests.request_cancel(self._session_id, run_id, reason)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.request_timeout
        backoff = self._backoff()
        while True:
            if run.status is RunStatus.CANCELLED:
                return run
            if run.status.terminal:
                raise ConflictError(
                    self._session_id,
                    run_id,
                    f"workflow {run.status} before cancellation",
                    actual=run.revision,
                )
            if loop.time() >= deadline:
                ringing = await self.requests.cancel_request(self._session_id, run_id)
                raise FrontDoorTimeoutError(
                    "cancel", run_id, self.request_timeout, picked_up=ringing is None
                )
            await backoff.sleep(listener, seen)
            seen = listener.wakes if listener is not None else 0
            run = await self.registry.get(self._session_id, run_id)

    # -- history ---------------------------------------------------------------------------

    async def history(
        self,
        run_id: str,
        *,
        after_revision: int = 0,
        after_event_id: str | None = None,
        limit: int = 0,
    ) -> HistoryPage:
        """A page of the run's published activity history (no ownership needed)."""
        run = await self.registry.get(self._session_id, run_id)  # NotFoundError if foreign
        return await self.journal.page(
            self._session_id,
            run_id,
            after_revision=after_revision,
            after_event_id=after_event_id,
            limit=limit,
            activity_cursor=run.activity_cursor,
        )


def _same_request(current: ResumeRequest, mine: ResumeRequest) -> bool:
    return (
        current.checkpoint_revision == mine.checkpoint_revision
        and current.requested_at == mine.requested_at
        and current.payload == mine.payload
    )
