"""What a `foreach` node costs per item: serial, and concurrent 16, with a value body
(or, with ``--body child``, a saved child artifact per item; with ``--body sequence``,
the same nodes inline).

    python bench/foreach.py [--items 1000] [--reps 3] [--db-dir DIR]
                            [--body value|child|sequence]

An artifact whose one `foreach` maps ``--items`` objects through a cheap value body
(``{i: index, v: item.v}``, two expressions per item) into a state field, through the
supervisor on SQLite (``synchronous=FULL``, one fresh database per run), ``--reps``
times per mode:

* **time per item**: wall time of the run (start to completion) divided by the items;
* **bytes per item**: the database (file and WAL, after a WAL checkpoint) minus that of
  the same run over an empty list, divided by the items: what the per-item records, the
  batches' checkpoints and the final list cost on disk;
* **steps**: super-steps of the foreach (serial: one per item; concurrent 16: one per
  16 items).

For comparison, in the same process and repetitions: a chain of ``--chain`` `set` nodes
(one super-step each, the cheapest node there is) given the same input (the list of
``--items`` objects, so each step carries the same state), per node: the difference to
the serial foreach's time per item is what a foreach item costs beyond a super-step.

With ``--body child`` the body runs the child ``shape`` per item (a `set` node computing
the same ``{i, v}`` from its input, then an `end` node returning it: a nested run of two
super-steps over in-memory checkpoints, with a trace entry per child node in the
database), and the item's result is the child's ``{outcome, output}``. With ``--body
sequence`` the same two nodes are the foreach's inline sequence body (reading ``item``
and ``index``; no input schema to check), run per item the same way.

Printed as a Markdown table: median and (min-max) of the repetitions. Nothing here is a
test.
"""

from __future__ import annotations

import argparse
import asyncio
import sqlite3
import statistics
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from flowledger.deploy import compile_artifact, validate_artifact
from flowledger.storage import open_store
from flowledger.tools import WorkflowTools
from flowledger.workflows import Catalog
from flowledger.workflows.runtime.session import WorkflowSession

OBJECT = {"type": "object", "additionalProperties": False}


def chain_artifact(length: int) -> dict[str, Any]:
    nodes: dict[str, Any] = {
        f"n{i}": {
            "kind": "set",
            "assign": {"out": "${ sum([state.out, `1`]) }"},
            "next": f"n{i + 1}" if i + 1 < length else "done",
        }
        for i in range(length)
    }
    nodes["done"] = {"kind": "end", "outcome": "done"}
    return {
        "format": "flowledger.artifact/v1",
        "name": "each",
        "version": "1",
        "input_schema": {
            "type": "object",
            "additionalProperties": False,
            "properties": {"items": {"type": "array"}},
        },
        "output_schema": OBJECT,
        "state": {"out": {"initial": 0}},
        "start": "n0",
        "nodes": nodes,
    }


CHILD: dict[str, Any] = {
    "format": "flowledger.artifact/v1",
    "name": "shape",
    "version": "1",
    "input_schema": {
        "type": "object",
        "additionalProperties": False,
        "properties": {"i": {"type": "integer"}, "v": {"type": "string"}},
    },
    "output_schema": {
        "type": "object",
        "additionalProperties": False,
        "properties": {"i": {}, "v": {}},
    },
    "state": {"shaped": {}},
    "start": "shape",
    "nodes": {
        "shape": {
            "kind": "set",
            "assign": {"shaped": {"i": "${ input.i }", "v": "${ input.v }"}},
            "next": "done",
        },
        "done": {
            "kind": "end",
            "outcome": "shaped",
            "output": {"i": "${ state.shaped.i }", "v": "${ state.shaped.v }"},
        },
    },
}


def foreach_artifact(mode: str, body: str = "value") -> dict[str, Any]:
    node: dict[str, Any] = {
        "kind": "foreach",
        "items": "${ input.items }",
        "body": {"kind": "value", "value": {"i": "${ index }", "v": "${ item.v }"}},
        "into": "out",
        "next": "done",
    }
    if body == "child":
        node["body"] = {
            "kind": "workflow",
            "workflow": "shape",
            "input": {"i": "${ index }", "v": "${ item.v }"},
        }
    if body == "sequence":
        node["body"] = {
            "kind": "sequence",
            "state": {"shaped": {}},
            "start": "shape",
            "nodes": {
                "shape": {
                    "kind": "set",
                    "assign": {"shaped": {"i": "${ index }", "v": "${ item.v }"}},
                    "next": "done",
                },
                "done": CHILD["nodes"]["done"],
            },
        }
    if mode == "concurrent":
        node.update(mode="concurrent", max_concurrency=16)
    return {
        "format": "flowledger.artifact/v1",
        "name": "each",
        "version": "1",
        "input_schema": {
            "type": "object",
            "additionalProperties": False,
            "properties": {"items": {"type": "array"}},
        },
        "output_schema": OBJECT,
        "state": {"out": {}},
        "start": "each",
        "nodes": {"each": node, "done": {"kind": "end", "outcome": "done"}},
        **({"children": {"shape": "1"}} if body == "child" else {}),
    }


async def one_run(
    path: Path, mode: str, items: int, document: dict[str, Any] | None = None, body: str = "value"
) -> tuple[float, int, int]:
    """(wall seconds, database bytes, foreach steps) of one run over ``items`` items (of
    ``document``, by default the foreach artifact of ``mode`` with ``body``)."""
    document = document or foreach_artifact(mode, body)
    children = {"shape": validate_artifact(CHILD)} if body == "child" else {}
    async with open_store(f"sqlite:///{path}") as store:
        catalog = Catalog()
        catalog.register(
            compile_artifact(validate_artifact(document), children=children, sources={})
        )
        session = WorkflowSession.build(store, str(uuid.uuid4()), catalog)
        await session.supervisor.activate()
        tools = WorkflowTools.for_session(session)
        listed = [{"v": f"value {i:04d}"} for i in range(items)]
        started = time.perf_counter()
        run = await tools.call(
            "workflow_run_start",
            {"definition_name": "each", "definition_version": "1", "input": {"items": listed}},
        )
        await session.supervisor.wait_idle()
        wall = time.perf_counter() - started
        record = await session.registry.get(session.session_id, run["run_id"])
        assert record.status.value == "completed", record
        definition = session.catalog.resolve("each", "1")
        page = await definition.trace.read(record.graph_run_id, limit=1)  # type: ignore[attr-defined]
        # Every trace entry but the end node's, and but a child or sequence item's two
        # (its nodes').
        steps = page.total - 1 - (2 * items if body in ("child", "sequence") else 0)
        await session.supervisor.shutdown()
    return wall, database_bytes(path), steps


def database_bytes(path: Path) -> int:
    """The SQLite file and what is left beside it after a checkpoint of its WAL."""
    with sqlite3.connect(path) as db:
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return path.stat().st_size + sum(p.stat().st_size for p in path.parent.glob(path.name + "-*"))


def spread(values: list[float], fmt: str) -> str:
    return f"{statistics.median(values):{fmt}} ({min(values):{fmt}}-{max(values):{fmt}})"


async def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--items", type=int, default=1000)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--chain", type=int, default=100)
    parser.add_argument("--db-dir", default=None)
    parser.add_argument("--body", choices=["value", "child", "sequence"], default="value")
    options = parser.parse_args()
    folder = Path(options.db_dir or tempfile.mkdtemp(prefix="flowledger-bench-"))
    rows = []
    for mode in ("serial", "concurrent"):
        per_item_ms: list[float] = []
        per_item_bytes: list[float] = []
        steps = 0
        for rep in range(options.reps):
            body = options.body
            _, empty, _ = await one_run(folder / f"{mode}-{rep}-e.db", mode, 0, body=body)
            wall, size, steps = await one_run(
                folder / f"{mode}-{rep}.db", mode, options.items, body=body
            )
            per_item_ms.append(wall * 1000 / options.items)
            per_item_bytes.append((size - empty) / options.items)
        label = "serial" if mode == "serial" else "concurrent, max_concurrency 16"
        rows.append(
            f"| {label} | {options.items} | {steps} | {spread(per_item_ms, '.2f')} | "
            f"{spread(per_item_bytes, ',.0f')} |"
        )
    node_ms: list[float] = []
    node_bytes: list[float] = []
    for rep in range(options.reps):
        chain = chain_artifact(options.chain)
        _, empty, _ = await one_run(
            folder / f"empty-{rep}.db", "", options.items, chain_artifact(1)
        )
        wall, size, _ = await one_run(folder / f"chain-{rep}.db", "", options.items, chain)
        node_ms.append(wall * 1000 / options.chain)
        node_bytes.append((size - empty) / (options.chain - 1))
    rows.append(
        f"| (a chain of `set` nodes, per node) | {options.chain} | {options.chain} | "
        f"{spread(node_ms, '.2f')} | {spread(node_bytes, ',.0f')} |"
    )
    print(
        f"python bench/foreach.py --items {options.items} --reps {options.reps} "
        f"--chain {options.chain} --body {options.body}\n"
    )
    print("| foreach | items | steps | ms per item, median (min-max) | bytes per item |")
    print("|---|---|---|---|---|")
    print("\n".join(rows))


if __name__ == "__main__":
    asyncio.run(main())
