"""Wake-ups against polling on PostgreSQL: front-door start latency with 3 workers, and the
queries an idle worker makes, alternating the code at ``--before`` and this checkout.

Every round runs in a subprocess per side (the code at git revision ``--before``
extracted with ``git archive`` and put first on ``PYTHONPATH``, then this checkout - or
the other way round on odd rounds), on a database of its own (created and dropped by
the round):

1. idle: ``--workers`` workers with their default settings in the round's process, each
   on a store whose KV, blobs and ledger count their calls (one statement each, or a
   short transaction), with no work at all for ``--idle`` seconds: calls per worker per
   minute (the heartbeat included);
2. start ``--workers`` ``flowledger worker`` processes (``--app workers:catalog``, the
   5-step chain of ``bench/workers.py``) with their default ``--poll`` (0.5 s before,
   the 5 s fallback after), and wait until each has announced itself;
3. latency: ``--latency-runs`` starts at ``--latency-rate`` per second in one session
   through the front door (`workflow_run_start`: the pending run written, a worker
   picked it up and made revision 0 durable), p50 and p99;
4. with ``--breakdown N``: N more starts one at a time (each after the previous one
   returned, 0.2 s apart), every process timestamping the way (`_startprobe`), and the
   time of each start split into phases: the front door's writes, its wake-up of the
   workers, the ``NOTIFY`` reaching the owning worker, its tick up to the run record
   ``running``, the first durable checkpoint, the owner's answer reaching the front door
   and the front door's confirming reads.

    python bench/wakeups.py --rounds 3   # --before defaults to the last polling commit
    python bench/wakeups.py --rounds 2 --idle 5 --latency-runs 10 --breakdown 20
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import functools
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
LAST_POLLING = "8ebe07b"  # main just before wake-ups (issue #33): workers polled every 0.5 s


def _database_url(url: str, database: str) -> str:
    return urlunsplit(urlsplit(url)._replace(path=f"/{database}"))


def _admin(url: str, statement: str) -> None:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(statement)  # type: ignore[arg-type]


def _spawn_worker(url: str) -> subprocess.Popen[bytes]:
    """A ``flowledger worker`` with its default ``--poll`` (that of the code under test),
    timestamping its way when ``FLOWLEDGER_START_PROBE`` names a file (`_startprobe`)."""
    probed = "import _startprobe; _startprobe.install(); from flowledger.cli import main; main()"
    return subprocess.Popen(
        [sys.executable, "-c", probed, "worker", "--db", url, "--app", "workers:catalog"],
        cwd=HERE,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def _quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


class _Counting:
    """A storage primitive that counts the calls made on it (each one statement, or a
    short transaction, on PostgreSQL)."""

    def __init__(self, inner: object, count: list[int]) -> None:
        self._inner = inner
        self._count = count

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self._inner, name)
        if not callable(attribute):
            return attribute

        def counted(*a: Any, **k: Any) -> Any:
            self._count[0] += 1
            return attribute(*a, **k)

        return counted


async def _idle_calls(args: argparse.Namespace, url: str) -> float:
    """Storage calls per idle worker per minute: ``--workers`` workers with their default
    settings, in this process, each on a store of its own whose KV, blobs and ledger
    count their calls, over ``--idle`` seconds without any work."""
    from flowledger.storage import open_store
    from flowledger.workflows.runtime.worker import Worker
    from workers import catalog

    count = [0]
    stop = asyncio.Event()
    stores = [await open_store(url) for _ in range(args.workers)]
    try:
        counted = [
            dataclasses.replace(
                store,
                kv=_Counting(store.kv, count),
                blobs=_Counting(store.blobs, count),
                ledger=_Counting(store.ledger, count),
            )
            for store in stores
        ]
        tasks = [asyncio.ensure_future(Worker(s, catalog()).run(stop)) for s in counted]
        await asyncio.sleep(2.0)  # first ticks, heartbeats and listeners
        before = count[0]
        await asyncio.sleep(args.idle)
        calls = count[0] - before
        stop.set()
        await asyncio.gather(*tasks)
    finally:
        for store in stores:
            await store.close()
    return calls / args.workers * 60 / args.idle


async def _round(args: argparse.Namespace, url: str) -> dict[str, float]:
    from flowledger.storage import open_store
    from flowledger.tools import WorkflowTools
    from flowledger.workflows.runtime.frontdoor import FrontDoor
    from flowledger.workflows.runtime.session import WorkflowSession
    from flowledger.workflows.runtime.worker import read_workers
    from workers import catalog

    per_minute = await _idle_calls(args, url)
    procs = [_spawn_worker(url) for _ in range(args.workers)]
    try:
        async with open_store(url) as store:
            while True:
                if len(await read_workers(store)) >= args.workers:
                    break
                await asyncio.sleep(0.05)
            session = WorkflowSession.build(store, str(uuid.uuid4()), catalog())
            tools = WorkflowTools(
                session.session_id,
                catalog=session.catalog,
                registry=session.registry,
                inputs=session.inputs,
                supervisor=FrontDoor.for_session(session, start_timeout=600),
                start_timeout=605,
            )
            latencies: list[float] = []

            async def start_at(number: int) -> None:
                await asyncio.sleep(number / args.latency_rate)
                began = time.perf_counter()
                await tools.call(
                    "workflow_run_start",
                    {"definition_name": "chain", "definition_version": "v1", "input": {}},
                )
                latencies.append(time.perf_counter() - began)

            await asyncio.gather(*(start_at(n) for n in range(args.latency_runs)))
            windows = await _one_at_a_time(args, tools)
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            proc.wait(timeout=60)
    return {
        "idle_per_worker_minute": per_minute,
        "latencies": latencies,  # type: ignore[dict-item]
        "phases": _phases(windows),  # type: ignore[dict-item]
    }


async def _one_at_a_time(args: argparse.Namespace, tools: Any) -> list[tuple[float, float]]:
    """``--breakdown`` starts, one at a time: each one's (call, return) monotonic times."""
    windows: list[tuple[float, float]] = []
    for _ in range(args.breakdown):
        await asyncio.sleep(0.2)
        began = time.monotonic()
        await tools.call(
            "workflow_run_start",
            {"definition_name": "chain", "definition_version": "v1", "input": {}},
        )
        windows.append((began, time.monotonic()))
    return windows


PHASES = (
    ("front door writes (input, index, run record)", "call", "door_start"),
    ("front door: its check and the NOTIFY", "door_start", "door_woke"),
    ("NOTIFY heard by the owning worker", "door_woke", "woken"),
    ("worker tick to the record `running`", "woken", "running"),
    ("first durable checkpoint (revision 0)", "running", "seeded"),
    ("owner's answer heard by the front door", "seeded", "answered"),
    ("front door's confirming reads", "answered", "returned"),
    ("total", "call", "returned"),
)


def _first(
    events: list[dict[str, Any]],
    event: str,
    after: float,
    pid: int | None = None,
    channel: str = "",
) -> Any:
    """The first ``event`` at or after ``after`` (of process ``pid``; heard on a channel
    starting with ``channel``), or None."""
    for e in events:
        if e["event"] != event or e["t"] < after or (pid is not None and e["pid"] != pid):
            continue
        if not channel or any(c.startswith(channel) for c in e.get("channels", ())):
            return e
    return None


def _phases(windows: list[tuple[float, float]]) -> list[dict[str, float]]:
    """Each start's phase durations (ms), from the events `_startprobe` wrote."""
    path = os.environ.get("FLOWLEDGER_START_PROBE")
    if not path or not windows:
        return []
    events = sorted(
        (json.loads(line) for line in Path(path).read_text().splitlines()), key=lambda e: e["t"]
    )
    me = os.getpid()
    found = []
    for began, returned in windows:
        inside = [e for e in events if began <= e["t"] <= returned]
        first = functools.partial(_first, inside)
        door_start = first("door_start", began, me)
        door_woke = door_start and first("door_woke", door_start["t"], me)
        seeded = first("seeded", began)
        if not (door_woke and seeded):
            continue
        owner = seeded["pid"]
        woken = first("woken", door_start["t"], owner, "work")
        running = first("running", began, owner)
        answered = first("woken", seeded["t"], me, "replies.") or first(
            "woken", seeded["t"], me, "started."
        )
        if not (woken and running and answered):
            continue
        t = {
            "call": began,
            "door_start": door_start["t"],
            "door_woke": door_woke["t"],
            "woken": woken["t"],
            "running": running["t"],
            "seeded": seeded["t"],
            "answered": answered["t"],
            "returned": returned,
        }
        found.append({name: 1000 * (t[end] - t[start]) for name, start, end in PHASES})
    return found


def once(args: argparse.Namespace) -> None:
    prefix = os.environ.get("FLOWLEDGER_BENCH_DATABASE_PREFIX") or "bench_wakeups"
    database = f"{prefix}_{uuid.uuid4().hex[:10]}"
    _admin(args.db, f'CREATE DATABASE "{database}"')
    with tempfile.TemporaryDirectory() as probe:
        if args.breakdown:
            os.environ["FLOWLEDGER_START_PROBE"] = f"{probe}/events.jsonl"
            import _startprobe

            _startprobe.install()
        try:
            result = asyncio.run(_round(args, _database_url(args.db, database)))
        finally:
            _admin(args.db, f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)')
    print(json.dumps(result))


def summary(values: list[float], digits: int = 0) -> str:
    low, high = min(values), max(values)
    return f"{statistics.median(values):.{digits}f} ({low:.{digits}f}-{high:.{digits}f})"


def compare(args: argparse.Namespace) -> None:
    found: dict[str, list[dict[str, object]]] = {"before": [], "after": []}
    with tempfile.TemporaryDirectory() as base:
        archive = subprocess.run(
            ["git", "archive", args.before, "src"], cwd=ROOT, check=True, capture_output=True
        ).stdout
        subprocess.run(["tar", "-x", "-C", base], input=archive, check=True)
        codes = [("before", f"{base}/src"), ("after", str(ROOT / "src"))]
        for index in range(args.rounds):
            for label, path in codes if index % 2 == 0 else codes[::-1]:
                command = [sys.executable, __file__, "--once", "--db", args.db]
                command += ["--workers", str(args.workers), "--idle", str(args.idle)]
                command += ["--latency-runs", str(args.latency_runs)]
                command += ["--latency-rate", str(args.latency_rate)]
                command += ["--breakdown", str(args.breakdown)]
                out = subprocess.run(
                    command,
                    cwd=ROOT,
                    env={**os.environ, "PYTHONPATH": f"{path}:{HERE}"},
                    check=True,
                    capture_output=True,
                    text=True,
                ).stdout
                result = json.loads(out.splitlines()[-1])
                found[label].append(result)
                lat = result["latencies"]
                print(
                    f"round {index + 1} {label}: start p50 {1000 * statistics.median(lat):.1f} ms, "
                    f"p99 {1000 * _quantile(lat, 0.99):.1f} ms, idle "
                    f"{result['idle_per_worker_minute']:.1f} storage calls/worker/min",
                    file=sys.stderr,
                    flush=True,
                )
    command = "python bench/wakeups.py " + " ".join(sys.argv[1:])
    print(f"\n`{command}`\n")
    print(
        f"{args.workers} workers, {args.latency_runs} starts at {args.latency_rate:g}/s in one "
        f"session per round, {args.rounds} alternated rounds; before = {args.before} "
        f"{'(default poll 0.5 s)' if args.before == LAST_POLLING else ''}, after = this "
        f"checkout (wake-ups, fallback poll 5 s). Start "
        f"p50/p99 per round, then median (min-max) over rounds; idle storage calls per "
        f"worker per minute over {args.idle:g} s without work.\n"
    )
    print("| code | start p50 (ms) | start p99 (ms) | idle storage calls per worker per minute |")
    print("| --- | ---: | ---: | ---: |")
    for label, rounds in found.items():
        p50 = [1000 * statistics.median(r["latencies"]) for r in rounds]  # type: ignore[arg-type]
        p99 = [1000 * _quantile(r["latencies"], 0.99) for r in rounds]  # type: ignore[arg-type]
        idle = [float(r["idle_per_worker_minute"]) for r in rounds]  # type: ignore[arg-type]
        print(f"| {label} | {summary(p50, 1)} | {summary(p99, 1)} | {summary(idle, 1)} |")
    if args.breakdown:
        _print_breakdown(args, found)


def _print_breakdown(args: argparse.Namespace, found: dict[str, list[dict[str, Any]]]) -> None:
    starts = {label: [p for r in rounds for p in r["phases"]] for label, rounds in found.items()}
    print(
        f"\nOne start at a time ({args.breakdown} per round and side, the session already "
        f"owned but for the first): where the ms of a start go, median (min-max) over "
        f"{', '.join(f'{len(v)} {k}' for k, v in starts.items())} starts.\n"
    )
    print("| phase (ms) | " + " | ".join(starts) + " |")
    print("| --- |" + " ---: |" * len(starts))
    for name, _, _ in PHASES:
        cells = [
            summary([p[name] for p in phases], 1) if phases else "-" for phases in starts.values()
        ]
        print(f"| {name} | " + " | ".join(cells) + " |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--db", default="postgresql://postgres@127.0.0.1:5432/test")
    parser.add_argument(
        "--before",
        default=LAST_POLLING,
        help="git revision to compare with (default: the last commit before wake-ups)",
    )
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--workers", type=int, default=3)
    parser.add_argument("--idle", type=float, default=30.0, help="seconds of the idle count")
    parser.add_argument("--latency-runs", type=int, default=40)
    parser.add_argument("--latency-rate", type=float, default=5.0)
    parser.add_argument(
        "--breakdown", type=int, default=0, help="starts one at a time, timed phase by phase"
    )
    parser.add_argument("--once", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.once:
        once(args)
    else:
        compare(args)


if __name__ == "__main__":
    main()
