"""Both HTTP servers, in-process on 127.0.0.1 and an ephemeral port (uvicorn), for the
tests of the security layer they share; clients are real httpx clients, and a client
of another address binds 127.0.0.2 (Linux answers the whole of 127.0.0.0/8)."""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import httpx2 as httpx

from flowledger.httpsec import DEFAULT_BOUND, FailureBound
from flowledger.mcp import HttpMcpServer
from flowledger.web import WebServer

KINDS = ["mcp", "web"]
DEADLINE = 60.0  # only catches a hang
TOKEN_A = "token-a-0123456789abcdef"
TOKEN_B = "token-b-0123456789abcdef"
SESSION_A = "7c9e6679-7425-40de-944b-e07fc1f90ae7"
SESSION_B = "6ba7b810-9dad-41d1-80b4-00c04fd430c8"
WRONG = "token-x-0123456789abcdef"  # as long as the real ones
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "raw", "version": "0"},
    },
}
ACCEPT = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


class Clock:
    """A clock the test moves (`FailureBound.clock`)."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@dataclass
class Served:
    kind: str
    base: str  # http://127.0.0.1:PORT
    url: str  # the MCP endpoint, or the dashboard's root

    @property
    def host_refused(self) -> int:
        """The status a rebinding Host gets (the MCP SDK's 421, the dashboard's 400)."""
        return 421 if self.kind == "mcp" else 400

    async def attempt(
        self, http: httpx.AsyncClient, token: str | None, **headers: str
    ) -> httpx.Response:
        """One authenticated request: MCP ``initialize``, or the dashboard's runs page."""
        if token is not None:
            headers["Authorization"] = f"Bearer {token}"
        if self.kind == "mcp":
            return await http.post(self.url, json=INITIALIZE, headers={**ACCEPT, **headers})
        return await http.get(f"{self.base}/runs", headers=headers)

    def refused_token(self, response: httpx.Response) -> bool:
        """Whether ``response`` is the server's answer to an unknown token."""
        if self.kind == "mcp":
            return response.status_code == 401
        return response.status_code == 303 and response.headers["location"] == "/login"


def client(address: str = "127.0.0.1", **options: Any) -> httpx.AsyncClient:
    """An httpx client whose connections come from ``address``."""
    transport = httpx.AsyncHTTPTransport(local_address=address)
    return httpx.AsyncClient(transport=transport, timeout=DEADLINE, **options)


@asynccontextmanager
async def serving(
    kind: str,
    db: str,
    *,
    tokens: dict[str, str] | None = None,
    bound: FailureBound = DEFAULT_BOUND,
) -> AsyncIterator[Served]:
    server: HttpMcpServer | WebServer
    if kind == "mcp":
        server = HttpMcpServer(
            db, app=None, host="127.0.0.1", port=0, tokens=tokens or {}, failed_auth=bound
        )
    else:
        server = WebServer(
            db, app=None, host="127.0.0.1", port=0, tokens=tokens or {}, failed_auth=bound
        )
    ready: asyncio.Future[str] = asyncio.get_running_loop().create_future()
    task = asyncio.create_task(server.run(ready=ready.set_result))
    await asyncio.wait([ready, task], return_when=asyncio.FIRST_COMPLETED)
    if not ready.done():
        task.result()
        raise AssertionError("the server stopped before listening")
    url = ready.result()
    base = re.sub(r"^(http://[^/]+).*$", r"\1", url)
    try:
        yield Served(kind, base, url)
    finally:
        server.stop()
        await asyncio.wait_for(task, DEADLINE)


async def csrf(http: httpx.AsyncClient, url: str) -> str:
    """The dashboard's CSRF field of the form on ``url`` (its cookie is now in ``http``)."""
    page = await http.get(url)
    match = re.search(r'name="csrf" value="([^"]+)"', page.text)
    assert match is not None, page.text
    return match.group(1)
