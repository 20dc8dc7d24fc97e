"""The PostgreSQL backend: many processes on many machines sharing one database.

URLs are libpq connection URIs, ``postgresql://user:password@host:port/dbname``
(``postgres://`` is the same). Query options of our own:

* ``schema`` - the schema holding every table (default ``flowledger``); created
  on first open if missing. 1 to 63 characters of ``[a-z0-9_]``, not starting
  with a digit or ``pg_``. Stores on different schemas of one database are
  independent.
* ``pool_min`` / ``pool_max`` - connections the store's pool keeps open at least
  (default 1) and opens at most (default ``max(10, pool_min)``).
* ``connect_timeout`` - whole seconds (1..3600, default 10) to wait for a new
  connection; passed on to libpq, and also the longest a call waits for a free
  connection of a busy pool.

Every other query parameter must be one of libpq's own connection keywords
(``sslmode``, ``sslrootcert``, ``application_name``, ``target_session_attrs``,
...) and is passed on to libpq unchanged. Unknown or repeated options, bad
values and a ``#fragment`` raise `UnsupportedURLError` (with any password in the
URL masked).

Semantics, the same as the memory oracle's (the conformance suite compares them):

* Every call validates its arguments with the shared contract checks before
  touching the database, so a rejected call changes nothing.
* Every write is one ``READ COMMITTED`` transaction, atomic and isolated
  against every other connection, process and machine: a KV compare-and-swap
  (an ``INSERT ... ON CONFLICT DO NOTHING`` for a create, an ``UPDATE ... WHERE
  revision = expected`` otherwise), a blob put (insert if absent, else compare),
  and a ledger append - the tip check on the log's row, all of its records and
  the insert-if-absent of all of its attachments commit together or not at
  all. An append, a KV put and a KV delete are one statement each (its own
  implicit transaction, one round trip: they are the hot path of every durable
  step and run-record update), run at the server's default isolation (a
  serialization failure under a stricter one than READ COMMITTED is a race:
  nothing was written and the write is redone); every other write is an
  explicit transaction. Concurrent writers of one key or log queue on its row lock; the loser
  re-checks and gets the contract's conflict error.
* KV revisions count 1, 2, 3, ... per key and restart at 1 after a delete.
  Ledger sequence numbers are 1-based and contiguous per log. Text keys are
  ``COLLATE "C"``, so listings are sorted by byte order whatever the
  database's locale.
* Leases live in one row per name ``{epoch, holder, expires_at}`` and use the
  *database's* clock (``clock_timestamp()``), so machines whose clocks
  disagree still agree on expiry. An acquire bumps the epoch only when the
  name is free or its holder's TTL has passed (otherwise `LeaseHeldError` with
  the holder's epoch); a renewal extends the grant only while epoch and holder
  still match and it has not expired (``"renewed"``, ``"expired"`` or
  ``"taken over"``); a release clears the holder, keeps the epoch and records
  when (in ``expires_at``).

Fences. A fenced write (see `fence`) starts its transaction by reading its
lease's row ``FOR SHARE`` (in a single-statement write, its first part, which
every write of the statement is conditioned on): a grant that is not current raises
`FencedWriteError` before anything is written, and a takeover (an update of that row) waits until
the write has ended, so it can never land after one. The same statement sets
``idle_in_transaction_session_timeout`` to 5 s for the transaction, so a writer
stalled in the middle of one (SIGSTOP, a frozen VM) is disconnected by the server
and rolled back instead of blocking the takeover for as long as it is stopped.

Collection (see `ledger` and docs/storage.md). ``attachment_refs`` holds one row per log
and digest it refers to. An append, after claiming its log's row, share-locks (``FOR KEY
SHARE``, in digest order) every stored attachment it sends or names in refs, raises
`AttachmentNotFoundError` for a ref that is not there, and inserts records, attachments
and references in one statement. A sweep page locks unreferenced attachments ``FOR
UPDATE SKIP LOCKED`` (passing over those an append in flight holds; an append that comes
later waits for the sweep's commit and finds the row gone), then deletes, in a new
statement whose fresh snapshot sees every reference committed before the locks were
granted, those still unreferenced. A single ``DELETE ... WHERE NOT EXISTS`` would be
wrong: after waiting for an append's lock it re-checks the row but not the subquery.
A drop deletes the log rows first (waiting for appends holding them), then, in new
statements, their records and references. Space is reclaimed by autovacuum;
`PostgresLedger.vacuum` runs ``VACUUM (ANALYZE)`` on the ledger's tables. A drop, a sweep
page and ``add_refs`` are idempotent, so a lost acknowledgement is simply raised.

Lost acknowledgements. When the connection fails while a ``COMMIT`` is in
flight (``psycopg.OperationalError`` after the commit was sent), the write may
or may not have happened. It is resolved by re-reading on a fresh connection,
never by guessing:

* a ledger append re-reads records ``expected+1 .. expected+n``: all there with
  identical bytes (and every attachment of the append present) - it
  succeeded, and returns the new tip; none there - the original error is
  raised (the outcome is still unknown; retry the append); other records there
  - `LedgerConflictError` (another writer moved the tip, so ours cannot have
  committed: it held the log's row lock until its own commit or rollback);
* a KV put re-reads the key: the same bytes at revision ``expected+1`` - it
  succeeded; the revision still ``expected`` (or absent for a create) - the
  original error; anything else - `ConflictError` (the key has moved on, by
  another writer's put, or by ours and then another's: re-read and decide);
* a blob put succeeds if the same bytes are there, raises `BlobConflictError`
  if different bytes are, and the original error if none are; a delete
  succeeds if the key is gone; a lease acquire succeeds if the row names this
  grant's holder; a release succeeds if the grant is no longer current.

If the re-read fails too, the original error is raised. A failure before the
``COMMIT`` was sent needs no resolution (nothing can have been written). A pooled
connection that turns out to be dead (the server or a pooler restarted) costs
no call: a write that finds it broken at ``BEGIN``, or a read that finds it
broken at all, is retried once on a fresh connection. An append or KV write has
no ``COMMIT`` of its own: any connection failure during its statement is resolved
as a lost acknowledgement, and when the re-read finds none of it and the connection
is broken it is retried once (another compare-and-swap or -append at the same
revision, so at most one of the two lands; a conflict then is re-read the same way).

Pooling. Each `Store` owns a ``psycopg_pool.AsyncConnectionPool`` of autocommit
connections with ``prepare_threshold=None``, and keeps no session state: no ``SET``,
no server-side prepared statements, no ``LISTEN``/``NOTIFY``, no advisory lock held
across transactions. So it works behind a transaction-mode pooler (PgBouncer, RDS
Proxy, Supavisor). Reads are single statements; writes are explicit ``BEGIN
ISOLATION LEVEL READ COMMITTED`` ... ``COMMIT`` transactions (appends and KV writes are
one statement, see above) whatever the server's default isolation. A store is bound to
the event loop that opened it (as its pool is); using it from another loop raises
`RuntimeError` - open one store per loop. `Store.close` closes the pool after the
store's leases are freed; calls already holding a connection finish, later calls
raise `StoreClosedError`. Database errors other than the contract's propagate as
``psycopg.Error``.

Checksums. Every KV value, blob and ledger record is stored with its CRC-32
bound to its place (key and revision, blob key, log and sequence number) and
checked on every read: damaged bytes, or a row copied to another place, raise
`CorruptDataError` (naming the key, or the log and sequence number) instead of
being returned. Attachments are
checked by their reader against their SHA-256.

Schema. The tables live in the URL's schema, next to
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

import asyncio
import contextlib
import functools
import hashlib
import re
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, fields
from datetime import UTC
from typing import Any, Final, LiteralString, TypeVar
from urllib.parse import quote, unquote, urlsplit, urlunsplit

import psycopg
import psycopg.errors
from psycopg import sql
from psycopg_pool import AsyncConnectionPool, PoolClosed

from .checksum import (
    blob_place,
    bound_checksum,
    checksum,
    kv_place,
    rebound,
    record_place,
    verified,
)
from .errors import (
    AttachmentNotFoundError,
    BlobConflictError,
    BlobNotFoundError,
    ConflictError,
    FencedWriteError,
    KeyNotFoundError,
    LeaseHeldError,
    LedgerConflictError,
    RefsIncompleteError,
    StorageError,
    StoreClosedError,
)
from .errors import SchemaVersionError as BaseSchemaVersionError
from .fence import Fence, check_fence, refused
from .kv import Entry, check_page
from .lease import Leaser, LeaseStatus, RenewStatus
from .ledger import (
    LedgerUsage,
    Record,
    SweepReport,
    check_append,
    check_digests,
    check_names,
    check_read,
    check_refs,
)
from .limits import MAX_BLOB_BYTES, MAX_KV_VALUE_BYTES, check_bytes, check_revision
from .names import validate_name
from .store import Store, UnsupportedURLError, redact_url

__all__ = [
    "SCHEMA_VERSION",
    "PostgresBlobs",
    "PostgresKV",
    "PostgresLeaseBackend",
    "PostgresLedger",
    "PostgresSettings",
    "SchemaVersionError",
    "connect_postgres",
    "parse_postgres_url",
]

SCHEMA_VERSION: Final = 4

_T = TypeVar("_T")
_Conn = psycopg.AsyncConnection[tuple[Any, ...]]

_DEFAULT_SCHEMA: Final = "flowledger"
_DEFAULT_POOL_MIN: Final = 1
_DEFAULT_POOL_MAX: Final = 10
_MAX_POOL: Final = 1000
_DEFAULT_CONNECT_TIMEOUT: Final = 10
_MAX_CONNECT_TIMEOUT: Final = 3600
# Sequence numbers never get near this; clamping keeps huge ``after`` values bindable.
_MAX_BIGINT: Final = 2**63 - 1
# Logs per drop transaction, attachments per sweep transaction.
_DROP_BATCH: Final = 64
_SWEEP_BATCH: Final = 1000
# The longest a fenced write may keep its transaction idle (it holds its lease's row).
_FENCED_IDLE_LIMIT: Final = "5s"


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


# --- URLs -----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PostgresSettings:
    conninfo: str  # the URL without our own options: what libpq gets
    schema: str = _DEFAULT_SCHEMA
    pool_min: int = _DEFAULT_POOL_MIN
    pool_max: int = _DEFAULT_POOL_MAX
    connect_timeout: int = _DEFAULT_CONNECT_TIMEOUT


_OWN_OPTIONS: Final = ("schema", "pool_min", "pool_max", "connect_timeout")
# libpq keywords that would turn the connection into something other than a SQL session.
_REFUSED_LIBPQ: Final = frozenset({"replication"})
_SCHEMA_NAME: Final = re.compile(r"[a-z_][a-z0-9_]{0,62}")
_DIGITS: Final = re.compile(r"[0-9]+")


@functools.cache
def _libpq_keywords() -> frozenset[str]:
    """The connection keywords the linked libpq understands."""
    options = psycopg.pq.Conninfo.get_defaults()
    return frozenset(o.keyword.decode() for o in options) - _REFUSED_LIBPQ - set(_OWN_OPTIONS)


def _whole(url: str, option: str, value: str, low: int, high: int) -> int:
    if not _DIGITS.fullmatch(value) or not low <= int(value) <= high:
        raise UnsupportedURLError(
            redact_url(url), f"{option} must be a whole number in {low}..{high}, not {value!r}"
        )
    return int(value)


def _parse_query(shown: str, query: str) -> list[tuple[str, str]]:
    """``key=value`` pairs, percent-decoded the way libpq does (a ``+`` stays a ``+``)."""
    if not query:
        return []
    pairs = []
    for part in query.split("&"):
        key, equals, value = part.partition("=")
        if not equals or not key:
            raise UnsupportedURLError(shown, "malformed query string")
        pairs.append((unquote(key), unquote(value)))
    return pairs


def parse_postgres_url(url: str) -> PostgresSettings:
    """Parse a ``postgresql:`` URL (see the module docstring) or raise `UnsupportedURLError`."""
    shown = redact_url(url)
    scheme, _, rest = url.partition(":")
    if scheme.lower() not in ("postgresql", "postgres") or not rest.startswith("//"):
        raise UnsupportedURLError(shown, "expected postgresql://[user@]host[:port]/dbname")
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - validates the port
    except ValueError as exc:
        raise UnsupportedURLError(shown, f"malformed URL: {exc}") from None
    if parts.fragment or url.endswith("#"):
        raise UnsupportedURLError(shown, "a postgres URL has no #fragment")
    options = _parse_query(shown, parts.query)

    known = _libpq_keywords()
    seen: set[str] = set()
    passed: list[tuple[str, str]] = []
    own: dict[str, str] = {}
    for option, value in options:
        if option in seen:
            raise UnsupportedURLError(shown, f"option {option!r} is given more than once")
        seen.add(option)
        if option in _OWN_OPTIONS:
            own[option] = value
        elif option in known:
            passed.append((option, value))
        else:
            raise UnsupportedURLError(
                shown,
                f"unknown option {option!r} (ours: {', '.join(_OWN_OPTIONS)}; "
                f"anything else must be a libpq connection keyword such as sslmode)",
            )

    schema = own.get("schema", _DEFAULT_SCHEMA)
    if not _SCHEMA_NAME.fullmatch(schema) or schema.startswith("pg_"):
        raise UnsupportedURLError(
            shown,
            f"schema must be 1-63 characters of [a-z0-9_], not starting with a digit "
            f"or 'pg_', not {schema!r}",
        )
    pool_min = _DEFAULT_POOL_MIN
    if "pool_min" in own:
        pool_min = _whole(url, "pool_min", own["pool_min"], 0, _MAX_POOL)
    pool_max = max(_DEFAULT_POOL_MAX, pool_min)
    if "pool_max" in own:
        pool_max = _whole(url, "pool_max", own["pool_max"], 1, _MAX_POOL)
        if pool_max < pool_min:
            raise UnsupportedURLError(
                shown, f"pool_max ({pool_max}) must not be less than pool_min ({pool_min})"
            )
    connect_timeout = _DEFAULT_CONNECT_TIMEOUT
    if "connect_timeout" in own:
        connect_timeout = _whole(
            url, "connect_timeout", own["connect_timeout"], 1, _MAX_CONNECT_TIMEOUT
        )
    passed.append(("connect_timeout", str(connect_timeout)))
    query = "&".join(f"{quote(k, safe='')}={quote(v, safe='')}" for k, v in passed)
    conninfo = urlunsplit(parts._replace(query=query, fragment=""))
    return PostgresSettings(conninfo, schema, pool_min, pool_max, connect_timeout)


# --- SQL ------------------------------------------------------------------------------

# ``{s}`` is the store's schema (a quoted identifier). Text keys are COLLATE "C": byte
# order for ORDER BY and for the prefix range scans, whatever the database's locale.
# (table, primary key, value column before version 2) of every checksummed table
_CHECKSUMMED: Final = (
    ("kv", ("key",), "value"),
    ("blobs", ("key",), "data"),
    ("ledger_records", ("log_id", "seq"), "payload"),
)


async def _add_checksums(conn: _Conn, schema: str) -> None:
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


async def _bind_checksums(conn: _Conn, schema: str) -> None:
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
_Step = LiteralString | Callable[[_Conn, str], Awaitable[None]]

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
    # version 4: which attachments each log refers to (see `ledger` and the module
    # docstring's "Collection"). The attachment column is renamed so that a process of
    # version 3 still running fails loudly instead of sending attachments without
    # references. Logs written before have none: ``refs_complete`` says whether any could
    # be missing (only if attachments exist; the rename's lock keeps that exact).
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


@dataclass(frozen=True, slots=True)
class _Queries:
    """Every statement, rendered once per store for its schema."""

    kv_get: bytes = b"SELECT content, revision, bound_crc FROM {s}.kv WHERE key = %s"
    kv_revision: bytes = b"SELECT revision FROM {s}.kv WHERE key = %s"
    # KV writes are single statements too (see `_write_statement`): ``{ok}`` is the
    # fence's verdict (TRUE when unfenced), ``result`` what comes back.
    kv_create: bytes = (
        b"INSERT INTO {s}.kv (key, revision, content, bound_crc) "
        b"SELECT %s::text, 1, %s::bytea, %s::integer WHERE {ok} "
        b"ON CONFLICT (key) DO NOTHING RETURNING revision AS result"
    )
    kv_update: bytes = (
        b"UPDATE {s}.kv SET revision = revision + 1, content = %s, bound_crc = %s "
        b"WHERE key = %s AND revision = %s AND {ok} RETURNING revision AS result"
    )
    kv_delete: bytes = b"DELETE FROM {s}.kv WHERE key = %s AND {ok} RETURNING 1 AS result"
    kv_exists: bytes = b"SELECT 1 FROM {s}.kv WHERE key = %s"
    kv_keys: bytes = b"SELECT key FROM {s}.kv WHERE key >= %s AND key < %s ORDER BY key"
    # Keyset pages on the primary key: only the page's rows are visited.
    kv_page_up: bytes = (
        b"SELECT key FROM {s}.kv WHERE key >= %s AND key > %s AND key < %s ORDER BY key LIMIT %s"
    )
    kv_page_down: bytes = (
        b"SELECT key FROM {s}.kv WHERE key >= %s AND key < %s ORDER BY key DESC LIMIT %s"
    )

    blob_insert: bytes = (
        b"INSERT INTO {s}.blobs (key, content, bound_crc) VALUES (%s, %s, %s) "
        b"ON CONFLICT (key) DO NOTHING "
        b"RETURNING 1"
    )
    # Compare by length and SHA-256 so a big blob crosses the network once, not twice.
    blob_same: bytes = (
        b"SELECT length(content) = %s AND sha256(content) = %s FROM {s}.blobs WHERE key = %s"
    )
    blob_get: bytes = b"SELECT content, bound_crc FROM {s}.blobs WHERE key = %s"
    blob_exists: bytes = b"SELECT 1 FROM {s}.blobs WHERE key = %s"
    blob_delete: bytes = b"DELETE FROM {s}.blobs WHERE key = %s"
    blob_list: bytes = b"SELECT key FROM {s}.blobs WHERE key >= %s AND key < %s ORDER BY key"

    # A whole append in one statement (so in one implicit transaction, one round trip):
    # claim the tip, insert the records and the attachments, each write guarded by the
    # claim; ``{fence}`` is the fence's lease row read ``FOR SHARE`` (or nothing). The
    # claim's id is NULL when the tip moved or the fence refused; the fence's epoch and
    # liveness come back beside it. Attachments are inserted in digest order, so
    # concurrent appends sharing some never deadlock.
    append_create: bytes = (
        b"WITH {fence}"
        b"log AS (INSERT INTO {s}.ledger_logs (name, tip) SELECT %s::text, %s::bigint WHERE {ok} "
        b"ON CONFLICT (name) DO NOTHING RETURNING id), {rest}"
    )
    append_advance: bytes = (
        b"WITH {fence}"
        b"log AS (UPDATE {s}.ledger_logs SET tip = %s WHERE name = %s AND tip = %s AND {ok} "
        b"RETURNING id), {rest}"
    )
    # An append that names attachments takes the locking path of `ledger_append` instead:
    # claim the next ``n`` sequence numbers of a log (create it, expected 0, or move its
    # tip from ``expected``; the row lock queues concurrent appenders of the log), ...
    log_create: bytes = (
        b"INSERT INTO {s}.ledger_logs (name, tip) VALUES (%s, %s) "
        b"ON CONFLICT (name) DO NOTHING RETURNING id"
    )
    log_advance: bytes = (
        b"UPDATE {s}.ledger_logs SET tip = %s WHERE name = %s AND tip = %s RETURNING id"
    )
    # ... then the records, the attachments and the references, in one statement.
    # Attachments are inserted in digest order, so concurrent appends sharing some never
    # deadlock.
    ledger_insert: bytes = (
        b"WITH records AS ("
        b"INSERT INTO {s}.ledger_records (log_id, seq, content, bound_crc) "
        b"SELECT %s, %s + r.ord, r.payload, r.crc "
        b"FROM unnest(%s::bytea[], %s::integer[]) WITH ORDINALITY AS r(payload, crc, ord)"
        b"), refs AS ("
        b"INSERT INTO {s}.attachment_refs (log_id, digest) SELECT %s, d FROM unnest(%s::bytea[]) "
        b"AS d ORDER BY d ON CONFLICT DO NOTHING"
        b") INSERT INTO {s}.attachments (digest, content) "
        b"SELECT a.digest, a.data FROM unnest(%s::bytea[], %s::bytea[]) AS a(digest, data) "
        b"ORDER BY a.digest ON CONFLICT (digest) DO NOTHING"
    )
    # An append (or `add_refs`) first share-locks the stored attachments it refers to, in
    # digest order: a sweep that locked one first (FOR UPDATE) has deleted it or found it
    # referenced by the time this returns, and a sweep that comes later skips it.
    attachments_lock: bytes = (
        b"SELECT digest FROM {s}.attachments WHERE digest = ANY(%s) ORDER BY digest FOR KEY SHARE"
    )
    log_lock: bytes = b"SELECT id FROM {s}.ledger_logs WHERE name = %s FOR KEY SHARE"
    refs_insert: bytes = (
        b"INSERT INTO {s}.attachment_refs (log_id, digest) SELECT %s, d FROM unnest(%s::bytea[]) "
        b"AS d ORDER BY d ON CONFLICT DO NOTHING"
    )
    refs_complete: bytes = (
        b"SELECT value = '1' FROM {s}.flowledger_meta WHERE key = 'refs_complete'"
    )
    mark_refs_complete: bytes = (
        b"INSERT INTO {s}.flowledger_meta (key, value) VALUES ('refs_complete', '1') "
        b"ON CONFLICT (key) DO UPDATE SET value = '1'"
    )
    # A drop deletes the log rows first (waiting for appends in flight, which hold them),
    # then - in new statements, which see what those appends committed - the records and
    # references: no append can add any for the deleted ids any more.
    logs_drop: bytes = b"DELETE FROM {s}.ledger_logs WHERE name = ANY(%s) RETURNING id"
    records_drop: bytes = b"DELETE FROM {s}.ledger_records WHERE log_id = ANY(%s)"
    refs_drop: bytes = b"DELETE FROM {s}.attachment_refs WHERE log_id = ANY(%s)"
    # The sweep: lock a page of unreferenced attachments (skipping those an append holds),
    # then delete those still unreferenced in a new statement - a fresh snapshot, in which
    # every reference committed before the locks were taken is visible. (One DELETE ...
    # WHERE NOT EXISTS would not do: after waiting for a lock it re-checks the row, but not
    # the subquery, against what has been committed since its snapshot.)
    sweep_lock: bytes = (
        b"SELECT digest FROM {s}.attachments a WHERE digest > %s AND NOT EXISTS "
        b"(SELECT 1 FROM {s}.attachment_refs r WHERE r.digest = a.digest) "
        b"ORDER BY digest LIMIT %s FOR UPDATE SKIP LOCKED"
    )
    sweep_delete: bytes = (
        b"DELETE FROM {s}.attachments a WHERE digest = ANY(%s) AND NOT EXISTS "
        b"(SELECT 1 FROM {s}.attachment_refs r WHERE r.digest = a.digest) "
        b"RETURNING length(content)"
    )
    sweep_count: bytes = (
        b"SELECT (SELECT value = '1' FROM {s}.flowledger_meta WHERE key = 'refs_complete'), "
        b"count(*), coalesce(sum(length(content)), 0)::bigint FROM {s}.attachments a "
        b"WHERE NOT EXISTS (SELECT 1 FROM {s}.attachment_refs r WHERE r.digest = a.digest)"
    )
    usage: bytes = (
        b"WITH logs AS (SELECT id FROM {s}.ledger_logs WHERE name = ANY(%s)), "
        b"records AS (SELECT count(*) AS n, coalesce(sum(length(content)), 0)::bigint AS b "
        b"FROM {s}.ledger_records WHERE log_id IN (SELECT id FROM logs)), "
        b"exclusive AS (SELECT coalesce(sum(length(a.content)), 0)::bigint AS b "
        b"FROM {s}.attachments a WHERE a.digest IN (SELECT digest FROM {s}.attachment_refs "
        b"WHERE log_id IN (SELECT id FROM logs)) AND NOT EXISTS (SELECT 1 FROM "
        b"{s}.attachment_refs r WHERE r.digest = a.digest AND r.log_id NOT IN "
        b"(SELECT id FROM logs))) "
        b"SELECT (SELECT value = '1' FROM {s}.flowledger_meta WHERE key = 'refs_complete'), "
        b"records.n, records.b, exclusive.b FROM records, exclusive"
    )
    vacuum: bytes = (
        b"VACUUM (ANALYZE) {s}.attachments, {s}.attachment_refs, {s}.ledger_records, "
        b"{s}.ledger_logs"
    )
    ledger_tip: bytes = b"SELECT tip FROM {s}.ledger_logs WHERE name = %s"
    ledger_read: bytes = (
        b"SELECT r.seq, r.content, r.bound_crc FROM {s}.ledger_records r "
        b"JOIN {s}.ledger_logs l ON r.log_id = l.id "
        b"WHERE l.name = %s AND r.seq > %s ORDER BY r.seq LIMIT %s"
    )
    ledger_names_in: bytes = b"SELECT name FROM {s}.ledger_logs WHERE name = ANY(%s)"
    ledger_names: bytes = (
        b"SELECT name FROM {s}.ledger_logs WHERE name >= %s AND name < %s ORDER BY name"
    )
    attachments_get: bytes = b"SELECT digest, content FROM {s}.attachments WHERE digest = ANY(%s)"
    attachments_count: bytes = b"SELECT count(*) FROM {s}.attachments WHERE digest = ANY(%s)"

    # ON CONFLICT DO UPDATE locks the existing row even when its WHERE refuses the update,
    # so the follow-up read of the holder's epoch (same transaction) cannot race.
    lease_acquire: bytes = (
        b"INSERT INTO {s}.leases AS l (name, epoch, holder, expires_at) "
        b"VALUES (%s, 1, %s, clock_timestamp() + make_interval(secs => %s)) "
        b"ON CONFLICT (name) DO UPDATE SET epoch = l.epoch + 1, holder = excluded.holder, "
        b"expires_at = clock_timestamp() + make_interval(secs => %s) "
        b"WHERE l.holder IS NULL OR l.expires_at <= clock_timestamp() "
        b"RETURNING l.epoch"
    )
    lease_epoch: bytes = b"SELECT epoch FROM {s}.leases WHERE name = %s"
    lease_extend: bytes = (
        b"UPDATE {s}.leases SET expires_at = clock_timestamp() + make_interval(secs => %s) "
        b"WHERE name = %s AND epoch = %s AND holder = %s AND expires_at > clock_timestamp() "
        b"RETURNING 1"
    )
    lease_get: bytes = b"SELECT epoch, holder FROM {s}.leases WHERE name = %s"
    # A fenced write's first statement. The share lock makes a takeover (an UPDATE of the
    # row) wait until the write has committed or rolled back; so that a writer stalled in
    # the middle of its transaction cannot hold it forever, the server ends the writer's
    # session once it has kept the transaction idle for `_FENCED_IDLE_LIMIT`.
    lease_fence: bytes = (
        b"SELECT epoch, holder IS NOT NULL AND expires_at > clock_timestamp(), "
        b"set_config('idle_in_transaction_session_timeout', %s, true) "
        b"FROM {s}.leases WHERE name = %s FOR SHARE"
    )
    lease_release: bytes = (
        b"UPDATE {s}.leases SET holder = NULL, expires_at = clock_timestamp() "
        b"WHERE name = %s AND epoch = %s AND holder = %s"
    )
    lease_status: bytes = (
        b"SELECT epoch, holder IS NOT NULL AND expires_at > clock_timestamp(), expires_at "
        b"FROM {s}.leases WHERE name = %s"
    )

    # The fenced variants of the single-statement writes (filled in by `for_schema`).
    append_create_fenced: bytes = b""
    append_advance_fenced: bytes = b""
    kv_create_fenced: bytes = b""
    kv_update_fenced: bytes = b""
    kv_delete_fenced: bytes = b""

    @classmethod
    def for_schema(cls, schema: str) -> _Queries:
        quoted = sql.Identifier(schema).as_bytes(None)
        templates = cls()
        rendered = {f.name: getattr(templates, f.name).replace(b"{s}", quoted) for f in fields(cls)}
        for name in ("append_create", "append_advance"):
            template = rendered[name]
            rendered[f"{name}_fenced"] = _append_query(template, fenced=True, schema=quoted)
            rendered[name] = _append_query(template, fenced=False, schema=quoted)
        for name in ("kv_create", "kv_update", "kv_delete"):
            template = rendered[name]
            rendered[f"{name}_fenced"] = _write_statement(template, fenced=True, schema=quoted)
            rendered[name] = _write_statement(template, fenced=False, schema=quoted)
        return cls(**rendered)


# The parameters of an append statement, after the claim's: the fence's (lease name and
# epoch) come first when fenced; then the first sequence number minus one, the payloads,
# their checksums, the attachments' digests and data.
_APPEND_FENCE: Final = (
    b"fence AS (SELECT epoch, holder IS NOT NULL AND expires_at > clock_timestamp() AS live "
    b"FROM {s}.leases WHERE name = %s FOR SHARE), "
    b"ok AS (SELECT 1 FROM fence WHERE epoch = %s AND live), "
)
_APPEND_REST: Final = (
    b"records AS (INSERT INTO {s}.ledger_records (log_id, seq, content, bound_crc) "
    b"SELECT log.id, %s + r.ord, r.payload, r.crc FROM log, "
    b"unnest(%s::bytea[], %s::integer[]) WITH ORDINALITY AS r(payload, crc, ord)), "
    b"attached AS (INSERT INTO {s}.attachments (digest, content) "
    b"SELECT a.digest, a.data FROM unnest(%s::bytea[], %s::bytea[]) AS a(digest, data) "
    b"WHERE EXISTS (SELECT 1 FROM log) ORDER BY a.digest ON CONFLICT (digest) DO NOTHING) "
)


def _write_statement(write: bytes, *, fenced: bool, schema: bytes) -> bytes:
    """One write (``{ok}`` in its condition, ``RETURNING ... AS result``) as a statement
    whose row is ``(result, fence epoch, fence liveness)``, like an append's."""
    if not fenced:
        unfenced = write.replace(b"{ok}", b"TRUE")
        return b"WITH w AS (" + unfenced + b") SELECT result, NULL, NULL FROM w"
    query = (
        b"WITH "
        + _APPEND_FENCE
        + b"w AS ("
        + write.replace(b"{ok}", b"EXISTS (SELECT 1 FROM ok)")
        + b") SELECT (SELECT result FROM w), epoch, live FROM fence "
        b"UNION ALL SELECT NULL, NULL, NULL WHERE NOT EXISTS (SELECT 1 FROM fence)"
    )
    return query.replace(b"{s}", schema)


def _append_query(template: bytes, *, fenced: bool, schema: bytes) -> bytes:
    if fenced:
        rest = _APPEND_REST + b"SELECT (SELECT id FROM log), epoch, live FROM fence "
        # No lease row: one row all the same, so the refusal can name epoch 0.
        rest += b"UNION ALL SELECT NULL, NULL, NULL WHERE NOT EXISTS (SELECT 1 FROM fence)"
        fence, ok = _APPEND_FENCE, b"EXISTS (SELECT 1 FROM ok)"
    else:
        rest, fence, ok = _APPEND_REST + b"SELECT id, NULL, NULL FROM log", b"", b"TRUE"
    query = template.replace(b"{fence}", fence).replace(b"{ok}", ok).replace(b"{rest}", rest)
    return query.replace(b"{s}", schema)


def _render(template: LiteralString, schema: str) -> bytes:
    """``template`` with ``{s}`` replaced by the quoted schema name."""
    return sql.SQL(template).format(s=sql.Identifier(schema)).as_bytes(None)


def _advisory_key(schema: str) -> int:
    """The advisory lock that serialises migrations of ``schema`` (a signed 64-bit int)."""
    digest = hashlib.sha256(f"flowledger migrate {schema}".encode()).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


def _page_bounds(prefix: str, start: str, descending: bool) -> tuple[str, ...] | None:
    """The parameters of a keyset page query (see `_prefix_bounds`)."""
    bounds = _prefix_bounds(prefix)
    if bounds is None:
        return None
    low, high = bounds
    if descending:
        return (low, min(high, start) if start else high)
    return (low, start, high)


def _prefix_bounds(prefix: str) -> tuple[str, str] | None:
    """The half-open key range holding exactly the names that start with ``prefix``.

    Names are ASCII below 0x7f, so ``prefix + "\\x7f"`` bounds them in byte order; a
    prefix that is not ASCII, or holds a NUL (which text values cannot), matches no name.
    """
    if not isinstance(prefix, str):
        raise TypeError(f"prefix must be a str, not {type(prefix).__name__}")
    if not prefix.isascii() or "\0" in prefix:
        return None
    return prefix, prefix + "\x7f"


# --- the database -----------------------------------------------------------------------


class _Database:
    """A store's connection pool and every operation on it."""

    def __init__(self, settings: PostgresSettings) -> None:
        self.settings = settings
        self.q = _Queries.for_schema(settings.schema)
        self._pool: AsyncConnectionPool[_Conn] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._closed = False

    # lifecycle

    async def open(self) -> None:
        settings = self.settings
        self._loop = asyncio.get_running_loop()
        pool: AsyncConnectionPool[_Conn] = AsyncConnectionPool(
            settings.conninfo,
            min_size=settings.pool_min,
            max_size=settings.pool_max,
            timeout=float(settings.connect_timeout),
            kwargs={"autocommit": True, "prepare_threshold": None},
            configure=_configure,
            open=False,
            name=f"flowledger:{settings.schema}",
        )
        # The pool fills in the background while the schema is checked on a connection
        # of its own, whose failure (refused, bad password, no such database) is the
        # clear libpq error rather than a pool timeout.
        await pool.open(wait=False)
        try:
            conn = await psycopg.AsyncConnection.connect(
                settings.conninfo, autocommit=True, prepare_threshold=None
            )
            try:
                await self._ensure_schema(conn)
            finally:
                await conn.close()
        except BaseException:
            await pool.close()
            raise
        self._pool = pool

    async def _ensure_schema(self, conn: _Conn) -> None:
        schema = self.settings.schema
        if await self._version(conn) == SCHEMA_VERSION:
            return  # the common case: one query, no lock
        async with conn.transaction():
            await conn.execute(_MIGRATION_LOCK, (_advisory_key(schema),))
            # Re-read under the lock: another process may have migrated meanwhile.
            if await (await conn.execute(_HAS_SCHEMA, (schema,))).fetchone() is None:
                await conn.execute(_render(_CREATE_SCHEMA, schema))
            await conn.execute(_render(_CREATE_MIGRATIONS, schema))
            version = await self._version(conn) or 0
            for number in range(version + 1, SCHEMA_VERSION + 1):
                for step in _MIGRATIONS[number - 1]:
                    if isinstance(step, str):
                        await conn.execute(_render(step, schema))
                    else:
                        await step(conn, schema)
                await conn.execute(_render(_SET_VERSION, schema), (number,))

    async def _version(self, conn: _Conn) -> int | None:
        """The schema's version (None if it has none yet); `SchemaVersionError` if too new."""
        schema = self.settings.schema
        try:
            cursor = await conn.execute(_render(_GET_VERSION, schema))
            row = await cursor.fetchone()
        except (psycopg.errors.UndefinedTable, psycopg.errors.InvalidSchemaName):
            # Only outside a transaction: in the migration the table was just ensured.
            return None
        version = None if row is None else row[0]
        if version is not None and version > SCHEMA_VERSION:
            raise SchemaVersionError(schema, version, SCHEMA_VERSION)
        return version

    async def close(self) -> None:
        self._closed = True
        pool, self._pool = self._pool, None
        if pool is not None:
            await pool.close()

    def check_open(self) -> None:
        if self._closed:
            raise StoreClosedError()

    def _pool_for_call(self) -> AsyncConnectionPool[_Conn]:
        pool = self._pool
        if pool is None or self._closed:
            raise StoreClosedError()
        if asyncio.get_running_loop() is not self._loop:
            raise RuntimeError(
                "a postgres store is bound to the event loop that opened it; "
                "open another store on this loop"
            )
        return pool

    @contextlib.asynccontextmanager
    async def connection(self) -> AsyncIterator[_Conn]:
        """A connection of the pool (tests and diagnostics)."""
        try:
            async with self._pool_for_call().connection() as conn:
                yield conn
        except PoolClosed:
            raise StoreClosedError() from None

    # running calls

    async def read(self, body: Callable[[_Conn], Awaitable[_T]]) -> _T:
        """Run a read-only ``body``; once more on a fresh connection if the first was broken."""
        for attempt in (1, 2):
            conn: _Conn | None = None
            try:
                async with self.connection() as conn:
                    return await body(conn)
            except psycopg.OperationalError:
                if attempt == 2 or conn is None or not conn.broken:
                    raise
        raise AssertionError("unreachable")

    async def write(
        self,
        body: Callable[[_Conn], Awaitable[_T]],
        resolve: Callable[[psycopg.OperationalError], Awaitable[_T]] | None = None,
    ) -> _T:
        """Run ``body`` in one READ COMMITTED transaction.

        A connection that turns out broken at ``BEGIN`` (nothing sent yet) is replaced
        once. A connection failure while the ``COMMIT`` is in flight is a lost
        acknowledgement: ``resolve(error)`` decides the outcome by re-reading.
        """
        for attempt in (1, 2):
            conn: _Conn | None = None
            began = committing = False
            try:
                async with self.connection() as conn, conn.transaction():
                    began = True
                    result = await body(conn)
                    committing = True
                return result
            except psycopg.OperationalError as exc:
                if committing and resolve is not None:
                    return await self._resolve(exc, resolve)
                if began or attempt == 2 or conn is None or not conn.broken:
                    raise
        raise AssertionError("unreachable")

    async def _resolve(
        self,
        lost: psycopg.OperationalError,
        resolve: Callable[[psycopg.OperationalError], Awaitable[_T]],
    ) -> _T:
        try:
            return await resolve(lost)
        except (ConflictError, LedgerConflictError, BlobConflictError):
            raise  # the re-read proved that another writer got there first
        except Exception as exc:
            if exc is lost:
                raise
            raise lost from None  # the re-read failed too: the outcome stays unknown

    async def _check_fence(self, conn: _Conn, fence: Fence | None) -> None:
        """The first statement of a fenced write: `FencedWriteError` unless ``fence``'s
        grant is current; its row stays share-locked until the write ends."""
        if fence is None:
            return
        row = await _one(conn, self.q.lease_fence, (_FENCED_IDLE_LIMIT, fence.lease))
        live = row is not None and bool(row[1])
        if row is None or row[0] != fence.epoch or not live:
            current = 0 if row is None else int(row[0])
            raise refused(FencedWriteError(fence.lease, fence.epoch, current, live))

    # KV

    async def kv_get(self, key: str) -> Entry:
        async def body(conn: _Conn) -> Entry:
            row = await _one(conn, self.q.kv_get, (key,))
            if row is None:
                raise KeyNotFoundError(key)
            place = kv_place(key, row[1])
            return Entry(verified(row[0], row[2], place, f"value of key {key!r}"), row[1])

        return await self.read(body)

    async def kv_put(self, key: str, value: bytes, expected: int, fence: Fence | None) -> int:
        # A create writes revision 1, an update ``expected + 1``: the same place either way.
        crc = bound_checksum(kv_place(key, expected + 1), value)
        guard = (fence.lease, fence.epoch) if fence else ()
        if expected == 0:
            query = self.q.kv_create_fenced if fence else self.q.kv_create
            params: tuple[object, ...] = (*guard, key, value, crc)
        else:
            query = self.q.kv_update_fenced if fence else self.q.kv_update
            params = (*guard, value, crc, key, expected)

        async def resolve(lost: psycopg.OperationalError) -> int:
            row = await self.read(lambda conn: _one(conn, self.q.kv_get, (key,)))
            actual = 0 if row is None else int(row[1])
            if actual == expected + 1 and row is not None and row[0] == value:
                return actual
            if actual == expected:
                raise lost
            raise ConflictError(key, expected, actual)

        while True:
            row, retried = await self._statement(query, params, resolve)
            if row is None:
                return expected + 1  # a lost acknowledgement, resolved: it had committed
            written = _fenced_result(row, fence)
            if written is not None:
                return int(written)
            current = await self.read(lambda conn: _one(conn, self.q.kv_revision, (key,)))
            actual = 0 if current is None else int(current[0])
            if actual != expected:
                if retried:  # the first attempt may have landed after all
                    with contextlib.suppress(psycopg.OperationalError):
                        return await resolve(psycopg.OperationalError("put retried"))
                raise ConflictError(key, expected, actual)
            # The key changed between the two statements (deleted, or re-created up to
            # ``expected``), or a serialization failure: try again.

    async def kv_delete(self, key: str, fence: Fence | None) -> None:
        query = self.q.kv_delete_fenced if fence else self.q.kv_delete
        params = (fence.lease, fence.epoch, key) if fence else (key,)

        async def resolve(lost: psycopg.OperationalError) -> None:
            if await self.read(lambda conn: _one(conn, self.q.kv_exists, (key,))) is not None:
                raise lost  # still there: the delete did not happen (yet)

        while True:
            row, _retried = await self._statement(query, params, resolve)
            if row is None or row:
                _fenced_result(row or (None, None, None), fence)
                return
            # A serialization failure (a stricter default isolation): nothing happened.

    async def _delete(self, delete: bytes, exists: bytes, key: str, fence: Fence | None) -> None:
        async def body(conn: _Conn) -> None:
            await self._check_fence(conn, fence)
            await conn.execute(delete, (key,))

        async def resolve(lost: psycopg.OperationalError) -> None:
            if await self.read(lambda conn: _one(conn, exists, (key,))) is not None:
                raise lost  # still there: the delete did not happen (yet)

        await self.write(body, resolve)

    async def kv_keys(self, low: str, high: str) -> list[str]:
        return await self.read(lambda conn: _column(conn, self.q.kv_keys, (low, high)))

    async def kv_page(self, bounds: tuple[str, ...], limit: int, descending: bool) -> list[str]:
        query = self.q.kv_page_down if descending else self.q.kv_page_up
        return await self.read(lambda conn: _column(conn, query, (*bounds, limit)))

    # Blobs

    async def blob_put(self, key: str, data: bytes, fence: Fence | None) -> None:
        digest = hashlib.sha256(data).digest()
        crc = bound_checksum(blob_place(key), data)

        async def body(conn: _Conn) -> None:
            await self._check_fence(conn, fence)
            while True:
                if await _one(conn, self.q.blob_insert, (key, data, crc)) is not None:
                    return
                row = await _one(conn, self.q.blob_same, (len(data), digest, key))
                if row is None:
                    continue  # deleted between the two statements: insert again
                if not row[0]:
                    raise BlobConflictError(key)
                return

        async def resolve(lost: psycopg.OperationalError) -> None:
            row = await self.read(
                lambda conn: _one(conn, self.q.blob_same, (len(data), digest, key))
            )
            if row is None:
                raise lost
            if not row[0]:
                raise BlobConflictError(key)

        await self.write(body, resolve)

    async def blob_get(self, key: str) -> bytes:
        row = await self.read(lambda conn: _one(conn, self.q.blob_get, (key,)))
        if row is None:
            raise BlobNotFoundError(key)
        return verified(row[0], row[1], blob_place(key), f"blob {key!r}")

    async def blob_delete(self, key: str, fence: Fence | None) -> None:
        await self._delete(self.q.blob_delete, self.q.blob_exists, key, fence)

    async def blob_list(self, low: str, high: str) -> list[str]:
        return await self.read(lambda conn: _column(conn, self.q.blob_list, (low, high)))

    # Ledger

    async def ledger_append(
        self,
        name: str,
        payloads: list[bytes],
        expected: int,
        blobs: dict[str, bytes],
        needed: list[str],
        fence: Fence | None,
    ) -> int:
        tip = expected + len(payloads)
        crcs = [
            bound_checksum(record_place(name, expected + i), payload)
            for i, payload in enumerate(payloads, 1)
        ]
        digests = [bytes.fromhex(d) for d in blobs]
        datas = list(blobs.values())
        if expected == 0:
            query = self.q.append_create_fenced if fence else self.q.append_create
            claim: tuple[object, ...] = (name, tip)
        else:
            query = self.q.append_advance_fenced if fence else self.q.append_advance
            claim = (tip, name, expected)
        guard = (fence.lease, fence.epoch) if fence else ()
        params = (*guard, *claim, expected, payloads, crcs, digests, datas)

        referred = digests + [bytes.fromhex(d) for d in needed]

        async def body(conn: _Conn) -> int:
            await self._check_fence(conn, fence)
            while True:
                if expected == 0:
                    row = await _one(conn, self.q.log_create, (name, tip))
                else:
                    row = await _one(conn, self.q.log_advance, (tip, name, expected))
                if row is not None:
                    break
                current = await _one(conn, self.q.ledger_tip, (name,))
                actual = 0 if current is None else int(current[0])
                if actual != expected:
                    raise LedgerConflictError(name, expected, actual)
            if referred:
                locked = await _rows(conn, self.q.attachments_lock, (referred,))
                stored = {bytes(d) for (d,) in locked}
                for digest in needed:
                    if bytes.fromhex(digest) not in stored:
                        raise AttachmentNotFoundError(digest)
            await conn.execute(
                self.q.ledger_insert,
                (row[0], expected, payloads, crcs, row[0], referred, digests, datas),
            )
            return tip

        async def resolve(lost: psycopg.OperationalError) -> int:
            async def reread(conn: _Conn) -> tuple[list[bytes], int, int]:
                rows = await _rows(conn, self.q.ledger_read, (name, expected, len(payloads)))
                count = await _one(conn, self.q.attachments_count, (digests,))
                current = await _one(conn, self.q.ledger_tip, (name,))
                return (
                    [payload for _seq, payload, _crc in rows],
                    0 if count is None else int(count[0]),
                    0 if current is None else int(current[0]),
                )

            found, attached, actual = await self.read(reread)
            if found == payloads and attached == len(digests):
                return tip
            if not found:
                raise lost
            raise LedgerConflictError(name, expected, actual)

        if referred:
            # Attachments are share-locked before their references are inserted (see
            # the sweep), which takes a transaction of several statements.
            return await self.write(body, resolve)
        while True:
            row, retried = await self._statement(query, params, resolve)
            if row is None:
                return tip  # a lost acknowledgement, resolved: it had committed
            claimed, epoch, live = row or (None, fence and fence.epoch, True)
            if fence is not None and (epoch != fence.epoch or not live):
                current = 0 if epoch is None else int(epoch)
                raise refused(FencedWriteError(fence.lease, fence.epoch, current, bool(live)))
            if claimed is not None:
                return tip
            actual = await self.ledger_tip(name)
            if actual != expected:
                if retried:  # the first attempt may have landed after all
                    with contextlib.suppress(psycopg.OperationalError):
                        return await resolve(psycopg.OperationalError("append retried"))
                raise LedgerConflictError(name, expected, actual)
            # The tip is back where we expected (a claim that raced a creator that rolled
            # back): claim again.

    async def _statement(
        self,
        query: bytes,
        params: Sequence[object],
        resolve: Callable[[psycopg.OperationalError], Awaitable[object]],
    ) -> tuple[tuple[Any, ...] | None, bool]:
        """Run one single-statement write (an append, a KV put or delete): its row (the
        write's result - claimed log id, new revision - fence epoch and liveness; a
        NULL result when the write's condition refused it, ``(None, None, None)`` when
        no row came back; ``()`` for a serialization failure), or None for a lost
        acknowledgement that `resolve` proved committed; and whether it was retried.

        The statement is its own transaction, run at the server's default isolation;
        under a stricter one than READ COMMITTED a race is a serialization failure
        (nothing was written: the caller re-reads the tip, and claims again while it has
        not moved). A connection failure at any moment may have come after the commit:
        it is resolved by re-reading. A connection that was already broken when taken
        from the pool (the resolution found nothing) is replaced once; the retry is
        another compare-and-swap (or -append) at the same revision, so at most one of
        the two can land, and whichever does holds our bytes (a delete is idempotent).
        """
        for attempt in (1, 2):
            conn: _Conn | None = None
            try:
                async with self.connection() as conn:
                    row = await _one(conn, query, params)
                return (None, None, None) if row is None else row, attempt == 2
            except psycopg.errors.SerializationFailure:
                # Only under a stricter default isolation than READ COMMITTED (a
                # statement has no BEGIN to set its own): a concurrent writer moved the
                # log's or the lease's row. Nothing was written; the caller re-reads.
                return (), attempt == 2
            except psycopg.OperationalError as exc:
                broken = conn is not None and conn.broken
                try:
                    await self._resolve(exc, resolve)
                except psycopg.OperationalError as unresolved:
                    if unresolved is not exc or attempt == 2 or not broken:
                        raise
                    continue  # nothing of ours is there: retry on a fresh connection
                return None, attempt == 2
        raise AssertionError("unreachable")

    async def ledger_read(self, name: str, after: int, limit: int) -> list[Record]:
        rows = await self.read(lambda conn: _rows(conn, self.q.ledger_read, (name, after, limit)))
        return [
            Record(
                int(seq),
                verified(payload, crc, record_place(name, seq), f"record {seq} of log {name!r}"),
            )
            for seq, payload, crc in rows
        ]

    async def ledger_tip(self, name: str) -> int:
        row = await self.read(lambda conn: _one(conn, self.q.ledger_tip, (name,)))
        return 0 if row is None else int(row[0])

    async def ledger_names(self, low: str, high: str) -> list[str]:
        return await self.read(lambda conn: _column(conn, self.q.ledger_names, (low, high)))

    async def ledger_attachments(self, digests: list[str]) -> dict[str, bytes]:
        wanted = list(dict.fromkeys(digests))
        if not wanted:
            self.check_open()
            return {}
        keys = [bytes.fromhex(d) for d in wanted]
        rows = await self.read(lambda conn: _rows(conn, self.q.attachments_get, (keys,)))
        by_digest = {bytes(digest).hex(): data for digest, data in rows}
        found: dict[str, bytes] = {}
        for digest in wanted:
            data = by_digest.get(digest)
            if data is None:
                raise AttachmentNotFoundError(digest)
            found[digest] = data
        return found

    async def ledger_drop(self, names: list[str]) -> int:
        async def body(conn: _Conn) -> int:
            ids = [int(i) for (i,) in await _rows(conn, self.q.logs_drop, (names,))]
            if ids:
                await conn.execute(self.q.records_drop, (ids,))
                await conn.execute(self.q.refs_drop, (ids,))
            return len(ids)

        # No resolution: a drop is idempotent, so a lost acknowledgement is retried.
        return await self.write(body)

    async def ledger_sweep_page(self, after: bytes, limit: int) -> tuple[bytes | None, list[int]]:
        """Lock and delete one page of unreferenced attachments after ``after``; return
        the last digest looked at (None when there were none) and the deleted sizes."""

        async def body(conn: _Conn) -> tuple[bytes | None, list[int]]:
            complete = await _one(conn, self.q.refs_complete, ())
            if complete is None or not complete[0]:
                raise RefsIncompleteError()
            locked = [bytes(d) for (d,) in await _rows(conn, self.q.sweep_lock, (after, limit))]
            if not locked:
                return None, []
            sizes = await _rows(conn, self.q.sweep_delete, (locked,))
            return locked[-1], [int(n) for (n,) in sizes]

        return await self.write(body)

    async def ledger_sweep_count(self) -> SweepReport:
        row = await self.read(lambda conn: _one(conn, self.q.sweep_count, ()))
        assert row is not None
        if not row[0]:
            raise RefsIncompleteError()
        return SweepReport(int(row[1]), int(row[2]))

    async def ledger_usage(self, names: list[str]) -> LedgerUsage:
        row = await self.read(lambda conn: _one(conn, self.q.usage, (names,)))
        assert row is not None
        if not row[0]:
            raise RefsIncompleteError()
        return LedgerUsage(int(row[1]), int(row[2]), int(row[3]))

    async def ledger_add_refs(self, name: str, digests: list[str]) -> int:
        keys = list(dict.fromkeys(bytes.fromhex(d) for d in digests))

        async def body(conn: _Conn) -> int:
            log = await _one(conn, self.q.log_lock, (name,))
            if log is None or not keys:
                return 0
            stored = [bytes(d) for (d,) in await _rows(conn, self.q.attachments_lock, (keys,))]
            await conn.execute(self.q.refs_insert, (log[0], stored))
            return len(stored)

        return await self.write(body)

    async def ledger_refs_complete(self) -> bool:
        row = await self.read(lambda conn: _one(conn, self.q.refs_complete, ()))
        return row is not None and bool(row[0])

    async def ledger_mark_refs_complete(self) -> None:
        async def body(conn: _Conn) -> None:
            await conn.execute(self.q.mark_refs_complete)

        await self.write(body)

    async def vacuum(self) -> None:
        # VACUUM cannot run in a transaction: the pool's connections are autocommit.
        await self.read(lambda conn: conn.execute(self.q.vacuum))

    # Leases

    async def lease_acquire(self, name: str, holder: str, ttl: float) -> int:
        async def body(conn: _Conn) -> int:
            row = await _one(conn, self.q.lease_acquire, (name, holder, ttl, ttl))
            if row is not None:
                return int(row[0])
            held = await _one(conn, self.q.lease_epoch, (name,))  # locked by the upsert
            if held is None:
                raise StorageError(f"lease row {name!r} vanished while locked")
            raise LeaseHeldError(name, int(held[0]))

        async def resolve(lost: psycopg.OperationalError) -> int:
            row = await self.read(lambda conn: _one(conn, self.q.lease_get, (name,)))
            if row is not None and row[1] == holder:
                return int(row[0])  # our grant committed (holders are random tokens)
            raise lost

        return await self.write(body, resolve)

    async def lease_renew(self, name: str, epoch: int, holder: str, ttl: float) -> RenewStatus:
        async def body(conn: _Conn) -> RenewStatus:
            if await _one(conn, self.q.lease_extend, (ttl, name, epoch, holder)) is not None:
                return "renewed"
            row = await _one(conn, self.q.lease_get, (name,))
            if row is None or row[0] != epoch or row[1] != holder:
                return "taken over"
            return "expired"

        # No resolution: the renewal loop retries a failed renewal until its proven expiry.
        return await self.write(body)

    async def lease_status(self, name: str) -> LeaseStatus:
        row = await self.read(lambda conn: _one(conn, self.q.lease_status, (name,)))
        if row is None:
            return LeaseStatus(0, False, None)
        return LeaseStatus(int(row[0]), bool(row[1]), row[2].astimezone(UTC))

    async def lease_release(self, name: str, epoch: int, holder: str) -> None:
        async def body(conn: _Conn) -> None:
            await conn.execute(self.q.lease_release, (name, epoch, holder))

        async def resolve(lost: psycopg.OperationalError) -> None:
            row = await self.read(lambda conn: _one(conn, self.q.lease_get, (name,)))
            if row is not None and row[0] == epoch and row[1] == holder:
                raise lost  # still ours: the release did not happen (yet)

        await self.write(body, resolve)


def _fenced_result(row: tuple[Any, ...], fence: Fence | None) -> Any:
    """The write's result from a single-statement write's row (None for ``()``, a
    serialization failure); `FencedWriteError` if the fence refused the write."""
    if not row:
        return None
    result, epoch, live = row
    if fence is not None and (epoch != fence.epoch or not live):
        current = 0 if epoch is None else int(epoch)
        raise refused(FencedWriteError(fence.lease, fence.epoch, current, bool(live)))
    return result


async def _configure(conn: _Conn) -> None:
    # Client-side only: psycopg then starts transactions with
    # BEGIN ISOLATION LEVEL READ COMMITTED, whatever the server's default is.
    await conn.set_isolation_level(psycopg.IsolationLevel.READ_COMMITTED)


async def _one(conn: _Conn, query: bytes, params: Sequence[object]) -> tuple[Any, ...] | None:
    cursor = await conn.execute(query, params, binary=True)
    return await cursor.fetchone()


async def _rows(conn: _Conn, query: bytes, params: Sequence[object]) -> list[tuple[Any, ...]]:
    cursor = await conn.execute(query, params, binary=True)
    return await cursor.fetchall()


async def _column(conn: _Conn, query: bytes, params: Sequence[object]) -> list[str]:
    return [str(row[0]) for row in await _rows(conn, query, params)]


# --- the async primitives -----------------------------------------------------------------


class PostgresKV:
    def __init__(self, db: _Database) -> None:
        self._db = db

    async def get(self, key: str) -> Entry:
        validate_name(key)
        return await self._db.kv_get(key)

    async def put(
        self, key: str, value: bytes, *, expected: int, fence: Fence | None = None
    ) -> int:
        validate_name(key)
        check_revision("expected", expected)
        check_bytes("value", value, MAX_KV_VALUE_BYTES)
        check_fence(fence)
        return await self._db.kv_put(key, bytes(value), expected, fence)

    async def delete(self, key: str, *, fence: Fence | None = None) -> None:
        validate_name(key)
        check_fence(fence)
        await self._db.kv_delete(key, fence)

    async def keys(self, prefix: str = "") -> list[str]:
        bounds = _prefix_bounds(prefix)
        if bounds is None:
            self._db.check_open()
            return []
        return await self._db.kv_keys(*bounds)

    async def keys_page(
        self, prefix: str = "", *, start: str = "", limit: int = 100, descending: bool = False
    ) -> list[str]:
        check_page(start, limit)
        bounds = _page_bounds(prefix, start, descending)
        if bounds is None:
            self._db.check_open()
            return []
        return await self._db.kv_page(bounds, limit, descending)


class PostgresBlobs:
    def __init__(self, db: _Database) -> None:
        self._db = db

    async def put(self, key: str, data: bytes, *, fence: Fence | None = None) -> None:
        validate_name(key)
        check_bytes("blob", data, MAX_BLOB_BYTES)
        check_fence(fence)
        await self._db.blob_put(key, bytes(data), fence)

    async def get(self, key: str) -> bytes:
        validate_name(key)
        return await self._db.blob_get(key)

    async def delete(self, key: str, *, fence: Fence | None = None) -> None:
        validate_name(key)
        check_fence(fence)
        await self._db.blob_delete(key, fence)

    async def list(self, prefix: str = "") -> list[str]:
        bounds = _prefix_bounds(prefix)
        if bounds is None:
            self._db.check_open()
            return []
        return await self._db.blob_list(*bounds)


class PostgresLedger:
    def __init__(self, db: _Database) -> None:
        self._db = db

    async def append(
        self,
        name: str,
        records: Sequence[bytes],
        *,
        expected: int,
        attachments: Mapping[str, bytes] | None = None,
        refs: Iterable[str] = (),
        fence: Fence | None = None,
    ) -> int:
        validate_name(name)
        payloads, blobs = check_append(records, expected, attachments)
        needed = check_refs(refs, blobs)
        check_fence(fence)
        if expected + len(payloads) > _MAX_BIGINT:
            # No log ever gets there (and the new tip would not fit in a bigint).
            raise LedgerConflictError(name, expected, await self._db.ledger_tip(name))
        return await self._db.ledger_append(name, payloads, expected, blobs, needed, fence)

    async def read(self, name: str, *, after: int = 0, limit: int = 100) -> list[Record]:
        validate_name(name)
        check_read(after, limit)
        return await self._db.ledger_read(name, min(after, _MAX_BIGINT), limit)

    async def tip(self, name: str) -> int:
        validate_name(name)
        return await self._db.ledger_tip(name)

    async def names(self, prefix: str = "") -> list[str]:
        bounds = _prefix_bounds(prefix)
        if bounds is None:
            self._db.check_open()
            return []
        return await self._db.ledger_names(*bounds)

    async def attachments(self, digests: Iterable[str]) -> dict[str, bytes]:
        wanted = check_digests(digests)
        return await self._db.ledger_attachments(wanted)

    async def drop(self, names: Iterable[str]) -> int:
        wanted = check_names(names)
        self._db.check_open()
        dropped = 0
        for start in range(0, len(wanted), _DROP_BATCH):
            dropped += await self._db.ledger_drop(wanted[start : start + _DROP_BATCH])
        return dropped

    async def sweep(self, *, dry_run: bool = False) -> SweepReport:
        if dry_run:
            return await self._db.ledger_sweep_count()
        count = size = 0
        after: bytes | None = b""
        while after is not None:
            after, sizes = await self._db.ledger_sweep_page(after, _SWEEP_BATCH)
            count += len(sizes)
            size += sum(sizes)
        return SweepReport(count, size)

    async def usage(self, names: Iterable[str]) -> LedgerUsage:
        wanted = check_names(names)
        return await self._db.ledger_usage(wanted)

    async def vacuum(self) -> None:
        await self._db.vacuum()

    async def add_refs(self, name: str, digests: Iterable[str]) -> int:
        validate_name(name)
        wanted = check_digests(digests)
        return await self._db.ledger_add_refs(name, wanted)

    async def refs_complete(self) -> bool:
        return await self._db.ledger_refs_complete()

    async def mark_refs_complete(self) -> None:
        await self._db.ledger_mark_refs_complete()


class PostgresLeaseBackend:
    """`LeaseBackend` over the ``leases`` table, on the database's clock so machines agree."""

    def __init__(self, db: _Database) -> None:
        self._db = db

    async def try_acquire(self, name: str, holder: str, ttl: float) -> int:
        return await self._db.lease_acquire(name, holder, float(ttl))

    async def renew(self, name: str, epoch: int, holder: str, ttl: float) -> RenewStatus:
        return await self._db.lease_renew(name, epoch, holder, float(ttl))

    async def release(self, name: str, epoch: int, holder: str) -> None:
        await self._db.lease_release(name, epoch, holder)

    async def status(self, name: str) -> LeaseStatus:
        return await self._db.lease_status(name)


async def connect_postgres(url: str) -> Store:
    """Open the PostgreSQL store named by ``url``, creating or migrating its schema."""
    settings = parse_postgres_url(url)
    db = _Database(settings)
    await db.open()
    return Store(
        url,
        PostgresKV(db),
        PostgresBlobs(db),
        PostgresLedger(db),
        Leaser(PostgresLeaseBackend(db)),
        _close_backend=db.close,
    )
