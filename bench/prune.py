"""Retention pass cost: a prune of N finished runs of one session, on SQLite and PostgreSQL.

Each round, on a fresh database (a fresh schema on PostgreSQL): make ``--runs`` completed
runs of the semantics catalog (sharing ``--inputs`` inputs) and one interrupted run,
backdate them all, then time a dry run and a real pass (wall and process CPU time).

With ``--before REV`` (default: none), every round runs in a subprocess, alternately on
the code at git revision ``REV`` (``git archive``, put first on ``PYTHONPATH``) and on
this checkout, ``--repeat`` times per backend; the order within a pair flips every pair.
Printed per code and backend: the median with min-max of the real pass's wall time, of
its KV keys deleted per second (records, index entries and side keys) and of its runs per
second, then the load average (the machine is shared). The durability is the same on
both sides: each backend's default (SQLite ``synchronous=FULL`` in WAL; PostgreSQL
``synchronous_commit=on``); only the number of transactions differs.

    python bench/prune.py --runs 200 --repeat 5 --before main --backends sqlite,postgres
    python bench/prune.py --runs 200 --repeat 3            # this checkout, SQLite only
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests._postgres import postgres_url
from tests.workflows._retention_support import Runs, backdate, catalog

from flowledger.host import open_session
from flowledger.storage import open_store
from flowledger.workflows.retention.pruning import RetentionPolicy, prune

ROOT = Path(__file__).resolve().parents[1]


async def one_round(url: str, runs: int, inputs: int) -> dict[str, float]:
    async with open_session(url, catalog()) as session:
        maker = Runs(session)
        made = [await maker.completed(f"input {i % inputs}") for i in range(runs)]
        made.append(await maker.interrupted("input 0"))
        sid = session.session_id
    policy = RetentionPolicy(timedelta(days=30))
    async with open_store(url) as store:
        for run_id in made:
            await backdate(store, sid, run_id)
        wall, cpu = time.perf_counter(), time.process_time()
        dry = await prune(store, sid, policy, dry_run=True)
        dry_wall, dry_cpu = time.perf_counter() - wall, time.process_time() - cpu
        wall, cpu = time.perf_counter(), time.process_time()
        real = await prune(store, sid, policy)
        real_wall, real_cpu = time.perf_counter() - wall, time.process_time() - cpu
    assert len(dry.runs) == len(real.runs) == runs, (len(dry.runs), len(real.runs))
    keys = real.records + real.kv_keys
    return {
        "dry_wall": dry_wall,
        "dry_cpu": dry_cpu,
        "wall": real_wall,
        "cpu": real_cpu,
        "keys": keys,
        "logs": real.logs,
        "keys_per_s": keys / real_wall,
        "runs_per_s": runs / real_wall,
    }


@contextlib.contextmanager
def database(backend: str, folder: str) -> Iterator[str]:
    if backend == "sqlite":
        yield f"sqlite:///{folder}/bench.db"
    else:
        with postgres_url() as url:
            yield url


def once(backend: str, runs: int, inputs: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as folder, database(backend, folder) as url:
        return asyncio.run(one_round(url, runs, inputs))


def summary(values: list[float], unit: str, digits: int = 3) -> str:
    return (
        f"{statistics.median(values):.{digits}f}{unit} "
        f"({min(values):.{digits}f}-{max(values):.{digits}f})"
    )


def compare(args: argparse.Namespace, backends: list[str]) -> None:
    found: dict[tuple[str, str], list[dict[str, float]]] = {}
    with tempfile.TemporaryDirectory() as base:
        archive = subprocess.run(
            ["git", "archive", args.before, "src"], cwd=ROOT, check=True, capture_output=True
        ).stdout
        subprocess.run(["tar", "-x", "-C", base], input=archive, check=True)
        codes = [("before", f"{base}/src"), ("after", str(ROOT / "src"))]
        for index in range(args.repeat):
            for backend in backends:
                for label, path in codes if index % 2 == 0 else codes[::-1]:
                    command = [sys.executable, __file__, "--once", backend]
                    command += ["--runs", str(args.runs), "--inputs", str(args.inputs)]
                    out = subprocess.run(
                        command,
                        cwd=ROOT,
                        env={**os.environ, "PYTHONPATH": path},
                        check=True,
                        capture_output=True,
                        text=True,
                    ).stdout
                    result = json.loads(out.splitlines()[-1])
                    found.setdefault((backend, label), []).append(result)
                    print(
                        f"round {index + 1} {backend} {label}: real {result['wall']:.3f}s, "
                        f"{result['keys']:.0f} keys, {result['keys_per_s']:.0f} keys/s",
                        flush=True,
                    )
    print(
        f"\nprune of {args.runs} finished runs, {args.repeat} alternated rounds each: "
        f"median (min-max); before = {args.before}, after = this checkout"
    )
    print(f"{'backend':<9}{'code':<8}{'real pass wall':>24}{'KV keys/s':>24}{'runs/s':>22}")
    for (backend, label), rounds in found.items():
        print(
            f"{backend:<9}{label:<8}{summary([r['wall'] for r in rounds], 's'):>24}"
            f"{summary([r['keys_per_s'] for r in rounds], '', 0):>24}"
            f"{summary([r['runs_per_s'] for r in rounds], '', 0):>22}"
        )
    for backend in backends:
        before = statistics.median(r["keys_per_s"] for r in found[(backend, "before")])
        after = statistics.median(r["keys_per_s"] for r in found[(backend, "after")])
        print(f"{backend}: KV keys/s after / before = {after / before:.1f}x")
    print("load average", " ".join(f"{x:.2f}" for x in os.getloadavg()))


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--inputs", type=int, default=4)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--backends", default="sqlite", help="comma-separated: sqlite,postgres")
    parser.add_argument("--before", default=None, help="git revision to compare with")
    parser.add_argument("--once", choices=["sqlite", "postgres"], help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.once:
        print(json.dumps(once(args.once, args.runs, args.inputs)))
        return
    backends = [b.strip() for b in args.backends.split(",") if b.strip()]
    if args.before:
        compare(args, backends)
        return
    for backend in backends:
        rounds = [once(backend, args.runs, args.inputs) for _ in range(args.repeat)]
        print(
            f"{backend}, {args.runs} runs: real pass {summary([r['wall'] for r in rounds], 's')},"
            f" {summary([r['keys_per_s'] for r in rounds], ' keys/s', 0)}; dry run "
            f"{summary([r['dry_wall'] for r in rounds], 's')}"
        )
    print("load average", " ".join(f"{x:.2f}" for x in os.getloadavg()))


if __name__ == "__main__":
    main()
