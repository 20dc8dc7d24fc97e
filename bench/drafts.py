"""``draft_patch`` latency on a 50-node draft (memory, SQLite, optionally PostgreSQL).

A draft of NODES nodes (a chain of ``set`` nodes writing one state field each, then an
``end``) is created once; then PATCHES patches are applied one after the other through
the ``draft_patch`` tool (`DraftTools.call`: arguments checked against the tool's schema,
the draft read, the JSON Patch applied to a copy, the whole document validated as an
artifact, the record written under compare-and-swap). Each patch replaces one node's
assignment and keeps the draft valid, so every call pays a full validation. The first
WARMUP calls are not counted. Times are wall-clock per call, in milliseconds.

    python bench/drafts.py [--nodes 50] [--patches 500] [--postgres URL]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from flowledger.deploy import DeployService
from flowledger.deploy.drafts.service import DraftService
from flowledger.deploy.drafts.tools import DraftTools
from flowledger.storage import open_store
from flowledger.workflows import Catalog
from flowledger.workflows.runtime.session import WorkflowSession

SESSION = str(uuid.UUID(int=42, version=4))
WARMUP = 20


def document(nodes: int) -> dict[str, Any]:
    chain = {
        f"n{i}": {"kind": "set", "assign": {f"f{i}": "${ input.x }"}, "next": f"n{i + 1}"}
        for i in range(nodes - 1)
    }
    chain[f"n{nodes - 2}"]["next"] = "done"
    chain["done"] = {"kind": "end", "outcome": "ok", "output": {"x": "${ input.x }"}}
    closed = {"type": "object", "additionalProperties": False}
    return {
        "format": "flowledger.artifact/v1",
        "name": "bench_draft",
        "version": "1",
        "input_schema": {**closed, "properties": {"x": {"type": "string"}}},
        "output_schema": {**closed, "properties": {"x": {"type": "string"}}},
        "state": {f"f{i}": {} for i in range(nodes - 1)},
        "start": "n0",
        "nodes": chain,
    }


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))]


async def measure(url: str, nodes: int, patches: int) -> dict[str, float]:
    async with open_store(url) as store:
        tools = DraftTools(
            DraftService(DeployService(WorkflowSession.build(store, SESSION, Catalog())))
        )
        name = f"bench_{uuid.uuid4().hex[:8]}"
        created = await tools.call("draft_create", {"name": name})
        revision = created["revision"]
        replaced = await tools.call(
            "draft_patch",
            {
                "draft": name,
                "revision": revision,
                "operations": [{"op": "replace", "path": "", "value": document(nodes)}],
            },
        )
        assert replaced["valid"], replaced["diagnostics"][:3]
        revision = replaced["revision"]
        times: list[float] = []
        for index in range(patches + WARMUP):
            node = f"n{index % (nodes - 1)}"
            operations = [
                {
                    "op": "replace",
                    "path": f"/nodes/{node}/assign/f{index % (nodes - 1)}",
                    "value": f"${{ join('', [input.x, '{index}']) }}",
                }
            ]
            began = time.perf_counter()
            answer = await tools.call(
                "draft_patch", {"draft": name, "revision": revision, "operations": operations}
            )
            elapsed = (time.perf_counter() - began) * 1000
            assert answer["valid"] and answer["revision"] == revision + 1
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
    parser.add_argument("--patches", type=int, default=500)
    parser.add_argument("--postgres", default=None, help="a PostgreSQL URL to measure too")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as directory:
        backends = [("memory", "memory://"), ("SQLite", f"sqlite:///{Path(directory) / 'd.db'}")]
        if args.postgres:
            backends.append(("PostgreSQL", args.postgres))
        print(f"draft_patch on a {args.nodes}-node draft, {args.patches} patches (ms per call)")
        print()
        print("| backend | median | p95 | p99 | mean |")
        print("| --- | ---: | ---: | ---: | ---: |")
        for label, url in backends:
            found = await measure(url, args.nodes, args.patches)
            print(
                f"| {label} | {found['median']:.2f} | {found['p95']:.2f} | "
                f"{found['p99']:.2f} | {found['mean']:.2f} |"
            )


if __name__ == "__main__":
    asyncio.run(main())
