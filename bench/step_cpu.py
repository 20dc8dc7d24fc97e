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

``--postgres-url URL`` runs the loop on a PostgreSQL store instead (a fresh schema of that
database for every repetition, dropped after it; the server's ``synchronous_commit`` as
set): the client CPU of a step on PostgreSQL, e.g.
``PYTHONPATH=src python bench/step_cpu.py --postgres-url postgresql://127.0.0.1/DB``.

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
from flowledger.storage import Store, open_store
from steps import Counter, loop_graph

SETTLE_SECONDS = 3.5  # above folder.SETTLED_NS (3 s), which an older checkout lacks


async def one(n: int, sync: str, settled: bool, postgres_url: str | None) -> float:
    with tempfile.TemporaryDirectory() as tmp:
        if postgres_url is None:
            url = f"sqlite:///{tmp}/bench.db?synchronous={sync}"
        else:
            schema = f"bench_step_cpu_{os.getpid()}"
            url = f"{postgres_url}{'&' if '?' in postgres_url else '?'}schema={schema}"
        async with open_store(url) as store:
            try:
                return await measure(store, n, settled)
            finally:
                if postgres_url is not None:
                    async with store.ledger._db.connection() as conn:  # type: ignore[attr-defined]
                        await conn.execute(f"DROP SCHEMA {schema} CASCADE".encode())


async def measure(store: Store, n: int, settled: bool) -> float:
    if settled:
        await store.kv.put("settle", b"x", expected=0)
        await asyncio.sleep(SETTLE_SECONDS)
    runner = loop_graph(n).compile(
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
    parser.add_argument("--postgres-url", help="run on this PostgreSQL database instead")
    args = parser.parse_args()
    micros = [
        await one(args.n, args.sync, args.settled, args.postgres_url) for _ in range(args.reps)
    ]
    if args.postgres_url:
        where = "PostgreSQL"
    else:
        settled = "settled" if args.settled else "fresh"
        where = f"synchronous={args.sync} {settled} directory"
    print(
        f"a) loop N={args.n} {where}: "
        f"{statistics.median(micros):.1f} CPU us/step ({min(micros):.1f}-{max(micros):.1f})"
    )


if __name__ == "__main__":
    asyncio.run(main())
