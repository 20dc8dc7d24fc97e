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

Before that throughput phase, a latency phase starts ``--latency-runs`` runs at a low,
fixed rate (``--latency-rate`` per second, far below what the workers drain, so no start
waits for a run slot) in ``--latency-sessions`` sessions (default 1; spread over many
sessions at a low rate, each session goes idle, is released after 2 s and must be claimed
again, which the start then waits for) and takes the front door's start latency (the
`workflow_run_start` call: the pending run written, a worker claimed it and made revision
0 durable), p50 and p99.

CPU is counted per process over the throughput phase, from ``/proc/<pid>/stat``: this
process (the front doors), each worker, and the PostgreSQL backends serving each of them
(every connection carries an ``application_name`` naming its process, and the backends
are looked up in ``pg_stat_activity``); "rest" is what else the machine was busy with
(other backends, autovacuum, the WAL writer, anything else running).

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
import re
import shutil
import signal
import statistics
import subprocess
import sys
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from flowledger import flow
from flowledger.workflows import Catalog, Metadata, TypedDefinition, VertexMetadata

HERE = Path(__file__).resolve().parent
STEPS_ENV = "FLOWLEDGER_BENCH_STEPS"
APP_PREFIX = "flbench_"


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


def _with_app_name(url: str, name: str) -> str:
    parts = urlsplit(url)
    query = [(k, v) for k, v in parse_qsl(parts.query) if k != "application_name"]
    return urlunsplit(parts._replace(query=urlencode([*query, ("application_name", name)])))


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


def _backends(url: str) -> dict[str, list[int]]:
    """The PostgreSQL backend pids by ``application_name`` (of this bench's processes)."""
    import psycopg

    base = urlunsplit(urlsplit(url)._replace(query=""))
    with psycopg.connect(base, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT application_name, pid FROM pg_stat_activity WHERE application_name LIKE %s",
            (f"{APP_PREFIX}%",),
        ).fetchall()
    found: dict[str, list[int]] = {}
    for name, pid in rows:
        found.setdefault(name, []).append(pid)
    return found


class CpuMeter:
    """CPU seconds per named process group between `start` and `stop` (from /proc)."""

    def __init__(self, url: str, processes: dict[str, list[int]]) -> None:
        self.url = url
        self.processes = processes  # name -> pids (the client processes)
        self.before: dict[str, float] = {}
        self.backend_pids: dict[str, set[int]] = {}

    def _groups(self) -> dict[str, list[int]]:
        groups = dict(self.processes)
        for app, pids in _backends(self.url).items():
            self.backend_pids.setdefault(app, set()).update(pids)
        for app, pids in self.backend_pids.items():
            groups[f"{app.removeprefix(APP_PREFIX).replace('_', ' ')} backends"] = sorted(pids)
        return groups

    def start(self) -> None:
        self.before = {name: _process_cpu(pids) for name, pids in self._groups().items()}

    def stop(self) -> dict[str, float]:
        # A backend seen only at the end started during the phase: it counts from 0.
        return {
            name: _process_cpu(pids) - self.before.get(name, 0.0)
            for name, pids in self._groups().items()
        }


@dataclass
class Result:
    workers: int
    seconds: float
    runs: int
    steps: int
    start_p50: float  # seconds, throughput phase (starts queue for run slots)
    worker_cpu: float = 0.0  # CPU seconds of the worker processes while it measured
    front_cpu: float = 0.0  # CPU seconds of this process while it measured
    busy: float = 0.0  # CPU seconds the whole machine was busy while it measured
    cpu: dict[str, float] = field(default_factory=dict)  # CPU seconds by process group
    idle_latencies: list[float] = field(default_factory=list)  # seconds, latency phase

    @property
    def runs_per_second(self) -> float:
        return self.runs / self.seconds

    @property
    def steps_per_second(self) -> float:
        return self.runs * self.steps / self.seconds


async def measure(args: argparse.Namespace, workers: int) -> Result:
    from flowledger.storage import open_store
    from flowledger.tools import WorkflowTools
    from flowledger.workflows.records.unfinished import UnfinishedIndex
    from flowledger.workflows.runtime.frontdoor import FrontDoor
    from flowledger.workflows.runtime.session import WorkflowSession
    from flowledger.workflows.runtime.worker import read_workers

    schema = f"bench_{uuid.uuid4().hex[:12]}"
    url = _with_schema(args.db, schema)
    procs: list[subprocess.Popen[bytes]] = []
    try:
        async with open_store(_with_app_name(url, f"{APP_PREFIX}front_door")) as store:
            procs.extend(
                _spawn_worker(_with_app_name(url, f"{APP_PREFIX}worker_{i + 1}"), args)
                for i in range(workers)
            )

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
            index = UnfinishedIndex(store.kv)

            async def start(number: int, latencies: list[float], spread: int) -> None:
                async with gate:
                    began = time.perf_counter()
                    await tools[number % spread].call(
                        "workflow_run_start",
                        {
                            "definition_name": "chain",
                            "definition_version": "v1",
                            "input": {"count": number},
                        },
                    )
                    latencies.append(time.perf_counter() - began)

            async def drained() -> bool:
                return not await index.scan()

            # The latency phase: starts at a fixed low rate, none waiting for a slot.
            idle: list[float] = []

            async def start_at(number: int, delay: float) -> None:
                await asyncio.sleep(delay)
                await start(number, idle, min(args.latency_sessions, len(tools)))

            await asyncio.gather(
                *(start_at(-1 - n, n / args.latency_rate) for n in range(args.latency_runs))
            )
            await _wait_until(drained, 0.02)

            latencies: list[float] = []
            pids = [proc.pid for proc in procs]
            meter = CpuMeter(
                args.db,
                {"front door": [os.getpid()]}
                | {f"worker {i + 1}": [pid] for i, pid in enumerate(pids)},
            )
            spy = _py_spy(args.profile, pids[0]) if args.profile else None
            meter.start()
            cpu_before, busy_before = time.process_time(), _machine_busy()
            workers_before = _process_cpu(pids)
            began = time.perf_counter()
            await asyncio.gather(*(start(n, latencies, len(tools)) for n in range(args.runs)))
            await _wait_until(drained, 0.02)
            seconds = time.perf_counter() - began
            front_cpu = time.process_time() - cpu_before
            busy = _machine_busy() - busy_before
            worker_cpu = _process_cpu(pids) - workers_before
            cpu = meter.stop()
            if spy is not None:
                spy.send_signal(signal.SIGINT)
                spy.wait(timeout=60)
                args.profile = None  # the first measurement only
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
        cpu,
        idle,
    )


def _py_spy(out: str, pid: int) -> subprocess.Popen[bytes]:
    """py-spy sampling ``pid`` (raw collapsed stacks into ``out``) until SIGINT."""
    spy = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
    argv = [spy, "record", "--pid", str(pid), "--rate", "250", "--format", "raw", "-o", out]
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(0.5)  # let it attach before the phase starts
    return proc


def summarize_profile(path: str, top: int = 20) -> list[str]:
    """Self and total shares of a raw py-spy profile, by frame (function and file)."""
    own: dict[str, int] = {}
    total: dict[str, int] = {}
    samples = 0
    with open(path) as lines:
        for line in lines:
            stack, _, count = line.rstrip().rpartition(" ")
            if not stack or not count.isdigit():
                continue
            frames = [re.sub(r":\d+\)$", ")", f) for f in stack.split(";")]
            samples += int(count)
            own[frames[-1]] = own.get(frames[-1], 0) + int(count)
            for frame in set(frames):
                total[frame] = total.get(frame, 0) + int(count)
    out = [f"{samples} samples", "", "self %  frame"]
    for frame, n in sorted(own.items(), key=lambda kv: -kv[1])[:top]:
        out.append(f"{100 * n / samples:5.1f}  {frame}")
    out += ["", "total %  frame (flowledger's own)"]
    # Frames on every stack (the CLI's entry points) say nothing.
    mine = [(f, n) for f, n in total.items() if "flowledger/" in f and n < 0.98 * samples]
    for frame, n in sorted(mine, key=lambda kv: -kv[1])[:top]:
        out.append(f"{100 * n / samples:5.1f}  {frame}")
    return out


def _quantile(values: list[float], q: float) -> float:
    """The ``q`` quantile (nearest rank) of ``values``."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * len(ordered)) - 1))]


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
    parser.add_argument(
        "--latency-runs", type=int, default=40, help="runs of the low-rate latency phase"
    )
    parser.add_argument(
        "--latency-rate", type=float, default=5.0, help="starts per second in that phase"
    )
    parser.add_argument(
        "--latency-sessions",
        type=int,
        default=1,
        help="sessions the latency phase's runs go to (default 1: a session that is "
        "never idle long enough to be released, so no start waits for a claim)",
    )
    parser.add_argument(
        "--profile",
        metavar="RAW",
        help="py-spy the first worker through the first throughput phase into RAW "
        "(collapsed stacks) and print its hot frames",
    )
    args = parser.parse_args()
    profile_out = args.profile

    command = "python bench/workers.py " + " ".join(sys.argv[1:])
    cpus = os.cpu_count() or 1
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    rows: list[tuple[int, list[Result]]] = []
    for workers in args.workers:
        results = []
        for _ in range(args.repeat):
            result = asyncio.run(measure(args, workers))
            shares = ", ".join(f"{k} {1000 * v / result.runs:.1f}" for k, v in result.cpu.items())
            print(
                f"{workers} worker(s): {result.seconds:.2f} s, "
                f"{result.runs_per_second:.1f} runs/s, {result.steps_per_second:.0f} steps/s, "
                f"idle start p50 {1000 * statistics.median(result.idle_latencies):.0f} ms, "
                f"machine busy {100 * result.busy / (result.seconds * cpus):.0f}%, "
                f"CPU ms/run: {shares}",
                file=sys.stderr,
                flush=True,
            )
            results.append(result)
        rows.append((workers, results))

    print(f"\n`{command}` ({platform.python_version()}, {cpus} CPUs, {platform.machine()})\n")
    print(f"load average at start: {load}\n")
    print(
        f"{args.runs} runs x {args.steps} steps over {args.sessions} sessions, "
        f"{args.runs_per_session} runs per session at once, {args.concurrency} starts in "
        f"flight, poll {args.poll} s; median of {args.repeat} (range). Start latency at a "
        f"low rate: {args.latency_runs} runs at {args.latency_rate:g}/s in "
        f"{args.latency_sessions} session(s) per repetition, "
        "all repetitions pooled.\n"
    )
    print(
        "| workers | runs/s | steps/s | wall time (s) | start p50 under load (ms) "
        "| start p50 / p99 at a low rate (ms) | machine CPU busy "
        "| CPU ms per run: front door / workers / their PostgreSQL backends / rest |"
    )
    print("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for workers, results in rows:
        rps = [r.runs_per_second for r in results]
        sps = [r.steps_per_second for r in results]
        wall = [r.seconds for r in results]
        p50 = [r.start_p50 * 1000 for r in results]
        idle = [1000 * v for r in results for v in r.idle_latencies]
        busy = [100 * r.busy / (r.seconds * cpus) for r in results]
        split = " / ".join(
            f"{statistics.median(part):.1f}" for part in zip(*map(_split, results), strict=True)
        )
        print(
            f"| {workers} | {statistics.median(rps):.1f} ({min(rps):.1f}-{max(rps):.1f}) "
            f"| {statistics.median(sps):.0f} ({min(sps):.0f}-{max(sps):.0f}) "
            f"| {statistics.median(wall):.2f} | {statistics.median(p50):.0f} "
            f"| {_quantile(idle, 0.5):.0f} / {_quantile(idle, 0.99):.0f} "
            f"| {statistics.median(busy):.0f}% | {split} |"
        )

    names = sorted(
        {k for _, results in rows for r in results for k in r.cpu},
        key=lambda k: (k.endswith("backends"), not k.startswith("front"), k),
    )
    print("\nCPU ms per run by process (median of the repetitions; backends = the PostgreSQL")
    print("processes serving that process's connections; rest = the rest of the machine):\n")
    print("| workers | " + " | ".join(names) + " | rest |")
    print("| ---: |" + " ---: |" * (len(names) + 1))
    for workers, results in rows:
        cells = [
            f"{statistics.median([1000 * r.cpu[n] / r.runs for r in results if n in r.cpu]):.1f}"
            if any(n in r.cpu for r in results)
            else "-"
            for n in names
        ]
        rest = statistics.median(
            [1000 * max(0.0, r.busy - sum(r.cpu.values())) / r.runs for r in results]
        )
        print(f"| {workers} | " + " | ".join(cells) + f" | {rest:.1f} |")
    if profile_out:
        print(f"\nProfile of worker 1 in the first throughput phase ({profile_out}):\n")
        print("\n".join(summarize_profile(profile_out)))


def _split(r: Result) -> tuple[float, float, float, float]:
    """CPU ms per run: front door, workers, their backends, the rest of the machine."""
    front = r.cpu.get("front door", r.front_cpu)
    workers = sum(v for k, v in r.cpu.items() if k.startswith("worker") and "backends" not in k)
    backends = sum(v for k, v in r.cpu.items() if k.endswith("backends"))
    rest = max(0.0, r.busy - front - workers - backends)
    return tuple(1000 * v / r.runs for v in (front, workers, backends, rest))  # type: ignore[return-value]


if __name__ == "__main__":
    main()
