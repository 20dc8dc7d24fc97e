"""`Store.integrity`: a miss is confirmed without the index that missed, and the engine
checks its own structures.

The damage is real: a flipped byte in an index page of an SQLite file makes the lookup of
a stored key miss it (`_sqlite_bytes.SqliteBytes.flip_in_index`), and `PRAGMA
integrity_check` reports it. On PostgreSQL an index cannot be damaged from a test, so a
name the table holds stands in for the lookup that missed it.
"""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path

import psycopg
import pytest

from flowledger.storage import (
    BlobNotFoundError,
    CorruptDataError,
    InvalidNameError,
    KeyNotFoundError,
    Store,
    open_store,
)
from flowledger.storage.integrity import Kind

from .._postgres import base_url, postgres_url
from ..reliability._sqlite_bytes import SqliteBytes

NAMES: dict[Kind, str] = {"kv": "runs/kept", "blob": "inputs/kept", "log": "logs/kept"}
INDEXES: dict[Kind, str] = {
    "kv": "sqlite_autoindex_kv_1",
    "blob": "sqlite_autoindex_blobs_1",
    "log": "sqlite_autoindex_ledger_logs_1",
}


async def _write(store: Store) -> None:
    await store.kv.put(NAMES["kv"], b"value", expected=0)
    await store.blobs.put(NAMES["blob"], b"blob")
    await store.ledger.append(NAMES["log"], [b"record"], expected=0)
    for n in range(40):  # neighbours, so the damaged entry is one among many
        await store.kv.put(f"runs/other-{n:02d}", b"x", expected=0)
        await store.ledger.append(f"logs/other-{n:02d}", [b"x"], expected=0)


async def _misses(store: Store, kind: Kind) -> bool:
    """Whether the ordinary lookup of ``kind``'s name finds nothing."""
    try:
        if kind == "kv":
            await store.kv.get(NAMES[kind])
        elif kind == "blob":
            await store.blobs.get(NAMES[kind])
        else:
            return await store.ledger.tip(NAMES[kind]) == 0
    except (KeyNotFoundError, BlobNotFoundError):
        return True
    return False


async def test_an_absent_name_is_confirmed_and_a_clean_database_checks_ok(store: Store) -> None:
    await _write(store)
    for kind in NAMES:
        await store.integrity.confirm_absent(kind, "never/written")
    report = await store.integrity.check()
    assert report.ok and report.problems == ()
    if not store.url.startswith("postgres"):
        assert report.complete


@pytest.fixture(params=["sqlite", "postgres"])
async def durable(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    if request.param == "sqlite":
        async with open_store(f"sqlite:///{tmp_path / 'store.db'}") as store:
            yield store
    else:
        with postgres_url() as url:
            async with open_store(url) as store:
                yield store


async def test_a_name_the_table_holds_is_not_confirmed_absent(durable: Store) -> None:
    """A miss of a name that is stored - what a damaged index does - is a
    `CorruptDataError` naming it, and nothing changes."""
    await _write(durable)
    for kind, name in NAMES.items():
        with pytest.raises(CorruptDataError, match="its index missed it") as refused:
            await durable.integrity.confirm_absent(kind, name)
        assert name in refused.value.what
        assert not await _misses(durable, kind)


async def test_arguments_are_checked(durable: Store) -> None:
    with pytest.raises(ValueError, match="integrity kind"):
        await durable.integrity.confirm_absent("table", "x")  # type: ignore[arg-type]
    with pytest.raises(InvalidNameError):
        await durable.integrity.confirm_absent("kv", "../x")
    with pytest.raises(ValueError, match="problem limit"):
        await durable.integrity.check(limit=0)


@pytest.mark.parametrize("kind", list(NAMES))
async def test_a_flipped_index_byte_is_a_miss_the_store_does_not_confirm(
    tmp_path: Path, kind: Kind
) -> None:
    """One flipped byte in an SQLite index page: the lookup misses a stored value,
    `confirm_absent` says corrupt (for that name and for any other name the damaged table
    is asked about), and `check` names the index."""
    path = tmp_path / "store.db"
    async with open_store(f"sqlite:///{path}") as store:
        await _write(store)
    SqliteBytes(path).flip_in_index(INDEXES[kind], NAMES[kind])
    async with open_store(f"sqlite:///{path}", read_only=True) as store:
        assert await _misses(store, kind)
        with pytest.raises(CorruptDataError, match="damaged") as refused:
            await store.integrity.confirm_absent(kind, NAMES[kind])
        assert INDEXES[kind] in str(refused.value)
        with pytest.raises(CorruptDataError):
            await store.integrity.confirm_absent(kind, "never/written")
        report = await store.integrity.check()
    assert report.method == "sqlite integrity_check"
    assert not report.ok and any(INDEXES[kind] in problem for problem in report.problems)
    assert report.problems == tuple(SqliteBytes(path).problems())
    assert report.rows == ((kind, NAMES[kind]),)  # the value whose index entry is damaged


async def test_a_log_row_without_records_in_an_intact_file_is_empty(tmp_path: Path) -> None:
    """The records of a log gone, its row kept, and the file intact: the log is empty, as a
    lookup said (nothing of the engine's structures contradicts it)."""
    path = tmp_path / "store.db"
    async with open_store(f"sqlite:///{path}") as store:
        await _write(store)
    db = sqlite3.connect(path, isolation_level=None)
    try:
        (log,) = db.execute("SELECT id FROM ledger_logs WHERE name = ?", (NAMES["log"],)).fetchone()
        db.execute("DELETE FROM ledger_records WHERE key >> 32 = ?", (log,))
    finally:
        db.close()
    async with open_store(f"sqlite:///{path}") as store:
        assert await _misses(store, "log")
        await store.integrity.confirm_absent("log", NAMES["log"])


async def test_postgres_checks_with_amcheck_only_where_it_is_installed() -> None:
    """Without amcheck the check is incomplete and says how to complete it (it installs
    nothing); with it, every index and table of the store's schema is verified."""
    with postgres_url() as url:
        with psycopg.connect(base_url(), autocommit=True) as admin:
            if admin.execute("SELECT 1 FROM pg_extension WHERE extname = 'amcheck'").fetchone():
                pytest.skip("amcheck is installed in the test database already")
        async with open_store(url) as store:
            await _write(store)
            without = await store.integrity.check()
            assert without.ok and not without.complete
            assert "CREATE EXTENSION amcheck" in without.note
            schema = url.rsplit("schema=", 1)[1]
            # Into the test's own schema, so dropping the schema drops the extension too.
            with psycopg.connect(base_url(), autocommit=True) as admin:
                admin.execute(f'CREATE EXTENSION amcheck SCHEMA "{schema}"')
            with_amcheck = await store.integrity.check()
    assert with_amcheck.method == "postgresql amcheck"
    assert with_amcheck.ok and with_amcheck.complete
