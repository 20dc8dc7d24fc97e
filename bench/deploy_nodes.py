"""What an artifact node costs: a `tool` node against a direct MCP SDK call, and a chain.

    python bench/deploy_nodes.py [--calls 1000] [--chain 100] [--db-dir DIR]

1. **Tool node overhead.** An artifact loops ``--calls`` times over one `tool` node that
   calls ``get_current_time`` of ``mcp-server-time`` over stdio (plus a `set` and a
   `switch` node per round). The tool node's own time is read from the run's trace (its
   entries' start and end: arguments, the tool lookup, the argument check against the
   tool's schema, the two durable intent records and the call itself). The same number of
   direct calls through the SDK's client on one session (``mcp.Client``) are timed before
   and after the run. Printed: median and p99 of each, and the medians' difference.
2. **A 100-node chain.** An artifact of ``--chain`` `set` nodes in a row: wall time per
   node of the whole run (start to completion, through the supervisor, SQLite with
   ``synchronous=FULL``), and database bytes per node (the SQLite file and its WAL after
   a checkpoint of the WAL, divided by the nodes).

Everything runs in one process on one SQLite file per part; nothing here is a test.
"""

from __future__ import annotations

import argparse
import asyncio
import sqlite3
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from mcp import Client
from mcp.client.stdio import StdioServerParameters

from flowledger.deploy import StdioSource, compile_artifact, validate_artifact
from flowledger.storage import open_store
from flowledger.tools import WorkflowTools
from flowledger.workflows import Catalog
from flowledger.workflows.runtime.session import WorkflowSession

OBJECT = {"type": "object", "additionalProperties": False}


def loop_artifact(calls: int) -> dict[str, Any]:
    return {
        "format": "flowledger.artifact/v1",
        "name": "clock_loop",
        "version": "1",
        "input_schema": OBJECT,
        "output_schema": OBJECT,
        "dependencies": {"clock": {"tools": ["get_current_time"]}},
        "state": {"rounds": {"initial": 0}, "now": {}},
        "start": "call",
        "nodes": {
            "call": {
                "kind": "tool",
                "dependency": "clock",
                "tool": "get_current_time",
                "arguments": {"timezone": "Etc/UTC"},
                "assign": {"now": "${ result.structured.datetime }"},
                "next": "count",
            },
            "count": {
                "kind": "set",
                "assign": {"rounds": "${ sum([state.rounds, `1`]) }"},
                "next": "again",
            },
            "again": {
                "kind": "switch",
                "cases": [{"when": f"${{ state.rounds < `{calls}` }}", "next": "call"}],
                "default": "done",
            },
            "done": {"kind": "end", "outcome": "done"},
        },
    }


def chain_artifact(length: int) -> dict[str, Any]:
    nodes: dict[str, Any] = {
        f"n{i}": {
            "kind": "set",
            "assign": {"count": "${ sum([state.count, `1`]) }"},
            "next": f"n{i + 1}" if i + 1 < length else "done",
        }
        for i in range(length)
    }
    nodes["done"] = {"kind": "end", "outcome": "done"}
    return {
        "format": "flowledger.artifact/v1",
        "name": "chain",
        "version": "1",
        "input_schema": OBJECT,
        "output_schema": OBJECT,
        "state": {"count": {"initial": 0}},
        "start": "n0",
        "nodes": nodes,
    }


def time_server() -> StdioSource:
    script = Path(sys.executable).parent / "mcp-server-time"
    return StdioSource(str(script), ["--local-timezone", "Etc/UTC"])


async def direct_calls(calls: int) -> list[float]:
    source = time_server()
    params = StdioServerParameters(command=source.command, args=list(source.args))
    durations = []
    async with Client(params) as client:
        for _ in range(10):
            await client.call_tool("get_current_time", {"timezone": "Etc/UTC"})
        for _ in range(calls):
            started = time.perf_counter()
            await client.call_tool("get_current_time", {"timezone": "Etc/UTC"})
            durations.append(time.perf_counter() - started)
    return durations


async def run_artifact(
    url: str, document: dict[str, Any], sources: dict[str, Any]
) -> tuple[float, str, Any]:
    async with open_store(url) as store:
        catalog = Catalog()
        catalog.register(compile_artifact(validate_artifact(document), sources=sources))
        session = WorkflowSession.build(store, str(uuid.uuid4()), catalog)
        await session.supervisor.activate()
        tools = WorkflowTools.for_session(session)
        started = time.perf_counter()
        run = await tools.call(
            "workflow_run_start",
            {"definition_name": document["name"], "definition_version": "1", "input": {}},
        )
        await session.supervisor.wait_idle()
        wall = time.perf_counter() - started
        record = await session.registry.get(session.session_id, run["run_id"])
        assert record.status.value == "completed", record
        definition = session.catalog.resolve(document["name"], "1")
        entries = []
        start = 0
        while True:
            trace = definition.trace  # type: ignore[attr-defined]
            page = await trace.read(record.graph_run_id, start=start, limit=100)
            entries += page.entries
            start += len(page.entries)
            if start >= page.total or not page.entries:
                break
        await session.supervisor.shutdown()
        return wall, record.graph_run_id, entries


def quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def ms(value: float) -> str:
    return f"{value * 1000:.2f} ms"


async def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--calls", type=int, default=1000)
    parser.add_argument("--chain", type=int, default=100)
    parser.add_argument("--db-dir", default=None)
    options = parser.parse_args()
    folder = Path(options.db_dir or tempfile.mkdtemp(prefix="flowledger-bench-"))

    before = await direct_calls(options.calls)
    _, _, entries = await run_artifact(
        f"sqlite:///{folder / 'loop.db'}", loop_artifact(options.calls), {"clock": time_server()}
    )
    after = await direct_calls(options.calls)
    node = [(e.ended_at - e.started_at).total_seconds() for e in entries if e.node == "call"]
    direct = before + after
    for what, values in ((f"tool node ({len(node)} calls)", node), ("direct SDK call", direct)):
        print(f"{what}: median {ms(statistics.median(values))}, p99 {ms(quantile(values, 0.99))}")
    overhead = statistics.median(node) - statistics.median(direct)
    print(f"overhead of a tool node at the median: {ms(overhead)}")

    path = folder / "chain.db"
    wall, _, _ = await run_artifact(f"sqlite:///{path}", chain_artifact(options.chain), {})
    with sqlite3.connect(path) as db:
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    size = path.stat().st_size
    print(
        f"chain of {options.chain} set nodes: {ms(wall / options.chain)} per node, "
        f"{size / options.chain:.0f} database bytes per node ({size} bytes)"
    )


if __name__ == "__main__":
    asyncio.run(main())
