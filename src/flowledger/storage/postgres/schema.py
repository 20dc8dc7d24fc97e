"""The PostgreSQL schema: its tables, its version and the migrations between versions.

The tables live in the URL's schema, next to
``flowledger_migrations(version, applied_at)``, one row per applied migration.
Opening a store reads the highest version (one query when up to date); a
missing or older schema is migrated in one transaction under a
transaction-scoped advisory lock (``pg_advisory_xact_lock``), so processes
opening a fresh database together are safe. Version 2 adds the checksums and
computes them for the rows already there (reading every value once); version 3
binds them to their places the same way, carrying any mismatch over; version 4 adds the
references (``attachment_refs``, and ``flowledger_meta`` saying whether they are
complete: not if attachments existed already). A
database whose version is newer than this code knows raises
`SchemaVersionError` before anything is written.
"""

from __future__ import annotations

import hashlib
from collections.abc import Awaitable, Callable
from typing import Any, Final, LiteralString

import psycopg
import psycopg.errors
from psycopg import sql

from ..checksum import blob_place, checksum, kv_place, rebound, record_place
from ..errors import SchemaVersionError as BaseSchemaVersionError
from .queries import Conn

__all__ = ["SCHEMA_VERSION", "SchemaVersionError", "ensure_schema", "render", "version"]

SCHEMA_VERSION: Final = 4


class SchemaVersionError(BaseSchemaVersionError):
    """The database's schema is newer than this code knows; nothing was changed."""

    def __init__(self, schema: str, found: int, supported: int) -> None:
        self.schema = schema
        self.found = found
        self.supported = supported
        super().__init__(
            f"postgres schema {schema!r} is at version {found}; this flowledger understands "
            f"versions up to {supported} - upgrade flowledger to open it"
        )


# ``{s}`` is the store's schema (a quoted identifier). Text keys are COLLATE "C": byte
# order for ORDER BY and for the prefix range scans, whatever the database's locale.
# (table, primary key, value column before version 2) of every checksummed table
_CHECKSUMMED: Final = (
    ("kv", ("key",), "value"),
    ("blobs", ("key",), "data"),
    ("ledger_records", ("log_id", "seq"), "payload"),
)


async def _add_checksums(conn: Conn, schema: str) -> None:
    """Migration 2: a ``crc`` column on every table of values, filled for existing rows.
    The checksummed column is renamed to ``content``, so that a process of version 1 still
    running against the schema fails loudly ("column does not exist") instead of writing
    values without, or with a stale, checksum."""
    for table, keys, data in _CHECKSUMMED:
        names = {
            "s": sql.Identifier(schema),
            "t": sql.Identifier(table),
            "data": sql.Identifier(data),
            "keys": sql.SQL(", ").join(map(sql.Identifier, keys)),
        }
        await conn.execute(
            sql.SQL("ALTER TABLE {s}.{t} RENAME COLUMN {data} TO content").format(**names)
        )
        await conn.execute(sql.SQL("ALTER TABLE {s}.{t} ADD COLUMN crc integer").format(**names))
        update = sql.SQL("UPDATE {s}.{t} SET crc = %s WHERE ({keys}) = ({params})").format(
            params=sql.SQL(", ").join(sql.Placeholder() * len(keys)), **names
        )
        select = sql.SQL("SELECT {keys}, content FROM {s}.{t}").format(**names)
        async with conn.cursor(name="flowledger_add_checksums") as rows:
            await rows.execute(select)
            while batch := await rows.fetchmany(1000):
                async with conn.cursor() as writer:
                    await writer.executemany(
                        update, [(checksum(row[-1]), *row[:-1]) for row in batch]
                    )
        await conn.execute(
            sql.SQL("ALTER TABLE {s}.{t} ALTER COLUMN crc SET NOT NULL").format(**names)
        )


def _rebind_kv(row: tuple[Any, ...]) -> tuple[Any, ...]:
    key, revision, content, crc = row
    return rebound(kv_place(key, revision), content, crc), key


def _rebind_blob(row: tuple[Any, ...]) -> tuple[Any, ...]:
    key, content, crc = row
    return rebound(blob_place(key), content, crc), key


def _rebind_record(row: tuple[Any, ...]) -> tuple[Any, ...]:
    log_id, name, seq, content, crc = row
    return rebound(record_place(name, seq), content, crc), log_id, seq


# Per checksummed table: its primary key, the statement reading every row, and the
# function turning a row into (bound checksum, primary key...).
_REBIND: Final[tuple[tuple[str, tuple[str, ...], LiteralString, Callable[..., Any]], ...]] = (
    ("kv", ("key",), "SELECT key, revision, content, bound_crc FROM {s}.kv", _rebind_kv),
    ("blobs", ("key",), "SELECT key, content, bound_crc FROM {s}.blobs", _rebind_blob),
    (
        "ledger_records",
        ("log_id", "seq"),
        "SELECT r.log_id, l.name, r.seq, r.content, r.bound_crc "
        "FROM {s}.ledger_records r JOIN {s}.ledger_logs l ON l.id = r.log_id",
        _rebind_record,
    ),
)


async def _bind_checksums(conn: Conn, schema: str) -> None:
    """Migration 3: every checksum is bound to its value's place (see `checksum`), carrying
    over any mismatch, so a value damaged before the upgrade stays detected. The column is
    renamed to ``bound_crc``, so that a process of version 2 still running against the
    schema fails loudly ("column does not exist") instead of writing unbound checksums."""
    for table, keys, select, rebind in _REBIND:
        names = {
            "s": sql.Identifier(schema),
            "t": sql.Identifier(table),
            "keys": sql.SQL(", ").join(map(sql.Identifier, keys)),
        }
        await conn.execute(
            sql.SQL("ALTER TABLE {s}.{t} RENAME COLUMN crc TO bound_crc").format(**names)
        )
        update = sql.SQL("UPDATE {s}.{t} SET bound_crc = %s WHERE ({keys}) = ({params})").format(
            params=sql.SQL(", ").join(sql.Placeholder() * len(keys)), **names
        )
        async with conn.cursor(name="flowledger_bind_checksums") as rows:
            await rows.execute(sql.SQL(select).format(s=sql.Identifier(schema)))
            while batch := await rows.fetchmany(1000):
                async with conn.cursor() as writer:
                    await writer.executemany(update, [rebind(row) for row in batch])


# A migration step is a statement (with ``{s}`` for the schema) or a coroutine function.
_Step = LiteralString | Callable[[Conn, str], Awaitable[None]]

_MIGRATIONS: Final[tuple[tuple[_Step, ...], ...]] = (
    # version 1
    (
        """CREATE TABLE {s}.kv (
            key text COLLATE "C" PRIMARY KEY,
            revision bigint NOT NULL,
            value bytea NOT NULL
        )""",
        """CREATE TABLE {s}.blobs (
            key text COLLATE "C" PRIMARY KEY,
            data bytea NOT NULL
        )""",
        # One row per log with at least one record; ``tip`` is its last sequence number,
        # and its row lock is what serialises appends to the log.
        """CREATE TABLE {s}.ledger_logs (
            id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            name text COLLATE "C" NOT NULL UNIQUE,
            tip bigint NOT NULL
        )""",
        """CREATE TABLE {s}.ledger_records (
            log_id bigint NOT NULL,
            seq bigint NOT NULL,
            payload bytea NOT NULL,
            PRIMARY KEY (log_id, seq)
        )""",
        # Digests are stored as their 32 raw bytes, not 64 hex characters.
        """CREATE TABLE {s}.attachments (
            digest bytea PRIMARY KEY,
            data bytea NOT NULL
        )""",
        """CREATE TABLE {s}.leases (
            name text COLLATE "C" PRIMARY KEY,
            epoch bigint NOT NULL,
            holder text,
            expires_at timestamptz NOT NULL
        )""",
    ),
    # version 2: a CRC-32 beside every value, blob and record (see `checksum`)
    (_add_checksums,),
    # version 3: each checksum bound to its value's place (see `checksum`)
    (_bind_checksums,),
    # version 4: which attachments each log refers to (see `ledger` and `collection`).
    # The attachment column is renamed so that a process of version 3 still running
    # fails loudly instead of sending attachments without references. Logs written
    # before have none: ``refs_complete`` says whether any could be missing (only if
    # attachments exist; the rename's lock keeps that exact).
    (
        "ALTER TABLE {s}.attachments RENAME COLUMN data TO content",
        """CREATE TABLE {s}.attachment_refs (
            log_id bigint NOT NULL,
            digest bytea NOT NULL,
            PRIMARY KEY (log_id, digest)
        )""",
        "CREATE INDEX attachment_refs_by_digest ON {s}.attachment_refs (digest)",
        """CREATE TABLE {s}.flowledger_meta (
            key text COLLATE "C" PRIMARY KEY,
            value text COLLATE "C" NOT NULL
        )""",
        """INSERT INTO {s}.flowledger_meta (key, value) SELECT 'refs_complete',
            CASE WHEN EXISTS (SELECT 1 FROM {s}.attachments) THEN '0' ELSE '1' END""",
    ),
)
assert len(_MIGRATIONS) == SCHEMA_VERSION

_CREATE_MIGRATIONS: Final = """CREATE TABLE IF NOT EXISTS {s}.flowledger_migrations (
    version integer PRIMARY KEY,
    applied_at timestamptz NOT NULL DEFAULT now()
)"""
_GET_VERSION: Final = "SELECT max(version) FROM {s}.flowledger_migrations"
_SET_VERSION: Final = "INSERT INTO {s}.flowledger_migrations (version) VALUES (%s)"
_HAS_SCHEMA: Final = "SELECT 1 FROM pg_namespace WHERE nspname = %s"
_CREATE_SCHEMA: Final = "CREATE SCHEMA IF NOT EXISTS {s}"
_MIGRATION_LOCK: Final = "SELECT pg_advisory_xact_lock(%s)"


def render(template: LiteralString, schema: str) -> bytes:
    """``template`` with ``{s}`` replaced by the quoted schema name."""
    return sql.SQL(template).format(s=sql.Identifier(schema)).as_bytes(None)


def _advisory_key(schema: str) -> int:
    """The advisory lock that serialises migrations of ``schema`` (a signed 64-bit int)."""
    digest = hashlib.sha256(f"flowledger migrate {schema}".encode()).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


async def ensure_schema(conn: Conn, schema: str) -> None:
    """Create or migrate ``schema`` to `SCHEMA_VERSION` (see the module docstring)."""
    if await version(conn, schema) == SCHEMA_VERSION:
        return  # the common case: one query, no lock
    async with conn.transaction():
        await conn.execute(_MIGRATION_LOCK, (_advisory_key(schema),))
        # Re-read under the lock: another process may have migrated meanwhile.
        if await (await conn.execute(_HAS_SCHEMA, (schema,))).fetchone() is None:
            await conn.execute(render(_CREATE_SCHEMA, schema))
        await conn.execute(render(_CREATE_MIGRATIONS, schema))
        found = await version(conn, schema) or 0
        for number in range(found + 1, SCHEMA_VERSION + 1):
            for step in _MIGRATIONS[number - 1]:
                if isinstance(step, str):
                    await conn.execute(render(step, schema))
                else:
                    await step(conn, schema)
            await conn.execute(render(_SET_VERSION, schema), (number,))


async def version(conn: Conn, schema: str) -> int | None:
    """The schema's version (None if it has none yet); `SchemaVersionError` if too new."""
    try:
        cursor = await conn.execute(render(_GET_VERSION, schema))
        row = await cursor.fetchone()
    except (psycopg.errors.UndefinedTable, psycopg.errors.InvalidSchemaName):
        # Only outside a transaction: in the migration the table was just ensured.
        return None
    found = None if row is None else row[0]
    if found is not None and found > SCHEMA_VERSION:
        raise SchemaVersionError(schema, found, SCHEMA_VERSION)
    return found
