"""Wake-ups: a writer of new work tells the processes waiting for work, so they need not poll.

A *channel* is a short name (1 to 48 characters of ``[a-z0-9_.:-]``, starting with a
letter or digit). Two ways to announce work on channels:

* ``with waking(*channels):`` - every KV ``put`` and ``write_many`` made in that context
  (and the tasks it creates) wakes the channels **when it commits**, and only if it wrote
  something: on PostgreSQL a ``NOTIFY`` runs inside the write's own transaction (so a
  write that is rolled back, refused by its compare-and-swap or its fence, announces
  nothing); the in-process backends wake after the write returned. Other writes
  (deletes, blobs, appends) never wake.
* ``await store.wakeups.notify(*channels)`` - announce now, outside any write (work that
  became due by time rather than by a write, for one).

``await store.wakeups.listen(channels)`` returns a `Listener`; ``await
listener.wait(seconds)`` returns True as soon as one of its channels was woken since the
previous `wait` returned (a wake-up while nobody waits is kept, never lost; several
collapse into one), or False after ``seconds``. A wake-up says only "look now":
the waiter re-reads what it cares about, so a spurious one costs a read and a missed one
costs the caller's fallback poll - which is why every waiter keeps one.
``listener.live`` says whether wake-ups are being delivered at all; while it is False
the waiter should poll at its fast interval.

Delivery per backend (``Wakeups.delivery``):

* ``memory://`` and SQLite: in-process only (`LocalWakeups`). Listeners of the same
  memory store, or of any store open on the same SQLite file in this process, are woken.
  Another *process* on the same SQLite file is never woken: it finds the work on its
  fallback poll.
* PostgreSQL: ``LISTEN``/``NOTIFY`` across processes and machines (see
  ``storage/postgres/wakeups.py``).
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import re
import threading
from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator
from typing import Final

from .errors import StorageError

__all__ = [
    "InvalidChannelError",
    "Listener",
    "LocalWakeups",
    "Wakeups",
    "check_channels",
    "pending_wakes",
    "waking",
]

_CHANNEL: Final = re.compile(r"[a-z0-9][a-z0-9_.:-]{0,47}")


class InvalidChannelError(StorageError, ValueError):
    """A wake-up channel name that is not 1-48 characters of ``[a-z0-9_.:-]``."""

    def __init__(self, channel: object) -> None:
        self.channel = channel
        super().__init__(
            f"wake-up channel must be 1-48 characters of [a-z0-9_.:-] starting with a "
            f"letter or digit, not {channel!r}"
        )


def check_channels(channels: Iterable[str]) -> tuple[str, ...]:
    """The channels, validated and de-duplicated (in order); `InvalidChannelError` else."""
    if isinstance(channels, str):
        raise InvalidChannelError(channels)  # a bare string would be taken letter by letter
    seen: dict[str, None] = {}
    for channel in channels:
        if not isinstance(channel, str) or not _CHANNEL.fullmatch(channel):
            raise InvalidChannelError(channel)
        seen[channel] = None
    return tuple(seen)


_waking: contextvars.ContextVar[tuple[str, ...]] = contextvars.ContextVar(
    "flowledger_waking", default=()
)


@contextlib.contextmanager
def waking(*channels: str) -> Iterator[None]:
    """Make the KV writes of this context wake ``channels`` when they commit (see the
    module documentation). Nested contexts add their channels."""
    checked = check_channels(channels)
    token = _waking.set(check_channels((*_waking.get(), *checked)))
    try:
        yield
    finally:
        _waking.reset(token)


def pending_wakes() -> tuple[str, ...]:
    """The channels a KV write in this context wakes on commit (backends call this)."""
    return _waking.get()


class Listener:
    """Waits for wake-ups on a fixed set of channels (see the module documentation)."""

    def __init__(self, channels: tuple[str, ...]) -> None:
        self.channels = channels
        self._loop = asyncio.get_running_loop()
        self._event = asyncio.Event()  # the one `wait`er's
        self._changed = asyncio.Event()  # every `changed` waiter's; replaced on each wake
        self._closed = False
        self.wakes = 0  # wake-ups received (several may collapse into one `wait`)

    @property
    def live(self) -> bool:
        """Whether wake-ups are delivered now (False: poll at the fast interval)."""
        return not self._closed

    def wake(self) -> None:
        """Wake the waiters; callable from any thread."""
        if self._loop.is_closed():
            return
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is self._loop:
            self._woken()
        else:
            self._loop.call_soon_threadsafe(self._woken)

    def _woken(self) -> None:
        self.wakes += 1
        self._event.set()
        changed, self._changed = self._changed, asyncio.Event()
        changed.set()

    async def changed(self, since: int, seconds: float) -> bool:
        """For several waiters at once: True as soon as `wakes` exceeds ``since`` (read
        it before looking at what a wake-up would announce), False after ``seconds``.
        Does not consume anything `wait` returns."""
        if self.wakes > since:
            return True
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._changed.wait(), max(0.0, seconds))
        return self.wakes > since

    async def wait(self, seconds: float) -> bool:
        """True once woken since the last `wait` returned, False after ``seconds``."""
        if not self._event.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._event.wait(), max(0.0, seconds))
        woken = self._event.is_set()
        self._event.clear()
        return woken

    async def close(self) -> None:
        """Stop listening. Idempotent."""
        self._closed = True

    async def __aenter__(self) -> Listener:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()


class Wakeups(ABC):
    """A store's wake-ups: `notify` now, `listen` for them. Writes made inside
    `waking` wake on commit (each backend's KV does it)."""

    delivery: str = ""  # who is woken, in words (for logs and status)
    # Whether a write in another process wakes this store's listeners (PostgreSQL); if
    # not (SQLite), a waiter's fallback poll is how it learns of other processes' work.
    across_processes: bool = False

    @abstractmethod
    async def notify(self, *channels: str) -> None:
        """Wake every listener of ``channels`` now."""

    @abstractmethod
    async def listen(self, channels: Iterable[str]) -> Listener:
        """A started `Listener` of ``channels``; close it when done."""

    @abstractmethod
    async def close(self) -> None:
        """Close every listener still open (the store is closing)."""


class _Hub:
    """The process-wide table of in-process listeners, keyed by what they listen to."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._listeners: dict[object, set[_LocalListener]] = {}

    def add(self, key: object, listener: _LocalListener) -> None:
        with self._lock:
            self._listeners.setdefault(key, set()).add(listener)

    def remove(self, key: object, listener: _LocalListener) -> None:
        with self._lock:
            group = self._listeners.get(key)
            if group is not None:
                group.discard(listener)
                if not group:
                    del self._listeners[key]

    def notify(self, key: object, channels: tuple[str, ...]) -> None:
        with self._lock:
            group = list(self._listeners.get(key, ()))
        for listener in group:
            if not listener.closed and any(c in listener.channels for c in channels):
                listener.wake()


_HUB: Final = _Hub()


class _LocalListener(Listener):
    def __init__(
        self, key: object, channels: tuple[str, ...], open_set: set[_LocalListener]
    ) -> None:
        super().__init__(channels)
        self._key = key
        self._open_set = open_set
        self.closed = False
        open_set.add(self)
        _HUB.add(key, self)

    async def close(self) -> None:
        self.closed = True
        _HUB.remove(self._key, self)
        self._open_set.discard(self)
        await super().close()


class LocalWakeups(Wakeups):
    """In-process wake-ups among the stores of one ``key`` (a memory store's identity, an
    SQLite file's real path); other processes are not woken."""

    def __init__(self, key: object, delivery: str = "in-process only") -> None:
        self._key = key
        self.delivery = delivery
        self._open: set[_LocalListener] = set()

    async def notify(self, *channels: str) -> None:
        _HUB.notify(self._key, check_channels(channels))

    def wake_committed(self, channels: tuple[str, ...]) -> None:
        """What a backend calls after a write made inside `waking` committed."""
        if channels:
            _HUB.notify(self._key, channels)

    async def listen(self, channels: Iterable[str]) -> Listener:
        return _LocalListener(self._key, check_channels(channels), self._open)

    async def close(self) -> None:
        for listener in list(self._open):
            await listener.close()
