"""One served session per tenant, each in its own task.

An HTTP server serves each token's workflow session apart from every other (without
tokens: the one session it was started for). `SessionHosts` keeps them by session ID: a
session is opened by the server's ``open(session_id)`` (an async context manager whose
value is what requests are served from) on the first request that needs it, in a task
of its own, so a context that must be entered and left by one task (the MCP SDK's
session manager, a supervisor) is. Requests for one session never wait for another's:
a session that cannot be opened fails only the requests that wait for it (each gets
the exception), and the next request for it tries again.

`SessionHosts.close` asks every session to stop (their contexts exit normally: runs in
flight stop at their next step boundary) and waits up to ``stop_timeout`` seconds for
each before cancelling it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from typing import Final, Generic, TypeVar

__all__ = ["ServerStoppingError", "SessionHosts"]

T = TypeVar("T")

_STOP_TIMEOUT: Final = 15.0

Opener = Callable[[str | None], AbstractAsyncContextManager[T]]


class ServerStoppingError(Exception):
    """The server is stopping: no session is opened any more."""

    def __init__(self) -> None:
        super().__init__("the server is stopping")


def _retrieve(future: asyncio.Future[T]) -> None:
    """Mark a startup failure as seen (it is reported to each request that waits)."""
    if not future.cancelled():
        future.exception()


class _Host(Generic[T]):
    """One session, served from its own task until `stop`."""

    def __init__(self, opened: AbstractAsyncContextManager[T], log: logging.Logger) -> None:
        loop = asyncio.get_running_loop()
        self._opened = opened
        self._log = log
        self._stop = asyncio.Event()
        self.ready: asyncio.Future[T] = loop.create_future()
        self.ready.add_done_callback(_retrieve)
        self.task = loop.create_task(self._run())

    @property
    def failed(self) -> bool:
        """It could not start, or stopped serving: a new request starts a new host."""
        return self.task.done() or (
            self.ready.done() and (self.ready.cancelled() or self.ready.exception() is not None)
        )

    async def _run(self) -> None:
        try:
            async with self._opened as value:
                self.ready.set_result(value)
                await self._stop.wait()
        except Exception as exc:
            if not self.ready.done():
                self.ready.set_exception(exc)
            else:
                self._log.error("workflow session failed: %s", exc)
        finally:
            if not self.ready.done():
                self.ready.set_exception(ServerStoppingError())

    async def stop(self, within: float) -> None:
        self._stop.set()
        try:
            await asyncio.wait_for(asyncio.shield(self.task), within)
        except TimeoutError:
            self.task.cancel()
            with contextlib.suppress(BaseException):
                await self.task


class SessionHosts(Generic[T]):
    """The served sessions of one server, by session ID (``None``: the default one)."""

    def __init__(
        self,
        open: Opener[T],
        *,
        log: logging.Logger,
        stop_timeout: float = _STOP_TIMEOUT,
    ) -> None:
        self._open = open
        self._log = log
        self._stop_timeout = stop_timeout
        self._hosts: dict[str | None, _Host[T]] = {}
        self._closing = False

    async def get(self, session_id: str | None) -> T:
        """The served session, opened if need be; raises what opening it raised (a
        later call tries again), or `ServerStoppingError` once `close` was called."""
        if self._closing:
            raise ServerStoppingError()
        host = self._hosts.get(session_id)
        if host is None or host.failed:
            host = _Host(self._open(session_id), self._log)
            self._hosts[session_id] = host
        return await asyncio.shield(host.ready)

    async def close(self) -> None:
        """Stop every session (see the module doc); `get` refuses from now on."""
        self._closing = True
        hosts, self._hosts = list(self._hosts.values()), {}
        await asyncio.gather(*(h.stop(self._stop_timeout) for h in hosts), return_exceptions=True)
