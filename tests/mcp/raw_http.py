"""A raw JSON-RPC client of ``flowledger mcp --http`` speaking 2026-07-28 (for what the SDK
client does not do: the tasks extension's ``taskIds`` listen filter and its
``notifications/tasks``)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx2

TASKS = "io.modelcontextprotocol/tasks"
WITH_TASKS: dict[str, Any] = {"extensions": {TASKS: {}}, "elicitation": {"form": {}}}
PLAIN: dict[str, Any] = {}


def _body(ident: int, method: str, params: dict[str, Any], capabilities: dict[str, Any]) -> Any:
    meta = {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "1"},
        "io.modelcontextprotocol/clientCapabilities": capabilities,
    }
    return {"jsonrpc": "2.0", "id": ident, "method": method, "params": {**params, "_meta": meta}}


def _headers(token: str | None, method: str, name: str | None) -> dict[str, str]:
    headers = {
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": "2026-07-28",
        "Mcp-Method": method,
    }
    if name is not None:
        headers["Mcp-Name"] = name
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    return headers


async def _messages(response: httpx2.Response) -> AsyncIterator[Any]:
    """The JSON-RPC messages of a response: one JSON body, or an SSE stream's events."""
    if not response.headers.get("content-type", "").startswith("text/event-stream"):
        yield json.loads(await response.aread())
        return
    data: list[str] = []
    async for line in response.aiter_lines():
        if line.startswith("data:"):
            data.append(line[5:].strip())
        elif not line and data:
            yield json.loads("\n".join(data))
            data = []


class RawClient:
    """Requests as one client of one token (None: no token)."""

    def __init__(self, http: httpx2.AsyncClient, url: str, token: str | None) -> None:
        self.http = http
        self.url = url
        self.token = token
        self._next = 0

    def _id(self) -> int:
        self._next += 1
        return self._next

    @property
    def last_id(self) -> int:
        """The ID of the last request sent (a listen stream's subscription ID)."""
        return self._next

    async def request(
        self,
        method: str,
        params: dict[str, Any],
        capabilities: dict[str, Any] = WITH_TASKS,
        name: str | None = None,
    ) -> Any:
        """The response message (``result`` or ``error``) of one request."""
        ident = self._id()
        async with self.http.stream(
            "POST",
            self.url,
            json=_body(ident, method, params, capabilities),
            headers=_headers(self.token, method, name),
        ) as response:
            async for message in _messages(response):
                if message.get("id") == ident:
                    return message
        raise AssertionError(f"no response to {method}")

    async def call(self, tool: str, arguments: dict[str, Any], **options: Any) -> Any:
        return await self.request(
            "tools/call", {"name": tool, "arguments": arguments}, name=tool, **options
        )

    async def task(self, method: str, task_id: str, **params: Any) -> Any:
        return await self.request(method, {"taskId": task_id, **params}, name=task_id)

    @asynccontextmanager
    async def listen(
        self, notifications: dict[str, Any], capabilities: dict[str, Any] = WITH_TASKS
    ) -> AsyncIterator[AsyncIterator[Any]]:
        """A ``subscriptions/listen`` stream's messages (the acknowledgement first, or
        the request's error response)."""
        ident = self._id()
        body = _body(ident, "subscriptions/listen", {"notifications": notifications}, capabilities)
        async with self.http.stream(
            "POST", self.url, json=body, headers=_headers(self.token, "subscriptions/listen", None)
        ) as response:
            yield _messages(response)


@asynccontextmanager
async def raw_client(url: str, token: str | None) -> AsyncIterator[RawClient]:
    async with httpx2.AsyncClient(timeout=httpx2.Timeout(60.0)) as http:
        yield RawClient(http, url, token)
