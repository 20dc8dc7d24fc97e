"""What the checks against the catalog add to a ``draft_patch``: a draft of NODES nodes
whose steps are ``set`` nodes (the artifact's own checks only) against one whose steps
are ``tool`` nodes calling a tool of a registered source (each edit also reads the
source's recorded probe, validates every node's literal arguments against the tool's
input schema, traces the argument types and the ``result.structured`` paths, and
records the contract fingerprints).

Both drafts are chains of NODES - 1 steps and an ``end``; each tool step passes one
literal and one expression argument and assigns one declared result field. PATCHES
patches are applied one after the other through the ``draft_patch`` tool, each
replacing one step's expression and keeping the draft valid; the first WARMUP are not
counted. Times are wall-clock per call, in milliseconds. The source's probe is recorded
(the operator's probe, without a server: drafting never contacts one).

    python bench/draft_contracts.py [--nodes 50] [--patches 300] [--postgres URL]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from flowledger.deploy import DeployService
from flowledger.deploy.drafts.record import timestamp
from flowledger.deploy.drafts.service import DraftService
from flowledger.deploy.drafts.tools import DraftTools
from flowledger.deploy.registry.store import Probe, SourceRegistry
from flowledger.deploy.sources.tool_info import ToolInfo
from flowledger.storage import open_store
from flowledger.workflows import Catalog
from flowledger.workflows.runtime.session import WorkflowSession

SESSION = str(uuid.UUID(int=43, version=4))
WARMUP = 20
TOOL = {
    "name": "label",
    "inputSchema": {
        "type": "object",
        "properties": {
            "text": {"type": "string"},
            "count": {"type": "integer", "minimum": 0},
            "mode": {"type": "string", "enum": ["short", "long"]},
        },
        "required": ["text", "mode"],
        "additionalProperties": False,
    },
    "outputSchema": {
        "type": "object",
        "properties": {"label": {"type": "string"}, "size": {"type": "integer"}},
        "required": ["label"],
        "additionalProperties": False,
    },
}


def step(kind: str, i: int, nxt: str, expression: str) -> dict[str, Any]:
    if kind == "set":
        return {"kind": "set", "assign": {f"f{i}": expression}, "next": nxt}
    return {
        "kind": "tool",
        "dependency": "labels",
        "tool": "label",
        "arguments": {"text": expression, "mode": "short", "count": i},
        "assign": {f"f{i}": "${ result.structured.label }"},
        "next": nxt,
    }


def document(kind: str, nodes: int) -> dict[str, Any]:
    chain = {
        f"n{i}": step(kind, i, f"n{i + 1}" if i < nodes - 2 else "done", "${ input.x }")
        for i in range(nodes - 1)
    }
    chain["done"] = {"kind": "end", "outcome": "ok", "output": {"x": "${ input.x }"}}
    closed = {"type": "object", "additionalProperties": False}
    found: dict[str, Any] = {
        "format": "flowledger.artifact/v1",
        "name": "bench_contracts",
        "version": "1",
        "input_schema": {**closed, "properties": {"x": {"type": "string"}}, "required": ["x"]},
        "output_schema": {**closed, "properties": {"x": {"type": "string"}}},
        "state": {f"f{i}": {} for i in range(nodes - 1)},
        "start": "n0",
        "nodes": chain,
    }
    if kind == "tool":
        found["dependencies"] = {"labels": {"tools": ["label"]}}
    return found


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))]


async def measure(url: str, kind: str, nodes: int, patches: int) -> dict[str, float]:
    async with open_store(url) as store:
        registry = SourceRegistry.over(store)
        if "labels" not in await registry.names():
            await registry.add(
                {
                    "format": "flowledger.source/v1",
                    "name": "labels",
                    "stdio": {"command": sys.executable},
                }
            )
            probe = Probe(
                1, timestamp(), True, None, {"name": "labels"}, (ToolInfo.from_entry(TOOL),)
            )
            await registry.record_probe("labels", probe)
        service = DraftService(DeployService(WorkflowSession.build(store, SESSION, Catalog())))
        tools = DraftTools(service)
        name = f"bench_{uuid.uuid4().hex[:8]}"
        await tools.call("draft_create", {"name": name})
        await service.store.edit(
            SESSION, name, 1, lambda draft: (document(kind, nodes), {"labels": "labels"})
        )
        shown = await tools.call("draft_get", {"draft": name})
        assert shown["valid"], shown["diagnostics"][:3]
        assert len(shown["capabilities"]) == (1 if kind == "tool" else 0)
        revision = shown["revision"]
        times: list[float] = []
        for index in range(patches + WARMUP):
            i = index % (nodes - 1)
            path = f"/nodes/n{i}/assign/f{i}" if kind == "set" else f"/nodes/n{i}/arguments/text"
            operations = [
                {"op": "replace", "path": path, "value": f"${{ join('', [input.x, '{index}']) }}"}
            ]
            began = time.perf_counter()
            answer = await tools.call(
                "draft_patch", {"draft": name, "revision": revision, "operations": operations}
            )
            elapsed = (time.perf_counter() - began) * 1000
            assert answer["valid"] and answer["revision"] == revision + 1, answer["diagnostics"]
            revision = answer["revision"]
            if index >= WARMUP:
                times.append(elapsed)
        return {
            "median": statistics.median(times),
            "p95": percentile(times, 0.95),
            "p99": percentile(times, 0.99),
            "mean": statistics.fmean(times),
        }


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=50)
    parser.add_argument("--patches", type=int, default=300)
    parser.add_argument("--postgres", default=None, help="a PostgreSQL URL to measure too")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as directory:
        backends = [("memory", "memory://"), ("SQLite", f"sqlite:///{Path(directory) / 'd.db'}")]
        if args.postgres:
            backends.append(("PostgreSQL", args.postgres))
        print(
            f"draft_patch on a {args.nodes}-node draft, {args.patches} patches (ms per call): "
            "set steps (artifact checks) against tool steps (and the catalog's checks)"
        )
        print()
        print("| backend | steps | median | p95 | p99 | mean |")
        print("| --- | --- | ---: | ---: | ---: | ---: |")
        for label, url in backends:
            for kind in ("set", "tool"):
                found = await measure(url, kind, args.nodes, args.patches)
                print(
                    f"| {label} | {kind} | {found['median']:.2f} | {found['p95']:.2f} | "
                    f"{found['p99']:.2f} | {found['mean']:.2f} |"
                )


if __name__ == "__main__":
    asyncio.run(main())
