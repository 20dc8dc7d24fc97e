"""Per-step cost of long runs: does it stay flat as a run grows?

One loop workflow (state ``{count, goal}``; vertex ``tick`` adds one and routes to itself
until ``count == goal``, then ``stop``), on a fresh SQLite file for every run, measured
two ways at each length:

* flow      - the engine alone (`flow.Runner.run`), the floor;
* workflows - the same definition started through a `Supervisor` (registry, input
              store, live activity publication into the `ActivityJournal`), timed from
              ``activate`` until the registry says ``completed``; the run's journal is
              then checked to hold every activity.

Prints wall and CPU microseconds per step, median of --repeat runs (min/max in brackets).
A per-step cost that grows with N is a quadratic run.

    python bench/long_runs.py [--steps 1000,5000,10000,20000] [--repeat 3] [--sync FULL]
                              [--backend sqlite|memory] [--layers flow,workflows]

``--backend memory`` takes the disk out, which shows the cost of publication itself.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import tempfile
import time
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime

from flowledger import flow
from flowledger.storage import Store, open_store
from flowledger.workflows.activities.journal import ActivityJournal
from flowledger.workflows.authoring.definition import TypedDefinition
from flowledger.workflows.authoring.metadata import Metadata, VertexMetadata
from flowledger.workflows.records.inputs import InputStore, canonical_json
from flowledger.workflows.records.pending import PendingStore
from flowledger.workflows.records.registry import RunRegistry
from flowledger.workflows.records.run import Run, RunStatus
from flowledger.workflows.runtime.catalog import Catalog
from flowledger.workflows.runtime.supervisor import Supervisor

SCHEMA = {
    "type": "object",
    "additionalProperties": False,
    "required": ["count", "goal"],
    "properties": {
        "count": {"type": "integer", "minimum": 0},
        "goal": {"type": "integer", "minimum": 0},
    },
}


@dataclass
class Loop:
    count: int = 0
    goal: int = 0


async def tick(state: Loop) -> dict[str, int]:
    return {"count": state.count + 1}


async def stop(state: Loop) -> dict[str, int]:
    return {}


def definition(store: flow.CheckpointStore) -> TypedDefinition[Loop]:
    graph: flow.Graph[Loop] = flow.Graph("loop", state=Loop)
    graph.add_vertex("tick", tick)
    graph.add_vertex("stop", stop)
    graph.add_route(
        "tick", targets=["tick", "stop"], pick=lambda s: "tick" if s.count < s.goal else "stop"
    )
    runner = graph.compile(entry="tick", finish="stop", store=store)
    metadata = Metadata(
        "loop",
        "v1",
        description="counts to a goal",
        input_schema=SCHEMA,
        vertices=[VertexMetadata("tick", "tick"), VertexMetadata("stop", "stop")],
    )
    return TypedDefinition(metadata, runner, max_steps=10_000_000)


async def flow_run(store: Store, n: int) -> int:
    runner = definition(flow.LedgerCheckpointStore(store.ledger)).runner
    result = await runner.run(Loop(goal=n), max_steps=n + 10)
    assert result.run.status is flow.RunStatus.COMPLETED, result
    return result.run.step + 1


async def workflows_run(store: Store, n: int) -> int:
    checkpoints = flow.LedgerCheckpointStore(store.ledger)
    catalog = Catalog()
    catalog.register(definition(checkpoints))
    registry = RunRegistry(store.kv)
    inputs = InputStore(store.blobs)
    journal = ActivityJournal(store.ledger)
    session_id = str(uuid.uuid4())
    ref = await inputs.put(session_id, canonical_json({"count": 0, "goal": n}))
    graph_run_id = str(uuid.uuid4())
    now = datetime.now(UTC)
    run = await registry.create(
        Run(
            session_id=session_id,
            tool_execution_id=str(uuid.uuid4()),
            definition_name="loop",
            definition_version="v1",
            id=str(uuid.uuid4()),
            graph_run_id=graph_run_id,
            input=ref,
            ledger_locator=f"flow/runs/{graph_run_id}",
            created_at=now,
            updated_at=now,
        )
    )
    supervisor = Supervisor(
        session_id,
        catalog=catalog,
        registry=registry,
        inputs=inputs,
        leases=store.leases,
        publisher=journal,
        pending=PendingStore(store.kv),
    )
    await supervisor.activate()
    error = await supervisor.wait_idle()
    await supervisor.shutdown()
    assert error is None, error
    done = await registry.get(session_id, run.id)
    assert done.status is RunStatus.COMPLETED, done.status_summary
    history = await checkpoints.history(graph_run_id)
    assert done.activity_cursor == len(history)
    records = await journal.records(session_id, run.id)
    assert len(records) == n + 3, len(records)  # started, n + 1 vertices, completed
    return history[-1].run.step + 1


async def measure(layer: str, n: int, sync: str, backend: str) -> tuple[float, float]:
    """(wall, CPU) microseconds per step of one run."""
    with tempfile.TemporaryDirectory() as tmp:
        url = f"sqlite:///{os.path.join(tmp, 'bench.db')}?synchronous={sync}"
        if backend == "memory":
            url = "memory://"
        async with open_store(url) as store:
            wall, cpu = time.perf_counter(), time.process_time()
            steps = await (flow_run(store, n) if layer == "flow" else workflows_run(store, n))
            wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    return wall / steps * 1e6, cpu / steps * 1e6


def _summary(values: list[float]) -> str:
    return f"{statistics.median(values):7.1f} [{min(values):.1f}..{max(values):.1f}]"


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", default="1000,5000,10000,20000")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--sync", default="FULL")
    parser.add_argument("--layers", default="flow,workflows")
    parser.add_argument("--backend", choices=["sqlite", "memory"], default="sqlite")
    args = parser.parse_args()
    lengths = [int(part) for part in args.steps.split(",")]
    where = f"sqlite synchronous={args.sync}" if args.backend == "sqlite" else "memory"
    print(f"{where}, median of {args.repeat} [min..max], us per step")
    print(f"{'layer':9s} {'steps':>6s}  {'wall':>22s}  {'cpu':>22s}")
    for layer in args.layers.split(","):
        for n in lengths:
            walls: list[float] = []
            cpus: list[float] = []
            failures = 0
            for _ in range(args.repeat):
                try:
                    wall, cpu = await measure(layer, n, args.sync, args.backend)
                except AssertionError as exc:  # e.g. the session lease expired on a busy machine
                    failures += 1
                    print(f"{layer} {n}: run did not finish: {exc}", flush=True)
                    continue
                walls.append(wall)
                cpus.append(cpu)
            if not walls:
                continue
            note = f"  ({failures} of {args.repeat} runs did not finish)" if failures else ""
            print(
                f"{layer:9s} {n:6d}  {_summary(walls):>22s}  {_summary(cpus):>22s}{note}",
                flush=True,
            )


if __name__ == "__main__":
    asyncio.run(main())
