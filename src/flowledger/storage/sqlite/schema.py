"""The SQLite schema: its tables, its version and the migrations between versions.

The schema version is kept in ``flowledger_meta``. Opening a database of an
older version migrates it in one transaction (version 2 adds the checksums and
computes them for the rows already there; version 3 binds them to their places,
carrying any mismatch over; version 4 adds the references, marked incomplete when
attachments exist already); opening one written by a newer schema raises
`SchemaVersionError` before anything is written. Opening a database already at this
version takes no write lock.
"""

from __future__ import annotations

import re
import sqlite3
from typing import Final

from ..checksum import blob_place, checksum, kv_place, rebound, record_place
from ..errors import SchemaVersionError as BaseSchemaVersionError

__all__ = ["SCHEMA_VERSION", "SchemaVersionError", "check_version", "ensure_schema"]

SCHEMA_VERSION: Final = 4

_DIGITS: Final = re.compile(r"[0-9]+")


class SchemaVersionError(BaseSchemaVersionError):
    """The database was written by a newer (or unknown) schema; nothing was changed."""

    def __init__(self, path: str, found: object, supported: int) -> None:
        self.path = path
        self.found = found
        self.supported = supported
        super().__init__(
            f"store {path!r} has schema version {found!r}; this flowledger understands "
            f"versions up to {supported} - upgrade flowledger to open it"
        )


# Payload-carrying tables keep rowids: in a WITHOUT ROWID table a row over ~1 KB
# (with 4 KiB pages) spills into a mostly empty overflow page, which tripled the
# file size for 1.2 KiB ledger records at no gain in append latency. Tables of
# small rows with text keys are WITHOUT ROWID, so each is a single b-tree.
#
# Version ``n`` of the schema is reached by running ``_MIGRATIONS[n - 1]`` on version
# ``n - 1``; a new file runs them all, so a migrated file and a new one are the same.
_MIGRATIONS: Final[tuple[tuple[str, ...], ...]] = (
    # version 1
    (
        """CREATE TABLE IF NOT EXISTS kv (
            key TEXT PRIMARY KEY NOT NULL,
            revision INTEGER NOT NULL,
            value BLOB NOT NULL
        )""",
        """CREATE TABLE IF NOT EXISTS blobs (
            key TEXT PRIMARY KEY NOT NULL,
            data BLOB NOT NULL
        )""",
        # A log's records live under rowid (log id << 32 | seq): the table is its own index,
        # and a record's key costs a few bytes instead of repeating the log's name.
        """CREATE TABLE IF NOT EXISTS ledger_logs (
            id INTEGER PRIMARY KEY,
            name TEXT NOT NULL UNIQUE
        )""",
        """CREATE TABLE IF NOT EXISTS ledger_records (
            key INTEGER PRIMARY KEY,
            payload BLOB NOT NULL
        )""",
        # Digests are stored as their 32 raw bytes, not 64 hex characters.
        """CREATE TABLE IF NOT EXISTS attachments (
            digest BLOB PRIMARY KEY NOT NULL,
            data BLOB NOT NULL
        )""",
        """CREATE TABLE IF NOT EXISTS leases (
            name TEXT PRIMARY KEY NOT NULL,
            epoch INTEGER NOT NULL,
            holder TEXT,
            expires_at REAL NOT NULL
        ) WITHOUT ROWID""",
    ),
    # version 2: a CRC-32 beside every value, blob and record (see `checksum`). The
    # checksummed column is renamed to ``content`` so that a process of version 1 still
    # running against the file fails loudly ("no such column") instead of writing values
    # without, or with a stale, checksum.
    (
        "ALTER TABLE kv RENAME COLUMN value TO content",
        "ALTER TABLE kv ADD COLUMN crc INTEGER NOT NULL DEFAULT 0",
        "UPDATE kv SET crc = flowledger_crc32(content)",
        "ALTER TABLE blobs RENAME COLUMN data TO content",
        "ALTER TABLE blobs ADD COLUMN crc INTEGER NOT NULL DEFAULT 0",
        "UPDATE blobs SET crc = flowledger_crc32(content)",
        "ALTER TABLE ledger_records RENAME COLUMN payload TO content",
        "ALTER TABLE ledger_records ADD COLUMN crc INTEGER NOT NULL DEFAULT 0",
        "UPDATE ledger_records SET crc = flowledger_crc32(content)",
    ),
    # version 3: the checksum is bound to the value's place (see `checksum`), so a row
    # copied to another key, revision, blob key, log or sequence number is corrupt where
    # it lands. The column is renamed to ``bound_crc`` for the same reason as in version 2:
    # a process of version 2 still running fails loudly instead of writing unbound ones.
    (
        "ALTER TABLE kv RENAME COLUMN crc TO bound_crc",
        "UPDATE kv SET bound_crc = flowledger_rebind_kv(key, revision, content, bound_crc)",
        "ALTER TABLE blobs RENAME COLUMN crc TO bound_crc",
        "UPDATE blobs SET bound_crc = flowledger_rebind_blob(key, content, bound_crc)",
        "ALTER TABLE ledger_records RENAME COLUMN crc TO bound_crc",
        """UPDATE ledger_records SET bound_crc = flowledger_rebind_record(
            (SELECT name FROM ledger_logs WHERE id = ledger_records.key >> 32),
            ledger_records.key & 4294967295, content, bound_crc)""",
    ),
    # version 4: which attachments each log refers to (see `ledger`), so unreferenced ones
    # can be swept. Log ids become AUTOINCREMENT: a dropped log's id is never given to
    # another log, so an id cached by a process that missed the drop points at nothing
    # (and is looked up again) instead of at a stranger's records. The attachment column
    # is renamed so that a process of version 3 still running fails loudly instead of
    # sending attachments without references. Logs written before have no references:
    # ``refs_complete`` says whether any could be missing (only if attachments exist).
    (
        """CREATE TABLE ledger_logs_v4 (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            name TEXT NOT NULL UNIQUE
        )""",
        "INSERT INTO ledger_logs_v4 (id, name) SELECT id, name FROM ledger_logs",
        "DROP TABLE ledger_logs",
        "ALTER TABLE ledger_logs_v4 RENAME TO ledger_logs",
        """CREATE TABLE attachment_refs (
            log_id INTEGER NOT NULL,
            digest BLOB NOT NULL,
            PRIMARY KEY (log_id, digest)
        ) WITHOUT ROWID""",
        "CREATE INDEX attachment_refs_by_digest ON attachment_refs (digest)",
        "ALTER TABLE attachments RENAME COLUMN data TO content",
        """INSERT OR REPLACE INTO flowledger_meta (key, value) VALUES ('refs_complete',
            CASE WHEN EXISTS (SELECT 1 FROM attachments) THEN '0' ELSE '1' END)""",
    ),
)
assert len(_MIGRATIONS) == SCHEMA_VERSION

_CREATE_META: Final = """CREATE TABLE IF NOT EXISTS flowledger_meta (
    key TEXT PRIMARY KEY NOT NULL,
    value TEXT NOT NULL
) WITHOUT ROWID"""
_HAS_META: Final = "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'flowledger_meta'"
_GET_VERSION: Final = "SELECT value FROM flowledger_meta WHERE key = 'schema_version'"
_SET_VERSION: Final = (
    "INSERT OR REPLACE INTO flowledger_meta (key, value) VALUES ('schema_version', ?)"
)


def ensure_schema(conn: sqlite3.Connection, path: str) -> None:
    """Bring the database on ``conn`` to `SCHEMA_VERSION` (``path`` names it in errors)."""
    if check_version(conn, path) == SCHEMA_VERSION:
        return  # the common case: no write lock needed to open
    conn.create_function("flowledger_crc32", 1, checksum, deterministic=True)
    conn.create_function("flowledger_rebind_kv", 4, _rebind_kv, deterministic=True)
    conn.create_function("flowledger_rebind_blob", 3, _rebind_blob, deterministic=True)
    conn.create_function("flowledger_rebind_record", 4, _rebind_record, deterministic=True)
    conn.execute("BEGIN IMMEDIATE")
    try:
        conn.execute(_CREATE_META)
        # Re-read under the write lock: another process may have migrated meanwhile.
        version = check_version(conn, path) or 0
        for number in range(version + 1, SCHEMA_VERSION + 1):
            for statement in _MIGRATIONS[number - 1]:
                conn.execute(statement)
        conn.execute(_SET_VERSION, (str(SCHEMA_VERSION),))
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise


def check_version(conn: sqlite3.Connection, path: str) -> int | None:
    """The stored schema version (None if absent); `SchemaVersionError` if unknown."""
    if conn.execute(_HAS_META).fetchone() is None:
        return None
    row = conn.execute(_GET_VERSION).fetchone()
    if row is None:
        return None
    raw = row[0]
    if not isinstance(raw, str) or not _DIGITS.fullmatch(raw):
        raise SchemaVersionError(path, raw, SCHEMA_VERSION)
    version = int(raw)
    # 0 was never written.
    if not 1 <= version <= SCHEMA_VERSION:
        raise SchemaVersionError(path, version, SCHEMA_VERSION)
    return version


# The migration to version 3 (SQL functions over each stored row).


def _rebind_kv(key: str, revision: int, content: bytes, crc: int) -> int:
    return rebound(kv_place(key, revision), content, crc)


def _rebind_blob(key: str, content: bytes, crc: int) -> int:
    return rebound(blob_place(key), content, crc)


def _rebind_record(log: str | None, seq: int, content: bytes, crc: int) -> int:
    if log is None:
        return crc  # a record of no log: nothing can ever read it
    return rebound(record_place(log, seq), content, crc)
