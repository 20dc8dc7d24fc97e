"""Resource subscription latency: from a run's state change to the subscribed client's
``notifications/resources/updated``.

One process owns a fresh session on a SQLite file and serves it with `WorkflowMcpServer`
(the server that executes the session's runs: it hears activities live); an SDK client
on the in-memory transport (protocol 2026-07-28) listens to ``flowledger://runs/{id}``.
Per run of ``tests.mcp.watch_app`` (held at its first vertex until the bench opens the
gate, then paused for an answer): the delay is the moment the client receives the first
update after the registry record's ``updated_at`` of the pause (when the supervisor
recorded it), minus that ``updated_at``. Both clocks are
this process's system clock. Printed: median, p99 and min-max in milliseconds, and the
load average (the machine is shared).

    python bench/resource_updates.py --runs 50
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import mcp_types as types
from mcp import Client
from mcp.client.subscriptions import ResourceUpdated

from flowledger.mcp import WorkflowMcpServer
from flowledger.mcp._session import load_app, open_served_session

APP = "tests.mcp.watch_app:catalog"


async def read(client: Client, uri: str) -> dict[str, Any]:
    content = (await client.read_resource(uri)).contents[0]
    assert isinstance(content, types.TextResourceContents)
    data: dict[str, Any] = json.loads(content.text)
    return data


async def one(client: Client, folder: Path) -> float:
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
    async with client.listen(resource_subscriptions=[uri]) as sub:
        await asyncio.to_thread((folder / "first").touch)
        changed: float | None = None
        async with asyncio.timeout(60):
            async for event in sub:
                received = time.time()
                assert isinstance(event, ResourceUpdated)
                if changed is None:
                    run = await read(client, uri)
                    if run["run_status"] == "interrupted":
                        changed = datetime.fromisoformat(run["updated_at"]).timestamp()
                # an earlier change's update (a read after it may already show the
                # pause) is not the pause's: that one arrives after the record changed
                if changed is not None and received >= changed:
                    return (received - changed) * 1000
    raise AssertionError("no update")


async def main(runs: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        async with open_served_session(f"sqlite:///{tmp}/b.db", load_app(APP)) as served:
            mcp = WorkflowMcpServer(
                served.tools,
                journal=served.session.journal,
                session_id=served.session_id,
                registry=served.session.registry,
            )
            async with Client(mcp.server) as client:
                delays = [await one(client, Path(tmp) / f"r{i}") for i in range(runs)]
    delays.sort()
    p99 = delays[min(len(delays) - 1, int(len(delays) * 0.99))]
    print(
        f"{runs} runs: median {statistics.median(delays):.1f} ms, p99 {p99:.1f} ms, "
        f"min-max {delays[0]:.1f}-{delays[-1]:.1f} ms; load average {os.getloadavg()[0]:.1f}"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=50)
    asyncio.run(main(parser.parse_args().runs))
