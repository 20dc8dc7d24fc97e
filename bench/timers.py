"""Wake latency of durable timers with many runs parked, and what an idle owner costs.

One process owns one session (`WorkflowSession`, the real clock) over a fresh database.
``--parked N`` entries are written into the session's due-time index, all due a day from
now (index entries only, as a parked run's owner sees them: the owner's wake-up lookup
reads nothing else; real runs would add their adoption at activation, measured in
bench/adoption.py). Then, per repetition:

- **idle CPU**: the owner's CPU time (`process_time`, this process) over ``--idle``
  seconds with nothing due: it must not grow with N (the loop sleeps on its clock);
- **wake latency**: ``--probes`` runs of a one-vertex graph that calls
  ``flow.sleep(--sleep)``, started one after another through the tools bundle; each
  records when its vertex ran again (woken) and the latency is that time minus the
  ``wake_at`` its checkpoint recorded; plus how many index-head reads the owner's loop
  made per wake.

For comparison, a wake-up found by polling every P seconds (the worker's ``--poll``,
default 0.5 s) waits uniformly in 0..P: median P/2, p99 0.99 P. Everything shares this
machine (2 busy cores).

    python bench/timers.py --parked 0 1000 10000 --db sqlite
    python bench/timers.py --parked 10000 --db postgresql://postgres@127.0.0.1:5432/test
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from flowledger import flow
from flowledger.storage import open_store
from flowledger.tools import WorkflowTools
from flowledger.workflows import Catalog, Metadata, TypedDefinition, VertexMetadata
from flowledger.workflows.records.timers import TimerIndex
from flowledger.workflows.runtime.session import WorkflowSession

WOKE: dict[str, float] = {}
HANG_MS = 120_000


@dataclass
class Nap:
    seconds: float = 0.5


def catalog() -> Catalog:
    graph: flow.Graph[Nap] = flow.Graph("nap", state=Nap)

    @graph.vertex("nap")
    def nap(state: Nap) -> dict[str, Any]:
        flow.sleep(state.seconds)
        WOKE.setdefault(flow.run_info().graph_run_id, time.time())
        return {}

    runner = graph.compile(entry="nap", finish="nap")
    metadata = Metadata(
        "nap",
        "v1",
        description="sleeps",
        input_schema={
            "type": "object",
            "additionalProperties": False,
            "properties": {"seconds": {"type": "number"}},
        },
        vertices=[VertexMetadata("nap", "nap")],
    )
    built = Catalog()
    built.register(TypedDefinition(metadata, runner))
    return built


@dataclass
class Sample:
    parked: int
    idle_cpu_ms: float
    latencies_ms: list[float]
    reads_per_wake: float


async def one(url: str, parked: int, probes: int, sleep: float, idle: float) -> Sample:
    session_id = str(uuid.uuid4())
    async with open_store(url) as store:
        index = TimerIndex(store.kv)
        due = datetime.now(UTC) + timedelta(days=1)
        for n in range(parked):
            run_id = str(uuid.UUID(int=n + 1, version=4))
            await index.put(session_id, run_id, due + timedelta(microseconds=n), 1, "timer")
        session = WorkflowSession.build(store, session_id, catalog())
        await session.supervisor.activate()
        tools = WorkflowTools.for_session(session)
        definition = session.catalog.resolve("nap", "v1")
        loop = session.supervisor.timer_loop
        assert loop is not None
        try:
            await asyncio.sleep(0.2)  # the loop's first look at the head
            cpu = time.process_time()
            await asyncio.sleep(idle)
            idle_cpu = (time.process_time() - cpu) * 1000
            reads = loop.head_reads
            latencies: list[float] = []
            for _ in range(probes):
                started = await tools.call(
                    "workflow_run_start",
                    {
                        "definition_name": "nap",
                        "definition_version": "v1",
                        "input": {"seconds": sleep},
                    },
                )
                record = await session.registry.get(session_id, started["run_id"])
                for _ in range(HANG_MS):  # the vertex runs in a thread: look every ms
                    if record.graph_run_id in WOKE:
                        break
                    await asyncio.sleep(0.001)
                else:
                    raise TimeoutError(f"run {record.id} was not woken")
                history = await definition.checkpoint_history(record.graph_run_id)
                wake_at = next(
                    i.wake_at for cp in history for i in cp.interrupts if i.wake_at is not None
                )
                latencies.append((WOKE[record.graph_run_id] - wake_at.timestamp()) * 1000)
            wakes_reads = (loop.head_reads - reads) / max(1, probes)
        finally:
            await session.supervisor.shutdown()
    return Sample(parked, idle_cpu, latencies, wakes_reads)


def _quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--parked", type=int, nargs="+", default=[0, 1000, 10000])
    parser.add_argument("--probes", type=int, default=20)
    parser.add_argument("--sleep", type=float, default=0.3)
    parser.add_argument("--idle", type=float, default=5.0)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--db", default="sqlite", help="sqlite (a fresh file) or a URL")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        print(
            "| parked | wake latency median | p99 | min-max | idle CPU per second "
            "| head reads per wake |"
        )
        print("| ---: | ---: | ---: | ---: | ---: | ---: |")
        for parked in args.parked:
            samples = []
            for rep in range(args.reps):
                url = (
                    f"sqlite:///{Path(folder) / f'timers-{parked}-{rep}.db'}"
                    if args.db == "sqlite"
                    else args.db
                )
                samples.append(asyncio.run(one(url, parked, args.probes, args.sleep, args.idle)))
            latencies = [x for s in samples for x in s.latencies_ms]
            idle = [s.idle_cpu_ms / args.idle for s in samples]
            reads = statistics.median(s.reads_per_wake for s in samples)
            print(
                f"| {parked:,} | {statistics.median(latencies):.1f} ms | "
                f"{_quantile(latencies, 0.99):.1f} ms | "
                f"{min(latencies):.1f}-{max(latencies):.1f} ms | "
                f"{statistics.median(idle):.2f} ms ({min(idle):.2f}-{max(idle):.2f}) | "
                f"{reads:.1f} |",
                flush=True,
            )


if __name__ == "__main__":
    main()
