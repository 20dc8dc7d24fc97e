"""One MCP session per source for as long as a run executes.

A run's tool nodes ask the pool for the session of their source: the first ask opens it
(concurrent first asks share one connect), later asks get the same session, so a run
costs one server process or HTTP session per source rather than one per node. `close`
closes every session, and the run calls it when it stops or pauses; the pool stays
usable, and the next ask (the resumed run's first tool node) connects again. A session
whose connection was lost is replaced by a new one on the next ask; the call that saw
the loss has already failed with `ConnectionLostError`, the pool never retries a call.

Sessions are keyed by source equality (`StdioSource`, `HttpSource`, `PythonSource`): the
same command, arguments, environment and working directory, the same URL and headers,
or the same module, functions and annotations. A Python source's "session"
(`PythonSession`) imports its module when opened; nothing else differs.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any, TextIO

from .connect import AnySession, session_for
from .session import DEFAULT_CALL_TIMEOUT, DEFAULT_CONNECT_TIMEOUT, ToolResult
from .spec import Source

__all__ = ["SourcePool"]


class SourcePool:
    """Open sessions by source; ``async with SourcePool() as pool`` closes them all at
    the end. The timeouts and ``errlog`` apply to every session (see `SourceSession`)."""

    def __init__(
        self,
        *,
        connect_timeout: float = DEFAULT_CONNECT_TIMEOUT,
        call_timeout: float = DEFAULT_CALL_TIMEOUT,
        errlog: TextIO | None = None,
    ) -> None:
        if not connect_timeout > 0 or not call_timeout > 0:
            raise ValueError("connect_timeout and call_timeout must be positive")
        self._connect_timeout = connect_timeout
        self._call_timeout = call_timeout
        self._errlog = errlog
        self._sessions: dict[Source, AnySession] = {}
        self._locks: dict[Source, asyncio.Lock] = {}

    async def __aenter__(self) -> SourcePool:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    @property
    def open_sources(self) -> tuple[Source, ...]:
        """The sources with an open session now."""
        return tuple(source for source, session in self._sessions.items() if session.is_open)

    async def session(self, source: Source) -> AnySession:
        """The open session of ``source``, connecting (or reconnecting after a lost
        connection) if there is none; `SourceUnreachableError` if it cannot be opened."""
        current = self._sessions.get(source)
        if current is not None and current.is_open:
            return current
        async with self._locks.setdefault(source, asyncio.Lock()):
            current = self._sessions.get(source)
            if current is not None and current.is_open:
                return current
            if current is not None:
                del self._sessions[source]
                await current.close()
            fresh = session_for(
                source,
                connect_timeout=self._connect_timeout,
                call_timeout=self._call_timeout,
                errlog=self._errlog,
            )
            await fresh.open()
            self._sessions[source] = fresh
            return fresh

    async def call_tool(
        self,
        source: Source,
        name: str,
        arguments: Mapping[str, Any] | None = None,
        *,
        timeout: float | None = None,  # noqa: ASYNC109 - see SourceSession.call_tool
    ) -> ToolResult:
        """``call_tool`` on the pooled session of ``source``."""
        session = await self.session(source)
        return await session.call_tool(name, arguments, timeout=timeout)

    async def close(self) -> None:
        """Close every session (concurrently). The pool can be used again afterwards."""
        sessions = list(self._sessions.values())
        self._sessions.clear()
        await asyncio.gather(*(session.close() for session in sessions))
