"""CPU per durable step of a) (bench/steps.py's one-vertex loop), for before/after runs.

Prints ``process_time`` per step of ``runner.run`` alone (store open and graph build
outside), median and min-max of ``--reps`` fresh stores, by default at
``synchronous=OFF`` (what is left is CPU). ``--settled`` makes a first write and waits
until the database's directory has settled (`flowledger.storage.sqlite.folder`), as in a
long-lived store, before the clock starts.

To compare two checkouts, alternate them in fresh processes, e.g.::

    for i in 1 2 3; do
      PYTHONPATH=/path/to/old/src python bench/step_cpu.py --settled
      PYTHONPATH=src python bench/step_cpu.py --settled
    done

Instruction counts (repeatable on a loaded machine): run it under
``valgrind --tool=callgrind`` with ``--reps 1`` at two ``--n`` and divide the difference
of the totals by the difference of the steps.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from flowledger import flow
from flowledger.storage import open_store
from steps import Counter, loop_graph

SETTLE_SECONDS = 3.5  # above folder.SETTLED_NS (3 s), which an older checkout lacks


async def one(n: int, sync: str, settled: bool) -> float:
    graph = loop_graph(n)
    with tempfile.TemporaryDirectory() as tmp:
        async with open_store(f"sqlite:///{tmp}/bench.db?synchronous={sync}") as store:
            if settled:
                await store.kv.put("settle", b"x", expected=0)
                await asyncio.sleep(SETTLE_SECONDS)
            runner = graph.compile(
                entry="tick", finish="stop", store=flow.LedgerCheckpointStore(store.ledger)
            )
            started = time.process_time()
            result = await runner.run(Counter(), max_steps=n + 10)
            cpu = time.process_time() - started
            assert result.run.status is flow.RunStatus.COMPLETED, result
            return cpu / (result.run.step + 1) * 1e6


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1000)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--sync", default="OFF")
    parser.add_argument("--settled", action="store_true")
    args = parser.parse_args()
    micros = [await one(args.n, args.sync, args.settled) for _ in range(args.reps)]
    where = "settled" if args.settled else "fresh"
    print(
        f"a) loop N={args.n} synchronous={args.sync} {where} directory: "
        f"{statistics.median(micros):.1f} CPU us/step ({min(micros):.1f}-{max(micros):.1f})"
    )


if __name__ == "__main__":
    asyncio.run(main())
