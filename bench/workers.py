"""Throughput of ``flowledger worker`` processes on PostgreSQL: runs/s and steps/s with 1, 2
and 3 workers.

For each worker count, on a fresh schema: start the workers (``--app workers:catalog``,
this file), wait until each has announced itself, then start ``--runs`` runs of a small
chain workflow (``--steps`` vertices in a line, no sleeps: pure overhead) spread over
``--sessions`` sessions through front doors (`FrontDoor` behind the workflow tools, the
same path as ``flowledger mcp --no-execute``), ``--concurrency`` starts in flight, and
time until every run has completed (the unfinished-run index is empty). The clock starts
before the first start call, so front-door latency is included. The workers are then
stopped with SIGTERM and the schema dropped.

    python bench/workers.py --db postgresql://postgres@127.0.0.1:5432/test

Each configuration is measured ``--repeat`` times; the table shows the median (and the
range). Everything - workers, the front door and PostgreSQL - shares this machine.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import os
import platform
import signal
import statistics
import subprocess
import sys
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from flowledger import flow
from flowledger.workflows import Catalog, Metadata, TypedDefinition, VertexMetadata

HERE = Path(__file__).resolve().parent
STEPS_ENV = "FLOWLEDGER_BENCH_STEPS"


@dataclass
class Chain:
    count: int = 0


def _add_one(state: Chain) -> dict[str, Any]:
    return {"count": state.count + 1}


async def _step(state: Chain) -> dict[str, Any]:
    return _add_one(state)


def catalog() -> Catalog:
    """The app the workers serve: ``chain`` v1 with ``$FLOWLEDGER_BENCH_STEPS`` vertices."""
    steps = int(os.environ.get(STEPS_ENV, "5"))
    graph: flow.Graph[Chain] = flow.Graph("bench_chain", state=Chain)
    names = [f"s{i}" for i in range(steps)]
    for name in names:
        graph.add_vertex(name, _step)
    for before, after in itertools.pairwise(names):
        graph.add_edge(before, after)
    runner = graph.compile(entry=names[0], finish=names[-1], version="1")
    metadata = Metadata(
        "chain",
        "v1",
        description=f"{steps} steps in a line",
        input_schema={
            "type": "object",
            "additionalProperties": False,
            "properties": {"count": {"type": "integer"}},
        },
        vertices=[VertexMetadata(name, name) for name in names],
    )
    app = Catalog()
    app.register(TypedDefinition(metadata, runner))
    return app


# -- the measurement --------------------------------------------------------------------------


def _with_schema(url: str, schema: str) -> str:
    parts = urlsplit(url)
    query = [(k, v) for k, v in parse_qsl(parts.query) if k != "schema"] + [("schema", schema)]
    return urlunsplit(parts._replace(query=urlencode(query)))


def _drop(url: str, schema: str) -> None:
    import psycopg

    base = urlunsplit(urlsplit(url)._replace(query=""))
    with psycopg.connect(base, autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')  # type: ignore[arg-type]


async def _wait_until(check: Callable[[], Awaitable[bool]], interval: float) -> None:
    while True:
        if await check():
            return
        await asyncio.sleep(interval)


def _spawn_worker(url: str, args: argparse.Namespace) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "flowledger",
            "worker",
            "--db",
            url,
            "--app",
            "workers:catalog",
            "--poll",
            str(args.poll),
            "--runs-per-session",
            str(args.runs_per_session),
        ],
        cwd=HERE,
        env={**os.environ, STEPS_ENV: str(args.steps)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def _machine_busy() -> float:
    """CPU seconds this machine has been busy (all CPUs, from /proc/stat; 0 elsewhere)."""
    try:
        with open("/proc/stat") as stat:
            fields = [float(v) for v in stat.readline().split()[1:]]
    except OSError:
        return 0.0
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0.0)  # idle + iowait
    return (sum(fields[:8]) - idle) / os.sysconf("SC_CLK_TCK")


def _process_cpu(pids: list[int]) -> float:
    """CPU seconds the processes have used so far (from /proc; 0 elsewhere)."""
    total = 0.0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += (float(fields[11]) + float(fields[12])) / os.sysconf("SC_CLK_TCK")
    return total


@dataclass
class Result:
    workers: int
    seconds: float
    runs: int
    steps: int
    start_p50: float
    worker_cpu: float = 0.0  # CPU seconds of the worker processes while it measured
    front_cpu: float = 0.0  # CPU seconds of this process while it measured
    busy: float = 0.0  # CPU seconds the whole machine was busy while it measured

    @property
    def runs_per_second(self) -> float:
        return self.runs / self.seconds

    @property
    def steps_per_second(self) -> float:
        return self.runs * self.steps / self.seconds


async def measure(args: argparse.Namespace, workers: int) -> Result:
    from flowledger.storage import open_store
    from flowledger.tools import WorkflowTools
    from flowledger.workflows.frontdoor import FrontDoor
    from flowledger.workflows.session import WorkflowSession
    from flowledger.workflows.unfinished import UnfinishedIndex
    from flowledger.workflows.worker import read_workers

    schema = f"bench_{uuid.uuid4().hex[:12]}"
    url = _with_schema(args.db, schema)
    procs: list[subprocess.Popen[bytes]] = []
    try:
        async with open_store(url) as store:  # creates the schema first
            procs.extend(_spawn_worker(url, args) for _ in range(workers))

            async def announced() -> bool:
                return len(await read_workers(store)) >= workers

            await _wait_until(announced, 0.05)
            app = catalog()
            tools = []
            for _ in range(args.sessions):
                session = WorkflowSession.build(store, str(uuid.uuid4()), app)
                door = FrontDoor.for_session(session, start_timeout=600)
                tools.append(
                    WorkflowTools(
                        session.session_id,
                        catalog=session.catalog,
                        registry=session.registry,
                        inputs=session.inputs,
                        supervisor=door,
                        start_timeout=605,
                    )
                )
            gate = asyncio.Semaphore(args.concurrency)
            latencies: list[float] = []

            async def start(number: int) -> None:
                async with gate:
                    began = time.perf_counter()
                    await tools[number % len(tools)].call(
                        "workflow_run_start",
                        {
                            "definition_name": "chain",
                            "definition_version": "v1",
                            "input": {"count": number},
                        },
                    )
                    latencies.append(time.perf_counter() - began)

            index = UnfinishedIndex(store.kv)
            pids = [proc.pid for proc in procs]
            cpu_before, busy_before = time.process_time(), _machine_busy()
            workers_before = _process_cpu(pids)
            began = time.perf_counter()
            await asyncio.gather(*(start(n) for n in range(args.runs)))

            async def drained() -> bool:
                return not await index.scan()

            await _wait_until(drained, 0.02)
            seconds = time.perf_counter() - began
            front_cpu = time.process_time() - cpu_before
            busy = _machine_busy() - busy_before
            worker_cpu = _process_cpu(pids) - workers_before
    finally:
        for proc in procs:
            proc.send_signal(signal.SIGTERM)
        for proc in procs:
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
        _drop(args.db, schema)
    return Result(
        workers,
        seconds,
        args.runs,
        args.steps,
        statistics.median(latencies),
        worker_cpu,
        front_cpu,
        busy,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--db", default="postgresql://postgres@127.0.0.1:5432/test")
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--runs", type=int, default=240)
    parser.add_argument("--sessions", type=int, default=12)
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--concurrency", type=int, default=48, help="starts in flight")
    parser.add_argument("--runs-per-session", type=int, default=4)
    parser.add_argument("--poll", type=float, default=0.2)
    parser.add_argument("--repeat", type=int, default=2)
    args = parser.parse_args()

    command = "python bench/workers.py " + " ".join(sys.argv[1:])
    rows: list[tuple[int, list[Result]]] = []
    for workers in args.workers:
        results = []
        for _ in range(args.repeat):
            result = asyncio.run(measure(args, workers))
            print(
                f"{workers} worker(s): {result.seconds:.2f} s, "
                f"{result.runs_per_second:.1f} runs/s, {result.steps_per_second:.0f} steps/s, "
                f"start p50 {result.start_p50 * 1000:.0f} ms, machine busy "
                f"{100 * result.busy / (result.seconds * (os.cpu_count() or 1)):.0f}%, CPU s: "
                f"workers {result.worker_cpu:.1f}, front door {result.front_cpu:.1f}, "
                f"rest {max(0.0, result.busy - result.worker_cpu - result.front_cpu):.1f}",
                file=sys.stderr,
                flush=True,
            )
            results.append(result)
        rows.append((workers, results))

    cpus = os.cpu_count()
    print(f"\n`{command}` ({platform.python_version()}, {cpus} CPUs, {platform.machine()})\n")
    print(
        f"{args.runs} runs x {args.steps} steps over {args.sessions} sessions, "
        f"{args.runs_per_session} runs per session at once, {args.concurrency} starts in "
        f"flight, poll {args.poll} s; median of {args.repeat} (range)\n"
    )
    print(
        "| workers | runs/s | steps/s | wall time (s) | front-door start p50 (ms) "
        "| machine CPU busy | CPU ms per run: workers / front door / PostgreSQL + rest |"
    )
    print("| ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for workers, results in rows:
        rps = [r.runs_per_second for r in results]
        sps = [r.steps_per_second for r in results]
        wall = [r.seconds for r in results]
        p50 = [r.start_p50 * 1000 for r in results]
        busy = [100 * r.busy / (r.seconds * (cpus or 1)) for r in results]
        per_run = [
            (
                1000 * r.worker_cpu / r.runs,
                1000 * r.front_cpu / r.runs,
                1000 * max(0.0, r.busy - r.worker_cpu - r.front_cpu) / r.runs,
            )
            for r in results
        ]
        split = " / ".join(f"{statistics.median(part):.1f}" for part in zip(*per_run, strict=True))
        print(
            f"| {workers} | {statistics.median(rps):.1f} ({min(rps):.1f}-{max(rps):.1f}) "
            f"| {statistics.median(sps):.0f} ({min(sps):.0f}-{max(sps):.0f}) "
            f"| {statistics.median(wall):.2f} | {statistics.median(p50):.0f} "
            f"| {statistics.median(busy):.0f}% | {split} |"
        )


if __name__ == "__main__":
    main()
