"""A database written before references (schema version 3) migrates with its references
marked incomplete when it has attachments: sweep and usage refuse until they are
registered (add_refs) and marked complete. SQLite files and PostgreSQL schemas."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from flowledger.storage import (
    RefsIncompleteError,
    SweepReport,
    digest_of,
    open_store,
)
from flowledger.storage.checksum import bound_checksum, record_place
from flowledger.storage.postgres import schema as postgres_schema
from flowledger.storage.sqlite import schema as sqlite_schema

from .._postgres import postgres_url

KEPT, LOST = b"kept by the old log" * 20, b"referred to by nothing" * 20
RECORDS = [b"old record 1", b"old record 2"]


async def v3_sqlite(path: str, monkeypatch: pytest.MonkeyPatch, *, attachments: bool) -> str:
    """A version 3 SQLite file holding log ``old`` (and, with ``attachments``, two)."""
    url = f"sqlite:///{path}"
    with monkeypatch.context() as patch:
        patch.setattr(sqlite_schema, "SCHEMA_VERSION", 3)
        async with open_store(url):
            pass
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        conn.execute("BEGIN")
        conn.execute("INSERT INTO ledger_logs (id, name) VALUES (3, 'old')")
        conn.executemany(
            "INSERT INTO ledger_records (key, content, bound_crc) VALUES (?, ?, ?)",
            [
                (3 << 32 | seq, p, bound_checksum(record_place("old", seq), p))
                for seq, p in enumerate(RECORDS, 1)
            ],
        )
        if attachments:
            conn.executemany(
                "INSERT INTO attachments (digest, data) VALUES (?, ?)",
                [(bytes.fromhex(digest_of(d)), d) for d in (KEPT, LOST)],
            )
        conn.execute("COMMIT")
    finally:
        conn.close()
    return url


async def v3_postgres(url: str, monkeypatch: pytest.MonkeyPatch, *, attachments: bool) -> str:
    """A version 3 schema holding log ``old`` (and, with ``attachments``, two)."""
    with monkeypatch.context() as patch:
        patch.setattr(postgres_schema, "SCHEMA_VERSION", 3)
        async with open_store(url) as store:
            db = store.ledger._db  # type: ignore[attr-defined]
            s = db.settings.schema
            async with db.connection() as conn:
                await conn.execute(
                    f'INSERT INTO "{s}".ledger_logs (name, tip) VALUES (%s, 2)', ("old",)
                )
                for seq, payload in enumerate(RECORDS, 1):
                    await conn.execute(
                        f'INSERT INTO "{s}".ledger_records (log_id, seq, content, bound_crc) '
                        f'SELECT id, %s, %s, %s FROM "{s}".ledger_logs WHERE name = %s',
                        (seq, payload, bound_checksum(record_place("old", seq), payload), "old"),
                    )
                if attachments:
                    for data in (KEPT, LOST):
                        await conn.execute(
                            f'INSERT INTO "{s}".attachments (digest, data) VALUES (%s, %s)',
                            (bytes.fromhex(digest_of(data)), data),
                        )
    return url


@pytest.fixture(params=["sqlite", "postgres"])
def place(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[str, str]]:
    """Where the old database goes: an SQLite path, or a fresh PostgreSQL schema's URL."""
    if request.param == "sqlite":
        yield "sqlite", str(tmp_path / "v3.db")
    else:
        with postgres_url() as url:
            yield "postgres", url


async def make_v3(
    place: tuple[str, str], monkeypatch: pytest.MonkeyPatch, *, attachments: bool
) -> str:
    backend, where = place
    make = v3_sqlite if backend == "sqlite" else v3_postgres
    return await make(where, monkeypatch, attachments=attachments)


async def test_an_old_database_with_attachments_refuses_to_sweep_until_backfilled(
    place: tuple[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """After migrating a version 3 database with attachments, refs are incomplete: sweep
    (also a dry run) and usage raise RefsIncompleteError naming the backfill and delete
    nothing; the old log reads as before. After add_refs and mark_refs_complete, a sweep
    deletes only what no log refers to."""
    url = await make_v3(place, monkeypatch, attachments=True)
    async with open_store(url) as store:
        assert not await store.ledger.refs_complete()
        for refused in (store.ledger.sweep(), store.ledger.sweep(dry_run=True)):
            with pytest.raises(RefsIncompleteError, match="backfill_refs"):
                await refused
        with pytest.raises(RefsIncompleteError):
            await store.ledger.usage(["old"])
        assert [r.payload for r in await store.ledger.read("old")] == RECORDS
        both = await store.ledger.attachments([digest_of(KEPT), digest_of(LOST)])
        assert both == {digest_of(KEPT): KEPT, digest_of(LOST): LOST}
        assert await store.ledger.append("old", [b"new"], expected=2) == 3

        assert await store.ledger.add_refs("old", [digest_of(KEPT)]) == 1
        await store.ledger.mark_refs_complete()
    async with open_store(url) as store:
        assert await store.ledger.refs_complete()
        assert await store.ledger.sweep() == SweepReport(1, len(LOST))
        assert await store.ledger.attachments([digest_of(KEPT)]) == {digest_of(KEPT): KEPT}


async def test_an_old_database_without_attachments_has_complete_refs(
    place: tuple[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A version 3 database with no attachments has nothing a sweep could lose: refs are
    complete right after the migration."""
    url = await make_v3(place, monkeypatch, attachments=False)
    async with open_store(url) as store:
        assert await store.ledger.refs_complete()
        assert await store.ledger.sweep() == SweepReport(0, 0)
        assert [r.payload for r in await store.ledger.read("old")] == RECORDS
