"""Observability overhead: CPU per durable step with instrumentation on against off.

Workloads (SQLite, synchronous=FULL, a fresh file each time):

* a) one run of the 1-vertex loop, N steps (bench/steps.py's ``loop``);
* g) RUNS runs of that loop, N=100 each, started together on one store
  (bench/concurrent_runs.py's flowledger side).

``--instrument`` chooses what "on" means: ``metrics`` (`flowledger.observability.metrics`
enabled: every step, commit, lease and run transition recorded in the process's
Prometheus registry), ``traces`` or ``both`` (OpenTelemetry spans through the SDK's
batch processor to its in-memory exporter: the ``otel`` extra), or ``none`` (off against
off: the noise floor). Each measurement runs in a child process of its own
(metrics, once on, stay on for a process), and the rounds alternate off, on, off, on...
so a drift of the machine falls on both sides. Reported: the median and min-max of CPU
microseconds per durable step (``time.process_time``, every thread of the child) for
each side, and the ratio of the medians.

    python bench/observability.py --instrument metrics [--rounds 7] [--n 1000] [--runs 100]
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
CHOICES = ("none", "metrics", "traces", "both")


def _turn_on(instrument: str) -> None:
    if instrument in ("metrics", "both"):
        from flowledger.observability import metrics

        metrics.enable()
    if instrument in ("traces", "both"):
        # the SDK's provider with a batch processor and the in-memory exporter: what a
        # collector set-up costs the process, without a network
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import (
            InMemorySpanExporter,
        )

        from flowledger.observability import tracing

        provider = TracerProvider()
        provider.add_span_processor(BatchSpanProcessor(InMemorySpanExporter()))
        tracing.enable(provider)


def _workload_a(n: int) -> dict[str, Any]:
    sys.path.insert(0, HERE)
    from flowledger import flow
    from flowledger.storage import open_store
    from steps import Counter, loop_graph

    async def main() -> dict[str, Any]:
        with tempfile.TemporaryDirectory() as tmp:
            url = f"sqlite:///{tmp}/a.db?synchronous=FULL"
            async with open_store(url) as store:
                runner = loop_graph(n).compile(
                    entry="tick", finish="stop", store=flow.LedgerCheckpointStore(store.ledger)
                )
                cpu = time.process_time()
                result = await runner.run(Counter(), max_steps=n + 10)
                cpu = time.process_time() - cpu
                assert result.run.status is flow.RunStatus.COMPLETED, result
                return {"cpu": cpu, "steps": result.run.step + 1}

    return asyncio.run(main())


def _workload_g(runs: int) -> dict[str, Any]:
    sys.path.insert(0, HERE)
    from concurrent_runs import fl_concurrent

    with tempfile.TemporaryDirectory() as tmp:
        out = fl_concurrent({"db": f"{tmp}/g.db", "n": 100, "runs": runs})
    return {"cpu": out["cpu"], "steps": out["steps"]}


def child(workload: str, instrument: str, n: int, runs: int) -> None:
    _turn_on(instrument)
    out = _workload_a(n) if workload == "a" else _workload_g(runs)
    print(json.dumps({"cpu_us_per_step": out["cpu"] / out["steps"] * 1e6}))


def measure(workload: str, instrument: str, n: int, runs: int) -> float:
    command = [
        sys.executable, __file__, "--child", workload, "--instrument", instrument,
        "--n", str(n), "--runs", str(runs),
    ]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"{workload} with {instrument} failed:\n{done.stderr}")
    return float(json.loads(done.stdout.strip().splitlines()[-1])["cpu_us_per_step"])


def _available(instrument: str) -> str | None:
    if instrument in ("metrics", "both") and importlib.util.find_spec("prometheus_client") is None:
        return "metrics need the 'prometheus' extra (pip install 'flowledger[prometheus]')"
    if instrument in ("traces", "both") and importlib.util.find_spec("opentelemetry.sdk") is None:
        return "traces need the 'otel' extra (pip install 'flowledger[otel]')"
    return None


def _shown(values: list[float]) -> str:
    return f"{statistics.median(values):.0f} ({min(values):.0f}-{max(values):.0f})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--instrument", choices=CHOICES, default="metrics")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--n", type=int, default=1000, help="a): steps of the one run")
    parser.add_argument("--runs", type=int, default=100, help="g): concurrent runs")
    parser.add_argument("--workloads", default="a,g")
    parser.add_argument("--child", choices=("a", "g"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child, args.instrument, args.n, args.runs)
        return
    missing = _available(args.instrument)
    if missing is not None:
        raise SystemExit(f"--instrument {args.instrument}: {missing}")
    print(f"instrument={args.instrument} rounds={args.rounds} n={args.n} runs={args.runs}")
    print("| workload | off CPU µs/step | on CPU µs/step | on/off (medians) |")
    print("|---|---|---|---|")
    for workload in args.workloads.split(","):
        off: list[float] = []
        on: list[float] = []
        for _ in range(args.rounds):  # alternating: drift falls on both sides
            off.append(measure(workload, "none", args.n, args.runs))
            on.append(measure(workload, args.instrument, args.n, args.runs))
        ratio = statistics.median(on) / statistics.median(off)
        name = f"a) loop, N={args.n}" if workload == "a" else f"g) {args.runs} runs, N=100"
        print(f"| {name} | {_shown(off)} | {_shown(on)} | {ratio:.3f} |", flush=True)


if __name__ == "__main__":
    main()
