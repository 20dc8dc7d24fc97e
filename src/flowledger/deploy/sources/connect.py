"""`session_for`: the session of any capability source, MCP, Python or OpenAPI.

Everything that contacts a source (the run's `SourcePool`, a registry probe, a check
before a start or a resume, ``capability_call``) asks here, so a new kind of source is
one more branch, and the callers use one interface: ``open`` / ``close`` (or ``async
with``), ``server_info``, ``list_tools``, ``tool``, ``call_tool``, ``is_open``.
"""

from __future__ import annotations

from typing import TextIO, TypeAlias

from .openapi_session import OpenApiSession
from .openapi_spec import OpenApiSource
from .python_session import PythonSession
from .python_spec import PythonSource
from .session import DEFAULT_CALL_TIMEOUT, DEFAULT_CONNECT_TIMEOUT, ServerInfo, SourceSession
from .spec import Source
from .tool_info import ToolInfo

__all__ = ["AnySession", "probe_any", "session_for"]

AnySession: TypeAlias = SourceSession | PythonSession | OpenApiSession


def session_for(
    source: Source,
    *,
    connect_timeout: float = DEFAULT_CONNECT_TIMEOUT,
    call_timeout: float = DEFAULT_CALL_TIMEOUT,
    errlog: TextIO | None = None,
) -> AnySession:
    """A new, unopened session with ``source`` (the timeouts as `SourceSession` has them)."""
    if isinstance(source, PythonSource):
        return PythonSession(
            source, connect_timeout=connect_timeout, call_timeout=call_timeout, errlog=errlog
        )
    if isinstance(source, OpenApiSource):
        return OpenApiSession(
            source, connect_timeout=connect_timeout, call_timeout=call_timeout, errlog=errlog
        )
    return SourceSession(
        source, connect_timeout=connect_timeout, call_timeout=call_timeout, errlog=errlog
    )


async def probe_any(source: Source, *, seconds: float) -> tuple[ServerInfo, tuple[ToolInfo, ...]]:
    """Open, list every tool, close: `flowledger.deploy.sources.session.probe` for any
    kind of source."""
    async with session_for(source, connect_timeout=seconds, call_timeout=seconds) as session:
        return session.server_info, await session.list_tools()
