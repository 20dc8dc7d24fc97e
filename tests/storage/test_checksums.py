"""Checksums of the durable backends: every KV value, blob and ledger record is stored with
a CRC-32 bound to its place (key and revision, blob key, log and sequence number) and
checked on read; a database of schema version 1 (no checksums) gains them and one of
version 2 (unbound checksums) has them bound when it is opened.

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
    Entry,
    StorageError,
    Store,
    open_store,
)
from flowledger.storage.checksum import (
    blob_place,
    bound_checksum,
    checksum,
    kv_place,
    record_checksums,
    record_place,
    verified,
)
from flowledger.storage.sqlite import schema as sqlite_schema

from .._postgres import postgres_url, require_postgres

SENTINEL = b"sentinel-7f3a9c: never in an error message"

# the table per kind of stored value (its bytes are in ``content``, next to ``bound_crc``)
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
            row = conn.execute(f"SELECT content, bound_crc FROM {table} WHERE {where}", params)
            data, crc = row.fetchone()
        return bytes(data), int(crc)

    def write(self, kind: str, name: Any, data: bytes, crc: int) -> None:
        table = TABLES[kind]
        where, params = self._where(kind, name)
        conn = sqlite3.connect(self.path, isolation_level=None)
        try:
            query = f"UPDATE {table} SET content = ?, bound_crc = ? WHERE {where}"
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
        query = f'SELECT content, bound_crc FROM "{self.schema}".{table} WHERE {where}'
        ((data, crc),) = self._execute(query, params)
        return bytes(data), int(crc)

    def write(self, kind: str, name: Any, data: bytes, crc: int) -> None:
        table = TABLES[kind]
        where, params = self._where(kind, name)
        query = f'UPDATE "{self.schema}".{table} SET content = %s, bound_crc = %s WHERE {where}'
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


def place(kind: str, name: Any, revision: int = 1) -> bytes:
    if kind == "kv":
        return kv_place(name, revision)
    if kind == "blob":
        return blob_place(name)
    return record_place(*name)


# --- the checksum itself ------------------------------------------------------------------


def test_checksum_is_a_signed_32_bit_crc() -> None:
    assert checksum(b"") == 0
    assert checksum(b"123456789") == 0xCBF43926 - (1 << 32)  # the CRC-32 check value
    assert all(-(1 << 31) <= checksum(bytes([b])) < 1 << 31 for b in range(256))


def test_the_bound_checksum_covers_place_and_bytes() -> None:
    # The CRC-32 of the place, a NUL, and the bytes.
    assert bound_checksum(b"1234", b"56789") == checksum(b"1234\x0056789")
    crc = bound_checksum(kv_place("k/a", 2), b"value")
    assert verified(b"value", crc, kv_place("k/a", 2), "x") == b"value"
    assert all(-(1 << 31) <= bound_checksum(b"p", bytes([b])) < 1 << 31 for b in range(256))
    elsewhere = [
        kv_place("k/b", 2),
        kv_place("k/a", 1),
        kv_place("k/a", 12),
        blob_place("k/a"),
        record_place("k/a", 2),
    ]
    for other in elsewhere:
        with pytest.raises(CorruptDataError, match=r"^x is corrupt"):
            verified(b"value", crc, other, "x")
    # A NUL separates the parts: (log "a/1", seq 2) is not (log "a", seq 12).
    assert record_place("a/1", 2) != record_place("a", 12)
    assert kv_place("k", 12) != kv_place("k1", 2)


def test_record_checksums_are_the_bound_checksums_of_their_places() -> None:
    payloads = [b"", b"x", bytes(range(256)) * 3]
    for log, after in (("a", 0), ("log/b-1", 9), ("z", (1 << 32) - 4)):
        assert record_checksums(log, after, payloads) == [
            bound_checksum(record_place(log, after + i), p) for i, p in enumerate(payloads, 1)
        ]


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
    assert crc == bound_checksum(place(kind, name), data)


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
        flipped = (crc & 0xFFFFFFFF) ^ (1 << bit)
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
        assert raw.read("kv", key) == (value, bound_checksum(kv_place(key, revision), value))
    for key, data in V1_BLOBS:
        assert await store.blobs.get(key) == data
        assert raw.read("blob", key) == (data, bound_checksum(blob_place(key), data))
    records = await store.ledger.read("log/v1")
    assert [(r.seq, r.payload) for r in records] == list(enumerate(V1_RECORDS, 1))
    bound = bound_checksum(record_place("log/v1", 2), V1_RECORDS[1])
    assert raw.read("record", ("log/v1", 2)) == (V1_RECORDS[1], bound)
    # ... and the migrated values are protected like new ones
    raw.write("record", ("log/v1", 2), b"x" + V1_RECORDS[1], bound)
    with pytest.raises(CorruptDataError):
        await store.ledger.read("log/v1")
    assert await store.ledger.append("log/v1", [b"r4"], expected=3) == 4
    assert await store.kv.put("k/new", b"new", expected=0) == 1


async def test_a_version_1_sqlite_file_gains_checksums(tmp_path: Path) -> None:
    path = tmp_path / "v1.db"
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        conn.execute("BEGIN")
        conn.execute(sqlite_schema._CREATE_META)
        for statement in sqlite_schema._MIGRATIONS[0]:
            conn.execute(statement)
        conn.execute(sqlite_schema._SET_VERSION, ("1",))
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
        (version,) = conn.execute(sqlite_schema._GET_VERSION).fetchone()
    finally:
        conn.close()
    assert version == str(sqlite_schema.SCHEMA_VERSION) == "4"
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

    from flowledger.storage.postgres import parse_postgres_url
    from flowledger.storage.postgres import schema as pg_schema

    with postgres_url() as url:
        schema = parse_postgres_url(url).schema
        with psycopg.connect(require_postgres(), autocommit=True) as conn:
            conn.execute(pg_schema.render(pg_schema._CREATE_SCHEMA, schema))
            conn.execute(pg_schema.render(pg_schema._CREATE_MIGRATIONS, schema))
            for statement in pg_schema._MIGRATIONS[0]:
                assert isinstance(statement, str)
                conn.execute(pg_schema.render(statement, schema))
            conn.execute(pg_schema.render(pg_schema._SET_VERSION, schema), (1,))
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
                "WHERE table_schema = %s AND column_name = 'bound_crc' ORDER BY table_name",
                (schema,),
            ).fetchall()
        assert versions == [(1,), (2,), (3,), (4,)]
        assert nullable == [("blobs", "NO"), ("kv", "NO"), ("ledger_records", "NO")]
        with psycopg.connect(require_postgres(), autocommit=True) as conn:
            for statement in V1_STATEMENTS_POSTGRES:
                with pytest.raises(psycopg.errors.UndefinedColumn):
                    conn.execute(statement.replace("{s}", f'"{schema}"'))


# --- a row read anywhere but where it was written -------------------------------------------


async def test_a_kv_value_copied_to_another_key_is_corrupt(backend: Backend) -> None:
    store, raw = backend.store, backend.raw
    await store.kv.put("runs/x", b"the state of x", expected=0)
    await store.kv.put("runs/y", b"the state of y", expected=0)
    data, crc = raw.read("kv", "runs/x")
    raw.write("kv", "runs/y", data, crc)
    with pytest.raises(CorruptDataError) as caught:
        await store.kv.get("runs/y")
    assert caught.value.what == "value of key 'runs/y'"
    assert (await store.kv.get("runs/x")).value == b"the state of x"


async def test_an_old_revision_of_a_kv_value_put_back_is_corrupt(backend: Backend) -> None:
    """A value (with its checksum) restored over a later revision of the same key - a
    partial restore, a rolled-back page - is refused: the revision is part of the place."""
    store, raw = backend.store, backend.raw
    await store.kv.put("runs/x", b"revision one", expected=0)
    old = raw.read("kv", "runs/x")
    assert await store.kv.put("runs/x", b"revision two", expected=1) == 2
    raw.write("kv", "runs/x", *old)
    with pytest.raises(CorruptDataError):
        await store.kv.get("runs/x")
    assert await store.kv.put("runs/x", b"repaired", expected=2) == 3
    assert (await store.kv.get("runs/x")).value == b"repaired"


async def test_a_blob_copied_to_another_key_is_corrupt(backend: Backend) -> None:
    store, raw = backend.store, backend.raw
    await store.blobs.put("inputs/x", b"input of x")
    await store.blobs.put("inputs/y", b"input of y")
    raw.write("blob", "inputs/y", *raw.read("blob", "inputs/x"))
    with pytest.raises(CorruptDataError) as caught:
        await store.blobs.get("inputs/y")
    assert caught.value.what == "blob 'inputs/y'"
    assert await store.blobs.get("inputs/x") == b"input of x"


async def test_a_record_copied_to_another_log_is_corrupt(backend: Backend) -> None:
    store, raw = backend.store, backend.raw
    await store.ledger.append("flow/runs/x", [b"x1", b"x2"], expected=0)
    await store.ledger.append("flow/runs/y", [b"y1", b"y2"], expected=0)
    for seq in (1, 2):
        raw.write("record", ("flow/runs/y", seq), *raw.read("record", ("flow/runs/x", seq)))
    with pytest.raises(CorruptDataError) as caught:
        await store.ledger.read("flow/runs/y")
    assert caught.value.what == "record 1 of log 'flow/runs/y'"
    assert [r.payload for r in await store.ledger.read("flow/runs/x")] == [b"x1", b"x2"]


async def test_a_record_copied_to_another_sequence_number_is_corrupt(backend: Backend) -> None:
    """Within one log too: a record moved, duplicated or swapped with another is refused."""
    store, raw = backend.store, backend.raw
    await store.ledger.append("log/a", [b"one", b"two", b"three"], expected=0)
    first, third = raw.read("record", ("log/a", 1)), raw.read("record", ("log/a", 3))
    raw.write("record", ("log/a", 3), *first)
    with pytest.raises(CorruptDataError) as caught:
        await store.ledger.read("log/a", after=2)
    assert caught.value.what == "record 3 of log 'log/a'"
    raw.write("record", ("log/a", 3), *third)
    assert [r.payload for r in await store.ledger.read("log/a")] == [b"one", b"two", b"three"]


# --- migrating a version-2 database (unbound checksums) ----------------------------------

V2_KV = [("k/a", 1, b"alpha"), ("k/b", 4, b"bravo"), ("k/damaged", 2, b"damaged")]
V2_BLOBS = [("b/one", b"blob bytes"), ("b/empty", b""), ("b/damaged", b"damaged")]
V2_RECORDS = [b"r1", b"r2" * 100, b"", b"damaged"]
# Damaged before the upgrade: the stored bytes no longer match the stored checksum.
V2_DAMAGED = {"k/damaged", "b/damaged", 4}


def v2_crc(name: object, data: bytes) -> int:
    return checksum(data) ^ (1 if name in V2_DAMAGED else 0)


# What version 2 ran on values (a process of that version may still be running).
V2_STATEMENTS_SQLITE = [
    ("SELECT content, revision, crc FROM kv WHERE key = ?", ("k/a",)),
    ("UPDATE kv SET revision = ?, content = ?, crc = ? WHERE key = ?", (2, b"x", 0, "k/a")),
    ("INSERT INTO kv (key, revision, content, crc) VALUES (?, 1, ?, ?)", ("k/old", b"x", 0)),
    ("INSERT INTO blobs (key, content, crc) VALUES (?, ?, ?)", ("b/old", b"x", 0)),
    ("SELECT content, crc FROM blobs WHERE key = ?", ("b/one",)),
    ("INSERT INTO ledger_records (key, content, crc) VALUES (?, ?, ?)", (7 << 32 | 9, b"x", 0)),
    ("SELECT key, content, crc FROM ledger_records WHERE key > ?", (0,)),
]
V2_STATEMENTS_POSTGRES = [
    "SELECT content, revision, crc FROM {s}.kv",
    "UPDATE {s}.kv SET revision = revision + 1, content = 'x', crc = 0",
    "INSERT INTO {s}.kv (key, revision, content, crc) VALUES ('k/old', 1, 'x', 0)",
    "INSERT INTO {s}.blobs (key, content, crc) VALUES ('b/old', 'x', 0)",
    "SELECT r.seq, r.content, r.crc FROM {s}.ledger_records r",
]


async def check_bound(store: Store, raw: Raw) -> None:
    """Every intact version-2 value reads back with a bound checksum; the damaged ones are
    still corrupt; and a row moved elsewhere after the upgrade is refused."""
    for key, revision, value in V2_KV:
        if key in V2_DAMAGED:
            with pytest.raises(CorruptDataError):
                await store.kv.get(key)
            continue
        assert await store.kv.get(key) == Entry(value, revision)
        assert raw.read("kv", key) == (value, bound_checksum(kv_place(key, revision), value))
    for key, data in V2_BLOBS:
        if key in V2_DAMAGED:
            with pytest.raises(CorruptDataError):
                await store.blobs.get(key)
            continue
        assert await store.blobs.get(key) == data
        assert raw.read("blob", key) == (data, bound_checksum(blob_place(key), data))
    intact = await store.ledger.read("log/v2", limit=3)
    assert [(r.seq, r.payload) for r in intact] == list(enumerate(V2_RECORDS[:3], 1))
    with pytest.raises(CorruptDataError):
        await store.ledger.read("log/v2", after=3)
    raw.write("kv", "k/b", *raw.read("kv", "k/a"))
    with pytest.raises(CorruptDataError):
        await store.kv.get("k/b")
    assert await store.ledger.append("log/v2", [b"r5"], expected=4) == 5
    assert await store.kv.put("k/new", b"new", expected=0) == 1


async def test_a_version_2_sqlite_file_has_its_checksums_bound(tmp_path: Path) -> None:
    path = tmp_path / "v2.db"
    conn = sqlite3.connect(path, isolation_level=None)
    conn.create_function("flowledger_crc32", 1, checksum)
    try:
        conn.execute("BEGIN")
        conn.execute(sqlite_schema._CREATE_META)
        for statement in (*sqlite_schema._MIGRATIONS[0], *sqlite_schema._MIGRATIONS[1]):
            conn.execute(statement)
        conn.execute(sqlite_schema._SET_VERSION, ("2",))
        conn.executemany(
            "INSERT INTO kv (key, revision, content, crc) VALUES (?, ?, ?, ?)",
            [(k, r, v, v2_crc(k, v)) for k, r, v in V2_KV],
        )
        conn.executemany(
            "INSERT INTO blobs (key, content, crc) VALUES (?, ?, ?)",
            [(k, d, v2_crc(k, d)) for k, d in V2_BLOBS],
        )
        conn.execute("INSERT INTO ledger_logs (id, name) VALUES (7, 'log/v2')")
        conn.executemany(
            "INSERT INTO ledger_records (key, content, crc) VALUES (?, ?, ?)",
            [(7 << 32 | seq, p, v2_crc(seq, p)) for seq, p in enumerate(V2_RECORDS, 1)],
        )
        conn.execute("COMMIT")
    finally:
        conn.close()
    async with open_store(f"sqlite:///{path}") as store:
        await check_bound(store, SqliteRaw(path))
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        assert conn.execute(sqlite_schema._GET_VERSION).fetchone() == ("4",)
        # A version-2 process still running against the file fails loudly on every value
        # statement instead of writing (or trusting) an unbound checksum.
        for statement, params in V2_STATEMENTS_SQLITE:
            with pytest.raises(sqlite3.OperationalError, match=r"no such column|has no column"):
                conn.execute(statement, params)
    finally:
        conn.close()


async def test_a_version_2_postgres_schema_has_its_checksums_bound() -> None:
    import psycopg

    from flowledger.storage.postgres import parse_postgres_url
    from flowledger.storage.postgres import schema as pg_schema

    with postgres_url() as url:
        schema = parse_postgres_url(url).schema
        s = f'"{schema}"'
        async with await psycopg.AsyncConnection.connect(
            require_postgres(), autocommit=True
        ) as conn:
            await conn.execute(pg_schema.render(pg_schema._CREATE_SCHEMA, schema))
            await conn.execute(pg_schema.render(pg_schema._CREATE_MIGRATIONS, schema))
            for number in (1, 2):
                async with conn.transaction():
                    for step in pg_schema._MIGRATIONS[number - 1]:
                        if isinstance(step, str):
                            await conn.execute(pg_schema.render(step, schema))
                        else:
                            await step(conn, schema)
                    await conn.execute(pg_schema.render(pg_schema._SET_VERSION, schema), (number,))
            async with conn.cursor() as cursor:
                await cursor.executemany(
                    f"INSERT INTO {s}.kv (key, revision, content, crc) VALUES (%s, %s, %s, %s)",
                    [(k, r, v, v2_crc(k, v)) for k, r, v in V2_KV],
                )
                await cursor.executemany(
                    f"INSERT INTO {s}.blobs (key, content, crc) VALUES (%s, %s, %s)",
                    [(k, d, v2_crc(k, d)) for k, d in V2_BLOBS],
                )
                await cursor.execute(
                    f"INSERT INTO {s}.ledger_logs (name, tip) VALUES ('log/v2', %s) RETURNING id",
                    (len(V2_RECORDS),),
                )
                row = await cursor.fetchone()
                assert row is not None
                await cursor.executemany(
                    f"INSERT INTO {s}.ledger_records (log_id, seq, content, crc) "
                    "VALUES (%s, %s, %s, %s)",
                    [(row[0], seq, p, v2_crc(seq, p)) for seq, p in enumerate(V2_RECORDS, 1)],
                )
        raw = PostgresRaw(schema)
        try:
            async with open_store(url) as store:
                await check_bound(store, raw)
        finally:
            raw.close()
        with psycopg.connect(require_postgres(), autocommit=True) as sync:
            versions = sync.execute(
                f"SELECT version FROM {s}.flowledger_migrations ORDER BY version"
            ).fetchall()
            assert versions == [(1,), (2,), (3,), (4,)]
            for statement in V2_STATEMENTS_POSTGRES:
                with pytest.raises(psycopg.errors.UndefinedColumn):
                    sync.execute(statement.replace("{s}", s))
