"""`ThreadLeases`: one writer per thread (the saver's ``single_writer`` option), and
`AdminLease`: one rewrite (prune, delete, copy) of a thread at a time.

With ``single_writer``, a saver writes a thread only while it holds the thread's lease
(``<prefix>/leases/<t>``): its first write takes it, writes keep it (it renews itself
every ``ttl / 3``), and it is given back after ``idle`` seconds without a write (or by
`release`, or when the saver closes), so another process can take the thread over
between runs. Every append carries the lease's fence, checked by the store in the
append's own transaction, so a write after the lease ended (the process stalled past its
TTL and another took the thread) is refused, never stored. A second process writing the
thread while the lease is held gets `ThreadLeaseHeldError`; the saver also appends only
at the tip it last saw of the log, so a process that took the lease over after another
wrote the thread gets `ThreadConflictError` rather than forking the history from a stale
read.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import threading
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Final

from ...storage import Fence, Lease, LeaseHeldError, Store, validate_name
from .bridge import LoopBridge
from .errors import ThreadBusyError, ThreadLeaseHeldError
from .names import lease_name, segment

__all__ = ["AdminLease", "ThreadLeases"]

_ADMIN_TTL: Final = 30.0
_ADMIN_WAIT: Final = 60.0


@dataclass
class _Held:
    lease: Lease
    users: int = 0
    last_used: float = field(default_factory=time.monotonic)
    idler: asyncio.Task[None] | None = None


class ThreadLeases:
    """The single-writer leases a saver holds. They live on ``home`` (a loop that runs
    all the time, so they renew on time); writes on another loop take a held lease's
    fence without a hand-over, the counts guarded by a thread lock."""

    def __init__(
        self, store: Store, prefix: str, *, ttl: float, idle: float, home: LoopBridge
    ) -> None:
        self.store = store
        self.prefix = prefix
        self.ttl = ttl
        self.idle = idle
        self.home = home
        self._held: dict[str, _Held] = {}
        self._guard = threading.Lock()
        self._taking: dict[str, asyncio.Lock] = {}

    @contextlib.asynccontextmanager
    async def hold(self, thread_id: str) -> AsyncIterator[Fence]:
        """The fence of this saver's lease of the thread (taken if needed) for one write."""
        held = self._use(thread_id)
        if held is None:
            held = await self.home.run(functools.partial(self._take, thread_id))
        try:
            yield held.lease.fence
        finally:
            with self._guard:
                held.users -= 1
                held.last_used = time.monotonic()

    def _use(self, thread_id: str) -> _Held | None:
        with self._guard:
            held = self._held.get(thread_id)
            if held is None or held.lease.lost:
                return None
            held.users += 1
            return held

    async def _take(self, thread_id: str) -> _Held:
        """On the home loop: the held lease of the thread, or a new grant."""
        lock = self._taking.setdefault(thread_id, asyncio.Lock())
        async with lock:
            held = self._use(thread_id)
            if held is not None:
                return held
            try:
                lease = await self.store.leases.acquire(
                    lease_name(self.prefix, thread_id), ttl=self.ttl
                )
            except LeaseHeldError:
                raise ThreadLeaseHeldError(thread_id) from None
            held = _Held(lease, users=1)
            with self._guard:
                self._held[thread_id] = held
            held.idler = asyncio.get_running_loop().create_task(self._idle(thread_id, held))
            return held

    async def _idle(self, thread_id: str, held: _Held) -> None:
        while not held.lease.lost:
            with self._guard:
                wait = held.last_used + self.idle - time.monotonic()
                busy = held.users > 0
                if not busy and wait <= 0:
                    if self._held.get(thread_id) is held:
                        del self._held[thread_id]
                    break
            await asyncio.sleep(max(wait, self.idle / 10))
        with self._guard:
            if self._held.get(thread_id) is held:
                del self._held[thread_id]
        await held.lease.release()

    async def release(self, thread_id: str) -> None:
        """Give the thread's lease back now."""
        await self.home.run(functools.partial(self._release, thread_id))

    async def _release(self, thread_id: str) -> None:
        with self._guard:
            held = self._held.pop(thread_id, None)
        if held is not None:
            if held.idler is not None and held.idler is not asyncio.current_task():
                held.idler.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await held.idler
            await held.lease.release()

    async def close(self) -> None:
        for thread_id in list(self._held):
            await self.release(thread_id)


class AdminLease:
    """Serialises the rewrites of one thread across processes (waiting up to a minute)."""

    def __init__(self, store: Store, prefix: str) -> None:
        self.store = store
        self.prefix = prefix

    @contextlib.asynccontextmanager
    async def hold(self, thread_id: str) -> AsyncIterator[Lease]:
        name = validate_name(f"{self.prefix}/admin/{segment(thread_id)}")
        deadline = time.monotonic() + _ADMIN_WAIT
        while True:
            try:
                lease = await self.store.leases.acquire(name, ttl=_ADMIN_TTL)
                break
            except LeaseHeldError:
                if time.monotonic() > deadline:
                    raise ThreadBusyError(thread_id) from None
                await asyncio.sleep(0.05)
        try:
            yield lease
        finally:
            await lease.release()
