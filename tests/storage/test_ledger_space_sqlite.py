"""Space reclaim on SQLite: a new file gives the pages of dropped logs and swept
attachments back at once (incremental auto-vacuum); an older file keeps them for reuse
until `Ledger.vacuum`, which also turns incremental auto-vacuum on for it."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from flowledger.storage import LedgerUsage, Store, digest_of, open_store
from flowledger.storage.sqlite import schema as sqlite_schema

LOGS = 60
RECORD = b"r" * 1000
BLOB = 6000


def pragma(path: Path, name: str) -> int:
    conn = sqlite3.connect(path)
    try:
        return int(conn.execute(f"PRAGMA {name}").fetchone()[0])
    finally:
        conn.close()


def size(path: Path) -> int:
    return pragma(path, "page_count") * pragma(path, "page_size")


async def fill(store: Store) -> list[str]:
    names = [f"runs/{i:03}" for i in range(LOGS)]
    for i, name in enumerate(names):
        data = bytes([i]) * BLOB
        await store.ledger.append(
            name, [RECORD, RECORD], expected=0, attachments={digest_of(data): data}
        )
    return names


async def test_a_new_file_shrinks_after_drop_and_sweep(tmp_path: Path) -> None:
    """A new file has auto_vacuum=INCREMENTAL; dropping every log and sweeping leaves no
    free page, and the file is smaller; usage predicted what went."""
    path = tmp_path / "new.db"
    async with open_store(f"sqlite:///{path}") as store:
        names = await fill(store)
        assert await store.ledger.usage(names) == LedgerUsage(
            2 * LOGS, 2 * LOGS * len(RECORD), LOGS * BLOB
        )
        full = size(path)
        await store.ledger.drop(names)
        await store.ledger.sweep()
        assert pragma(path, "auto_vacuum") == 2
        assert pragma(path, "freelist_count") == 0
        emptied = size(path)
        assert emptied < full - LOGS * BLOB
        await store.ledger.vacuum()
        assert size(path) <= emptied


async def test_an_older_file_keeps_its_pages_until_vacuum(tmp_path: Path) -> None:
    """A file whose tables existed before incremental auto-vacuum (any file created by an
    older flowledger) keeps freed pages as free pages; vacuum gives them back and turns
    incremental auto-vacuum on, so later sweeps give back at once."""
    path = tmp_path / "old.db"
    conn = sqlite3.connect(path)
    conn.execute(sqlite_schema._CREATE_META)  # a table already there: as in an old file
    conn.close()
    async with open_store(f"sqlite:///{path}") as store:
        assert pragma(path, "auto_vacuum") == 0
        names = await fill(store)
        full = size(path)
        await store.ledger.drop(names)
        await store.ledger.sweep()
        assert size(path) == full
        assert pragma(path, "freelist_count") > 0
        await store.ledger.vacuum()
        assert pragma(path, "auto_vacuum") == 2
        vacuumed = size(path)
        assert vacuumed < full - LOGS * BLOB
        assert path.stat().st_size == vacuumed  # the write-ahead log was checkpointed

        names = await fill(store)
        refilled = size(path)
        await store.ledger.drop(names)
        await store.ledger.sweep()
        assert size(path) < refilled
        assert pragma(path, "freelist_count") == 0
