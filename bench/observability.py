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
each side, the ratio of the medians and the ratio of the minimums (the least disturbed
run of each side), and with traces the spans one traced child recorded (a) records two
per step, the step and its vertex, plus the segment; ``--commits`` adds one per commit).

``--profile`` instead samples one traced a) child with py-spy (bench/requirements-peers.txt)
and prints which share of the main thread's samples falls in OpenTelemetry's code and in
flowledger's tracing module, and where the spans are entered: what stands in the way of
a lower ratio (docs/benchmarks.md#traces).

    python bench/observability.py --instrument both [--rounds 7] [--n 1000] [--runs 100]
    python bench/observability.py --profile [--n 3000]
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
CHOICES = ("none", "metrics", "traces", "both")


def _turn_on(instrument: str, commits: bool) -> Callable[[], int] | None:
    """Turn ``instrument`` on; with traces, what counts the spans recorded so far."""
    if instrument in ("metrics", "both"):
        from flowledger.observability import metrics

        metrics.enable()
    if instrument not in ("traces", "both"):
        return None
    # the SDK's provider with a batch processor and the in-memory exporter: what a
    # collector set-up costs the process, without a network
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from flowledger.observability import tracing

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(exporter))
    tracing.enable(provider, commits=commits)

    def spans() -> int:
        provider.force_flush()
        return len(exporter.get_finished_spans())

    return spans


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


def child(workload: str, instrument: str, n: int, runs: int, commits: bool) -> None:
    spans = _turn_on(instrument, commits)
    out = _workload_a(n) if workload == "a" else _workload_g(runs)
    recorded = None if spans is None else spans()
    print(json.dumps({"cpu_us_per_step": out["cpu"] / out["steps"] * 1e6, "spans": recorded}))


def measure(
    workload: str, instrument: str, n: int, runs: int, commits: bool = False
) -> tuple[float, int | None]:
    """(CPU µs per step, spans exported) of one child process."""
    command = [
        sys.executable, __file__, "--child", workload, "--instrument", instrument,
        "--n", str(n), "--runs", str(runs), *(["--commits"] if commits else []),
    ]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"{workload} with {instrument} failed:\n{done.stderr}")
    out = json.loads(done.stdout.strip().splitlines()[-1])
    return float(out["cpu_us_per_step"]), out["spans"]


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
    parser.add_argument("--instrument", choices=CHOICES, default="both")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--n", type=int, default=1000, help="a): steps of the one run")
    parser.add_argument("--runs", type=int, default=100, help="g): concurrent runs")
    parser.add_argument("--workloads", default="a,g")
    parser.add_argument("--commits", action="store_true", help="with traces: commit spans too")
    parser.add_argument("--profile", action="store_true", help="py-spy one traced a) child")
    parser.add_argument("--child", choices=("a", "g"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child, args.instrument, args.n, args.runs, args.commits)
        return
    if args.profile:
        profile(args.n, args.commits)
        return
    missing = _available(args.instrument)
    if missing is not None:
        raise SystemExit(f"--instrument {args.instrument}: {missing}")
    print(
        f"instrument={args.instrument} rounds={args.rounds} n={args.n} runs={args.runs}"
        f"{' commits' if args.commits else ''}"
    )
    print("| workload | off CPU µs/step | on CPU µs/step | on/off (medians) | (minimums) | spans |")
    print("|---|---|---|---|---|---|")
    for workload in args.workloads.split(","):
        off: list[float] = []
        on: list[float] = []
        spans = None
        for _ in range(args.rounds):  # alternating: drift falls on both sides
            off.append(measure(workload, "none", args.n, args.runs)[0])
            took, spans = measure(workload, args.instrument, args.n, args.runs, args.commits)
            on.append(took)
        ratio = statistics.median(on) / statistics.median(off)
        least = min(on) / min(off)
        name = f"a) loop, N={args.n}" if workload == "a" else f"g) {args.runs} runs, N=100"
        shown = "-" if spans is None else str(spans)
        row = f"| {name} | {_shown(off)} | {_shown(on)} | {ratio:.3f} | {least:.3f} | {shown} |"
        print(row, flush=True)


#: Frames of the OpenTelemetry API and SDK (py-spy names files relative to site-packages'
#: ``opentelemetry/``) and of flowledger's tracing module.
_TRACING_FRAME = re.compile(
    r"\((sdk/|trace/|context/|attributes/|_shared_internal/|util/|observability/tracing\.py)"
)


def profile(n: int, commits: bool) -> None:
    """Sample one traced a) child with py-spy; print the tracing share and its entries."""
    spy = shutil.which("py-spy", path=os.path.dirname(sys.executable)) or shutil.which("py-spy")
    if spy is None:
        raise SystemExit("--profile needs py-spy: pip install -r bench/requirements-peers.txt")
    with tempfile.TemporaryDirectory() as tmp:
        raw = os.path.join(tmp, "stacks.txt")
        target = [sys.executable, __file__, "--child", "a", "--instrument", "traces", "--n", str(n)]
        command = [spy, "record", "-r", "1000", "-f", "raw", "-o", raw, "--", *target]
        done = subprocess.run(
            [*command, *(["--commits"] if commits else [])], capture_output=True, text=True
        )
        if done.returncode != 0:
            raise SystemExit(f"py-spy failed:\n{done.stderr}")
        with open(raw, encoding="utf-8") as stacks:
            lines = stacks.read().splitlines()
    total = traced = 0
    entries: dict[str, int] = {}
    for line in lines:
        stack, count = line.rsplit(" ", 1)
        frames = stack.split(";")
        if not any(f.startswith("_workload_a (") for f in frames):
            continue  # start-up, or the export thread (it mostly waits)
        total += int(count)
        hits = [i for i, frame in enumerate(frames) if _TRACING_FRAME.search(frame)]
        if hits:
            traced += int(count)
            first = hits[0]
            entry = f"{_name(frames[first - 1])} -> {_name(frames[first])}"
            entries[entry] = entries.get(entry, 0) + int(count)
    print(f"a) loop, N={n}, traces on: {total} samples of the run (main thread)")
    print(f"in OpenTelemetry or flowledger's tracing: {traced} ({traced / total:.1%})")
    print("| entered from -> into | samples | share of all |")
    print("|---|---:|---:|")
    for entry, count in sorted(entries.items(), key=lambda e: -e[1])[:10]:
        print(f"| {entry} | {count} | {count / total:.1%} |")


def _name(frame: str) -> str:
    return frame.split(" (")[0]


if __name__ == "__main__":
    main()
