"""``flowledger web``: the dashboard served by uvicorn until stopped.

Refuses, before listening, a non-loopback address without tokens (anyone who reaches it
could run workflows; `flowledger.httpsec.open_bind_refusal`, as the MCP server does),
and a session it cannot serve (owned by another process: stop it, or serve
``--read-only`` beside it).
"""

from __future__ import annotations

import signal
import socket
from collections.abc import Callable, Mapping
from types import FrameType
from typing import Final

import uvicorn

from ..host import load_catalog
from ..httpsec import DEFAULT_BOUND, FailureBound, StartupError, is_loopback, open_bind_refusal
from ..observability import metrics
from ..observability.logs import serving
from .app import Dashboard
from .security import Gate
from .sessions import SessionPool

__all__ = ["DEFAULT_HOST", "DEFAULT_PORT", "WebServer", "WebStartupError"]

DEFAULT_HOST: Final = "127.0.0.1"
DEFAULT_PORT: Final = 8000


class WebStartupError(StartupError):
    """The dashboard cannot start; the message (one line) says why and what to do."""


class WebServer:
    """``flowledger web``. ``failed_auth`` bounds failed token authentications per
    client address (`flowledger.httpsec.FailureBound`: by default 10 per 60 s)."""

    def __init__(
        self,
        db_url: str,
        *,
        app: str | None = None,
        host: str = DEFAULT_HOST,
        port: int = DEFAULT_PORT,
        tokens: Mapping[str, str] | None = None,
        read_only: bool = False,
        session: str | None = None,
        failed_auth: FailureBound = DEFAULT_BOUND,
    ) -> None:
        tokens = dict(tokens or {})
        refusal = open_bind_refusal(host, tokens=bool(tokens), how="--tokens-file")
        if refusal is not None:
            raise WebStartupError(refusal)
        if tokens and session is not None:
            raise WebStartupError(
                "--session cannot be combined with tokens: each token names its session"
            )
        self.db_url = db_url
        self.app = app
        self.host = host
        self.port = port
        self.tokens = tokens
        self.read_only = read_only
        self.session = session
        self.failed_auth = failed_auth
        self.url = ""
        self.dashboard: Dashboard | None = None  # while it serves
        self._server: uvicorn.Server | None = None
        self._stop_requested = False

    async def run(self, *, ready: Callable[[str], None] | None = None) -> None:
        metrics.enable_if_available()  # counted from the start; /metrics says if not
        catalog = load_catalog(self.app)
        pool = SessionPool(self.db_url, catalog, read_only=self.read_only)
        try:
            if not self.tokens:
                try:
                    await pool.open_first(self.session)
                except Exception as exc:
                    raise WebStartupError(
                        f"cannot serve the workflow session: {_reason(exc)}"
                    ) from exc
            gate = Gate(self.tokens, loopback=is_loopback(self.host), failed_auth=self.failed_auth)
            dashboard = self.dashboard = Dashboard(pool, gate, read_only=self.read_only)
            sock = self._bind()
            try:
                config = uvicorn.Config(
                    dashboard.asgi_app(),
                    lifespan="off",
                    log_config=None,
                    log_level="warning",
                    access_log=False,
                    timeout_graceful_shutdown=2,
                )
                bound = sock.getsockname()
                host = f"[{bound[0]}]" if ":" in bound[0] else bound[0]
                url = self.url = f"http://{host}:{bound[1]}/"
                server = _Uvicorn(config, lambda: ready(url) if ready is not None else None)
                self._server = server
                server.should_exit = self._stop_requested
                await server.serve(sockets=[sock])
            finally:
                sock.close()
        finally:
            self._server = None
            await pool.close()

    def stop(self) -> None:
        self._stop_requested = True
        if self._server is not None:
            self._server.should_exit = True

    def _bind(self) -> socket.socket:
        try:
            infos = socket.getaddrinfo(self.host, self.port, type=socket.SOCK_STREAM)
        except OSError as exc:
            raise WebStartupError(f"cannot resolve {self.host!r}: {exc.strerror or exc}") from None
        family, kind, proto, _, address = infos[0]
        sock = socket.socket(family, kind, proto)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(address)
        except OSError as exc:
            sock.close()
            raise WebStartupError(
                f"cannot listen on {self.host}:{self.port}: {exc.strerror or exc}"
            ) from None
        sock.listen(128)
        sock.setblocking(False)
        return sock


def _reason(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    from ..workflows.errors import SessionOwnedError

    if isinstance(exc, SessionOwnedError):
        return (
            f"workflow session {exc.session_id} is owned by another process (a worker, a "
            "`flowledger start`, an MCP server); stop it, or serve --read-only beside it"
        )
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


class _Uvicorn(uvicorn.Server):
    """uvicorn, telling us once it listens, and not raising the signal that stopped it
    again once it has stopped: the sessions still have to stop their runs at the next
    step boundary (a second SIGINT, then, lets go at once)."""

    def __init__(self, config: uvicorn.Config, on_started: Callable[[], None]) -> None:
        super().__init__(config)
        self._on_started = on_started

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        if self.should_exit and sig == signal.SIGINT:
            self.force_exit = True
        else:
            self.should_exit = True

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets=sockets)
        if self.started:
            self._on_started()


def announce(url: str, tokens: int, read_only: bool) -> None:
    auth = f"{tokens} token(s), one session each" if tokens else "no tokens, loopback only"
    mode = ", read-only" if read_only else ""
    serving(f"flowledger web: serving {url} ({auth}{mode})")
