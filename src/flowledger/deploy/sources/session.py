"""A session with one MCP capability source, on the official ``mcp`` SDK client.

`SourceSession` opens a stdio or streamable HTTP connection within a bounded connect
timeout, lists tools (every page, straight from the server: the SDK's response cache is
off) and calls them within a bounded call timeout. Failures are typed
(`source_errors`): nothing the SDK or the transport raises leaks through.

Task ownership: the SDK's transports run anyio task groups and cancel scopes that must
be entered and exited by one task, and a transport that breaks cancels the task that
entered it. So a session runs its connection in an *owner task* of its own: the task
enters the SDK client, reports readiness, and waits until `close`; calls from any task
of the same event loop go through the connection, concurrently if they like. A broken
connection ends the owner task; calls in flight then fail with `ConnectionLostError`,
and so do later calls, without sending anything.

Tool names are checked against the server's listing before a call (listed on first use,
listed again once when a name is missing, and after the server announces a changed
listing with ``notifications/tools/list_changed``), so an unknown tool is
`ToolNotFoundError` with nothing sent, whatever the server would have answered. A tool's
own failure is not an exception: it is a `ToolResult` with ``is_error`` set, for the
caller to route.

When a request counts as written (what tells ``unavailable`` from ``outcome_unknown``):
a tool call is *written* once its message has been handed to the transport's write
stream. The stdio transport's stream has no buffer, so a hand-over completes only when
the task writing the server's stdin took the message (the HTTP transport's likewise
when its posting task took it); a hand-over the stream refuses because its reader is
gone (`anyio.BrokenResourceError`, `anyio.ClosedResourceError`) delivered nothing. A
connection lost before the hand-over, or with the hand-over refused, is
`ConnectionLostError` with ``in_flight`` false (nothing was sent: ``unavailable``); lost
after a hand-over started, it is ``in_flight`` (the server may have run the tool:
``outcome_unknown``). A hand-over interrupted by cancellation counts as started, because
a memory stream can deliver an item and still raise.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
from collections.abc import AsyncIterator, Iterator, Mapping
from contextlib import AbstractAsyncContextManager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, Final, TextIO

import anyio
import anyio.lowlevel
import httpx2
import mcp_types as types
from mcp import Client
from mcp.client._transport import TransportStreams
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._stream_protocols import ReadStream, WriteStream
from mcp.shared.exceptions import MCPError
from mcp.shared.message import SessionMessage
from mcp_types import CONNECTION_CLOSED, REQUEST_TIMEOUT
from pydantic import ValidationError

from ... import __version__
from .errors import (
    ConnectionLostError,
    SessionClosedError,
    SourceProtocolError,
    SourceUnreachableError,
    ToolArgumentsError,
    ToolCallFailedError,
    ToolCallRejectedError,
    ToolCallTimeoutError,
    ToolNotFoundError,
    ToolResultInvalidError,
    clip,
)
from .fingerprint import FingerprintError
from .spec import McpSource, StdioSource
from .stderr import prefixed_stderr, server_name
from .tool_info import ToolInfo

__all__ = [
    "DEFAULT_CALL_TIMEOUT",
    "DEFAULT_CONNECT_TIMEOUT",
    "ServerInfo",
    "SourceSession",
    "ToolResult",
    "probe",
]

logger = logging.getLogger(__name__)


class _Handover:
    """Whether the current call's request was handed to the transport (see the module)."""

    __slots__ = ("refused", "started")

    def __init__(self) -> None:
        self.started = False
        self.refused = False

    @property
    def written(self) -> bool:
        return self.started and not self.refused


# The call a write belongs to: the SDK writes a request from the task that sends it.
_HANDOVER: ContextVar[_Handover | None] = ContextVar("flowledger_mcp_handover", default=None)

DEFAULT_CONNECT_TIMEOUT: Final = 30.0
"""Seconds from launching the command (or the first HTTP request) to a finished handshake."""
DEFAULT_CALL_TIMEOUT: Final = 60.0
"""Seconds for one tool call, or for one whole tool listing (all its pages)."""
MAX_LIST_PAGES: Final = 1000
CLOSE_TIMEOUT: Final = 15.0
"""Closing waits at most this long; the SDK bounds a stdio server's shutdown itself
(close stdin, then SIGTERM, then SIGKILL, about 6 s at worst)."""
HTTP_STREAM_READ_TIMEOUT: Final = 300.0
CLIENT_INFO: Final = types.Implementation(name="flowledger", version=__version__)
TOOLS_CHANGED: Final = "notifications/tools/list_changed"


@dataclass(frozen=True)
class ServerInfo:
    """Who answered the handshake. Name and version are what the server says about
    itself (2026-era servers may say nothing)."""

    name: str | None
    version: str | None
    title: str | None
    protocol_version: str
    #: The SHA-256 of what describes the tools, where that is a document (an OpenAPI
    #: source's): pinned with the run, a changed one is ``server_changed``.
    document: str | None = None

    def to_json(self) -> dict[str, Any]:
        found: dict[str, Any] = {
            "name": self.name,
            "version": self.version,
            "title": self.title,
            "protocol_version": self.protocol_version,
        }
        if self.document is not None:
            found["document"] = self.document
        return found


@dataclass(frozen=True, eq=False)
class ToolResult:
    """What a tool answered: content blocks in wire form (``{"type": "text", "text":
    ...}``, ...), the structured content if any, and whether the tool reports an error."""

    content: tuple[Mapping[str, Any], ...]
    structured_content: Mapping[str, Any] | None
    is_error: bool

    @property
    def text(self) -> str:
        """The text blocks, joined by newlines."""
        return "\n".join(
            str(block.get("text", "")) for block in self.content if block.get("type") == "text"
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "content": [dict(block) for block in self.content],
            "structuredContent": (
                None if self.structured_content is None else dict(self.structured_content)
            ),
            "isError": self.is_error,
        }


class SourceSession:
    """One open MCP session with ``source``. Use ``async with SourceSession(source) as
    session`` (or `open` / `close`); a session opens once, a closed one stays closed.

    ``connect_timeout`` bounds `open`; ``call_timeout`` is the default bound of one call
    and of one listing. ``errlog`` receives a stdio server's stderr (default: this
    process's stderr, each line prefixed with ``[NAME] ``, the server's program name; a
    stream without a file descriptor means the null device)."""

    def __init__(
        self,
        source: McpSource,
        *,
        connect_timeout: float = DEFAULT_CONNECT_TIMEOUT,
        call_timeout: float = DEFAULT_CALL_TIMEOUT,
        errlog: TextIO | None = None,
    ) -> None:
        if not connect_timeout > 0 or not call_timeout > 0:
            raise ValueError("connect_timeout and call_timeout must be positive")
        self._source = source
        self._connect_timeout = connect_timeout
        self._call_timeout = call_timeout
        self._errlog = errlog
        self._client: Client | None = None
        self._server_info: ServerInfo | None = None
        self._owner: asyncio.Task[None] | None = None
        self._stop = asyncio.Event()
        self._ended = asyncio.Event()  # the server's side of the connection ended
        self._closed = False
        self._failure = ""
        self._tools: dict[str, ToolInfo] | None = None
        self._listing = asyncio.Lock()

    # -- lifecycle ----------------------------------------------------------------------

    @property
    def source(self) -> McpSource:
        return self._source

    @property
    def label(self) -> str:
        return self._source.label

    @property
    def is_open(self) -> bool:
        """Opened, not closed, and the connection is still up."""
        return (
            self._client is not None
            and not self._closed
            and not self._ended.is_set()
            and self._owner is not None
            and not self._owner.done()
        )

    @property
    def server_info(self) -> ServerInfo:
        if self._server_info is None:
            raise SessionClosedError(self.label)
        return self._server_info

    async def __aenter__(self) -> SourceSession:
        await self.open()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    async def open(self) -> None:
        """Connect and finish the handshake within the connect timeout, or raise
        `SourceUnreachableError` (with nothing left running)."""
        if self._owner is not None or self._closed:
            raise RuntimeError("a SourceSession opens only once")
        ready: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._owner = asyncio.create_task(self._own(ready), name=f"mcp source {self.label}")
        try:
            done, _ = await asyncio.wait({ready}, timeout=self._connect_timeout)
        except BaseException:
            await self._abandon()
            raise
        if not done:
            await self._abandon()
            raise SourceUnreachableError(
                self.label, f"no handshake within {self._connect_timeout:g}s (connect timeout)"
            )
        error = asyncio.CancelledError() if ready.cancelled() else ready.exception()
        if error is not None:
            await self._abandon()
            raise SourceUnreachableError(self.label, self._why_unreachable(error)) from error

    async def close(self) -> None:
        """Close the connection (a stdio server is stopped). Idempotent; never raises
        for the transport's own teardown trouble. Calls still in flight fail with
        `ConnectionLostError`."""
        self._closed = True
        self._stop.set()
        owner = self._owner
        if owner is None or owner.done():
            return
        try:
            await asyncio.wait_for(asyncio.shield(owner), CLOSE_TIMEOUT)
        except TimeoutError:
            logger.warning("MCP source %s did not close within %ss", self.label, CLOSE_TIMEOUT)
            owner.cancel()

    async def _abandon(self) -> None:
        """Stop an owner task that did not become ready, and wait for its teardown."""
        self._closed = True
        self._stop.set()
        owner = self._owner
        if owner is not None and not owner.done():
            owner.cancel()
            with contextlib.suppress(BaseException):
                await asyncio.wait_for(asyncio.shield(owner), CLOSE_TIMEOUT)

    async def _own(self, ready: asyncio.Future[None]) -> None:
        """The owner task: enter the SDK client, report readiness, wait for `close`."""
        try:
            async with self._connection() as client:
                info = client.server_info
                self._server_info = ServerInfo(
                    name=info.name if info is not None else None,
                    version=info.version if info is not None else None,
                    title=info.title if info is not None else None,
                    protocol_version=client.protocol_version,
                )
                self._client = client
                ready.set_result(None)
                await self._stop.wait()
        except BaseException as exc:  # the owner task reports; it never raises
            if not ready.done():
                if isinstance(exc, asyncio.CancelledError):
                    ready.cancel()
                else:
                    ready.set_exception(exc)
            elif not self._closed:
                self._failure = _leaf_text(exc)
                logger.debug("MCP source %s: connection ended", self.label, exc_info=True)
        finally:
            self._client = None

    @contextlib.asynccontextmanager
    async def _stderr(self, source: StdioSource) -> AsyncIterator[TextIO]:
        """The server's stderr: ``errlog`` when given, else this process's stderr with
        each line prefixed by the server's name (`flowledger.deploy.sources.stderr`)."""
        if self._errlog is None:
            async with prefixed_stderr(server_name(source.command, source.args)) as stream:
                yield stream
            return
        with _file_backed(self._errlog) as stream:
            yield stream

    @contextlib.asynccontextmanager
    async def _connection(self) -> AsyncIterator[Client]:
        source = self._source
        options: dict[str, Any] = {
            "cache": None,
            "client_info": CLIENT_INFO,
            "message_handler": self._on_message,
        }
        if isinstance(source, StdioSource):
            params = StdioServerParameters(
                command=source.command,
                args=list(source.args),
                env=dict(source.env) or None,
                cwd=source.cwd,
            )
            async with self._stderr(source) as stderr:
                transport = _watched(stdio_client(params, errlog=stderr), self._ended)
                async with Client(transport, **options) as client:
                    yield client
            return
        timeout = httpx2.Timeout(self._connect_timeout, read=HTTP_STREAM_READ_TIMEOUT)
        async with httpx2.AsyncClient(headers=dict(source.headers), timeout=timeout) as http:
            transport = _watched(streamable_http_client(source.url, http_client=http), self._ended)
            async with Client(transport, **options) as client:
                yield client

    async def _on_message(self, message: types.ServerNotification | Exception) -> None:
        """The server's notifications: a changed tool listing drops the one kept for
        name checks (the next call lists again)."""
        if getattr(message, "method", None) == TOOLS_CHANGED:
            self._tools = None
        await anyio.lowlevel.checkpoint()

    def _why_unreachable(self, error: BaseException) -> str:
        leaf = _leaf(error)
        source = self._source
        if isinstance(source, StdioSource) and isinstance(leaf, OSError):
            if isinstance(leaf, FileNotFoundError):
                if source.cwd is not None and leaf.filename == source.cwd:
                    return f"working directory not found: {source.cwd}"
                return f"command not found: {source.command}"
            if isinstance(leaf, PermissionError):
                return f"command is not executable: {source.command}"
            if isinstance(leaf, NotADirectoryError):
                return f"working directory is not a directory: {source.cwd}"
            return f"cannot start the command: {leaf.strerror or type(leaf).__name__}"
        if isinstance(leaf, MCPError):
            if leaf.code == CONNECTION_CLOSED:
                if isinstance(source, StdioSource):
                    return "the server closed the connection during the handshake (did it exit?)"
                return f"the connection closed during the handshake: {clip(leaf.message)}"
            return f"the handshake failed: {clip(leaf.message)} (JSON-RPC error {leaf.code})"
        if isinstance(leaf, httpx2.TimeoutException):
            return f"no answer within {self._connect_timeout:g}s (connect timeout)"
        if isinstance(leaf, httpx2.ConnectError):
            return "cannot connect (connection refused or host unreachable)"
        if isinstance(leaf, httpx2.HTTPStatusError):
            return f"HTTP status {leaf.response.status_code}"
        if isinstance(leaf, httpx2.TransportError):
            return f"HTTP transport error ({type(leaf).__name__})"
        if isinstance(leaf, asyncio.CancelledError):
            return "the connection was cancelled during the handshake"
        return f"{type(leaf).__name__} during the handshake: {clip(str(leaf))}"

    # -- tools --------------------------------------------------------------------------

    def _require_open(self, tool: str | None) -> Client:
        client = self._client
        if self._closed:
            raise SessionClosedError(self.label)
        if client is None or self._owner is None or self._owner.done() or self._ended.is_set():
            if self._owner is None:
                raise SessionClosedError(self.label)
            detail = self._failure or "the server ended the connection"
            raise ConnectionLostError(self.label, tool, detail, in_flight=False)
        return client

    # A timeout parameter (ASYNC109): the bound is part of the call's contract (its expiry
    # is a typed error saying the outcome is unknown), not the caller's cancellation.
    async def list_tools(
        self,
        *,
        timeout: float | None = None,  # noqa: ASYNC109
    ) -> tuple[ToolInfo, ...]:
        """Every tool the server lists, in its order, following ``nextCursor`` to the last
        page; each call asks the server again (no cache). ``timeout`` bounds the whole
        listing (default: the session's call timeout)."""
        limit = _limit(self._call_timeout, timeout)
        client = self._require_open(None)
        async with self._listing:
            tools: dict[str, ToolInfo] = {}
            seen: set[str] = set()
            cursor: str | None = None
            try:
                with anyio.fail_after(limit):
                    for _ in range(MAX_LIST_PAGES):
                        page = await client.session.list_tools(
                            params=types.PaginatedRequestParams(cursor=cursor)
                        )
                        for tool in page.tools:
                            info = self._tool_info(tool)
                            if info.name in tools:
                                raise SourceProtocolError(
                                    self.label, f"it lists tool {info.name!r} twice"
                                )
                            tools[info.name] = info
                        cursor = page.next_cursor
                        if cursor is None:
                            break
                        if cursor in seen:
                            raise SourceProtocolError(
                                self.label, "its tool listing repeats a page cursor"
                            )
                        seen.add(cursor)
                    else:
                        raise SourceProtocolError(
                            self.label, f"its tool listing has more than {MAX_LIST_PAGES} pages"
                        )
            except TimeoutError:
                raise SourceProtocolError(
                    self.label, f"listing its tools took longer than {limit:g}s"
                ) from None
            except MCPError as exc:
                if exc.code == CONNECTION_CLOSED:
                    raise self._lost(None, exc) from None
                if exc.code == REQUEST_TIMEOUT:
                    raise SourceProtocolError(
                        self.label, f"listing its tools took longer than {limit:g}s"
                    ) from None
                raise SourceProtocolError(
                    self.label,
                    f"tools/list failed: {clip(exc.message)} (JSON-RPC error {exc.code})",
                ) from None
            except ValidationError as exc:
                raise SourceProtocolError(
                    self.label, f"its tool listing is malformed: {clip(str(exc))}"
                ) from None
            except SourceProtocolError:
                raise
            except Exception as exc:
                if self._ended.is_set() or self._closed:
                    raise ConnectionLostError(self.label, None, _describe(exc)) from exc
                raise SourceProtocolError(
                    self.label, f"tools/list failed: {_describe(exc)}"
                ) from exc
            self._tools = tools
            return tuple(tools.values())

    def _tool_info(self, tool: types.Tool) -> ToolInfo:
        entry = tool.model_dump(mode="json", by_alias=True, exclude_unset=True)
        try:
            return ToolInfo.from_entry(entry)
        except FingerprintError as exc:
            raise SourceProtocolError(
                self.label, f"tool {tool.name!r} cannot be fingerprinted: {exc}"
            ) from None

    async def tool(self, name: str) -> ToolInfo:
        """The listing entry of tool ``name`` (listed again once if it is not known yet),
        or `ToolNotFoundError`."""
        tools = self._tools
        if tools is None or name not in tools:
            await self.list_tools()
            tools = self._tools or {}
        info = tools.get(name)
        if info is None:
            raise ToolNotFoundError(self.label, name, tuple(tools))
        return info

    async def call_tool(
        self,
        name: str,
        arguments: Mapping[str, Any] | None = None,
        *,
        timeout: float | None = None,  # noqa: ASYNC109
    ) -> ToolResult:
        """Call tool ``name`` within ``timeout`` seconds (default: the session's call
        timeout). A tool's own error is a result with ``is_error``; everything else that
        goes wrong raises a `SourceError`."""
        limit = _limit(self._call_timeout, timeout)
        client = self._require_open(name)
        document = _json_arguments(self.label, name, arguments)
        tools = self._tools
        if tools is None or name not in tools:
            await self.tool(name)
        handover = _Handover()
        token = _HANDOVER.set(handover)
        try:
            with anyio.fail_after(limit):
                result = await client.call_tool(name, document)
        except TimeoutError:
            raise ToolCallTimeoutError(self.label, name, limit) from None
        except MCPError as exc:
            if exc.code == CONNECTION_CLOSED:
                raise self._lost(name, exc, written=handover.written) from None
            if exc.code == REQUEST_TIMEOUT:
                raise ToolCallTimeoutError(self.label, name, limit) from None
            raise ToolCallRejectedError(self.label, name, exc.code, exc.message) from None
        except (RuntimeError, ValidationError) as exc:
            # the SDK's check of structured content against the tool's output schema, or
            # a result that does not parse
            raise ToolResultInvalidError(self.label, name, str(exc)) from None
        except Exception as exc:
            if self._ended.is_set() or self._closed:
                raise ConnectionLostError(
                    self.label, name, _describe(exc), in_flight=handover.written
                ) from exc
            raise ToolCallFailedError(self.label, name, _describe(exc)) from exc
        finally:
            _HANDOVER.reset(token)
        return ToolResult(
            content=tuple(
                block.model_dump(mode="json", by_alias=True, exclude_none=True)
                for block in result.content
            ),
            structured_content=result.structured_content,
            is_error=bool(result.is_error),
        )

    def _lost(
        self, tool: str | None, error: MCPError, *, written: bool = True
    ) -> ConnectionLostError:
        if self._closed:
            detail = "the session was closed"
        else:
            detail = clip(error.message)
        return ConnectionLostError(self.label, tool, detail, in_flight=written)


@contextlib.contextmanager
def _file_backed(errlog: TextIO) -> Iterator[TextIO]:
    """``errlog`` if a child process can write to it (it has a file descriptor), else the
    null device: an in-memory stream (a test runner's captured stderr) cannot be a
    child's stderr, and a server must not fail to start for that."""
    try:
        errlog.fileno()
    except (AttributeError, OSError, ValueError):  # io.UnsupportedOperation is both
        with open(os.devnull, "w") as sink:
            yield sink
        return
    yield errlog


class _WatchedReadStream:
    """A transport's read stream that reports its end (the server exited, the HTTP
    stream closed) so the session knows the connection is gone before the next call."""

    def __init__(self, inner: ReadStream[SessionMessage | Exception], ended: asyncio.Event) -> None:
        self._inner = inner
        self._ended = ended

    @property
    def last_context(self) -> Any:  # the SDK's HTTP transport carries sender contexts
        return getattr(self._inner, "last_context", None)

    async def receive(self) -> SessionMessage | Exception:
        try:
            return await self._inner.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
            self._ended.set()
            raise

    async def aclose(self) -> None:
        await self._inner.aclose()

    def __aiter__(self) -> _WatchedReadStream:
        return self

    async def __anext__(self) -> SessionMessage | Exception:
        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    async def __aenter__(self) -> _WatchedReadStream:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()


@contextlib.asynccontextmanager
async def _watched(
    transport: AbstractAsyncContextManager[TransportStreams], ended: asyncio.Event
) -> AsyncIterator[TransportStreams]:
    async with transport as (read_stream, write_stream):
        yield _WatchedReadStream(read_stream, ended), _WatchedWriteStream(write_stream)


class _WatchedWriteStream:
    """A transport's write stream that notes, for the call being made, whether its
    request was handed over (`_Handover`; the rule is in the module docstring)."""

    def __init__(self, inner: WriteStream[SessionMessage]) -> None:
        self._inner = inner

    async def send(self, item: SessionMessage, /) -> None:
        handover = _HANDOVER.get()
        if handover is None or not isinstance(item.message, types.JSONRPCRequest):
            await self._inner.send(item)
            return
        handover.started = True
        try:
            await self._inner.send(item)
        except (anyio.BrokenResourceError, anyio.ClosedResourceError):
            handover.refused = True  # no reader took it: nothing was delivered
            raise

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def __aenter__(self) -> _WatchedWriteStream:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()


def _leaf(error: BaseException) -> BaseException:
    """The first non-group exception inside ``error`` (anyio wraps task errors)."""
    while isinstance(error, BaseExceptionGroup) and error.exceptions:
        error = error.exceptions[0]
    return error


def _limit(default: float, timeout: float | None) -> float:
    if timeout is None:
        return default
    if not timeout > 0:
        raise ValueError(f"timeout must be a positive number of seconds, not {timeout!r}")
    return timeout


def _json_arguments(source: str, tool: str, arguments: Mapping[str, Any] | None) -> dict[str, Any]:
    """``arguments`` as a JSON object, or `ToolArgumentsError` before anything is sent."""
    if arguments is None:
        return {}
    if not isinstance(arguments, Mapping):
        raise ToolArgumentsError(source, tool, "arguments must be a JSON object")
    try:
        json.dumps(arguments, allow_nan=False)
    except (TypeError, ValueError) as exc:
        problem = f"arguments are not JSON: {clip(str(exc))}"
        raise ToolArgumentsError(source, tool, problem) from None
    except RecursionError:
        raise ToolArgumentsError(source, tool, "arguments are nested too deeply") from None
    return dict(arguments)


def _describe(error: BaseException) -> str:
    """An unexpected error in one line: its type, and its message unless it comes from
    the HTTP client (whose messages may quote a URL with its query)."""
    leaf = _leaf(error)
    name = type(leaf).__name__
    if isinstance(leaf, httpx2.HTTPError) or not str(leaf):
        return name
    return f"{name}: {clip(str(leaf))}"


def _leaf_text(error: BaseException) -> str:
    leaf = _leaf(error)
    if isinstance(leaf, MCPError):
        return leaf.message
    return type(leaf).__name__


async def probe(source: McpSource, *, seconds: float) -> tuple[ServerInfo, tuple[ToolInfo, ...]]:
    """Connect once, list every tool, disconnect: what ``flowledger source probe`` and
    the ``source_probe`` tool show (``seconds`` bound the handshake, then the listing)."""
    async with SourceSession(source, connect_timeout=seconds, call_timeout=seconds) as session:
        return session.server_info, await session.list_tools()
