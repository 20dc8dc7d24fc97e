"""Space given back by dropping half of the checkpoint logs and sweeping (SQLite, PostgreSQL).

RUNS runs of STEPS checkpoints each are written through `LedgerCheckpointStore`, with the
state ``{"manual": <16 KiB shared by every run>, "notes": <4 KiB of the run's own>,
"count": step}``. Then half the runs are measured (`Ledger.usage`), dropped and swept, and
the database is vacuumed. Sizes: SQLite ``page_count * page_size``; PostgreSQL the total
relation size of the store's tables (heap, TOAST and indexes). Wall times are of one
operation each (one run per backend: sizes are deterministic, times indicative only).

    python bench/ledger_gc.py [--runs 200] [--steps 20] [--postgres URL]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import tempfile
import time
from datetime import UTC, datetime, timedelta
from typing import Any

from flowledger import flow
from flowledger.flow import Checkpoint, RunRecord, RunStatus, StepPhase
from flowledger.flow.ids import new_run_id
from flowledger.storage import Store, open_store

T0 = datetime(2025, 1, 1, tzinfo=UTC)
MANUAL = "m" * 16384


def checkpoint(run_id: str, step: int, notes: str) -> Checkpoint:
    run = RunRecord(
        graph_run_id=run_id,
        graph_id="bench",
        graph_version="0" * 64 + ":0",
        status=RunStatus.RUNNING,
        step=step,
        revision=step,
        created_at=T0,
        started_at=T0,
        updated_at=T0 + timedelta(seconds=step),
    )
    state = {"manual": MANUAL, "notes": notes, "count": step}
    return Checkpoint(run=run, phase=StepPhase.ROUTED, state=state, frontier=["a"])


async def size_of(store: Store) -> int:
    db: Any = store.ledger._db  # type: ignore[attr-defined]
    if store.url.startswith("sqlite"):
        pages = db.run(lambda c: c.execute("PRAGMA page_count").fetchone()[0])
        page = db.run(lambda c: c.execute("PRAGMA page_size").fetchone()[0])
        return int(pages) * int(page)
    async with db.connection() as conn:
        cursor = await conn.execute(
            "SELECT sum(pg_total_relation_size(c.oid)) FROM pg_class c "
            "JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE n.nspname = %s AND c.relkind = 'r'",
            (db.settings.schema,),
        )
        row = await cursor.fetchone()
        return int(row[0])


def mib(n: int) -> str:
    return f"{n / 2**20:8.2f} MiB"


async def bench(url: str, runs: int, steps: int) -> None:
    async with open_store(url) as store:
        checkpoints = flow.LedgerCheckpointStore(store.ledger)
        ids = [new_run_id() for _ in range(runs)]
        started = time.perf_counter()
        for index, run_id in enumerate(ids):
            notes = f"{index}:" + "n" * 4096
            for step in range(steps):
                await checkpoints.append([checkpoint(run_id, step, notes)])
        written = time.perf_counter() - started
        full = await size_of(store)
        half = [checkpoints.log_name(run_id) for run_id in ids[: runs // 2]]
        usage = await store.ledger.usage(half)
        started = time.perf_counter()
        await store.ledger.drop(half)
        dropped = time.perf_counter() - started
        started = time.perf_counter()
        report = await store.ledger.sweep()
        swept = time.perf_counter() - started
        after = await size_of(store)
        await store.ledger.vacuum()
        vacuumed = await size_of(store)
        for run_id in ids[runs // 2 :: max(1, runs // 10)]:
            assert (await checkpoints.latest(run_id)).state["count"] == steps - 1
    backend = url.split(":")[0]
    print(f"{backend}: {runs} runs x {steps} checkpoints ({written:.1f} s to write)")
    print(f"  database                      {mib(full)}")
    print(
        f"  usage(half)                   {usage.records} records, {mib(usage.bytes)} "
        f"+ {mib(usage.exclusive_attachment_bytes)} exclusive attachments"
    )
    print(f"  drop(half)                    {len(half)} logs in {dropped * 1000:.0f} ms")
    print(
        f"  sweep                         {report.attachments} attachments, "
        f"{mib(report.bytes)} in {swept * 1000:.0f} ms"
    )
    print(f"  database after drop+sweep     {mib(after)}")
    print(f"  database after vacuum         {mib(vacuumed)}")


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--postgres", default="")
    args = parser.parse_args()
    print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    with tempfile.TemporaryDirectory() as tmp:
        await bench(f"sqlite:///{tmp}/gc.db?synchronous=NORMAL", args.runs, args.steps)
    if args.postgres:
        await bench(args.postgres, args.runs, args.steps)


if __name__ == "__main__":
    asyncio.run(main())
