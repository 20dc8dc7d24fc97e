"""CPU per durable step with OpenTelemetry traces on (SDK, batch processor, in-memory
exporter) against off, on the a) loop of bench/compare.py (one vertex routing to itself N
times, state ``{count, payload: 1 KiB}``, SQLite, synchronous=FULL).

Modes alternate within one invocation (off, on, off, on, ...) so both see the same machine
load; the ratios are of the medians and of the minimums. CPU is the process's (all
threads: the batch processor's export thread included). Each traced run records
2 spans per step (the step and its vertex) plus the segment.

    python bench/tracing_overhead.py [--n 1000] [--repeat 7] [--commits]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import tempfile
import time
from typing import Any

from flowledger import flow
from flowledger.observability import tracing
from flowledger.storage import open_store

PAYLOAD = "x" * 1024


def loop_graph(n: int) -> flow.Graph[dict[str, Any]]:
    graph: flow.Graph[dict[str, Any]] = flow.Graph("loop")

    async def bump(state: dict[str, Any]) -> dict[str, Any]:
        return {"count": state["count"] + 1}

    graph.add_vertex("tick", bump)
    graph.add_vertex("stop", bump)
    graph.add_route(
        "tick", targets=["tick", "stop"], pick=lambda s: "tick" if s["count"] < n else "stop"
    )
    return graph


async def one_run(n: int) -> tuple[float, float, int]:
    """(CPU s, wall s, steps) of one a) run on a fresh SQLite file."""
    with tempfile.TemporaryDirectory() as tmp:
        url = f"sqlite:///{os.path.join(tmp, 'bench.db')}?synchronous=FULL"
        async with open_store(url) as store:
            runner = loop_graph(n).compile(
                entry="tick", finish="stop", store=flow.LedgerCheckpointStore(store.ledger)
            )
            cpu, wall = time.process_time(), time.perf_counter()
            result = await runner.run({"count": 0, "payload": PAYLOAD}, max_steps=n + 10)
            cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    assert result.run.status is flow.RunStatus.COMPLETED, result
    return cpu, wall, result.run.step + 1


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--commits", action="store_true", help="commit spans too")
    args = parser.parse_args()

    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    cpu: dict[str, list[float]] = {"off": [], "traces": []}
    wall: dict[str, list[float]] = {"off": [], "traces": []}
    spans = 0
    asyncio.run(one_run(50))  # warm-up: imports, first database
    for _ in range(args.repeat):
        for mode in ("off", "traces"):
            provider = exporter = None
            if mode == "traces":
                exporter = InMemorySpanExporter()
                provider = TracerProvider()
                provider.add_span_processor(BatchSpanProcessor(exporter))
                tracing.enable(provider, commits=args.commits)
            took, elapsed, steps = asyncio.run(one_run(args.n))
            if provider is not None and exporter is not None:
                provider.force_flush()
                spans = len(exporter.get_finished_spans())
                tracing.disable()
                provider.shutdown()
            cpu[mode].append(took / steps * 1e6)
            wall[mode].append(elapsed / steps * 1e6)
    print(f"a) loop, N={args.n}, {args.repeat} runs per mode; {spans} spans per traced run")
    print(f"{'mode':8} {'CPU us/step':>26} {'wall us/step':>26}")
    for mode in ("off", "traces"):
        print(f"{mode:8} {_spread(cpu[mode]):>26} {_spread(wall[mode]):>26}")
    ratio = statistics.median(cpu["traces"]) / statistics.median(cpu["off"])
    print(f"CPU ratio traces/off (medians): {ratio:.3f}")
    # the least disturbed run of each mode: steadier than the median on a shared machine
    print(f"CPU ratio traces/off (minimums): {min(cpu['traces']) / min(cpu['off']):.3f}")


def _spread(values: list[float]) -> str:
    return f"{statistics.median(values):.0f} ({min(values):.0f}-{max(values):.0f})"


if __name__ == "__main__":
    main()
