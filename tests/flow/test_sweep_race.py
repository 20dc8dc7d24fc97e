"""Sweeping is safe against appenders in other processes (SQLite file, PostgreSQL).

Writer processes (``_sweep_writer.py``) append checkpoint runs whose states share a few
large fields through one `LedgerCheckpointStore` each, whose cache skips attachments it
believes stored and names them in refs. Meanwhile this process keeps dropping logs
(half of them, or all, so shared attachments lose every reference and are swept while
the writers still believe them stored) and sweeping. Afterwards no reference points at a
missing attachment, every surviving checkpoint reads back as written, and once all is
dropped and swept the SQLite file is smaller.
"""

from __future__ import annotations

import asyncio
import json
import random
import sqlite3
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from flowledger import flow
from flowledger.flow.ids import new_run_id
from flowledger.storage import Store, SweepReport, open_store

from .._postgres import postgres_url
from ._sweep_writer import state_for

WRITER = Path(__file__).with_name("_sweep_writer.py")
WRITERS = 2
RUNS = 300  # per writer; two appends each
KEPT = 10  # per writer: its last runs, which are not dropped while the writers run
HANG = 300.0  # seconds: a generous deadline for a hung writer, not a timing bound


@pytest.fixture(params=["sqlite", "postgres"])
async def url(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path}/race.db?synchronous=NORMAL&busy_timeout=60000"
        return
    with postgres_url() as pg:
        yield pg


async def raw(store: Store, query: str) -> list[tuple[Any, ...]]:
    """Rows of ``query`` (with ``{s}`` for the schema prefix) on the store's own database."""
    db: Any = store.ledger._db  # type: ignore[attr-defined]
    if store.url.startswith("sqlite"):
        rows: list[tuple[Any, ...]] = db.run(lambda c: c.execute(query.format(s="")).fetchall())
        return rows
    async with db.connection() as conn:
        cursor = await conn.execute(query.format(s=f'"{db.settings.schema}".'))
        return await cursor.fetchall()


async def size(store: Store) -> int:
    """The SQLite database's size in pages: page_count * page_size."""
    [(pages,)] = await raw(store, "PRAGMA page_count")
    [(page_size,)] = await raw(store, "PRAGMA page_size")
    return int(pages) * int(page_size)


async def writer_lines(proc: asyncio.subprocess.Process, lines: list[dict[str, Any]]) -> None:
    assert proc.stdout is not None
    async for line in proc.stdout:
        lines.append(json.loads(line))


@pytest.mark.slow
async def test_sweeps_race_appenders_in_other_processes(url: str) -> None:
    async with open_store(url) as store:  # creates the schema before the writers start
        lines: list[dict[str, Any]] = []
        # The writers' last runs are never dropped while they run, to be read back at the end.
        kept = [[new_run_id() for _ in range(KEPT)] for _ in range(WRITERS)]
        never = {f"flow/runs/{run_id}" for ids in kept for run_id in ids}
        procs = [
            await asyncio.create_subprocess_exec(
                sys.executable,
                str(WRITER),
                url,
                str(w),
                str(RUNS),
                *kept[w],
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
            )
            for w in range(WRITERS)
        ]
        readers = [asyncio.ensure_future(writer_lines(p, lines)) for p in procs]
        rng = random.Random(19)
        cycles = dropped = swept = 0
        try:
            async with asyncio.timeout(HANG):
                while any(p.returncode is None for p in procs):
                    names = [n for n in await store.ledger.names("flow/runs/") if n not in never]
                    everything = cycles % 4 == 3
                    victims = names if everything else rng.sample(names, len(names) // 2)
                    dropped += await store.ledger.drop(victims)
                    if cycles % 10 == 0:
                        await store.ledger.sweep(dry_run=True)
                        await store.ledger.usage(names[:5])
                    swept += (await store.ledger.sweep()).attachments
                    cycles += 1
                    await asyncio.sleep(0)  # the writers' exits are noticed here
                await asyncio.gather(*readers)
        finally:
            for p in procs:
                if p.returncode is None:
                    p.kill()
                    await p.wait()
        errors = [(await p.stderr.read()).decode() for p in procs if p.stderr is not None]
        assert [p.returncode for p in procs] == [0] * WRITERS, errors
        done = [line for line in lines if line.get("done")]
        runs = {line["run"]: line for line in lines if "run" in line}
        assert len(done) == WRITERS and len(runs) == WRITERS * RUNS
        refused = sum(line["refused"] for line in done)
        print(
            f"\n{WRITERS * RUNS} runs, {cycles} drop+sweep cycles, {dropped} logs dropped, "
            f"{swept} attachments swept, {refused} appends refused and re-sent"
        )

        # No reference points at a missing attachment.
        dangling = await raw(
            store,
            "SELECT count(*) FROM {s}attachment_refs r WHERE NOT EXISTS "
            "(SELECT 1 FROM {s}attachments a WHERE a.digest = r.digest)",
        )
        assert dangling == [(0,)]
        # Every surviving checkpoint reads back as written, by a store with no cache.
        fresh = flow.LedgerCheckpointStore(store.ledger)
        surviving = await store.ledger.names("flow/runs/")
        assert never <= set(surviving)
        assert all(runs[name.rpartition("/")[2]]["written"] == 2 for name in never)
        for name in surviving:
            run_id = name.rpartition("/")[2]
            line = runs[run_id]
            history = await fresh.history(run_id)
            assert [cp.state for cp in history] == [
                state_for(line["i"], revision) for revision in range(line["written"])
            ]
        await space_is_given_back(store, surviving)


async def space_is_given_back(store: Store, surviving: list[str]) -> None:
    """Dropping everything and sweeping leaves no attachment, and on SQLite the file (new,
    so with incremental auto-vacuum) shrinks, and shrinks or stays after `vacuum`."""
    before = await size(store) if store.url.startswith("sqlite") else 0
    assert await store.ledger.drop(surviving) == len(surviving)
    await store.ledger.sweep()
    assert await store.ledger.sweep(dry_run=True) == SweepReport(0, 0)
    assert await raw(store, "SELECT count(*) FROM {s}attachments") == [(0,)]
    assert await raw(store, "SELECT count(*) FROM {s}attachment_refs") == [(0,)]
    if not store.url.startswith("sqlite"):
        await store.ledger.vacuum()
        return
    after_sweep = await size(store)
    await store.ledger.vacuum()
    after_vacuum = await size(store)
    print(f"SQLite pages: {before} bytes -> {after_sweep} after drop+sweep -> {after_vacuum}")
    assert after_sweep < before
    assert after_vacuum <= after_sweep
    path = store.url.split("?")[0].removeprefix("sqlite:///")
    conn = sqlite3.connect(path)
    try:
        assert conn.execute("PRAGMA auto_vacuum").fetchone() == (2,)
    finally:
        conn.close()
