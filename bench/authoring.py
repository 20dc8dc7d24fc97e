"""What a scripted model pays to build the README's clock workflow (examples/clock.yaml)
over MCP: through drafts, against writing the whole document; and ``draft_patch`` on a
50-node draft (bench/drafts.py's measurement, reused).

Each repetition starts from an empty session of a database where the operator has
registered and probed ``clock`` (mcp-server-time, from this interpreter's environment):
the stdio MCP server (``python -m flowledger.mcp --session NEW``) is started and the
clock is found in the catalog; the seconds count from the first tool call to the answer
that makes the deployment live (the server's start is not counted: it is the same for
both). Both ways make the same two calls first (``capability_list`` to find the tool,
``capability_inspect`` for its argument and output schema) and end with the same
artifact (the digest of examples/clock.yaml) and the same deployment (``what_time_local``
binding ``clock`` to the registered source), which the bench checks.

* **document**: ``artifact_save`` with the whole YAML document, ``deployment_save``.
* **drafts**: ``draft_create`` from the capability (a one-node workflow calling it);
  one ``draft_patch`` giving it the clock's names, schemas, state and assignment; one
  adding the ``confirm`` pause (invalid: nothing routes to it yet); ``draft_connect``
  routing the clock to it; ``draft_set_output``; ``draft_validate``; ``draft_publish``
  with ``deploy``.

    python bench/authoring.py [--reps 5] [--nodes 50] [--patches 500] [--postgres URL]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import mcp_types as types
from mcp import Client
from mcp.client.stdio import StdioServerParameters

from flowledger.deploy import read_document
from flowledger.deploy.artifacts.validate import validate_artifact
from flowledger.deploy.registry.store import SourceRegistry
from flowledger.storage import open_store

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import drafts  # noqa: E402  (bench/drafts.py: the draft_patch measurement)

REPO = HERE.parent
CLOCK_YAML = (REPO / "examples" / "clock.yaml").read_text()
DEPLOYMENT = {
    "format": "flowledger.deployment/v1",
    "name": "what_time_local",
    "artifact": {"name": "what_time", "version": "1"},
    "sources": {"clock": {"source": "clock", "allow_tools": ["get_current_time"]}},
}

Call = Callable[[str, dict[str, Any]], Awaitable[Any]]


def _answer(result: types.CallToolResult) -> Any:
    (block,) = result.content
    assert isinstance(block, types.TextContent)
    if result.is_error:
        raise RuntimeError(block.text)
    return json.loads(block.text)


async def _discover(call: Call) -> tuple[str, dict[str, Any]]:
    found = await call("capability_list", {"query": "get_current_time"})
    (entry,) = [r for r in found["results"] if r["tool"] == "get_current_time"]
    inspected = await call("capability_inspect", {"source": entry["source"], "tool": entry["tool"]})
    return entry["source"], inspected["tool"]


async def by_document(call: Call) -> dict[str, Any]:
    """The whole artifact, then the deployment."""
    await _discover(call)
    saved = await call("artifact_save", {"document": CLOCK_YAML})
    deployed = await call("deployment_save", {"document": DEPLOYMENT})
    return {"digest": saved["digest"], "deployment": deployed["digest"]}


async def by_drafts(call: Call) -> dict[str, Any]:
    """Drafts, step by step (see the module)."""
    target = read_document(CLOCK_YAML)
    source, tool = await _discover(call)
    created = await call(
        "draft_create", {"name": "what_time", "from": {"source": source, "tool": tool["name"]}}
    )
    node = created["document"]["start"]
    (dependency,) = created["document"]["dependencies"]
    ask = target["nodes"]["ask_clock"]
    shaped = await call(
        "draft_patch",
        {
            "draft": "what_time",
            "revision": created["revision"],
            "operations": [
                {"op": "replace", "path": "/description", "value": target["description"]},
                {"op": "replace", "path": "/input_schema", "value": target["input_schema"]},
                {"op": "replace", "path": "/output_schema", "value": target["output_schema"]},
                {"op": "replace", "path": "/state", "value": target["state"]},
                {"op": "move", "from": f"/nodes/{node}", "path": "/nodes/ask_clock"},
                {"op": "replace", "path": "/start", "value": "ask_clock"},
                {"op": "add", "path": "/nodes/ask_clock/label", "value": ask["label"]},
                {"op": "replace", "path": "/nodes/ask_clock/assign", "value": ask["assign"]},
                {"op": "replace", "path": "/nodes/done/output", "value": {}},
            ],
        },
    )
    assert dependency == ask["dependency"], dependency
    paused = await call(
        "draft_patch",
        {
            "draft": "what_time",
            "revision": shaped["revision"],
            "operations": [
                {"op": "add", "path": "/nodes/confirm", "value": target["nodes"]["confirm"]}
            ],
        },
    )
    assert not paused["valid"]  # nothing routes to the pause yet
    routed = await call(
        "draft_connect",
        {
            "draft": "what_time",
            "revision": paused["revision"],
            "from": "ask_clock",
            "to": "confirm",
        },
    )
    done = target["nodes"]["done"]
    output = await call(
        "draft_set_output",
        {
            "draft": "what_time",
            "revision": routed["revision"],
            "output": done["output"],
            "outcome": done["outcome"],
        },
    )
    checked = await call("draft_validate", {"draft": "what_time"})
    assert checked["deployable"], checked
    published = await call(
        "draft_publish",
        {
            "draft": "what_time",
            "revision": output["revision"],
            "version": target["version"],
            "deploy": True,
            "deployment": DEPLOYMENT["name"],
        },
    )
    return {
        "digest": published["artifact"]["digest"],
        "deployment": published["deployment"]["digest"],
    }


async def register_clock(db: str) -> None:
    """The operator registers mcp-server-time as ``clock`` and probes it (not timed)."""
    command = Path(sys.executable).parent / "mcp-server-time"
    async with open_store(db) as store:
        registry = SourceRegistry.over(store)
        await registry.add(
            {
                "format": "flowledger.source/v1",
                "name": "clock",
                "stdio": {"command": str(command), "args": ["--local-timezone", "Etc/UTC"]},
            }
        )
        probe = await registry.probe("clock", {}, seconds=60)
        assert probe.ok, probe.error


async def once(
    db: str, way: Callable[[Call], Awaitable[dict[str, Any]]]
) -> tuple[int, float, dict[str, Any]]:
    """One repetition in a new session: (tool calls, seconds, what it made)."""
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "flowledger.mcp", "--db", db, "--session", str(uuid.uuid4())],
        cwd=str(REPO),
    )
    calls = 0
    async with Client(params) as client:

        async def call(name: str, arguments: dict[str, Any]) -> Any:
            nonlocal calls
            calls += 1
            return _answer(await client.call_tool(name, arguments))

        began = time.perf_counter()
        made = await way(call)
        return calls, time.perf_counter() - began, made


def spread(values: list[float]) -> str:
    return f"{statistics.median(values):.3f} ({min(values):.3f}-{max(values):.3f})"


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--nodes", type=int, default=50)
    parser.add_argument("--patches", type=int, default=500)
    parser.add_argument("--postgres", default=None, help="a PostgreSQL URL for draft_patch too")
    args = parser.parse_args()
    expected = validate_artifact(read_document(CLOCK_YAML)).digest
    with tempfile.TemporaryDirectory() as directory:
        db = f"sqlite:///{Path(directory) / 'authoring.db'}"
        await register_clock(db)
        print(f"the README's clock workflow over MCP (stdio, SQLite), {args.reps} repetitions")
        print()
        print("| way | tool calls | seconds: median (min-max) |")
        print("| --- | ---: | ---: |")
        made: list[dict[str, Any]] = []
        for label, way in (("whole document", by_document), ("drafts", by_drafts)):
            counts, seconds = set(), []
            for _ in range(args.reps):
                count, elapsed, result = await once(db, way)
                counts.add(count)
                seconds.append(elapsed)
                made.append(result)
            (count,) = counts
            print(f"| {label} | {count} | {spread(seconds)} |")
        assert all(m == made[0] for m in made) and made[0]["digest"] == expected, made
        print()
        print(f"draft_patch on a {args.nodes}-node draft, {args.patches} patches (ms per call)")
        print()
        print("| backend | median | p99 |")
        print("| --- | ---: | ---: |")
        backends = [("memory", "memory://"), ("SQLite", f"sqlite:///{Path(directory) / 'd.db'}")]
        if args.postgres:
            backends.append(("PostgreSQL", args.postgres))
        for label, url in backends:
            found = await drafts.measure(url, args.nodes, args.patches)
            print(f"| {label} | {found['median']:.2f} | {found['p99']:.2f} |")


if __name__ == "__main__":
    asyncio.run(main())
