"""Retention pass cost: a prune of N finished runs of one session (SQLite, by default).

For each of ``--repeat`` rounds, on a fresh database: make ``--runs`` completed runs of
the semantics catalog (sharing ``--inputs`` inputs) and one interrupted run, backdate
them all, then time a dry run and a real pass (wall and process CPU time). Prints every
round, then the median with min-max, and the load average (the machine is shared).

    python bench/prune.py --runs 200 --repeat 3
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.workflows._retention_support import Runs, backdate, catalog

from flowledger.host import open_session
from flowledger.storage import open_store
from flowledger.workflows.retention.pruning import RetentionPolicy, prune


async def one_round(url: str, runs: int, inputs: int) -> tuple[float, float, float, float]:
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
    return dry_wall, dry_cpu, real_wall, real_cpu


def summary(label: str, values: list[float]) -> str:
    median = statistics.median(values)
    return f"{label}: median {median:.3f}s (min {min(values):.3f}, max {max(values):.3f})"


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--inputs", type=int, default=4)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    rounds = []
    for index in range(args.repeat):
        with tempfile.TemporaryDirectory() as folder:
            url = f"sqlite:///{folder}/bench.db"
            rounds.append(await one_round(url, args.runs, args.inputs))
        print(
            f"round {index + 1}: dry {rounds[-1][0]:.3f}s wall {rounds[-1][1]:.3f}s cpu; "
            f"real {rounds[-1][2]:.3f}s wall {rounds[-1][3]:.3f}s cpu"
        )
    for column, label in enumerate(("dry wall", "dry cpu", "real wall", "real cpu")):
        print(summary(f"{label} ({args.runs} runs)", [r[column] for r in rounds]))
    print("load average", " ".join(f"{x:.2f}" for x in os.getloadavg()))


if __name__ == "__main__":
    asyncio.run(main())
