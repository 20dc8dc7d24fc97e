"""``flowledger mcp``: one session's workflow tools over stdio.

The server owns its session while it serves (the supervisor holds the session lease and
adopts unfinished runs); a session owned by another process stops it at startup with a
one-line `McpStartupError`. It serves until the client closes stdin (requests sent
before that are still answered, for up to 30 s) or sends SIGTERM; then the runs it
executes stop at their next step boundary (a second SIGTERM stops them at once), it
prints one line on stderr per run it leaves unfinished, and shuts the supervisor down,
so the session is free for the next owner at once rather than when its lease expires.

Stdin is read by a daemon thread of our own (not the SDK's default worker-thread reader),
so a server asked to stop is never held up by a read that only the client can end. While
serving, fd 0 points at the null device (as the SDK does), so workflow code and child
processes cannot swallow protocol bytes; the SDK diverts stray stdout writes to stderr.

Every line is screened before the SDK parses it (`flowledger.mcp.screen`): one it would
drop unanswered (not UTF-8, not JSON it can read, a repeated key, not JSON-RPC) is
answered here, with a JSON-RPC error carrying the request's id where it can be recovered.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import os
import signal
import sys
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import Any, Final, cast

import anyio
import mcp_types as types
from mcp.server.stdio import stdio_server
from mcp.shared.message import SessionMessage

from ..workflows.records.answers import answering
from ._session import load_app, open_served_session, redact_url
from .leaving import leave_session
from .screen import ScreenedLines
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
        # The loop is gone, or cancelled the put while shutting down: nobody reads. (The
        # future of run_coroutine_threadsafe raises concurrent.futures' CancelledError.)
        except (RuntimeError, asyncio.CancelledError, concurrent.futures.CancelledError):
            return False
        return True

    def _read(self, fd: int) -> None:
        with open(fd, "rb", closefd=False) as stream:
            try:
                for line in iter(stream.readline, b""):
                    # Bytes that are not UTF-8 stay visible (as lone surrogates), so
                    # the line is refused as a parse error rather than altered.
                    if not self._put(line.decode("utf-8", errors="surrogateescape")):
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


class _Termination:
    """SIGTERM and SIGINT while serving: the first ends serving (it cancels the serving
    task and sets ``stopped``); once the server is leaving (``leaving``: its runs stop at
    their next step boundary), the first signal changes nothing and the next one cuts the
    steps in flight (it cancels the task again). A client that closes stdin and then
    sends SIGTERM after a grace period, as the SDK's does, so still gets the boundary."""

    def __init__(self, task: asyncio.Task[Any] | None) -> None:
        self.stopped = asyncio.Event()
        self.leaving = False
        self._signals = 0
        self._task = task

    def __call__(self) -> None:
        self._signals += 1
        self.stopped.set()
        if self.leaving and self._signals < 2:
            return
        if self._task is not None:
            self._task.cancel()


@contextlib.contextmanager
def _stop_on_sigterm() -> Iterator[_Termination]:
    """While inside, SIGTERM and SIGINT are handled by the yielded `_Termination` (where
    the platform and thread allow signal handlers; elsewhere it never fires)."""
    loop = asyncio.get_running_loop()
    termination = _Termination(asyncio.current_task())
    installed: list[signal.Signals] = []
    for signum in (signal.SIGTERM, signal.SIGINT):
        try:
            loop.add_signal_handler(signum, termination)
        except (NotImplementedError, RuntimeError, ValueError):  # not the main thread, Windows
            continue
        installed.append(signum)
    try:
        yield termination
    finally:
        for signum in installed:
            loop.remove_signal_handler(signum)
        if signal.SIGINT in installed:  # asyncio resets it to the default, not Python's
            with contextlib.suppress(ValueError):
                signal.signal(signal.SIGINT, signal.default_int_handler)


def _continue_flags(db_url: str, app: str | None, session: str | None) -> list[str]:
    flags = ["--db", redact_url(db_url)]
    if app is not None:
        flags += ["--app", app]
    if session is not None:
        flags += ["--session", session]
    return flags


@contextlib.asynccontextmanager
async def _stdio_streams(lines: anyio.AsyncFile[str]) -> AsyncIterator[Any]:
    """`stdio_server`'s streams, its reader task started with the transport said
    (`answering`): the SDK handles each message in the context of the task that read it,
    so a resume it carries is recorded as one that came over stdio."""
    with answering("mcp-stdio"):
        async with stdio_server(stdin=lines) as streams:
            yield streams


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
    with _stop_on_sigterm() as termination:
        stopped = termination.stopped
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
                    registry=served.session.registry,
                )
                with _claim_stdin() as fd:
                    # stdio_server only iterates its stdin (``async for line in stdin``).

                    async def drain() -> None:
                        with contextlib.suppress(TimeoutError):
                            async with asyncio.timeout(_EOF_DRAIN_SECONDS):
                                await mcp.drain()

                    reader = ScreenedLines(_LineReader(fd, at_eof=drain))
                    lines = cast("anyio.AsyncFile[str]", cast(Any, reader))
                    try:
                        async with _stdio_streams(lines) as (read_stream, write_stream):

                            async def answer(error: types.JSONRPCError) -> None:
                                with contextlib.suppress(
                                    anyio.ClosedResourceError, anyio.BrokenResourceError
                                ):
                                    await write_stream.send(SessionMessage(error))

                            reader.answer_with(answer)
                            await mcp.server.run(
                                read_stream,
                                write_stream,
                                mcp.server.create_initialization_options(),
                            )
                    except asyncio.CancelledError:
                        task = asyncio.current_task()
                        if not stopped.is_set() or task is None:
                            raise
                        task.uncancel()  # a SIGTERM: stop serving, then leave as below
                # stdin closed or SIGTERM: the runs in flight stop at their next step
                # boundary (a further SIGTERM cuts them), then the session is released.
                termination.leaving = True
                await leave_session(served.session, _continue_flags(db_url, app, session))
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if not stopped.is_set() or task is None:
                raise
            task.uncancel()  # a SIGTERM: a normal end
