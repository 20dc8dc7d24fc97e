"""Background workers, per-run controllers and the lease's fence on every write.

Every operation on a run (start, adoption, resume, cancel, history) holds that run's lock
(its `Controller`) for its whole duration, so 16 concurrent resumes of one interrupted run
execute exactly one; the others see it is no longer interrupted and get `ConflictError`.
A Flow segment runs as the run's cancellable execution (`execute`), so `cancel`, lease
loss and shutdown reach it at once. Workers run in at most ``max_workers`` slots, each
write fenced by the session lease (`owner_writes`).
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import logging
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Concatenate, ParamSpec, TypeVar

from ....observability import logs, metrics
from ....storage import fencing
from ...errors import SupervisorClosedError

if TYPE_CHECKING:
    from .owner import Supervisor

log = logging.getLogger(__name__)


T = TypeVar("T")
P = ParamSpec("P")


def owner_writes(
    method: Callable[Concatenate[Supervisor, P], Coroutine[Any, Any, T]],
) -> Callable[Concatenate[Supervisor, P], Coroutine[Any, Any, T]]:
    """Run ``method`` with the session lease's fence on every write it (and every task it
    starts) makes, so a stale owner's first write fails inside its own transaction."""

    @functools.wraps(method)
    async def fenced(sup: Supervisor, /, *args: P.args, **kwargs: P.kwargs) -> T:
        lease = sup._lease
        with fencing(None if lease is None else lease.fence, on_refused=sup._on_fenced):
            return await method(sup, *args, **kwargs)

    return fenced


@dataclass(eq=False)
class Controller:
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    execution: asyncio.Task[Any] | None = None
    cancels: int = 0  # cancellations waiting for the lock


def spawn(
    sup: Supervisor,
    work: Coroutine[Any, Any, None],
    *,
    run_id: str | None = None,
    slot: bool = True,
) -> None:
    """Run ``work`` as a background worker (in a slot of ``max_workers`` unless
    ``slot`` is false); while it is queued or running, ``run_id`` counts as busy."""
    # the task's log records name the run it works on (`flowledger.observability.logs`)
    with logs.run_context(run_id):
        task = asyncio.ensure_future(in_slot(sup, work) if slot else contained(sup, work))
    sup._workers.add(task)
    sup._idle.clear()
    if run_id is not None:
        sup._queued[run_id] = sup._queued.get(run_id, 0) + 1

    def done(task: asyncio.Task[Any]) -> None:
        work.close()  # a worker cancelled before it began never awaited its work
        if run_id is not None:
            left = sup._queued.get(run_id, 1) - 1
            if left > 0:
                sup._queued[run_id] = left
            else:
                sup._queued.pop(run_id, None)
        worker_done(sup, task)

    task.add_done_callback(done)


def busy(sup: Supervisor, run_id: str) -> bool:
    """A worker for the run is queued or running, or an operation holds its lock."""
    if sup._queued.get(run_id, 0) > 0:
        return True
    controller = sup._controllers.get(run_id)
    return controller is not None and controller.lock.locked()


@owner_writes
async def contained(sup: Supervisor, work: Coroutine[Any, Any, None]) -> None:
    try:
        await work
    except asyncio.CancelledError:
        pass
    except Exception as exc:
        log.warning("session %s: request handler failed: %s", sup._session_id, exc)


@owner_writes
async def in_slot(sup: Supervisor, work: Coroutine[Any, Any, None]) -> None:
    try:
        async with sup._slots:
            await work
    except asyncio.CancelledError:
        pass  # ownership lost or shutting down: the next owner carries on
    except Exception as exc:
        log.warning("session %s: workflow worker failed: %s", sup._session_id, exc)
        if sup._last_error is None:
            sup._last_error = exc


def worker_done(sup: Supervisor, task: asyncio.Task[Any]) -> None:
    sup._workers.discard(task)
    if not sup._workers:
        sup._idle.set()


def controller_for(sup: Supervisor, run_id: str) -> Controller:
    if sup._state == "closed":
        raise SupervisorClosedError()
    if sup._state != "active" or sup._ownership_lost():
        raise RuntimeError("supervisor is not accepting work")
    controller = sup._controllers.get(run_id)
    if controller is None:
        controller = sup._controllers[run_id] = Controller()
    return controller


def forget_if_idle(sup: Supervisor, run_id: str) -> None:
    controller = sup._controllers.get(run_id)
    if controller is not None and not controller.lock.locked():
        del sup._controllers[run_id]
        sup._projections.forget(run_id)


async def execute(sup: Supervisor, controller: Controller, work: Awaitable[T]) -> T | None:
    """Run one Flow segment as the run's cancellable execution; None if it was cancelled
    (by `cancel`, lease loss or shutdown) rather than finished, or not begun because a
    cancellation is waiting."""
    if controller.cancels or sup._boundary.requested:
        if inspect.iscoroutine(work):
            work.close()
        return None
    task: asyncio.Task[T] = asyncio.ensure_future(work)
    controller.execution = task
    counted = metrics.enabled()  # a gauge raised only while on is lowered only then
    if counted:
        metrics.run_executing(1)
    try:
        return await asyncio.shield(task)
    except asyncio.CancelledError:
        current = asyncio.current_task()
        if current is not None and current.cancelling():
            task.cancel()
            raise
        return None
    finally:
        if counted:
            metrics.run_executing(-1)
        controller.execution = None
