"""Adoption time after a worker is SIGKILLed: how long a dead worker's run waits before
another ``flowledger worker`` makes progress on it (PostgreSQL).

On a fresh schema, start ``--workers`` workers (``--app adoption:catalog``, this file:
one workflow of ``--steps`` vertices in a line, each sleeping ``--step-sleep`` seconds,
so a run is always mid-flight when its worker dies). Then ``--kills`` times: start a run
in a new session through a front door, wait until it has made progress and its owner's
heartbeat record names the session, SIGKILL that owner, and poll the run's checkpoint
log (every ``--sample`` seconds) until a new checkpoint appears. Adoption time is from
the signal to that observation: lease expiry (``--lease-ttl``), the survivors' next look
for work (``--poll``, jittered), claiming the session and redoing the interrupted
vertex. A replacement worker is started after each kill.

    python bench/adoption.py --db postgresql://postgres@127.0.0.1:5432/test

Prints every sample, then p50 / p90 / p99 / max. Everything shares this machine.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import math
import os
import platform
import signal
import statistics
import subprocess
import sys
import tempfile
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
SLEEP_ENV = "FLOWLEDGER_BENCH_STEP_SLEEP"


@dataclass
class Chain:
    count: int = 0


async def _step(state: Chain) -> dict[str, Any]:
    await asyncio.sleep(float(os.environ.get(SLEEP_ENV, "0.05")))
    return {"count": state.count + 1}


def catalog() -> Catalog:
    """The workers' app: ``slow_chain`` v1, ``$FLOWLEDGER_BENCH_STEPS`` sleeping vertices."""
    steps = int(os.environ.get(STEPS_ENV, "100"))
    graph: flow.Graph[Chain] = flow.Graph("bench_slow_chain", state=Chain)
    names = [f"s{i}" for i in range(steps)]
    for name in names:
        graph.add_vertex(name, _step)
    for before, after in itertools.pairwise(names):
        graph.add_edge(before, after)
    runner = graph.compile(entry=names[0], finish=names[-1], version="1")
    metadata = Metadata(
        "slow_chain",
        "v1",
        description=f"{steps} sleeping steps in a line",
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


def _with_schema(url: str, schema: str) -> str:
    parts = urlsplit(url)
    query = [(k, v) for k, v in parse_qsl(parts.query) if k != "schema"] + [("schema", schema)]
    return urlunsplit(parts._replace(query=urlencode(query)))


def _drop(url: str, schema: str) -> None:
    import psycopg

    base = urlunsplit(urlsplit(url)._replace(query=""))
    with psycopg.connect(base, autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')  # type: ignore[arg-type]


def _spawn_worker(url: str, args: argparse.Namespace, logs: Path) -> subprocess.Popen[bytes]:
    """A worker whose stderr goes to a file under ``logs`` (to explain a worker that dies)."""
    log = (logs / f"worker-{time.monotonic_ns()}.log").open("wb")
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "flowledger",
            "worker",
            "--db",
            url,
            "--app",
            "adoption:catalog",
            "--lease-ttl",
            str(args.lease_ttl),
            "--poll",
            str(args.poll),
        ],
        cwd=HERE,
        env={**os.environ, STEPS_ENV: str(args.steps), SLEEP_ENV: str(args.step_sleep)},
        stdout=subprocess.DEVNULL,
        stderr=log,
    )


async def _wait_until(check: Callable[[], Awaitable[bool]], interval: float) -> None:
    while True:
        if await check():
            return
        await asyncio.sleep(interval)


def _percentile(samples: list[float], fraction: float) -> float:
    """Nearest-rank percentile."""
    ordered = sorted(samples)
    rank = max(1, min(len(ordered), math.ceil(fraction * len(ordered))))
    return ordered[rank - 1]


async def measure(args: argparse.Namespace) -> list[float]:
    from flowledger.storage import open_store
    from flowledger.tools import WorkflowTools
    from flowledger.workflows.runtime.frontdoor import FrontDoor
    from flowledger.workflows.runtime.session import WorkflowSession
    from flowledger.workflows.runtime.worker import read_workers

    schema = f"bench_{uuid.uuid4().hex[:12]}"
    url = _with_schema(args.db, schema)
    procs: dict[int, subprocess.Popen[bytes]] = {}
    samples: list[float] = []

    logs = Path(tempfile.mkdtemp(prefix="flowledger-adoption-"))

    async def announced(pid: int) -> None:
        async def listed() -> bool:
            if procs[pid].poll() is not None:
                raise RuntimeError(f"worker {pid} exited at startup; see {logs}")
            return pid in {record.pid for record in await read_workers(store)}

        await _wait_until(listed, 0.02)

    try:
        async with open_store(url) as store:  # creates the schema first
            for _ in range(args.workers):
                proc = _spawn_worker(url, args, logs)
                procs[proc.pid] = proc
            for pid in list(procs):
                await announced(pid)
            app = catalog()
            for kill in range(args.kills):
                session = WorkflowSession.build(store, str(uuid.uuid4()), app)
                door = FrontDoor.for_session(session, start_timeout=120)
                tools = WorkflowTools(
                    session.session_id,
                    catalog=session.catalog,
                    registry=session.registry,
                    inputs=session.inputs,
                    supervisor=door,
                    start_timeout=125,
                )
                started = await tools.call(
                    "workflow_run_start",
                    {"definition_name": "slow_chain", "definition_version": "v1", "input": {}},
                )
                run = await session.registry.get(session.session_id, str(started["run_id"]))
                log = f"flow/runs/{run.graph_run_id}"
                give_up = time.monotonic() + 120
                while True:  # some progress, and the owner's record says it owns the session
                    if time.monotonic() > give_up:
                        raise RuntimeError(f"kill {kill + 1}: no owner took the run; see {logs}")
                    owners = [
                        r.pid
                        for r in await read_workers(store)
                        if session.session_id in r.sessions and r.pid in procs
                    ]
                    if owners and await store.ledger.tip(log) >= 3:
                        break
                    await asyncio.sleep(0.02)
                victim = procs.pop(owners[0])
                victim.send_signal(signal.SIGKILL)
                killed = time.perf_counter()
                await asyncio.to_thread(victim.wait)
                durable = await store.ledger.tip(log)

                async def progressed(log: str = log, durable: int = durable) -> bool:
                    return await store.ledger.tip(log) > durable

                await _wait_until(progressed, args.sample)
                samples.append(time.perf_counter() - killed)
                print(f"kill {kill + 1}: adopted after {samples[-1]:.3f} s", file=sys.stderr)
                replacement = _spawn_worker(url, args, logs)
                procs[replacement.pid] = replacement
                await announced(replacement.pid)
    finally:
        for proc in procs.values():
            proc.send_signal(signal.SIGTERM)
        for proc in procs.values():
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
        _drop(args.db, schema)
    return samples


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--db", default="postgresql://postgres@127.0.0.1:5432/test")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--kills", type=int, default=20)
    parser.add_argument("--lease-ttl", type=float, default=1.0)
    parser.add_argument("--poll", type=float, default=0.2)
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--step-sleep", type=float, default=0.05)
    parser.add_argument("--sample", type=float, default=0.01, help="seconds between looks")
    args = parser.parse_args()
    if args.workers < 2:
        parser.error("--workers must be at least 2 (one dies, another adopts)")

    samples = asyncio.run(measure(args))
    command = "python bench/adoption.py " + " ".join(sys.argv[1:])
    print(
        f"\n`{command}` ({platform.python_version()}, {os.cpu_count()} CPUs, "
        f"{platform.machine()})\n"
    )
    print(
        f"{len(samples)} kills, {args.workers} workers, lease TTL {args.lease_ttl} s, "
        f"poll {args.poll} s, sampled every {args.sample} s\n"
    )
    print("| adoption after SIGKILL | p50 | p90 | p99 | max | mean |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    print(
        f"| seconds | {_percentile(samples, 0.5):.2f} | {_percentile(samples, 0.9):.2f} "
        f"| {_percentile(samples, 0.99):.2f} | {max(samples):.2f} "
        f"| {statistics.mean(samples):.2f} |"
    )


if __name__ == "__main__":
    main()
