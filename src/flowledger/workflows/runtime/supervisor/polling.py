"""Requests from front doors (`Supervisor.poll`).

A session owned by a worker is changed by processes that do not own it through durable
requests (`RunRequests`): new pending runs (found through the `UnfinishedIndex`), resume
requests and cancel requests. `poll` is one pass over them; a worker calls it on every
tick, and a standalone owner gets a loop that calls it when the session's wake-up channel
is woken and every ``poll_interval`` seconds otherwise (`WorkWaiter`). A
pass starts pending runs, re-adopts running runs nobody is executing (after an error;
with backoff), cancels runs whose cancellation was requested (at once, even
mid-segment), carries out resume requests, and removes index entries of terminal runs.
`Watch` is what a supervisor remembers about one unfinished run between passes.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Coroutine, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from ...errors import (
    ConflictError,
    DefinitionError,
    InvalidInputError,
    NotFoundError,
    ResumeBlockedError,
    UnknownDefinitionError,
)
from ...records.requests import ResumeRequest
from ...records.run import Run, RunStatus
from ...records.wakeups import DUE, session_channel
from ..resumption import prepare_resume
from ..waiting import WorkWaiter
from .adoption import reconcile_worker, resolve
from .replying import reply_to_front_doors
from .resume import Answered, resume_locked
from .workers import busy, controller_for, spawn

if TYPE_CHECKING:
    from .owner import Supervisor

log = logging.getLogger(__name__)


INTERRUPTED_RECHECK: Final = 30.0  # seconds between re-reads of an idle interrupted run


MAX_RETRY_DELAY: Final = 30.0  # the longest backoff before re-adopting a stuck run


REQUEST_RESCAN: Final = 10.0  # seconds between request reads without a bell (a safety net)


FAILED_REQUEST_TTL: Final = 600.0  # seconds a refused resume request is kept for its caller


@dataclass(eq=False)
class Watch:
    """What `Supervisor.poll` remembers about one unfinished run between passes."""

    revision: int = 0
    attempts: int = 0
    next_check: float = 0.0


async def poll_loop(sup: Supervisor, interval: float) -> None:
    """Poll when woken (the session's channel, or ``due``) and every ``interval``
    seconds otherwise (see `WorkWaiter`)."""
    channels = (session_channel(sup._session_id), DUE)
    waiter = WorkWaiter(sup.wakeups, channels, interval)
    await waiter.open()
    try:
        while sup.active:
            await waiter.wait(waiter.interval)
            try:
                await sup.poll()
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.warning("session %s: polling for requests failed: %s", sup._session_id, exc)
    finally:
        await waiter.close()


async def requests_due(sup: Supervisor, bells: Sequence[str] | None) -> bool:
    """Whether to read the request records now: a bell rings (it is silenced first),
    requests seen last time are still being worked on, or the safety net is due."""
    assert sup.requests is not None
    if bells is None:
        bells = await sup.requests.bells(sup._session_id)
    if bells:
        await sup.requests.silence(sup._session_id, bells)
        return True
    return sup._requests_open or time.monotonic() >= sup._requests_next


async def poll_once(
    sup: Supervisor, unfinished: Sequence[str] | None, bells: Sequence[str] | None
) -> None:
    sid = sup._session_id
    index = sup.index
    if unfinished is None:
        if index is not None:
            unfinished = await index.runs(sid)
        else:
            unfinished = [run.id for run in await sup._all_runs() if not run.status.terminal]
    cancels: list[str] = []
    resumes: list[str] = []
    if sup.requests is not None and await requests_due(sup, bells):
        cancels = await sup.requests.cancel_ids(sid)
        resumes = await sup.requests.resume_ids(sid)
        sup._requests_open = bool(cancels) or any(r not in sup._refused for r in resumes)
        sup._requests_next = time.monotonic() + REQUEST_RESCAN
        sup._refused &= set(resumes)
    for run_id in cancels:
        handle(sup, f"cancel:{run_id}", cancel_request(sup, run_id))
    cancelling = set(cancels)
    for run_id in resumes:
        if run_id not in cancelling:
            handle(sup, f"resume:{run_id}", resume_request(sup, run_id))
    now = time.monotonic()
    starting: list[Run] = []
    for run_id in unfinished:
        if not sup.active:
            return
        if busy(sup, run_id) or sup._handling & {f"cancel:{run_id}", f"resume:{run_id}"}:
            continue
        watch = sup._watch.get(run_id)
        if watch is not None and now < watch.next_check:
            continue
        try:
            run = await sup.registry.get(sid, run_id)
        except NotFoundError:
            if index is not None:
                await index.remove_orphan(sid, run_id)
            continue
        if run.status in (RunStatus.COMPLETED, RunStatus.CANCELLED):
            sup._watch.pop(run_id, None)
            sup._auto_started.discard(run_id)
            if index is not None:
                await index.remove(sid, run_id)
            continue
        if busy(sup, run_id):
            continue
        if watch is None or watch.revision != run.revision:
            watch = sup._watch[run_id] = Watch(revision=run.revision)
        if run.status is RunStatus.INTERRUPTED and not run.cancel_requested:
            watch.next_check = now + INTERRUPTED_RECHECK
            continue
        # Pending, running with nobody executing it (an earlier attempt failed, or the
        # record fell behind), failed with its activities not yet published, or
        # cancellation requested: reconcile, with backoff.
        watch.next_check = now + min(MAX_RETRY_DELAY, 0.5 * 2**watch.attempts)
        watch.attempts += 1
        if run.status is RunStatus.PENDING and not run.cancel_requested:
            starting.append(run)
        else:
            spawn(sup, reconcile_worker(sup, run_id), run_id=run_id)
    # Pending runs start oldest first; with limits, all of them are queued before any
    # asks for a slot, so the queue keeps their order (`admission`).
    starting.sort(key=lambda run: (run.created_at, run.id))
    if sup.admission is not None:
        for run in starting:
            await sup.admission.enqueue(run)
    for run in starting:
        if sup.active and not busy(sup, run.id):
            spawn(sup, reconcile_worker(sup, run.id), run_id=run.id)
    forget_finished(sup, set(unfinished))


def forget_finished(sup: Supervisor, unfinished: set[str]) -> None:
    """Drop what is kept per run for runs that are finished and idle (a worker owns a
    session for a long time)."""
    for run_id in [r for r in sup._watch if r not in unfinished]:
        del sup._watch[run_id]
    sup._auto_started &= unfinished | set(sup._queued)
    for run_id, controller in list(sup._controllers.items()):
        if (
            run_id not in unfinished
            and not busy(sup, run_id)
            and controller.execution is None
            and not controller.cancels
        ):
            del sup._controllers[run_id]


def handle(sup: Supervisor, key: str, work: Coroutine[Any, Any, None]) -> None:
    """Run a request handler unless one for the same request is in flight."""
    if key in sup._handling or not sup.active:
        work.close()
        return
    sup._handling.add(key)

    async def handled() -> None:
        try:
            await work
        finally:
            sup._handling.discard(key)

    spawn(sup, handled(), slot=False)


async def cancel_request(sup: Supervisor, run_id: str) -> None:
    """Carry out a cancel request, then wake the session's front doors (one waits for
    the outcome; a wake-up when nothing changed costs a waiting door one read)."""
    await _cancel_request(sup, run_id)
    await reply_to_front_doors(sup)


async def _cancel_request(sup: Supervisor, run_id: str) -> None:
    assert sup.requests is not None
    request = await sup.requests.cancel_request(sup._session_id, run_id)
    if request is None:
        return
    try:
        run = await sup.cancel(run_id, request.reason)
    except NotFoundError:
        run = None
        await sup.requests.delete_cancel(sup._session_id, run_id)
        return
    except ConflictError:
        pass  # terminal before it could be cancelled: the caller reads the outcome
    else:
        if run is None:
            return  # ownership lost: the next owner finds the doorbell
    await sup.requests.delete_cancel(sup._session_id, run_id)


async def resume_request(sup: Supervisor, run_id: str) -> None:
    """Carry out or refuse a resume request, then wake the session's front doors."""
    await _resume_request(sup, run_id)
    await reply_to_front_doors(sup)


async def _resume_request(sup: Supervisor, run_id: str) -> None:
    requests = sup.requests
    assert requests is not None
    request = await requests.resume_request(sup._session_id, run_id)
    if request is None:
        return
    if request.state == "failed":
        sup._refused.add(run_id)
        if sup.clock.now().timestamp() - request.requested_at > FAILED_REQUEST_TTL:
            await requests.delete_resume(sup._session_id, run_id)
        return
    sup._refused.discard(run_id)
    controller = controller_for(sup, run_id)
    async with controller.lock:
        try:
            run = await sup.registry.get(sup._session_id, run_id)
        except NotFoundError:
            await requests.delete_resume(sup._session_id, run_id)
            return
        verdict = resume_verdict(request, run)
        if verdict == "wait":
            return
        if verdict == "done":
            await requests.delete_resume(sup._session_id, run_id)
            return
        if verdict != "resume":
            with contextlib.suppress(ConflictError):
                await requests.refuse_resume(request, verdict)
                sup._refused.add(run_id)
            return
        try:
            definition = await resolve(sup, run)
        except (DefinitionError, UnknownDefinitionError):
            await _refuse(sup, request, "invalid")
            return
        # The one full check of this resume, and the segment it admits, in one span.
        async with definition.resuming(run.graph_run_id):
            try:
                payload = request.payload or None  # empty: the retry of an errored pause
                token = await prepare_resume(definition, run, payload)
            except (
                InvalidInputError,
                DefinitionError,
                UnknownDefinitionError,
                ResumeBlockedError,
            ) as exc:
                # Still interrupted at the same checkpoint: nothing took effect, so even
                # an accepted request can be refused.
                code = "blocked" if isinstance(exc, ResumeBlockedError) else "invalid"
                await _refuse(sup, request, code)
                return
            if sup._ownership_lost():
                return
            if request.state != "accepted":
                try:
                    request = await requests.accept_resume(request)
                except ConflictError:
                    return  # withdrawn or replaced meanwhile: look again next time
            answered = Answered(
                "request" if payload else "retry", request.transport, request.payload or None
            )
            after = await resume_locked(sup, controller, definition, run, token, answered)
        if after is None:
            return  # ownership lost: the next owner carries the accepted request out
        await requests.delete_resume(sup._session_id, run_id)


async def _refuse(sup: Supervisor, request: ResumeRequest, code: str) -> None:
    """Refuse a resume request that did not take effect (``code``: blocked, invalid)."""
    requests = sup.requests
    assert requests is not None
    with contextlib.suppress(ConflictError):
        await requests.refuse_resume(request, code)
        sup._refused.add(request.run_id)


def resume_verdict(request: ResumeRequest, run: Run) -> str:
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
