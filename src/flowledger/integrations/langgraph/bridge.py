"""`LoopBridge`: every call of the saver runs on one event loop, its *home*.

A flowledger store may be bound to the loop that opened it (PostgreSQL is), and the
saver's caches and per-log locks are plain asyncio objects, so all of its work runs on
the home loop. A home loop is one of two kinds:

* **borrowed** (`here`): the running loop of ``async with FlowledgerSaver.from_url(...)``
  or of ``FlowledgerSaver(store)``. An ``a...`` method awaited on it runs directly;
  awaited on another loop it is handed over (`asyncio.run_coroutine_threadsafe`); a
  synchronous method called from another thread hands its coroutine over and blocks.
* **driven** (`driven_loop`): a private loop for ``with FlowledgerSaver.from_url(...)``
  in synchronous code. It runs only inside calls: a synchronous method runs its
  coroutine on it *in the calling thread* (``run_until_complete``), so a ``graph.invoke``
  step costs no hand-over between threads. A call made while another thread drives the
  loop hands its coroutine to that loop and waits (`_drive`), so concurrent calls run
  together there; a call that may wait for company (``defer``: a task's writes) is left
  for the next thread that drives the loop (the step's checkpoint's), for a moment. An
  ``a...`` method awaited on another loop runs in a worker thread that drives it.
  Background work of the store (a pool's upkeep) advances whenever a call drives the
  loop; the single-writer leases, which must renew on time, live on a loop of their own
  (`start`).

On a SQLite store the synchronous ``put`` and ``put_writes`` take the host role without
running the loop at all when nothing else is under way (`try_host`, `lane`).

A synchronous method called *on* the home loop (from a coroutine running on it) would wait
for itself forever, so it raises `SaverUsageError` instead (as LangGraph's async savers
do).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Iterator
from typing import Any, Generic, TypeVar

from .errors import SaverUsageError

__all__ = ["LoopBridge", "Outcome"]

T = TypeVar("T")


class LoopBridge:
    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        thread: threading.Thread | None = None,
        *,
        driven: bool = False,
    ):
        self.loop = loop
        self.driven = driven
        self._thread = thread
        self._turn = threading.Lock()  # held by the thread that drives a driven loop
        self._mutex = threading.Lock()  # guards the host role and the count of guests
        self._hosting = False
        self._guests = 0
        self._waiting: list[tuple[Callable[[], Awaitable[Any]], Outcome[Any]]] = []
        self._no_guests: asyncio.Event | None = None

    @classmethod
    def here(cls) -> LoopBridge:
        """The running loop as home (called from a coroutine)."""
        return cls(asyncio.get_running_loop())

    @classmethod
    def driven_loop(cls) -> LoopBridge:
        """A private home loop, driven by the calls themselves."""
        return cls(asyncio.new_event_loop(), driven=True)

    @classmethod
    def start(cls) -> LoopBridge:
        """A new home loop running on a daemon thread (stopped by `stop`)."""
        loop = asyncio.new_event_loop()
        ready = threading.Event()

        def run() -> None:
            asyncio.set_event_loop(loop)
            loop.call_soon(ready.set)
            loop.run_forever()

        thread = threading.Thread(target=run, name="flowledger-langgraph", daemon=True)
        thread.start()
        ready.wait()
        return cls(loop, thread)

    def on_home(self) -> bool:
        # The running loop or None, without the exception `get_running_loop` raises in
        # synchronous code: every synchronous call asks twice.
        return asyncio._get_running_loop() is self.loop

    async def run(self, make: Callable[[], Awaitable[T]]) -> T:
        """Await ``make()`` on the home loop, from any loop."""
        if self.on_home():
            return await make()
        if self.driven:
            return await asyncio.to_thread(self._drive, make)
        future = asyncio.run_coroutine_threadsafe(_wrap(make), self.loop)
        return await asyncio.wrap_future(future)

    def call(self, make: Callable[[], Awaitable[T]], what: str, *, defer: float = 0.0) -> T:
        """Run ``make()`` on the home loop and wait for it, from synchronous code.

        ``defer`` (seconds; a driven loop only) is for work that may wait for company (a
        task's writes, which the step's checkpoint will join): when no thread drives the
        loop, the call is left for the next thread that does, for up to ``defer``, instead
        of driving it itself, so the thread on LangGraph's critical path (the
        checkpoint's) drives both and no thread hands work over to another."""
        if self.on_home():
            raise SaverUsageError(
                f"{what} is synchronous and was called on the event loop that runs the saver; "
                f"await a{what} instead (or call {what} from another thread)"
            )
        if self.loop.is_closed():
            raise SaverUsageError(f"{what}: the saver is closed")
        if not self.driven:
            return asyncio.run_coroutine_threadsafe(_wrap(make), self.loop).result()
        if _loop_running_here():
            # This thread runs another event loop, which a driven loop cannot run inside:
            # drive it from a worker thread instead.
            box: list[Any] = []

            def drive() -> None:
                try:
                    box.append((True, self._drive(make)))
                except BaseException as exc:
                    box.append((False, exc))

            worker = threading.Thread(target=drive, name="flowledger-langgraph-call")
            worker.start()
            worker.join()
            ok, value = box[0]
            if not ok:
                raise value
            return value  # type: ignore[no-any-return]
        if defer > 0:
            return self._deferred(make, defer)
        return self._drive(make)

    def _deferred(self, make: Callable[[], Awaitable[T]], wait: float) -> T:
        done: Outcome[T] = Outcome()
        item = (make, done)
        with self._mutex:
            if self.loop.is_closed():
                raise SaverUsageError("the saver is closed")
            queued = not self._hosting
            if queued:
                self._waiting.append(item)
            else:  # a thread drives the loop now: join it at once
                self._guests += 1
                self.loop.call_soon_threadsafe(self._admit, make, done)
        if not queued:
            return done.result()
        try:
            return done.result(timeout=wait)
        except TimeoutError:
            pass
        with self._mutex:
            mine = item in self._waiting
            if mine:
                self._waiting.remove(item)
        if mine:  # nobody came: drive it here
            return self._drive(make)
        return done.result()  # a thread that came drives it

    def _drive(self, make: Callable[[], Awaitable[T]]) -> T:
        """Run ``make()`` on the driven loop from this thread. The first caller drives
        the loop (the *host*); a caller arriving meanwhile is a *guest*: its coroutine is
        handed to the loop the host drives, and runs alongside the host's (so the saver
        may, say, commit both in one transaction), and the host keeps driving until every
        guest is done."""
        with self._mutex:
            if self.loop.is_closed():
                raise SaverUsageError("the saver is closed")
            host = not self._hosting
            if host:
                self._hosting = True
                waiting, self._waiting = self._waiting, []
                self._guests += len(waiting)
            else:
                self._guests += 1
                done: Outcome[T] = Outcome()
                self.loop.call_soon_threadsafe(self._admit, make, done)
        if not host:
            return done.result()
        with self._turn:
            if self.loop.is_closed():  # stopped while this thread waited for its turn
                with self._mutex:
                    self._hosting = False
                for _, left in waiting:
                    left.set_exception(SaverUsageError("the saver is closed"))
                raise SaverUsageError("the saver is closed")
            # Calls left for a driver start first (their tasks are created before this
            # call's own), so this call finds their work under way and can join it.
            for waiting_make, waiting_done in waiting:
                self._admit(waiting_make, waiting_done)
            try:
                return self.loop.run_until_complete(make())
            finally:
                self._serve_guests()

    def try_host(self) -> bool:
        """Take the host role of a driven loop without running it, so this thread may
        work on the saver's state synchronously (`lane`): True when this thread runs no
        event loop, no thread drives the loop and no deferred call waits for a driver.
        `end_host` must follow. While this thread is host no coroutine of the saver runs
        (the loop runs only when its host drives it); calls arriving meanwhile become
        guests, and `end_host` serves them. The host may drive the loop itself
        (``self.loop.run_until_complete``) for work that needs it."""
        if not self.driven or _loop_running_here():
            return False
        with self._mutex:
            if self._hosting or self._waiting or self.loop.is_closed():
                return False
            self._hosting = True
        self._turn.acquire()
        if self.loop.is_closed():  # stopped while this thread waited for its turn
            self._turn.release()
            with self._mutex:
                self._hosting = False
            raise SaverUsageError("the saver is closed")
        return True

    def end_host(self) -> None:
        """Give up the host role `try_host` took, once the guests that came are served."""
        try:
            self._serve_guests()
        finally:
            self._turn.release()

    def _admit(self, make: Callable[[], Awaitable[T]], done: Outcome[T]) -> None:
        """On the loop: run a guest's coroutine, and tell its thread the outcome."""
        task = self.loop.create_task(_wrap(make))

        def finish(task: asyncio.Task[T]) -> None:
            if task.cancelled():
                done.set_exception(concurrent.futures.CancelledError())
            else:
                error = task.exception()
                if error is not None:
                    done.set_exception(error)
                else:
                    done.set_result(task.result())
            with self._mutex:
                self._guests -= 1
                idle = self._guests == 0
            if idle and self._no_guests is not None:
                self._no_guests.set()

        task.add_done_callback(finish)

    def _serve_guests(self) -> None:
        """Host: drive the loop until no guest is left, then give up the host role."""
        while True:
            with self._mutex:
                if self._guests == 0:
                    self._hosting = False
                    return
            self.loop.run_until_complete(self._guests_done())

    async def _guests_done(self) -> None:
        if self._no_guests is None:
            self._no_guests = asyncio.Event()
        while True:
            with self._mutex:
                if self._guests == 0:
                    return
                self._no_guests.clear()
            await self._no_guests.wait()

    async def iterate(self, make: Callable[[], AsyncIterator[T]]) -> AsyncIterator[T]:
        """Items of ``make()`` (an async iterator that runs on the home loop), from any loop."""
        if self.on_home():
            async for item in make():
                yield item
            return
        iterator = make()
        try:
            while True:
                done, item = await self.run(lambda: _next(iterator))
                if done:
                    return
                yield item
        finally:
            await self.run(lambda: _close(iterator))

    def iterate_sync(self, make: Callable[[], AsyncIterator[T]], what: str) -> Iterator[T]:
        if self.on_home():
            raise SaverUsageError(
                f"{what} is synchronous and was called on the event loop that runs the saver; "
                f"use a{what} instead"
            )
        iterator = make()
        try:
            while True:
                done, item = self.call(lambda: _next(iterator), what)
                if done:
                    return
                yield item
        finally:
            if not self.loop.is_closed():
                self.call(lambda: _close(iterator), what)

    def stop(self) -> None:
        """Stop a loop this bridge made (after the saver closed); a borrowed one stays."""
        if self.driven:
            with self._turn:  # no call drives it now
                if not self.loop.is_closed():
                    self.loop.run_until_complete(self.loop.shutdown_asyncgens())
                    self.loop.close()
            return
        if self._thread is None:
            return
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join()
        self.loop.close()


class Outcome(Generic[T]):
    """What a call run by another thread came to, and the wait for it: a bare lock held
    until the outcome is set (cheaper than a `concurrent.futures.Future`, whose condition
    variable is Python code, on every step's path). Set once."""

    __slots__ = ("_error", "_ready", "_value")

    def __init__(self) -> None:
        self._ready = threading.Lock()
        self._ready.acquire()
        self._value: T | None = None
        self._error: BaseException | None = None

    def set_result(self, value: T) -> None:
        self._value = value
        self._ready.release()

    def set_exception(self, error: BaseException) -> None:
        self._error = error
        self._ready.release()

    def result(self, timeout: float | None = None) -> T:
        """The outcome (raised if an exception); `TimeoutError` if not set in time."""
        if not self._ready.acquire(timeout=-1 if timeout is None else timeout):
            raise TimeoutError
        self._ready.release()  # set for good: a later wait returns at once
        if self._error is not None:
            raise self._error
        return self._value  # type: ignore[return-value]


def _loop_running_here() -> bool:
    return asyncio._get_running_loop() is not None


async def _wrap(make: Callable[[], Awaitable[T]]) -> T:
    return await make()


async def _next(iterator: AsyncIterator[Any]) -> tuple[bool, Any]:
    try:
        return False, await iterator.__anext__()
    except StopAsyncIteration:
        return True, None


async def _close(iterator: AsyncIterator[Any]) -> None:
    close: Callable[[], Coroutine[Any, Any, None]] | None = getattr(iterator, "aclose", None)
    if close is not None:
        await close()
