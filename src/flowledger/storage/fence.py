"""Fences: a write that commits only while a lease grant is still current.

A `Fence` names a lease and one grant's epoch (``Lease.fence``). Every write of the
storage contract (``KV.put``/``delete``, ``Blobs.put``/``delete``, ``Ledger.append``)
takes an optional ``fence=``; a fenced write checks, *inside its own transaction*, that
the lease is still held at that epoch and has not expired by the backend's clock (the
same clock its leases use). Otherwise it raises `FencedWriteError` and writes nothing.
On PostgreSQL the check locks the lease row (``FOR SHARE``) until the write commits, so
a takeover waits for the write and a write never lands after a takeover; on SQLite
every write transaction holds the database's write lock; the memory backend holds its
lease table's lock across the write.

This is what makes a stalled owner harmless: after its grant ran out (and whether or
not another holder took the name meanwhile), its first fenced write fails.

Owners that cannot thread a fence through every call (a checkpoint store shared by
sessions, for one) set it for a stretch of work with `fencing(fence, on_refused=...)`;
`fence_arg()` then gives the keyword argument to pass on (nothing outside such a
stretch, so wrappers of the primitives that predate fences keep working). When a
backend refuses a write carrying the current fence, it calls ``on_refused(error)``
before raising: the owner learns that it lost the grant at once, before any code
that catches the error decides what to do next.
"""

from __future__ import annotations

import contextlib
import contextvars
import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TypedDict

from ..observability import metrics
from .errors import FencedWriteError, InvalidValueError
from .names import validate_name

__all__ = [
    "Fence",
    "FenceArg",
    "check_fence",
    "current_fence",
    "fence_arg",
    "fencing",
    "refused",
]

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Fence:
    """The grant of lease ``lease`` at ``epoch``: writes carrying it land only while it is
    current."""

    lease: str
    epoch: int


def check_fence(fence: object) -> Fence | None:
    """Validate a ``fence=`` argument (shared by every backend) before anything is touched."""
    if fence is None:
        return None
    if not isinstance(fence, Fence):
        raise InvalidValueError("fence", "a Fence or None", fence)
    validate_name(fence.lease)
    epoch = fence.epoch
    if not isinstance(epoch, int) or isinstance(epoch, bool) or epoch < 1:
        raise InvalidValueError("fence epoch", "a positive int", epoch)
    return fence


@dataclass(frozen=True, slots=True)
class _Fencing:
    fence: Fence | None
    on_refused: Callable[[FencedWriteError], object] | None


_NONE: _Fencing = _Fencing(None, None)
_current: contextvars.ContextVar[_Fencing] = contextvars.ContextVar(
    "flowledger_fence", default=_NONE
)


class FenceArg(TypedDict, total=False):
    fence: Fence


def current_fence() -> Fence | None:
    """The fence set by the innermost `fencing` of this context, if any."""
    return _current.get().fence


def fence_arg() -> FenceArg:
    """``{"fence": current_fence()}`` when one is set, else ``{}``: pass it on as ``**``."""
    fence = _current.get().fence
    return {} if fence is None else {"fence": fence}


@contextlib.contextmanager
def fencing(
    fence: Fence | None, *, on_refused: Callable[[FencedWriteError], object] | None = None
) -> Iterator[None]:
    """Make ``fence`` the current fence for this context (and the tasks it creates), and
    ``on_refused`` what a refusal of a write carrying it calls."""
    token = _current.set(_Fencing(fence, on_refused))
    try:
        yield
    finally:
        _current.reset(token)


def refused(error: FencedWriteError) -> FencedWriteError:
    """Tell the current `fencing` (if ``error`` refused its fence) and return ``error``.
    Backends call it as ``raise refused(FencedWriteError(...))``."""
    metrics.fence_refused()
    current = _current.get()
    fence = current.fence
    if (
        current.on_refused is not None
        and fence is not None
        and (fence.lease, fence.epoch) == (error.lease, error.epoch)
    ):
        try:
            current.on_refused(error)
        except Exception:
            log.exception("fence refusal callback failed")
    return error
