"""``flowledger worker --metrics-port N``: ``/metrics`` on a small HTTP listener of its own.

It listens on ``--metrics-host`` (127.0.0.1 by default) and has no tokens: the counts it
shows hold no run ids, inputs or states, and an address other than loopback is the
operator's choice (docs/observability.md). It passes the same Host/Origin checks as the
other servers (`flowledger.httpsec.Guard`), so a web page cannot read it through DNS
rebinding, and takes no request body.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import AsyncIterator, Iterator

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Route
from starlette.types import Scope

from ..httpsec import Guard, Refusal, is_loopback
from ..observability.endpoint import METRICS_PATH, metrics_response
from .runtime import CliError

__all__ = ["metrics_listener"]


class _Quiet(uvicorn.Server):
    """uvicorn inside a host that handles signals itself (the worker stops its runs
    first): it must neither take SIGINT/SIGTERM nor raise them again when it stops."""

    def __init__(self, config: uvicorn.Config) -> None:
        super().__init__(config)
        self.listening = asyncio.Event()

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets=sockets)
        if self.started:
            self.listening.set()

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


def _refused(scope: Scope, refusal: Refusal) -> Response:
    return PlainTextResponse(refusal.message, status_code=refusal.status)


async def _scrape(request: Request) -> Response:
    # the operator's listener (no tenants reach it): every session of the worker is theirs
    return await metrics_response(serves_one_session=True)


def _bind(host: str, port: int) -> socket.socket:
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
        family, kind, proto, _, address = infos[0]
        sock = socket.socket(family, kind, proto)
    except OSError as exc:
        raise CliError(f"--metrics-host {host!r}: {exc}") from None
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(64)
        sock.setblocking(False)
    except OSError as exc:
        sock.close()
        raise CliError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    return sock


@contextlib.asynccontextmanager
async def metrics_listener(host: str, port: int) -> AsyncIterator[str]:
    """Serve ``/metrics`` on ``host:port`` while the context lasts; yields its URL."""
    app = Starlette(routes=[Route(METRICS_PATH, _scrape, methods=["GET"])])
    guarded = Guard(app, loopback=is_loopback(host), respond=_refused, max_body=0)
    config = uvicorn.Config(
        guarded, lifespan="off", log_config=None, log_level="warning", access_log=False
    )
    server = _Quiet(config)
    sock = _bind(host, port)
    try:
        bound = sock.getsockname()
        shown = f"[{bound[0]}]" if ":" in bound[0] else bound[0]
        task = asyncio.create_task(server.serve(sockets=[sock]), name="metrics-listener")
        listening = asyncio.create_task(server.listening.wait())
        await asyncio.wait({task, listening}, return_when=asyncio.FIRST_COMPLETED)
        listening.cancel()
        if not server.listening.is_set():
            task.result()  # its startup failed: say why
            raise CliError(f"the metrics listener on {host}:{port} stopped at once")
        try:
            yield f"http://{shown}:{bound[1]}{METRICS_PATH}"
        finally:
            server.should_exit = True
            await task
    finally:
        sock.close()
