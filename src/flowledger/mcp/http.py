"""``flowledger mcp --http``: workflow tools over MCP streamable HTTP, one session per token.

* Every request passes the shared HTTP security layer first (`flowledger.httpsec`; the
  same one as the dashboard's): on a loopback address the ``Host`` must be loopback (421
  otherwise: no DNS rebinding), an ``Origin`` must be this server (403), and a body over
  1 MiB is refused with 413 before anything reads it.
* With tokens (``{token: session_id}``, see `flowledger.httpsec.tokens`) every request must
  carry ``Authorization: Bearer <token>``; anything else is answered 401 before it
  reaches the MCP layer. After too many failed tokens from one client address
  (`flowledger.httpsec.throttle`; 10 a minute by default, ``failed_auth``) its requests
  are answered 429 with ``Retry-After`` without their token being compared. The token
  selects the workflow session the request is served from: each session has its own
  `WorkflowSession` (own supervisor, owning that session's lease), its own tool bundle
  and its own MCP server and session manager, created on the first request that needs
  it and shut down when the server stops. MCP session IDs of one workflow session are
  unknown to every other, so a token can neither see nor reach another token's runs.
* Without tokens the server serves one session (``session`` or the database's default
  session), opened before listening - and only on a loopback address: binding any other
  address without tokens is refused before listening.
* Every client is a *tenant* (tokens or not): the deploy tools reach only sources the
  operator registered (`SourceAccess.TENANT`), unless the operator started the server
  with ``allow_inline_sources`` (docs/sources.md).
* A POST body holding a repeated object key, or a request whose ``id`` is not a string
  or an integer, is answered 400 with a JSON-RPC error (`flowledger.mcp.screen`) before
  the SDK (which would let the last key win, or take the request for a notification
  and answer a bare 202) sees it.

The endpoint is ``/mcp``. Stopping the server (SIGINT/SIGTERM, or `HttpMcpServer.stop`)
closes the listener, then every session.
"""

from __future__ import annotations

import json
import logging
import socket
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from typing import Final

import mcp_types as types
import uvicorn
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from starlette.applications import Starlette
from starlette.datastructures import Headers
from starlette.responses import Response
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from ..deploy.registry.access import SourceAccess
from ..httpsec import (
    DEFAULT_BOUND,
    DEFAULT_MAX_BODY,
    Authenticator,
    FailureBound,
    Guard,
    Refusal,
    SessionHosts,
    TooManyFailuresError,
    bearer_token,
    client_key,
    is_loopback,
    open_bind_refusal,
    request_body,
)
from ..observability import metrics
from ..observability.endpoint import METRICS_PATH, metrics_response
from ..observability.logs import serving
from ..workflows import Catalog
from ..workflows.records.answers import answering
from ..workflows.records.run import is_id
from ._session import load_app, open_served_session
from .errors import McpStartupError
from .leaving import leave_session
from .screen import body_refusal
from .server import WorkflowMcpServer

__all__ = [
    "DEFAULT_HOST",
    "DEFAULT_PORT",
    "ENDPOINT",
    "MAX_REQUEST_BODY",
    "HttpMcpServer",
    "is_loopback",
    "serve_http",
]

log = logging.getLogger(__name__)

DEFAULT_HOST: Final = "127.0.0.1"
DEFAULT_PORT: Final = 8765
ENDPOINT: Final = "/mcp"
MAX_REQUEST_BODY: Final = DEFAULT_MAX_BODY
_UNAUTHORIZED: Final = -32001
_UNAVAILABLE: Final = -32002


def _json_error(status: int, code: int, message: str, **headers: str) -> Response:
    body = {"jsonrpc": "2.0", "id": None, "error": {"code": code, "message": message}}
    return Response(
        json.dumps(body, separators=(",", ":")),
        status_code=status,
        media_type="application/json",
        headers=headers,
    )


def _refused(scope: Scope, refusal: Refusal) -> Response:
    """How the MCP server answers a request the security layer refused."""
    return _json_error(refusal.status, types.INVALID_REQUEST, refusal.message)


class HttpMcpServer:
    """The streamable-HTTP MCP server. `run` serves until `stop` (or a signal).

    ``failed_auth`` bounds failed token authentications per client address
    (`flowledger.httpsec.FailureBound`: by default 10 per 60 s, 4096 clients kept)."""

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
        failed_auth: FailureBound = DEFAULT_BOUND,
        allow_inline_sources: bool = False,
    ) -> None:
        tokens = dict(tokens or {})
        refusal = open_bind_refusal(
            host, tokens=bool(tokens), how="--tokens-file or FLOWLEDGER_MCP_TOKENS"
        )
        if refusal is not None:
            raise McpStartupError(refusal)
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
        self._auth = Authenticator(tokens, failed_auth)
        self._catalog: Catalog | None = None
        self._hosts: SessionHosts[StreamableHTTPSessionManager] = SessionHosts(
            self._serve_session, log=log
        )
        self._server: uvicorn.Server | None = None
        self._stop_requested = False
        self.url: str | None = None

    @property
    def uses_tokens(self) -> bool:
        return self._auth.uses_tokens

    # -- sessions ----------------------------------------------------------------------------

    @asynccontextmanager
    async def _serve_session(
        self, session_id: str | None
    ) -> AsyncIterator[StreamableHTTPSessionManager]:
        """One workflow session served over HTTP (entered and left by its own task,
        as the SDK session manager's task group needs)."""
        if self._catalog is None:
            raise McpStartupError("the server is not running")
        async with open_served_session(
            self.db_url,
            self._catalog,
            session_id,
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
                registry=served.session.registry,
            )
            # Host and Origin are checked by the guard in front of every session
            # (`asgi_app`), so the SDK's own checks stay off.
            manager = StreamableHTTPSessionManager(
                app=mcp.server, security_settings=None, max_request_body_size=MAX_REQUEST_BODY
            )
            async with manager.run():
                yield manager
            # its runs stop at their next step boundary (bounded by `stop`), saying
            # what they leave, before the session is shut down
            await leave_session(served.session)

    # -- the endpoint ------------------------------------------------------------------------

    def _session_of(self, scope: Scope) -> tuple[str | None, Response | None]:
        """The workflow session the request is served from, or the answer refusing it."""
        if not self._auth.uses_tokens:
            return self.session, None
        token = bearer_token(Headers(scope=scope))
        session_id = None
        if token is not None:
            try:
                session_id = self._auth.authenticate(token, client_key(scope))
            except TooManyFailuresError as exc:
                message = f"Too many requests: {exc}"
                return None, _json_error(429, _UNAUTHORIZED, message, **exc.headers)
        if session_id is None:
            challenge = 'Bearer realm="flowledger"'
            if token is not None:
                challenge += ', error="invalid_token"'
            return None, _json_error(
                401,
                _UNAUTHORIZED,
                "Unauthorized: send 'Authorization: Bearer <token>' with a valid token",
                **{"WWW-Authenticate": challenge},
            )
        return session_id, None

    async def _metrics(self, scope: Scope, receive: Receive, send: Send) -> None:
        """``/metrics``: the process's metrics (docs/observability.md), for a request
        with a valid token (any: they are the whole process's counts, never a run's id,
        input or state) when every token reaches the same session; without tokens
        (loopback only), for anyone."""
        if scope.get("method") not in ("GET", "HEAD"):
            response = _json_error(405, types.INVALID_REQUEST, "/metrics answers GET only")
            await response(scope, receive, send)
            return
        _, refused = self._session_of(scope)
        response = refused or await metrics_response(
            serves_one_session=self._auth.serves_one_session
        )
        await response(scope, receive, send)

    async def _endpoint(self, scope: Scope, receive: Receive, send: Send) -> None:
        key, refused = self._session_of(scope)
        if refused is None and scope.get("method") == "POST":
            error = body_refusal(request_body(scope))
            if error is not None:
                refused = Response(
                    error.model_dump_json(by_alias=True, exclude_unset=True),
                    status_code=400,
                    media_type="application/json",
                )
        if refused is not None:
            await refused(scope, receive, send)
            return
        try:
            manager = await self._hosts.get(key)
        except Exception as exc:
            # The details (they name the session) go to the server's log only.
            log.error("cannot serve a workflow session: %s", exc)
            response = _json_error(
                503, _UNAVAILABLE, "the workflow session is unavailable; try again later"
            )
            await response(scope, receive, send)
            return
        with answering("mcp-http"):  # the SDK runs the session's calls from this task
            await manager.handle_request(scope, receive, send)

    def asgi_app(self) -> ASGIApp:
        """``/mcp`` behind the HTTP security layer (`flowledger.httpsec.Guard`)."""
        endpoint = _Endpoint(self)
        scrape = _Scrape(self)
        routes = Starlette(
            routes=[Route(ENDPOINT, endpoint=endpoint), Route(METRICS_PATH, endpoint=scrape)]
        )
        return Guard(
            routes, loopback=is_loopback(self.host), respond=_refused, max_body=MAX_REQUEST_BODY
        )

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
        metrics.enable_if_available()  # counted from the start; /metrics says if not
        try:
            if not self._auth.uses_tokens:
                await self._hosts.get(self.session)  # fail before listening
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
            await self._hosts.close()

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


class _Scrape:
    """The ASGI app Starlette routes ``/metrics`` to."""

    def __init__(self, owner: HttpMcpServer) -> None:
        self._owner = owner

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self._owner._metrics(scope, receive, send)


def _announce(url: str, tokens: int) -> None:
    auth = f"{tokens} token(s), one session each" if tokens else "no tokens, loopback only"
    serving(f"flowledger mcp: serving {url} ({auth})")


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
