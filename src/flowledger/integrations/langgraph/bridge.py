"""`LoopBridge`: every call of the saver runs on one event loop, its *home*.

A flowledger store may be bound to the loop that opened it (PostgreSQL is), and the
saver's caches and per-log locks are plain asyncio objects, so all of its work runs on
the home loop:

* an ``a...`` method awaited on the home loop runs directly;
* awaited on another loop (another thread's ``asyncio.run``), it is handed to the home
  loop and awaited there (`asyncio.run_coroutine_threadsafe`);
* a synchronous method (``graph.invoke`` calls them) hands its coroutine to the home loop
  and blocks until it is done; called *on* the home loop it would wait for itself
  forever, so it raises `SaverUsageError` instead (as LangGraph's async savers do).

`LoopBridge.start` runs a home loop on a daemon thread of its own, for savers opened
from synchronous code (``with FlowledgerSaver.from_url(...) as saver:``).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Iterator
from typing import Any, TypeVar, cast

from .errors import SaverUsageError

__all__ = ["LoopBridge"]

T = TypeVar("T")


class LoopBridge:
    def __init__(self, loop: asyncio.AbstractEventLoop, thread: threading.Thread | None = None):
        self.loop = loop
        self._thread = thread

    @classmethod
    def here(cls) -> LoopBridge:
        """The running loop as home (called from a coroutine)."""
        return cls(asyncio.get_running_loop())

    @classmethod
    def start(cls) -> LoopBridge:
        """A new home loop on a daemon thread (stopped by `stop`)."""
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

    @property
    def owns_thread(self) -> bool:
        return self._thread is not None

    def on_home(self) -> bool:
        try:
            return asyncio.get_running_loop() is self.loop
        except RuntimeError:
            return False

    async def run(self, make: Callable[[], Awaitable[T]]) -> T:
        """Await ``make()`` on the home loop, from any loop."""
        if self.on_home():
            return await make()
        future = asyncio.run_coroutine_threadsafe(_wrap(make), self.loop)
        return await asyncio.wrap_future(future)

    def call(self, make: Callable[[], Awaitable[T]], what: str) -> T:
        """Run ``make()`` on the home loop and wait for it, from synchronous code."""
        if self.on_home():
            raise SaverUsageError(
                f"{what} is synchronous and was called on the event loop that runs the saver; "
                f"await a{what} instead (or call {what} from another thread)"
            )
        if self.loop.is_closed():
            raise SaverUsageError(f"{what}: the saver is closed")
        return asyncio.run_coroutine_threadsafe(_wrap(make), self.loop).result()

    async def iterate(self, make: Callable[[], AsyncIterator[T]]) -> AsyncIterator[T]:
        """Items of ``make()`` (an async iterator that runs on the home loop), from any loop."""
        if self.on_home():
            async for item in make():
                yield item
            return
        iterator = make()
        try:
            while True:
                future = asyncio.run_coroutine_threadsafe(_next(iterator), self.loop)
                done, item = await asyncio.wrap_future(future)  # type: ignore[arg-type]
                if done:
                    return
                yield item
        finally:
            await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(_close(iterator), self.loop))

    def iterate_sync(self, make: Callable[[], AsyncIterator[T]], what: str) -> Iterator[T]:
        if self.on_home():
            raise SaverUsageError(
                f"{what} is synchronous and was called on the event loop that runs the saver; "
                f"use a{what} instead"
            )
        iterator = make()
        try:
            while True:
                done, item = asyncio.run_coroutine_threadsafe(_next(iterator), self.loop).result()
                if done:
                    return
                yield cast(T, item)
        finally:
            if not self.loop.is_closed():
                asyncio.run_coroutine_threadsafe(_close(iterator), self.loop).result()

    def stop(self) -> None:
        """Stop a loop `start` made (after the saver closed); a borrowed loop is left alone."""
        if self._thread is None:
            return
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join()
        self.loop.close()


async def _wrap(make: Callable[[], Awaitable[T]]) -> T:
    return await make()


async def _next(iterator: AsyncIterator[T]) -> tuple[bool, T | None]:
    try:
        return False, await iterator.__anext__()
    except StopAsyncIteration:
        return True, None


async def _close(iterator: AsyncIterator[Any]) -> None:
    close: Callable[[], Coroutine[Any, Any, None]] | None = getattr(iterator, "aclose", None)
    if close is not None:
        await close()
