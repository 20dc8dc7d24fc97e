"""``flowledger mcp --http``: workflow tools over MCP streamable HTTP, one session per token.

* With tokens (``{token: session_id}``, see `flowledger.mcp.tokens`) every request must
  carry ``Authorization: Bearer <token>``; anything else is answered 401 before it
  reaches the MCP layer. The token selects the workflow session the request is served
  from: each session has its own `WorkflowSession` (own supervisor, owning that session's
  lease), its own tool bundle and its own MCP server and session manager, created on the
  first request that needs it and shut down when the server stops. MCP session IDs of
  one workflow session are unknown to every other, so a token can neither see nor reach
  another token's runs.
* Without tokens the server serves one session (``session`` or the database's default
  session), opened before listening - and only on a loopback address: binding any other
  address without tokens is refused before listening.
* Every client is a *tenant* (tokens or not): the deploy tools reach only sources the
  operator registered (`SourceAccess.TENANT`), unless the operator started the server
  with ``allow_inline_sources`` (docs/sources.md).
* On a loopback address the SDK's DNS-rebinding protection is on (Host and Origin must
  be loopback).
* A POST body holding a repeated object key is answered 400 with a JSON-RPC parse error
  naming the key's JSON pointer before the SDK (which would let the last one win) sees it.

The endpoint is ``/mcp``. Stopping the server (SIGINT/SIGTERM, or `HttpMcpServer.stop`)
closes the listener, then every session.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import ipaddress
import json
import logging
import socket
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

import uvicorn
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings
from starlette.applications import Starlette
from starlette.datastructures import Headers
from starlette.responses import Response
from starlette.routing import Route
from starlette.types import Message, Receive, Scope, Send

from ..deploy.registry.access import SourceAccess
from ..workflows import Catalog
from ..workflows.records.run import is_id
from ._session import load_app, open_served_session
from .errors import McpStartupError
from .leaving import leave_session
from .screen import repeated_key_refusal
from .server import WorkflowMcpServer

__all__ = [
    "DEFAULT_HOST",
    "DEFAULT_PORT",
    "ENDPOINT",
    "HttpMcpServer",
    "is_loopback",
    "serve_http",
]

log = logging.getLogger(__name__)

DEFAULT_HOST: Final = "127.0.0.1"
DEFAULT_PORT: Final = 8765
ENDPOINT: Final = "/mcp"
MAX_REQUEST_BODY: Final = 1 << 20
_STOP_TIMEOUT: Final = 15.0
_UNAUTHORIZED: Final = -32001
_UNAVAILABLE: Final = -32002


def is_loopback(host: str) -> bool:
    """Whether ``host`` names only this machine (``localhost`` or a loopback address)."""
    name = host.strip().strip("[]").lower()
    if name == "localhost":
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def _digest(token: str) -> bytes:
    return hashlib.sha256(token.encode("utf-8")).digest()


def _json_error(status: int, code: int, message: str, **headers: str) -> Response:
    body = {"jsonrpc": "2.0", "id": None, "error": {"code": code, "message": message}}
    return Response(
        json.dumps(body, separators=(",", ":")),
        status_code=status,
        media_type="application/json",
        headers=headers,
    )


def _bearer(scope: Scope) -> str | None:
    """The token of the request's single ``Authorization: Bearer`` header, if any."""
    values = Headers(scope=scope).getlist("authorization")
    if len(values) != 1:
        return None
    scheme, _, token = values[0].strip().partition(" ")
    token = token.strip()
    if scheme.lower() != "bearer" or not token or " " in token:
        return None
    return token


async def _buffered_body(receive: Receive) -> tuple[bytes, Receive]:
    """A request's body (up to just over `MAX_REQUEST_BODY` bytes: the SDK refuses longer
    ones) and a ``receive`` that hands the same messages to the SDK again."""
    chunks: list[bytes] = []
    size = 0
    more = True
    pending: list[Message] = []
    while more and size <= MAX_REQUEST_BODY:
        message = await receive()
        pending.append(message)
        if message["type"] != "http.request":
            break
        chunk = message.get("body", b"")
        chunks.append(chunk)
        size += len(chunk)
        more = bool(message.get("more_body", False))

    async def replay() -> Message:
        if pending:
            return pending.pop(0)
        return await receive()

    return b"".join(chunks), replay


def _retrieve(future: asyncio.Future[Any]) -> None:
    """Mark a startup failure as seen (it is reported to each request that waits)."""
    if not future.cancelled():
        future.exception()


@dataclass(eq=False)
class _SessionHost:
    """One workflow session served over HTTP: runs in its own task, so the SDK session
    manager's task group is entered and left by the same task."""

    url: str
    catalog: Catalog
    session_id: str | None
    read_only: bool
    security: TransportSecuritySettings | None
    no_execute: bool = False
    access: SourceAccess = SourceAccess.TENANT
    ready: asyncio.Future[StreamableHTTPSessionManager] = field(init=False)
    task: asyncio.Task[None] = field(init=False)

    def __post_init__(self) -> None:
        loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        self.ready = loop.create_future()
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
            async with open_served_session(
                self.url,
                self.catalog,
                self.session_id,
                read_only=self.read_only,
                no_execute=self.no_execute,
                access=self.access,
            ) as served:
                mcp = WorkflowMcpServer(
                    served.tools,
                    journal=served.session.journal,
                    session_id=served.session_id,
                    read_only=served.read_only,
                    executes=served.executes,
                    notice=served.notice,
                )
                manager = StreamableHTTPSessionManager(
                    app=mcp.server,
                    security_settings=self.security,
                    max_request_body_size=MAX_REQUEST_BODY,
                )
                async with manager.run():
                    self.ready.set_result(manager)
                    await self._stop.wait()
                # its runs stop at their next step boundary (bounded by `stop`), saying
                # what they leave, before the session is shut down
                await leave_session(served.session)
        except Exception as exc:
            if not self.ready.done():
                self.ready.set_exception(exc)
            else:
                log.error("workflow session host failed: %s", exc)
        finally:
            if not self.ready.done():
                self.ready.set_exception(McpStartupError("the server is stopping"))

    async def manager(self) -> StreamableHTTPSessionManager:
        return await asyncio.shield(self.ready)

    async def stop(self) -> None:
        self._stop.set()
        try:
            await asyncio.wait_for(asyncio.shield(self.task), _STOP_TIMEOUT)
        except TimeoutError:
            self.task.cancel()
            with contextlib.suppress(BaseException):
                await self.task


class HttpMcpServer:
    """The streamable-HTTP MCP server. `run` serves until `stop` (or a signal)."""

    def __init__(
        self,
        db_url: str,
        *,
        app: str | None,
        host: str = DEFAULT_HOST,
        port: int = DEFAULT_PORT,
        tokens: Mapping[str, str] | None = None,
        read_only: bool = False,
        session: str | None = None,
        no_execute: bool = False,
        allow_inline_sources: bool = False,
    ) -> None:
        tokens = dict(tokens or {})
        if not tokens and not is_loopback(host):
            raise McpStartupError(
                f"refusing to serve on non-loopback address {host!r} without tokens: "
                "anyone who can reach it could run workflows; give --tokens-file or "
                "FLOWLEDGER_MCP_TOKENS, or bind 127.0.0.1"
            )
        if tokens and session is not None:
            raise McpStartupError(
                "--session cannot be combined with tokens: each token names its session"
            )
        if isinstance(port, bool) or not isinstance(port, int) or not 0 <= port <= 65535:
            raise McpStartupError(f"--port must be in 0..65535, not {port!r}")
        for sid in tokens.values():
            if not is_id(sid):
                raise McpStartupError("every token must map to a nonzero lowercase UUID")
        self.db_url = db_url
        self.app = app
        self.host = host
        self.port = port
        self.read_only = read_only
        self.no_execute = no_execute
        # A client of an HTTP server is a tenant, tokens or not (docs/sources.md).
        self.access = SourceAccess.TENANT_INLINE if allow_inline_sources else SourceAccess.TENANT
        self.session = session
        self._sessions = {_digest(token): sid for token, sid in tokens.items()}
        self._security: TransportSecuritySettings | None = None
        if is_loopback(host):
            self._security = TransportSecuritySettings(
                enable_dns_rebinding_protection=True,
                allowed_hosts=["127.0.0.1:*", "localhost:*", "[::1]:*"],
                allowed_origins=["http://127.0.0.1:*", "http://localhost:*", "http://[::1]:*"],
            )
        self._catalog: Catalog | None = None
        self._hosts: dict[str | None, _SessionHost] = {}
        self._closing = False
        self._server: uvicorn.Server | None = None
        self._stop_requested = False
        self.url: str | None = None

    @property
    def uses_tokens(self) -> bool:
        return bool(self._sessions)

    # -- sessions ----------------------------------------------------------------------------

    def _host(self, session_id: str | None) -> _SessionHost:
        if self._closing or self._catalog is None:
            raise McpStartupError("the server is stopping")
        host = self._hosts.get(session_id)
        if host is None or host.failed:
            host = _SessionHost(
                self.db_url,
                self._catalog,
                session_id,
                self.read_only,
                self._security,
                self.no_execute,
                self.access,
            )
            self._hosts[session_id] = host
        return host

    async def _stop_hosts(self) -> None:
        self._closing = True
        hosts = list(self._hosts.values())
        self._hosts.clear()
        await asyncio.gather(*(h.stop() for h in hosts), return_exceptions=True)

    # -- the endpoint ------------------------------------------------------------------------

    async def _endpoint(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self._sessions:
            token = _bearer(scope)
            session_id = None if token is None else self._sessions.get(_digest(token))
            if session_id is None:
                challenge = 'Bearer realm="flowledger"'
                if token is not None:
                    challenge += ', error="invalid_token"'
                response = _json_error(
                    401,
                    _UNAUTHORIZED,
                    "Unauthorized: send 'Authorization: Bearer <token>' with a valid token",
                    **{"WWW-Authenticate": challenge},
                )
                await response(scope, receive, send)
                return
            key: str | None = session_id
        else:
            key = self.session
        if scope.get("method") == "POST":
            body, receive = await _buffered_body(receive)
            refused = repeated_key_refusal(body)
            if refused is not None:
                response = Response(
                    refused.model_dump_json(by_alias=True, exclude_unset=True),
                    status_code=400,
                    media_type="application/json",
                )
                await response(scope, receive, send)
                return
        try:
            manager = await self._host(key).manager()
        except Exception as exc:
            # The details (they name the session) go to the server's log only.
            log.error("cannot serve a workflow session: %s", exc)
            response = _json_error(
                503, _UNAVAILABLE, "the workflow session is unavailable; try again later"
            )
            await response(scope, receive, send)
            return
        await manager.handle_request(scope, receive, send)

    def asgi_app(self) -> Starlette:
        endpoint = _Endpoint(self)
        return Starlette(routes=[Route(ENDPOINT, endpoint=endpoint)])

    # -- running -----------------------------------------------------------------------------

    def _bind(self) -> socket.socket:
        try:
            infos = socket.getaddrinfo(
                self.host, self.port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
            )
        except OSError as exc:
            raise McpStartupError(f"cannot resolve {self.host!r}: {exc}") from exc
        family, kind, proto, _, address = infos[0]
        sock = socket.socket(family, kind, proto)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind(address)
            sock.listen(128)
            sock.setblocking(False)
        except OSError as exc:
            sock.close()
            raise McpStartupError(
                f"cannot listen on {self.host}:{self.port}: {exc.strerror or exc}"
            ) from exc
        return sock

    async def run(self, *, ready: Callable[[str], None] | None = None) -> None:
        """Open the default session (without tokens), listen, call ``ready(url)``, serve
        until stopped, then shut every session down."""
        self._catalog = load_app(self.app)
        try:
            if not self._sessions:
                await self._host(self.session).manager()  # fail before listening
            sock = self._bind()
            try:
                config = uvicorn.Config(
                    self.asgi_app(),
                    lifespan="off",
                    log_config=None,
                    log_level="warning",
                    access_log=False,
                    timeout_graceful_shutdown=5,
                )
                bound = sock.getsockname()
                host = f"[{bound[0]}]" if ":" in bound[0] else bound[0]
                url = self.url = f"http://{host}:{bound[1]}{ENDPOINT}"

                def started() -> None:
                    if ready is not None:
                        ready(url)

                server = _Uvicorn(config, started)
                self._server = server
                server.should_exit = self._stop_requested
                await server.serve(sockets=[sock])
            finally:
                sock.close()
        finally:
            self._server = None
            await self._stop_hosts()

    def stop(self) -> None:
        """Ask `run` to stop (safe before it started)."""
        self._stop_requested = True
        if self._server is not None:
            self._server.should_exit = True


class _Uvicorn(uvicorn.Server):
    """uvicorn, telling us once it listens."""

    def __init__(self, config: uvicorn.Config, on_started: Callable[[], None]) -> None:
        super().__init__(config)
        self._on_started = on_started

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets=sockets)
        if self.started:
            self._on_started()


class _Endpoint:
    """The ASGI app Starlette routes ``/mcp`` to."""

    def __init__(self, owner: HttpMcpServer) -> None:
        self._owner = owner

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self._owner._endpoint(scope, receive, send)


def _announce(url: str, tokens: int) -> None:
    auth = f"{tokens} token(s), one session each" if tokens else "no tokens, loopback only"
    print(f"flowledger mcp: serving {url} ({auth})", file=sys.stderr, flush=True)


async def serve_http(
    db_url: str,
    *,
    app: str | None,
    host: str,
    port: int,
    tokens: Mapping[str, str],
    read_only: bool,
    session: str | None = None,
    no_execute: bool = False,
    allow_inline_sources: bool = False,
) -> None:
    """Serve streamable HTTP on ``host:port`` until interrupted; see the module doc."""
    server = HttpMcpServer(
        db_url,
        app=app,
        host=host,
        port=port,
        tokens=tokens,
        read_only=read_only,
        session=session,
        no_execute=no_execute,
        allow_inline_sources=allow_inline_sources,
    )
    count = len(set(tokens))
    await server.run(ready=lambda url: _announce(url, count))
