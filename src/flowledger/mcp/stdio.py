"""``flowledger mcp``: one session's workflow tools over stdio.

The server owns its session while it serves (the supervisor holds the session lease and
adopts unfinished runs); a session owned by another process stops it at startup with a
one-line `McpStartupError`. It serves until the client closes stdin (requests sent
before that are still answered, for up to 30 s) or sends SIGTERM, then shuts the
supervisor down, so the session is free for the next server at once rather than when
its lease expires.

Stdin is read by a daemon thread of our own (not the SDK's default worker-thread reader),
so a server asked to stop is never held up by a read that only the client can end. While
serving, fd 0 points at the null device (as the SDK does), so workflow code and child
processes cannot swallow protocol bytes; the SDK diverts stray stdout writes to stderr.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
import threading
from collections.abc import Awaitable, Callable, Iterator
from typing import Any, Final, cast

import anyio
from mcp.server.stdio import stdio_server

from ._session import load_app, open_served_session
from .server import WorkflowMcpServer

__all__ = ["serve_stdio"]

_QUEUED_LINES: Final = 64
#: After stdin closes, how long requests already received may take to be answered.
_EOF_DRAIN_SECONDS: Final = 30.0


class _LineReader:
    """The lines of a file descriptor as an async iterator (what `stdio_server` reads).

    A daemon thread does the blocking reads and hands lines over through a bounded
    queue; cancelling the reader never waits for that thread, which dies with the
    process if it is still blocked."""

    def __init__(self, fd: int, at_eof: Callable[[], Awaitable[None]]) -> None:
        self._at_eof = at_eof
        self._loop = asyncio.get_running_loop()
        self._queue: asyncio.Queue[str | None] = asyncio.Queue(_QUEUED_LINES)
        self._thread = threading.Thread(
            target=self._read, args=(fd,), name="flowledger-mcp-stdin", daemon=True
        )
        self._thread.start()

    def _put(self, item: str | None) -> bool:
        try:
            asyncio.run_coroutine_threadsafe(self._queue.put(item), self._loop).result()
        except (RuntimeError, asyncio.CancelledError):  # the loop is gone: nobody reads
            return False
        return True

    def _read(self, fd: int) -> None:
        with open(fd, "rb", closefd=False) as stream:
            try:
                for line in iter(stream.readline, b""):
                    if not self._put(line.decode("utf-8", errors="replace")):
                        return
            except (OSError, ValueError):
                pass
            self._put(None)

    def __aiter__(self) -> _LineReader:
        return self

    async def __anext__(self) -> str:
        line = await self._queue.get()
        if line is None:
            await self._at_eof()
            raise StopAsyncIteration
        return line


@contextlib.contextmanager
def _claim_stdin() -> Iterator[int]:
    """A private duplicate of fd 0 to read the protocol from, with fd 0 itself pointed at
    the null device until the block ends (best effort: fd 0 as it is where that fails)."""
    if sys.platform == "win32":  # pragma: no cover
        yield 0
        return
    import fcntl

    try:
        private = fcntl.fcntl(0, fcntl.F_DUPFD_CLOEXEC, 3)
    except OSError:
        yield 0
        return
    try:
        null = os.open(os.devnull, os.O_RDONLY)
        try:
            os.dup2(null, 0)
        finally:
            os.close(null)
    except OSError:
        yield private
        return
    try:
        yield private
    finally:
        # The reader thread may still block on ``private``: it is restored onto fd 0 but
        # never closed, so the descriptor cannot be recycled under that thread.
        with contextlib.suppress(OSError):
            os.dup2(private, 0)


@contextlib.contextmanager
def _stop_on_sigterm() -> Iterator[asyncio.Event]:
    """While inside, SIGTERM cancels the current task and sets the yielded event (where
    the platform and thread allow signal handlers; elsewhere the event never fires)."""
    stopped = asyncio.Event()
    loop = asyncio.get_running_loop()
    task = asyncio.current_task()

    def terminate() -> None:
        stopped.set()
        if task is not None:
            task.cancel()

    try:
        loop.add_signal_handler(signal.SIGTERM, terminate)
    except (NotImplementedError, RuntimeError, ValueError):  # not the main thread, Windows
        yield stopped
        return
    try:
        yield stopped
    finally:
        loop.remove_signal_handler(signal.SIGTERM)


async def serve_stdio(
    db_url: str,
    *,
    app: str | None,
    session: str | None,
    read_only: bool,
    no_execute: bool = False,
) -> None:
    """Serve the session ``session`` (default: the database's default session) of the
    store at ``db_url``, with the catalog named by ``app`` (default: the built-in
    examples), over this process's stdin and stdout."""
    catalog = load_app(app)
    with _stop_on_sigterm() as stopped:
        try:
            async with open_served_session(
                db_url,
                catalog,
                session,
                read_only=read_only,
                no_execute=no_execute,
                read_only_when_owned=True,
            ) as served:
                mcp = WorkflowMcpServer(
                    served.tools,
                    journal=served.session.journal,
                    session_id=served.session_id,
                    read_only=served.read_only,
                    executes=served.executes,
                    notice=served.notice,
                )
                with _claim_stdin() as fd:
                    # stdio_server only iterates its stdin (``async for line in stdin``).

                    async def drain() -> None:
                        with contextlib.suppress(TimeoutError):
                            async with asyncio.timeout(_EOF_DRAIN_SECONDS):
                                await mcp.drain()

                    reader = _LineReader(fd, at_eof=drain)
                    lines = cast("anyio.AsyncFile[str]", cast(Any, reader))
                    async with stdio_server(stdin=lines) as (read_stream, write_stream):
                        await mcp.server.run(
                            read_stream, write_stream, mcp.server.create_initialization_options()
                        )
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if not stopped.is_set() or task is None:
                raise
            task.uncancel()  # a SIGTERM: a normal end
