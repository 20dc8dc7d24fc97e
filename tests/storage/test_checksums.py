"""Checksums of the durable backends: every KV value, blob and ledger record is stored with
a CRC-32 and checked on read, and a database of schema version 1 (no checksums) gains them
when it is opened.

The bytes are damaged straight in the database (SQLite's file, Postgres's tables), as a bad
disk, a bad restore or a hand edit would. The memory backend keeps Python objects, which
nothing but the store itself can reach, so it is not part of this module.
"""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import pytest

from flowledger.storage import (
    BlobNotFoundError,
    CorruptDataError,
    StorageError,
    Store,
    open_store,
)
from flowledger.storage import sqlite as sqlite_backend
from flowledger.storage.checksum import checksum, verified

from .._postgres import postgres_url, require_postgres

SENTINEL = b"sentinel-7f3a9c: never in an error message"

# the table per kind of stored value (its bytes are in ``content``, next to ``crc``)
TABLES = {"kv": "kv", "blob": "blobs", "record": "ledger_records"}


class Raw(Protocol):
    """Direct access to one stored value's bytes and checksum, by kind and name (a key,
    or ``(log, seq)`` for a record)."""

    def read(self, kind: str, name: Any) -> tuple[bytes, int]: ...

    def write(self, kind: str, name: Any, data: bytes, crc: int) -> None: ...


class SqliteRaw:
    def __init__(self, path: Path) -> None:
        self.path = path

    def _where(self, kind: str, name: Any) -> tuple[str, tuple[Any, ...]]:
        if kind != "record":
            return "key = ?", (name,)
        log, seq = name
        with sqlite3.connect(self.path) as conn:
            (log_id,) = conn.execute("SELECT id FROM ledger_logs WHERE name = ?", (log,)).fetchone()
        return "key = ?", (log_id << 32 | seq,)

    def read(self, kind: str, name: Any) -> tuple[bytes, int]:
        table = TABLES[kind]
        where, params = self._where(kind, name)
        with sqlite3.connect(self.path) as conn:
            row = conn.execute(f"SELECT content, crc FROM {table} WHERE {where}", params)
            data, crc = row.fetchone()
        return bytes(data), int(crc)

    def write(self, kind: str, name: Any, data: bytes, crc: int) -> None:
        table = TABLES[kind]
        where, params = self._where(kind, name)
        conn = sqlite3.connect(self.path, isolation_level=None)
        try:
            query = f"UPDATE {table} SET content = ?, crc = ? WHERE {where}"
            assert conn.execute(query, (data, crc, *params)).rowcount == 1
        finally:
            conn.close()


class PostgresRaw:
    def __init__(self, schema: str) -> None:
        import psycopg

        self.schema = schema
        self.conn = psycopg.connect(require_postgres(), autocommit=True)

    def close(self) -> None:
        self.conn.close()

    def _where(self, kind: str, name: Any) -> tuple[str, tuple[Any, ...]]:
        if kind != "record":
            return "key = %s", (name,)
        log, seq = name
        return (
            f'log_id = (SELECT id FROM "{self.schema}".ledger_logs WHERE name = %s) AND seq = %s',
            (log, seq),
        )

    def _execute(self, query: str, params: tuple[Any, ...]) -> Any:
        cursor = self.conn.execute(query, params)
        return cursor.fetchall() if cursor.description else cursor.rowcount

    def read(self, kind: str, name: Any) -> tuple[bytes, int]:
        table = TABLES[kind]
        where, params = self._where(kind, name)
        query = f'SELECT content, crc FROM "{self.schema}".{table} WHERE {where}'
        ((data, crc),) = self._execute(query, params)
        return bytes(data), int(crc)

    def write(self, kind: str, name: Any, data: bytes, crc: int) -> None:
        table = TABLES[kind]
        where, params = self._where(kind, name)
        query = f'UPDATE "{self.schema}".{table} SET content = %s, crc = %s WHERE {where}'
        assert self._execute(query, (data, crc, *params)) == 1


@dataclass
class Backend:
    store: Store
    raw: Raw


@pytest.fixture(params=["sqlite", "postgres"])
def backend_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[str, Raw]]:
    if request.param == "sqlite":
        path = tmp_path / "store.db"
        yield f"sqlite:///{path}", SqliteRaw(path)
    else:
        from flowledger.storage.postgres import parse_postgres_url

        with postgres_url() as url:
            raw = PostgresRaw(parse_postgres_url(url).schema)
            try:
                yield url, raw
            finally:
                raw.close()


@pytest.fixture
async def backend(backend_url: tuple[str, Raw]) -> AsyncIterator[Backend]:
    url, raw = backend_url
    async with open_store(url) as store:
        yield Backend(store, raw)


async def write_one_of_each(store: Store) -> None:
    await store.kv.put("k/value", SENTINEL, expected=0)
    await store.blobs.put("b/blob", SENTINEL * 3)
    await store.ledger.append("log/a", [b"first", SENTINEL, b"third"], expected=0)


async def read(store: Store, kind: str, name: Any) -> bytes:
    if kind == "kv":
        return (await store.kv.get(name)).value
    if kind == "blob":
        return await store.blobs.get(name)
    log, seq = name
    (record,) = await store.ledger.read(log, after=seq - 1, limit=1)
    return record.payload


VALUES = [("kv", "k/value"), ("blob", "b/blob"), ("record", ("log/a", 2))]


# --- the checksum itself ------------------------------------------------------------------


def test_checksum_is_a_signed_32_bit_crc() -> None:
    assert checksum(b"") == 0
    assert checksum(b"123456789") == 0xCBF43926 - (1 << 32)  # the CRC-32 check value
    assert all(-(1 << 31) <= checksum(bytes([b])) < 1 << 31 for b in range(256))
    assert verified(b"123456789", 0xCBF43926 - (1 << 32), "x") == b"123456789"
    with pytest.raises(CorruptDataError, match=r"^x is corrupt"):
        verified(b"123456788", 0xCBF43926 - (1 << 32), "x")


def test_corrupt_data_error_is_a_storage_error() -> None:
    error = CorruptDataError("value of key 'k'")
    assert isinstance(error, StorageError)
    assert error.what == "value of key 'k'"


# --- reads check ----------------------------------------------------------------------------


@pytest.mark.parametrize(("kind", "name"), VALUES)
async def test_values_are_stored_with_their_checksum(
    backend: Backend, kind: str, name: Any
) -> None:
    await write_one_of_each(backend.store)
    data, crc = backend.raw.read(kind, name)
    assert data == await read(backend.store, kind, name)
    assert crc == checksum(data)


@pytest.mark.parametrize(("kind", "name"), VALUES)
async def test_every_flipped_byte_is_a_corrupt_data_error(
    backend: Backend, kind: str, name: Any
) -> None:
    await write_one_of_each(backend.store)
    data, crc = backend.raw.read(kind, name)
    for position in range(len(data)):
        for mask in (0x01, 0x80, 0xFF):
            damaged = bytearray(data)
            damaged[position] ^= mask
            backend.raw.write(kind, name, bytes(damaged), crc)
            with pytest.raises(CorruptDataError) as caught:
                await read(backend.store, kind, name)
            assert SENTINEL.decode() not in str(caught.value)
    backend.raw.write(kind, name, data, crc)
    assert await read(backend.store, kind, name) == data


@pytest.mark.parametrize(("kind", "name"), VALUES)
async def test_a_damaged_checksum_or_length_is_detected(
    backend: Backend, kind: str, name: Any
) -> None:
    await write_one_of_each(backend.store)
    data, crc = backend.raw.read(kind, name)
    for bit in range(32):
        flipped = crc ^ (1 << bit)
        backend.raw.write(kind, name, data, flipped - (1 << 32) if flipped >= 1 << 31 else flipped)
        with pytest.raises(CorruptDataError):
            await read(backend.store, kind, name)
    for damaged in (data[:-1], data + b"\x00", b""):
        backend.raw.write(kind, name, damaged, crc)
        with pytest.raises(CorruptDataError):
            await read(backend.store, kind, name)


async def test_the_error_names_what_is_damaged(backend: Backend) -> None:
    await write_one_of_each(backend.store)
    expected = {
        "kv": "value of key 'k/value'",
        "blob": "blob 'b/blob'",
        "record": "record 2 of log 'log/a'",
    }
    for kind, name in VALUES:
        data, crc = backend.raw.read(kind, name)
        backend.raw.write(kind, name, b"x" + data, crc)
        with pytest.raises(CorruptDataError) as caught:
            await read(backend.store, kind, name)
        assert caught.value.what == expected[kind]
        assert (
            str(caught.value)
            == f"{expected[kind]} is corrupt: it does not match its stored checksum"
        )


async def test_a_damaged_record_fails_the_whole_read_and_nothing_else(backend: Backend) -> None:
    """A page that holds a damaged record is refused whole (no silently shortened page);
    the records before it, other logs, and every write go on working."""
    store = backend.store
    await write_one_of_each(store)
    await store.ledger.append("log/b", [b"other"], expected=0)
    data, crc = backend.raw.read("record", ("log/a", 2))
    backend.raw.write("record", ("log/a", 2), data[1:], crc)
    with pytest.raises(CorruptDataError):
        await store.ledger.read("log/a")
    assert [r.payload for r in await store.ledger.read("log/a", limit=1)] == [b"first"]
    assert [r.payload for r in await store.ledger.read("log/b")] == [b"other"]
    assert await store.ledger.append("log/a", [b"fourth"], expected=3) == 4
    assert await store.ledger.tip("log/a") == 4


async def test_a_damaged_value_can_be_replaced_or_deleted(backend: Backend) -> None:
    """Writes never read the old bytes: a compare-and-swap at the value's revision
    replaces a damaged value, and a delete removes it."""
    store = backend.store
    await write_one_of_each(store)
    await store.kv.put("k/other", b"v", expected=0)
    data, crc = backend.raw.read("kv", "k/value")
    backend.raw.write("kv", "k/value", data[1:], crc)
    with pytest.raises(CorruptDataError):
        await store.kv.get("k/value")
    assert (await store.kv.get("k/other")).value == b"v"
    assert await store.kv.put("k/value", b"repaired", expected=1) == 2
    assert (await store.kv.get("k/value")).value == b"repaired"
    data, crc = backend.raw.read("blob", "b/blob")
    backend.raw.write("blob", "b/blob", data[1:], crc)
    await store.blobs.delete("b/blob")
    with pytest.raises(BlobNotFoundError):
        await store.blobs.get("b/blob")


# --- migrating a version-1 database ----------------------------------------------------------

V1_KV = [(f"k/{i:05d}", 1, f"value {i}".encode() * (i % 7)) for i in range(2500)]
V1_BLOBS = [("b/one", b"blob bytes"), ("b/empty", b"")]
V1_RECORDS = [b"r1", b"r2" * 100, b""]


# What version 1 ran on values (a process of that version may still be running).
V1_STATEMENTS_SQLITE = [
    ("SELECT value, revision FROM kv WHERE key = ?", ("k/00000",)),
    ("UPDATE kv SET revision = ?, value = ? WHERE key = ?", (2, b"x", "k/00000")),
    ("INSERT INTO kv (key, revision, value) VALUES (?, 1, ?)", ("k/old", b"x")),
    ("INSERT INTO blobs (key, data) VALUES (?, ?)", ("b/old", b"x")),
    ("SELECT data FROM blobs WHERE key = ?", ("b/one",)),
    ("INSERT INTO ledger_records (key, payload) VALUES (?, ?)", (7 << 32 | 9, b"x")),
    ("SELECT key, payload FROM ledger_records WHERE key > ?", (0,)),
]
V1_STATEMENTS_POSTGRES = [
    "SELECT value, revision FROM {s}.kv",
    "UPDATE {s}.kv SET revision = revision + 1, value = 'x'",
    "INSERT INTO {s}.kv (key, revision, value) VALUES ('k/old', 1, 'x')",
    "INSERT INTO {s}.blobs (key, data) VALUES ('b/old', 'x')",
    "SELECT r.seq, r.payload FROM {s}.ledger_records r",
]


async def check_migrated(store: Store, raw: Raw) -> None:
    for key, revision, value in V1_KV[::97] + V1_KV[-1:]:
        entry = await store.kv.get(key)
        assert (entry.value, entry.revision) == (value, revision)
        assert raw.read("kv", key) == (value, checksum(value))
    for key, data in V1_BLOBS:
        assert await store.blobs.get(key) == data
        assert raw.read("blob", key) == (data, checksum(data))
    records = await store.ledger.read("log/v1")
    assert [(r.seq, r.payload) for r in records] == list(enumerate(V1_RECORDS, 1))
    assert raw.read("record", ("log/v1", 2)) == (V1_RECORDS[1], checksum(V1_RECORDS[1]))
    # ... and the migrated values are protected like new ones
    raw.write("record", ("log/v1", 2), b"x" + V1_RECORDS[1], checksum(V1_RECORDS[1]))
    with pytest.raises(CorruptDataError):
        await store.ledger.read("log/v1")
    assert await store.ledger.append("log/v1", [b"r4"], expected=3) == 4
    assert await store.kv.put("k/new", b"new", expected=0) == 1


async def test_a_version_1_sqlite_file_gains_checksums(tmp_path: Path) -> None:
    path = tmp_path / "v1.db"
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        conn.execute("BEGIN")
        conn.execute(sqlite_backend._CREATE_META)
        for statement in sqlite_backend._MIGRATIONS[0]:
            conn.execute(statement)
        conn.execute(sqlite_backend._SET_VERSION, ("1",))
        conn.executemany("INSERT INTO kv (key, revision, value) VALUES (?, ?, ?)", V1_KV)
        conn.executemany("INSERT INTO blobs (key, data) VALUES (?, ?)", V1_BLOBS)
        conn.execute("INSERT INTO ledger_logs (id, name) VALUES (7, 'log/v1')")
        conn.executemany(
            "INSERT INTO ledger_records (key, payload) VALUES (?, ?)",
            [(7 << 32 | seq, payload) for seq, payload in enumerate(V1_RECORDS, 1)],
        )
        conn.execute("COMMIT")
    finally:
        conn.close()
    async with open_store(f"sqlite:///{path}") as store:
        await check_migrated(store, SqliteRaw(path))
    conn = sqlite3.connect(path)
    try:
        (version,) = conn.execute(sqlite_backend._GET_VERSION).fetchone()
    finally:
        conn.close()
    assert version == str(sqlite_backend.SCHEMA_VERSION) == "2"
    # A version-1 process still running against the file fails loudly on every value
    # statement instead of writing a value without (or with a stale) checksum.
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        for statement, params in V1_STATEMENTS_SQLITE:
            with pytest.raises(sqlite3.OperationalError, match=r"no such column|has no column"):
                conn.execute(statement, params)
    finally:
        conn.close()


async def test_a_version_1_postgres_schema_gains_checksums() -> None:
    import psycopg

    from flowledger.storage import postgres as pg

    with postgres_url() as url:
        schema = pg.parse_postgres_url(url).schema
        with psycopg.connect(require_postgres(), autocommit=True) as conn:
            conn.execute(pg._render(pg._CREATE_SCHEMA, schema))
            conn.execute(pg._render(pg._CREATE_MIGRATIONS, schema))
            for statement in pg._MIGRATIONS[0]:
                assert isinstance(statement, str)
                conn.execute(pg._render(statement, schema))
            conn.execute(pg._render(pg._SET_VERSION, schema), (1,))
            with conn.cursor() as cursor:
                cursor.executemany(
                    f'INSERT INTO "{schema}".kv (key, revision, value) VALUES (%s, %s, %s)', V1_KV
                )
                cursor.executemany(
                    f'INSERT INTO "{schema}".blobs (key, data) VALUES (%s, %s)', V1_BLOBS
                )
                cursor.execute(
                    f'INSERT INTO "{schema}".ledger_logs (name, tip) VALUES (%s, %s) RETURNING id',
                    ("log/v1", len(V1_RECORDS)),
                )
                row = cursor.fetchone()
                assert row is not None
                cursor.executemany(
                    f'INSERT INTO "{schema}".ledger_records (log_id, seq, payload) '
                    "VALUES (%s, %s, %s)",
                    [(row[0], seq, payload) for seq, payload in enumerate(V1_RECORDS, 1)],
                )
        raw = PostgresRaw(schema)
        try:
            async with open_store(url) as store:
                await check_migrated(store, raw)
        finally:
            raw.close()
        with psycopg.connect(require_postgres(), autocommit=True) as conn:
            versions = conn.execute(
                f'SELECT version FROM "{schema}".flowledger_migrations ORDER BY version'
            ).fetchall()
            nullable = conn.execute(
                "SELECT table_name, is_nullable FROM information_schema.columns "
                "WHERE table_schema = %s AND column_name = 'crc' ORDER BY table_name",
                (schema,),
            ).fetchall()
        assert versions == [(1,), (2,)]
        assert nullable == [("blobs", "NO"), ("kv", "NO"), ("ledger_records", "NO")]
        with psycopg.connect(require_postgres(), autocommit=True) as conn:
            for statement in V1_STATEMENTS_POSTGRES:
                with pytest.raises(psycopg.errors.UndefinedColumn):
                    conn.execute(statement.replace("{s}", f'"{schema}"'))
