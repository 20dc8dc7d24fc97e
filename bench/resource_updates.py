"""Resource subscription latency: from a run's state change to the subscribed client's
``notifications/resources/updated``.

A fresh session on a SQLite file is served by the server that executes its runs (it
hears activities live), reached one of three ways (``--via``):

* ``memory``: `WorkflowMcpServer` in this process, the SDK client on the in-memory
  transport (protocol 2026-07-28, ``subscriptions/listen``);
* ``http``: ``python -m flowledger.mcp --http`` in a child process (loopback, the
  default session), the SDK client over streamable HTTP (2026-07-28, listen);
* ``http-legacy``: the same server, the SDK client in ``legacy`` mode (2025-11-25,
  ``resources/subscribe``; updates on the GET stream).

Per run of ``tests.mcp.watch_app`` (held at its first vertex until the bench opens the
gate, then paused for an answer): the delay is the moment the client receives the first
update after the registry record's ``updated_at`` of the pause (when the supervisor
recorded it), minus that ``updated_at``. Both are the machine's system clock (the child
process's and this one's). Printed: median, p99 and min-max in milliseconds, and the
load average (the machine is shared). With several ``--via``, the ways alternate run by
run, so each sees the same load.

    python bench/resource_updates.py --runs 100 --via memory --via http --via http-legacy
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from datetime import datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import httpx2
import mcp_types as types
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.client.subscriptions import ResourceUpdated
from mcp.shared.exceptions import MCPDeprecationWarning

from flowledger.mcp import WorkflowMcpServer
from flowledger.mcp._session import load_app, open_served_session

REPO = Path(__file__).resolve().parents[1]
APP = "tests.mcp.watch_app:catalog"
WAYS = ("memory", "http", "http-legacy")
#: Opens the updates of ``uri``: an iterator of the moments they arrive.
Updates = Callable[[str], Any]


async def read(client: Client, uri: str) -> dict[str, Any]:
    content = (await client.read_resource(uri)).contents[0]
    assert isinstance(content, types.TextResourceContents)
    data: dict[str, Any] = json.loads(content.text)
    return data


async def one(client: Client, updates: Updates, folder: Path) -> float:
    await asyncio.to_thread(folder.mkdir)
    started = await client.call_tool(
        "workflow_run_start",
        {
            "definition_name": "watched",
            "definition_version": "v1",
            "input": {"folder": str(folder)},
        },
    )
    block = started.content[0]
    assert isinstance(block, types.TextContent)
    uri = "flowledger://runs/" + json.loads(block.text)["run_id"]
    async with updates(uri) as arrivals:
        await asyncio.to_thread((folder / "first").touch)
        changed: float | None = None
        async with asyncio.timeout(60):
            async for received in arrivals:
                if changed is None:
                    run = await read(client, uri)
                    if run["run_status"] == "interrupted":
                        changed = datetime.fromisoformat(run["updated_at"]).timestamp()
                # an earlier change's update (a read after it may already show the
                # pause) is not the pause's: that one arrives after the record changed
                if changed is not None and received >= changed:
                    return (received - changed) * 1000
    raise AssertionError("no update")


def listening(client: Client) -> Updates:
    """Updates through ``subscriptions/listen`` (2026-07-28)."""

    @asynccontextmanager
    async def updates(uri: str) -> AsyncIterator[AsyncIterator[float]]:
        async with client.listen(resource_subscriptions=[uri]) as sub:

            async def arrivals() -> AsyncIterator[float]:
                async for event in sub:
                    received = time.time()
                    assert isinstance(event, ResourceUpdated)
                    yield received

            yield arrivals()

    return updates


class Subscribed:
    """Updates through ``resources/subscribe`` (2025-11-25): the client's message handler."""

    def __init__(self) -> None:
        self.queue: asyncio.Queue[tuple[str, float]] = asyncio.Queue()
        self.client: Client | None = None

    async def __call__(self, message: Any) -> None:
        if isinstance(message, types.ResourceUpdatedNotification):
            self.queue.put_nowait((message.params.uri, time.time()))

    @asynccontextmanager
    async def updates(self, uri: str) -> AsyncIterator[AsyncIterator[float]]:
        assert self.client is not None
        await self.client.subscribe_resource(uri)

        async def arrivals() -> AsyncIterator[float]:
            while True:
                got, received = await self.queue.get()
                if got == uri:
                    yield received

        try:
            yield arrivals()
        finally:
            await self.client.unsubscribe_resource(uri)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@asynccontextmanager
async def http_server(db: str) -> AsyncIterator[str]:
    """``python -m flowledger.mcp --http`` on loopback; its URL once it answers."""
    port = _free_port()
    env = {
        k: v for k, v in os.environ.items() if k not in ("FLOWLEDGER_DB", "FLOWLEDGER_MCP_TOKENS")
    }
    process = await asyncio.to_thread(
        subprocess.Popen,
        [
            sys.executable,
            "-m",
            "flowledger.mcp",
            "--http",
            "--port",
            str(port),
            "--db",
            db,
            "--app",
            APP,
        ],
        cwd=REPO,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    url = f"http://127.0.0.1:{port}/mcp"
    try:
        async with httpx2.AsyncClient() as probe, asyncio.timeout(120):
            while True:
                assert process.poll() is None, "flowledger mcp --http exited"
                try:
                    await probe.get(url, timeout=2.0)
                    break
                except httpx2.TransportError:
                    await asyncio.sleep(0.1)
        yield url
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            await asyncio.to_thread(process.wait, 30)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)


async def _open(way: str, stack: AsyncExitStack, tmp: str) -> tuple[Client, Updates]:
    """A client of a new server reached ``way``, and how it opens a run's updates."""
    db = f"sqlite:///{tmp}/{way}.db"
    if way == "memory":
        served = await stack.enter_async_context(open_served_session(db, load_app(APP)))
        mcp = WorkflowMcpServer(
            served.tools,
            journal=served.session.journal,
            session_id=served.session_id,
            registry=served.session.registry,
        )
        client = await stack.enter_async_context(Client(mcp.server))
        return client, listening(client)
    url = await stack.enter_async_context(http_server(db))
    http = await stack.enter_async_context(httpx2.AsyncClient(timeout=httpx2.Timeout(60.0)))
    transport = streamable_http_client(url, http_client=http)
    if way == "http":
        client = await stack.enter_async_context(Client(transport))
        return client, listening(client)
    subscribed = Subscribed()
    client = await stack.enter_async_context(
        Client(transport, mode="legacy", message_handler=subscribed)
    )
    subscribed.client = client
    return client, subscribed.updates


async def main(runs: int, ways: list[str]) -> None:
    delays: dict[str, list[float]] = {way: [] for way in ways}
    with tempfile.TemporaryDirectory() as tmp:
        async with AsyncExitStack() as stack:
            opened = {way: await _open(way, stack, tmp) for way in ways}
            for i in range(runs):
                for way, (client, updates) in opened.items():
                    folder = Path(tmp) / f"{way}-{i}"
                    delays[way].append(await one(client, updates, folder))
    for way, measured in delays.items():
        measured.sort()
        p99 = measured[min(len(measured) - 1, int(len(measured) * 0.99))]
        print(
            f"{way}: {runs} runs: median {statistics.median(measured):.1f} ms, "
            f"p99 {p99:.1f} ms, min-max {measured[0]:.1f}-{measured[-1]:.1f} ms"
        )
    print(f"load average {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument("--via", action="append", choices=WAYS, help="repeatable; default memory")
    arguments = parser.parse_args()
    # http-legacy uses the 2025-11-25 methods on purpose
    warnings.filterwarnings("ignore", category=MCPDeprecationWarning)
    asyncio.run(main(arguments.runs, arguments.via or ["memory"]))
