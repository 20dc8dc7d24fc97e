"""Leases: named, time-limited ownership with strictly increasing epochs.

`acquire(name, ttl=...)` grants a `Lease` when nobody holds the name (or the
holder's TTL has run out) and raises `LeaseHeldError` otherwise. Each grant of
a name has a strictly greater epoch than every earlier grant of that name.

While held, the lease renews itself every ``ttl / 3`` seconds in the
background. Its *lost* signal fires exactly once, with a reason:

* ``"released"`` - `Lease.release` was called (idempotent; a release can only
  ever free the grant it belongs to, never a later holder's);
* ``"expired"`` - a renewal could not prove ownership before the TTL ran out;
* ``"taken over"`` - another holder was granted the name (after our expiry);
* ``"closed"`` - the store was closed (its leases are freed on the way out);
* ``"broken"`` - a renewal found the store broken (`StoreBrokenError`: its
  files changed under it, so it refuses writes); nothing can be proven any more.

A lease alone is a liveness hint: a holder whose process stalls past its TTL
may still believe it holds the lease for a moment. Writes that must never land
after the grant ended carry ``fence=lease.fence``, which the backend checks in
the write's own transaction (see `fence`).

Anyone can read a name's `LeaseStatus` without holding it (`Leaser.status`): the
latest grant's epoch, whether it is current, and until when it runs (or since when it
has not). Holder tokens are never revealed: they are what proves a grant.

Backends supply four small operations (`LeaseBackend`); renewal, the lost signal and
release bookkeeping live here once for all of them.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Literal, Protocol

from ..observability import metrics
from .errors import FencedWriteError, StoreBrokenError, StoreClosedError
from .fence import Fence
from .names import validate_name

__all__ = [
    "Lease",
    "LeaseBackend",
    "LeaseStatus",
    "Leaser",
    "LostReason",
    "RenewStatus",
    "check_ttl",
]

log = logging.getLogger(__name__)

LostReason = Literal["released", "expired", "taken over", "closed", "broken"]
RenewStatus = Literal["renewed", "expired", "taken over"]

MAX_TTL = 3600.0


def check_ttl(ttl: object) -> float:
    if not isinstance(ttl, int | float) or isinstance(ttl, bool):
        raise TypeError(f"ttl must be a number of seconds, not {type(ttl).__name__}")
    if not 0.05 <= ttl <= MAX_TTL:
        raise ValueError(f"ttl must be between 0.05 and {MAX_TTL} seconds, not {ttl}")
    return float(ttl)


@dataclass(frozen=True, slots=True)
class LeaseStatus:
    """What can be read about a lease without holding it (on the backend's clock).

    ``epoch`` is the latest grant's (0: never granted). While ``held``, ``until`` is when
    the grant runs out unless its holder renews it; otherwise it is when the last grant
    ended (released, or its TTL ran out), or None if that is unknown (never granted, or
    released by an older version that did not record the moment)."""

    epoch: int
    held: bool
    until: datetime | None


class LeaseBackend(Protocol):
    """What a storage backend implements; times are the backend's own clock."""

    async def try_acquire(self, name: str, holder: str, ttl: float) -> int:
        """Grant ``name`` to ``holder`` and return the new epoch, or raise `LeaseHeldError`."""
        ...

    async def renew(self, name: str, epoch: int, holder: str, ttl: float) -> RenewStatus:
        """Extend the grant if it is still ours and unexpired."""
        ...

    async def release(self, name: str, epoch: int, holder: str) -> None:
        """Free the grant if it is still ours; keep the epoch counter and record when."""
        ...

    async def status(self, name: str) -> LeaseStatus:
        """Read the name's latest grant without changing anything."""
        ...


class Lease:
    """One grant of a named lease. Create through `Leaser.acquire`."""

    def __init__(
        self, backend: LeaseBackend, name: str, epoch: int, holder: str, ttl: float
    ) -> None:
        self.name = name
        self.epoch = epoch
        self.ttl = ttl
        self._backend = backend
        self._holder = holder
        self._lost_reason: LostReason | None = None
        self._lost_event = asyncio.Event()
        self._callbacks: list[Callable[[LostReason], object]] = []
        self._proven_until = time.monotonic() + ttl
        self._renewer: asyncio.Task[None] | None = None

    def __repr__(self) -> str:
        state = self._lost_reason or "held"
        return f"<Lease {self.name!r} epoch={self.epoch} {state}>"

    @property
    def fence(self) -> Fence:
        """This grant as a fence for writes (see `fence`)."""
        return Fence(self.name, self.epoch)

    @property
    def lost(self) -> bool:
        return self._lost_reason is not None

    @property
    def lost_reason(self) -> LostReason | None:
        return self._lost_reason

    async def wait_lost(self) -> LostReason:
        await self._lost_event.wait()
        assert self._lost_reason is not None
        return self._lost_reason

    async def wait_proven(self) -> bool:
        """True at once while the last renewal still proves the grant (it was sent less
        than a TTL ago by the monotonic clock, so the backend cannot have expired it yet);
        otherwise wait for the next renewal: True if it renewed, False once the lease is
        lost. A holder that was stalled (SIGSTOP, a blocked loop) learns here, before it
        acts, whether it still holds the lease."""
        while not self.lost:
            if time.monotonic() < self._proven_until:
                return True
            await asyncio.sleep(min(0.01, self.ttl / 30))
        return False

    def on_lost(self, callback: Callable[[LostReason], object]) -> None:
        """Call ``callback(reason)`` once when the lease is lost (now, if it already is)."""
        if self._lost_reason is not None:
            _call_quietly(callback, self._lost_reason)
        else:
            self._callbacks.append(callback)

    def refused(self, error: FencedWriteError) -> None:
        """A write carrying this grant's fence was refused: the grant has ended, though no
        renewal may have said so yet (a stalled holder's first write can learn it before
        its renewal does). Lost now - "taken over" if the name was granted again since,
        else "expired" - so a `release` that follows is not mistaken for letting go."""
        if (error.lease, error.epoch) == (self.name, self.epoch):
            self._mark_lost("taken over" if error.current != self.epoch else "expired")

    async def release(self) -> None:
        """Give the lease up. Idempotent; safe after loss; never frees a later holder."""
        self._mark_lost("released")
        await self._stop_renewing()
        if self._lost_reason == "closed":
            return  # closing the store already freed it
        # If the store closed after the loss, there is nothing left to free.
        with contextlib.suppress(StoreClosedError):
            await self._backend.release(self.name, self.epoch, self._holder)

    def _start(self) -> None:
        self._renewer = asyncio.get_running_loop().create_task(
            self._renew_loop(), name=f"lease-renew:{self.name}"
        )

    async def _stop_renewing(self) -> None:
        task, self._renewer = self._renewer, None
        if task is not None and task is not asyncio.current_task():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    def _mark_lost(self, reason: LostReason) -> None:
        if self._lost_reason is not None:
            return
        self._lost_reason = reason
        if reason not in ("released", "closed"):  # let go of, not lost
            metrics.lease_lost(reason)
        self._lost_event.set()
        callbacks, self._callbacks = self._callbacks, []
        for callback in callbacks:
            _call_quietly(callback, reason)

    async def _renew_loop(self) -> None:
        interval = self.ttl / 3
        while not self.lost:
            await asyncio.sleep(interval)
            if self.lost:
                return
            started = time.monotonic()
            try:
                status = await self._backend.renew(self.name, self.epoch, self._holder, self.ttl)
            except asyncio.CancelledError:
                raise
            except StoreBrokenError as exc:
                log.error("lease %r lost: %s", self.name, exc)
                self._mark_lost("broken")
                return
            except Exception:
                # A transient failure: keep trying until the last proven expiry passes.
                log.warning("renewing lease %r failed", self.name, exc_info=True)
                if time.monotonic() >= self._proven_until:
                    self._mark_lost("expired")
                continue
            if status == "renewed":
                self._proven_until = started + self.ttl
            else:
                self._mark_lost(status)


def _call_quietly(callback: Callable[[LostReason], object], reason: LostReason) -> None:
    try:
        callback(reason)
    except Exception:
        log.exception("lease lost callback failed")


class Leaser:
    """Grants leases over a backend and remembers them so closing the store can end them."""

    def __init__(self, backend: LeaseBackend, default_ttl: float = 15.0) -> None:
        self._backend = backend
        self._default_ttl = check_ttl(default_ttl)
        self._live: set[Lease] = set()

    async def acquire(self, name: str, *, ttl: float | None = None) -> Lease:
        validate_name(name)
        ttl = self._default_ttl if ttl is None else check_ttl(ttl)
        holder = secrets.token_hex(16)
        epoch = await self._backend.try_acquire(name, holder, ttl)
        lease = Lease(self._backend, name, epoch, holder, ttl)
        metrics.lease_acquired()
        self._live.add(lease)
        lease.on_lost(lambda _reason: self._live.discard(lease))
        lease._start()
        return lease

    async def status(self, name: str) -> LeaseStatus:
        """Who-holds-it, read only: the latest grant's epoch and whether (and until when)
        it is current, or since when it is not."""
        validate_name(name)
        return await self._backend.status(name)

    async def close(self) -> None:
        """Mark every live lease lost (``"closed"``) and free it so nobody waits out a TTL."""
        for lease in list(self._live):
            lease._mark_lost("closed")
            await lease._stop_renewing()
            with contextlib.suppress(Exception):
                await self._backend.release(lease.name, lease.epoch, lease._holder)
