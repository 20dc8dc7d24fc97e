"""The SQLite backend: the embedded default, one database file shared by any number of processes.

URLs are ``sqlite:///relative/path.db`` (relative to the current directory when
the store is opened) or ``sqlite:////absolute/path.db``; the path is
percent-decoded. Query options:

* ``synchronous`` - ``FULL`` (the default: a commit survives power loss),
  ``NORMAL`` (a commit survives a process crash but may be lost, never torn, on
  power loss) or ``OFF``; case-insensitive.
* ``busy_timeout`` - milliseconds a writer waits for another writer (default 5000).

Anything else (unknown or repeated options, bad values, an empty path, a host)
raises `UnsupportedURLError`. The parent directory must exist; the file is
created on first open.

Semantics, the same as the memory oracle's (the conformance suite compares them):

* Every call validates its arguments with the shared contract checks before
  touching the database, so a rejected call changes nothing.
* Every write is one ``BEGIN IMMEDIATE`` ... ``COMMIT`` transaction, so each
  call is atomic and isolated against every other connection and process: a
  KV compare-and-swap, a blob put (insert, or compare with what is there), and
  a ledger append - the tip check, all of its records and the insert-if-absent
  of all of its attachments commit together or not at all.
* Ledger appends made concurrently on one store are *group-committed* (see
  `_Worker`): one transaction, a savepoint per append (so each keeps its own
  checks and its own outcome, and a failed one writes nothing), one COMMIT.
  Each append is still atomic; a group is applied in the order its appends
  were made; a caller is answered only after the COMMIT holding its records
  returned; a failed COMMIT fails every append of its group, and only those.
* KV revisions count 1, 2, 3, ... per key and restart at 1 after a delete.
  Ledger sequence numbers are 1-based and contiguous per log. Listings are
  sorted by byte order (the default ``BINARY`` collation; names are ASCII).
* A fenced write (see `fence`) reads its lease's row inside its ``BEGIN
  IMMEDIATE`` transaction, before anything else.
* Leases live in a ``leases`` table and use the wall clock (`time.time`), so
  they work across processes on one machine; an acquire bumps the epoch only
  when the name is free or its holder's TTL has passed, and a release clears
  the holder but keeps the epoch (and records when, in ``expires_at``).

Settings: ``journal_mode=WAL`` (readers never block the writer and vice
versa), ``busy_timeout`` and ``synchronous`` from the URL. Each `Store` owns
one connection. Calls run on the calling thread, one at a time, each a whole
transaction: an uncontended commit blocks the event loop for its own
duration (with ``FULL``, one fsync), but waiting for another process's lock
never does - the wait is an asynchronous retry up to ``busy_timeout``; a
group's COMMIT runs on a writer thread. A call cancelled while it waits has
not started; a started call runs to completion. `Store.close` lets the calls
in line finish, then closes the connection; later calls raise
`StoreClosedError`. SQLite errors other than the contract's (for example
``database is locked`` after ``busy_timeout``, or a full disk) propagate as
`sqlite3.Error` after the transaction is rolled back.

References and collection (see `ledger` and docs/storage.md): ``attachment_refs``
holds one row per log and digest it refers to. An append checks its refs and inserts
its references inside its ``BEGIN IMMEDIATE`` transaction; a sweep selects a page of
attachments without references and deletes them inside another, so the database's
single write lock serialises every sweep page with every append: an append either
committed its reference first (kept) or finds the attachment gone
(`AttachmentNotFoundError`, nothing written). A drop deletes a log's records,
references and row in one transaction. Log ids are ``AUTOINCREMENT``: a dropped log's
id is never reused, so an id cached by another store points at no records, and a store
that finds a cached log empty looks its id up again. For the same reason a store
remembers the references it committed (`KnownRefs`) and does not insert them again, nor
re-check the attachments they name. A new file is created with
``auto_vacuum=INCREMENTAL`` and drops and sweeps run ``incremental_vacuum``; an older
file needs `SQLiteLedger.vacuum` (a full ``VACUUM``) to shrink.

Every KV value, blob and ledger record is stored with its CRC-32 bound to its
place (key and revision, blob key, log and sequence number) and checked on
every read: damaged bytes, or a row copied to another place, raise
`CorruptDataError` (naming the key, or the log and sequence number) instead of
being returned. Attachments are checked by their reader against their SHA-256.

The schema version is kept in ``flowledger_meta``. Opening a database of an
older version migrates it in one transaction (version 2 adds the checksums and
computes them for the rows already there; version 3 binds them to their places,
carrying any mismatch over; version 4 adds the references, marked incomplete when
attachments exist already); opening one written by a newer schema raises
`SchemaVersionError` before anything is written.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import json
import os
import queue
import re
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Final, Literal, TypeVar
from urllib.parse import parse_qsl, quote, unquote, urlsplit

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
    StoreBrokenError,
    StoreClosedError,
    StoreNotFoundError,
    StoreOpenError,
)
from .errors import SchemaVersionError as BaseSchemaVersionError
from .fence import Fence, check_fence, refused
from .kv import Entry, check_page
from .lease import Leaser, LeaseStatus, RenewStatus
from .ledger import (
    KnownRefs,
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
from .store import Store, UnsupportedURLError

__all__ = [
    "SCHEMA_VERSION",
    "SQLiteBlobs",
    "SQLiteKV",
    "SQLiteLeaseBackend",
    "SQLiteLedger",
    "SQLiteSettings",
    "SchemaVersionError",
    "connect_sqlite",
    "parse_sqlite_url",
]

SCHEMA_VERSION: Final = 4

Synchronous = Literal["FULL", "NORMAL", "OFF"]

_T = TypeVar("_T")

_DEFAULT_BUSY_TIMEOUT_MS: Final = 5000
_MAX_BUSY_TIMEOUT_MS: Final = 2**31 - 1  # sqlite3_busy_timeout takes a C int
# Sequence numbers never get near this; clamping keeps huge ``after`` values bindable.
_MAX_SQL_INT: Final = 2**63 - 1
# Logs per drop transaction and attachments per sweep transaction: each holds the write
# lock, so other writers wait at most one batch.
_DROP_BATCH: Final = 16
_SWEEP_BATCH: Final = 500


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


# --- URLs -----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SQLiteSettings:
    path: str  # as written in the URL (decoded); relative paths resolve at open time
    synchronous: Synchronous = "FULL"
    busy_timeout_ms: int = _DEFAULT_BUSY_TIMEOUT_MS


_DIGITS: Final = re.compile(r"[0-9]+")
_SYNCHRONOUS_MODES: Final[dict[str, Synchronous]] = {
    "FULL": "FULL",
    "NORMAL": "NORMAL",
    "OFF": "OFF",
}


def parse_sqlite_url(url: str) -> SQLiteSettings:
    """Parse a ``sqlite:`` URL (see the module docstring) or raise `UnsupportedURLError`."""
    scheme, _, rest = url.partition(":")
    if scheme.lower() != "sqlite" or not rest.startswith("//"):
        raise UnsupportedURLError(url, "expected sqlite:///relative/path or sqlite:////abs/path")
    parts = urlsplit(url)
    if parts.netloc:
        raise UnsupportedURLError(
            url, "a sqlite URL has no host: use sqlite:///relative/path or sqlite:////abs/path"
        )
    if parts.fragment or url.endswith("#"):
        raise UnsupportedURLError(url, "a sqlite URL has no #fragment")
    path = unquote(parts.path[1:])  # drop the "/" that separates the empty host
    if not path:
        raise UnsupportedURLError(url, "the database path is empty")
    if "\0" in path:
        raise UnsupportedURLError(url, "the database path contains a NUL byte")
    if path.endswith("/"):
        raise UnsupportedURLError(url, "the database path names a directory")

    synchronous: Synchronous = "FULL"
    busy_timeout_ms = _DEFAULT_BUSY_TIMEOUT_MS
    try:
        options = parse_qsl(parts.query, keep_blank_values=True, strict_parsing=bool(parts.query))
    except ValueError:
        raise UnsupportedURLError(url, "malformed query string") from None
    seen: set[str] = set()
    for option, value in options:
        if option in seen:
            raise UnsupportedURLError(url, f"option {option!r} is given more than once")
        seen.add(option)
        if option == "synchronous":
            mode = _SYNCHRONOUS_MODES.get(value.upper())
            if mode is None:
                raise UnsupportedURLError(
                    url, f"synchronous must be FULL, NORMAL or OFF, not {value!r}"
                )
            synchronous = mode
        elif option == "busy_timeout":
            if not _DIGITS.fullmatch(value) or int(value) > _MAX_BUSY_TIMEOUT_MS:
                raise UnsupportedURLError(
                    url,
                    f"busy_timeout must be a whole number of milliseconds "
                    f"(0..{_MAX_BUSY_TIMEOUT_MS}), not {value!r}",
                )
            busy_timeout_ms = int(value)
        else:
            raise UnsupportedURLError(
                url, f"unknown option {option!r} (known: synchronous, busy_timeout)"
            )
    return SQLiteSettings(path, synchronous, busy_timeout_ms)


# --- SQL ------------------------------------------------------------------------------

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

_KV_GET: Final = "SELECT content, revision, bound_crc FROM kv WHERE key = ?"
_KV_REVISION: Final = "SELECT revision FROM kv WHERE key = ?"
_KV_INSERT: Final = "INSERT INTO kv (key, revision, content, bound_crc) VALUES (?, 1, ?, ?)"
_KV_UPDATE: Final = "UPDATE kv SET revision = ?, content = ?, bound_crc = ? WHERE key = ?"
_KV_DELETE: Final = "DELETE FROM kv WHERE key = ?"
_KV_KEYS: Final = "SELECT key FROM kv WHERE key >= ? AND key < ? ORDER BY key"
# Keyset pages on the primary key: only the page's rows are visited. Each query has one
# lower bound: given two (the prefix and the cursor), SQLite seeks to one of them and
# filters by the other, so a page far into a prefix walked every key before it.
_KV_PAGE_UP: Final = "SELECT key FROM kv WHERE key >= ? AND key < ? ORDER BY key LIMIT ?"
_KV_PAGE_AFTER: Final = "SELECT key FROM kv WHERE key > ? AND key < ? ORDER BY key LIMIT ?"
_KV_PAGE_DOWN: Final = "SELECT key FROM kv WHERE key >= ? AND key < ? ORDER BY key DESC LIMIT ?"

_BLOB_INSERT: Final = (
    "INSERT INTO blobs (key, content, bound_crc) VALUES (?, ?, ?) ON CONFLICT (key) DO NOTHING"
)
_BLOB_SAME: Final = "SELECT content = ? FROM blobs WHERE key = ?"
_BLOB_GET: Final = "SELECT content, bound_crc FROM blobs WHERE key = ?"
_BLOB_DELETE: Final = "DELETE FROM blobs WHERE key = ?"
_BLOB_LIST: Final = "SELECT key FROM blobs WHERE key >= ? AND key < ? ORDER BY key"

_SEQ_BITS: Final = 32
MAX_SEQ: Final = (1 << _SEQ_BITS) - 1
_LOG_ID: Final = "SELECT id FROM ledger_logs WHERE name = ?"
_LOG_INSERT: Final = "INSERT INTO ledger_logs (name) VALUES (?)"
_LEDGER_TIP: Final = "SELECT max(key) FROM ledger_records WHERE key BETWEEN ? AND ?"
_LEDGER_INSERT: Final = "INSERT INTO ledger_records (key, content, bound_crc) VALUES (?, ?, ?)"
_LEDGER_READ: Final = (
    "SELECT key, content, bound_crc FROM ledger_records "
    "WHERE key BETWEEN ? AND ? ORDER BY key LIMIT ?"
)
_LEDGER_NAMES: Final = "SELECT name FROM ledger_logs WHERE name >= ? AND name < ? ORDER BY name"
_ATTACHMENT_INSERT: Final = "INSERT OR IGNORE INTO attachments (digest, content) VALUES (?, ?)"
_ATTACHMENT_GET: Final = "SELECT content FROM attachments WHERE digest = ?"
_ATTACHMENT_EXISTS: Final = "SELECT 1 FROM attachments WHERE digest = ?"
_REF_INSERT: Final = "INSERT OR IGNORE INTO attachment_refs (log_id, digest) VALUES (?, ?)"
_REFS_COMPLETE: Final = "SELECT value FROM flowledger_meta WHERE key = 'refs_complete'"
_MARK_REFS_COMPLETE: Final = (
    "INSERT OR REPLACE INTO flowledger_meta (key, value) VALUES ('refs_complete', '1')"
)
_LOG_DROP: Final = (
    "DELETE FROM ledger_records WHERE key BETWEEN ? AND ?",
    "DELETE FROM attachment_refs WHERE log_id = ?",
    "DELETE FROM ledger_logs WHERE id = ?",
)
# Keyset pages of unreferenced attachments; length() of a blob does not read its bytes.
_SWEEP_PAGE: Final = (
    "SELECT digest, length(content) FROM attachments a WHERE digest > ? AND NOT EXISTS "
    "(SELECT 1 FROM attachment_refs r WHERE r.digest = a.digest) ORDER BY digest LIMIT ?"
)
_ATTACHMENT_DELETE: Final = "DELETE FROM attachments WHERE digest = ?"
_RECORDS_USAGE: Final = (
    "SELECT count(*), total(length(content)) FROM ledger_records WHERE key BETWEEN ? AND ?"
)
# ``?1`` is a JSON array of the set's log ids.
_EXCLUSIVE_USAGE: Final = (
    "SELECT total(length(a.content)) FROM attachments a WHERE a.digest IN "
    "(SELECT digest FROM attachment_refs WHERE log_id IN (SELECT value FROM json_each(?1))) "
    "AND NOT EXISTS (SELECT 1 FROM attachment_refs r WHERE r.digest = a.digest "
    "AND r.log_id NOT IN (SELECT value FROM json_each(?1)))"
)

_AUTO_VACUUM_INCREMENTAL: Final = 2  # what PRAGMA auto_vacuum reports for INCREMENTAL
_VACUUM_PAGES: Final = 2048  # pages given back per write transaction

_LEASE_GET: Final = "SELECT epoch, holder, expires_at FROM leases WHERE name = ?"
_LEASE_INSERT: Final = "INSERT INTO leases (name, epoch, holder, expires_at) VALUES (?, 1, ?, ?)"
_LEASE_GRANT: Final = "UPDATE leases SET epoch = ?, holder = ?, expires_at = ? WHERE name = ?"
_LEASE_EXTEND: Final = "UPDATE leases SET expires_at = ? WHERE name = ?"
_LEASE_RELEASE: Final = (  # expires_at keeps the moment of release (`LeaseStatus.until`)
    "UPDATE leases SET holder = NULL, expires_at = ? WHERE name = ? AND epoch = ? AND holder = ?"
)


def _page_query(prefix: str, start: str, descending: bool) -> tuple[str, tuple[str, str]] | None:
    """The keyset page query and its bounds (see `_prefix_bounds`)."""
    bounds = _prefix_bounds(prefix)
    if bounds is None:
        return None
    low, high = bounds
    if descending:
        return _KV_PAGE_DOWN, (low, min(high, start) if start else high)
    if start >= low:
        return _KV_PAGE_AFTER, (start, high)
    return _KV_PAGE_UP, (low, high)


def _prefix_bounds(prefix: str) -> tuple[str, str] | None:
    """The half-open key range holding exactly the names that start with ``prefix``.

    Names are ASCII below 0x7f, so ``prefix + "\\x7f"`` bounds them; a prefix that
    is not ASCII matches no name at all.
    """
    if not isinstance(prefix, str):
        raise TypeError(f"prefix must be a str, not {type(prefix).__name__}")
    if not prefix.isascii():
        return None
    return prefix, prefix + "\x7f"


# --- the database thread ---------------------------------------------------------------


class _Database:
    """The connection and every operation on it. Used only from the worker thread."""

    def __init__(self, settings: SQLiteSettings, *, read_only: bool = False) -> None:
        self.settings = settings
        self.read_only = read_only
        self.path = ""
        self._conn: sqlite3.Connection | None = None
        self._log_ids: dict[str, int] = {}
        self._known_refs = KnownRefs()
        self._group_refs: list[tuple[int, bytes]] = []  # references of the open group
        self._identity: tuple[int, int] | None = None  # (device, inode) of the open file
        self._companions: tuple[str, ...] = ()  # the -wal and -shm files that must stay
        self.broken: StoreBrokenError | None = None

    @property
    def conn(self) -> sqlite3.Connection:
        if self._conn is None:
            raise StoreClosedError()
        return self._conn

    # lifecycle

    def open(self) -> None:
        path = os.path.abspath(self.settings.path)
        self.path = path
        parent = os.path.dirname(path)
        if self.read_only:
            self._conn = self._open_read_only(path)
            return
        if not os.path.isdir(parent):
            raise FileNotFoundError(
                errno.ENOENT, "the directory for the sqlite store does not exist", parent
            )
        if os.path.isdir(path):
            raise IsADirectoryError(errno.EISDIR, "the sqlite store path is a directory", path)
        if os.path.exists(path) and (
            not os.access(path, os.W_OK) or _read_only_file_system(parent)
        ):
            # SQLite would open it read-only without a word and fail at the first write.
            refused = sqlite3.OperationalError("attempt to write a readonly database")
            raise StoreOpenError(path, _open_failure(path, refused))
        timeout_ms = self.settings.busy_timeout_ms
        try:
            conn = sqlite3.connect(
                path, timeout=timeout_ms / 1000, isolation_level=None, check_same_thread=False
            )
        except sqlite3.OperationalError as exc:
            raise StoreOpenError(path, _open_failure(path, exc)) from exc
        try:
            conn.execute(f"PRAGMA busy_timeout = {timeout_ms}")
            # Only a file without tables takes it: the freed pages of a new file can then
            # be given back (`incremental_vacuum`); an older file needs `vacuum`.
            conn.execute("PRAGMA auto_vacuum = INCREMENTAL")
            self._enable_wal(conn, timeout_ms)
            conn.execute(f"PRAGMA synchronous = {self.settings.synchronous}")
            self._ensure_schema(conn)
            # From here on, `_Worker.call` waits for locks without blocking the event loop.
            conn.execute("PRAGMA busy_timeout = 0")
            # The schema check read the file, so WAL mode has created both companions;
            # they stay until the last connection closes, which cannot happen while ours
            # is open.
            info = os.stat(path)
            self._identity = (info.st_dev, info.st_ino)
            self._companions = tuple(
                path + suffix for suffix in ("-wal", "-shm") if os.path.exists(path + suffix)
            )
        except sqlite3.OperationalError as exc:
            conn.close()
            if _is_busy(exc):
                raise
            raise StoreOpenError(path, _open_failure(path, exc)) from exc
        except BaseException:
            conn.close()
            raise
        self._conn = conn

    def _open_read_only(self, path: str) -> sqlite3.Connection:
        """Open an existing database for reading only: nothing is created, migrated or
        written. A WAL database needs its shared-memory file, which SQLite cannot create
        in a read-only directory; then the file is opened *immutable* (read as it is on
        disk, without locks), which is what a read-only directory can hold anyway."""
        if not os.path.exists(path):
            raise StoreNotFoundError(path)
        if os.path.isdir(path):
            raise StoreOpenError(path, "the path is a directory, not a database file")
        timeout_ms = self.settings.busy_timeout_ms
        last: sqlite3.Error | None = None
        for mode in ("mode=ro", "mode=ro&immutable=1"):
            uri = f"file:{quote(path)}?{mode}"
            try:
                conn = sqlite3.connect(
                    uri,
                    uri=True,
                    timeout=timeout_ms / 1000,
                    isolation_level=None,
                    check_same_thread=False,
                )
            except sqlite3.Error as exc:
                last = exc
                continue
            try:
                conn.execute("PRAGMA busy_timeout = 0")
                version = self._check_version(conn)
            except sqlite3.OperationalError as exc:
                conn.close()
                if _is_busy(exc):
                    raise
                last = exc
                continue
            except sqlite3.DatabaseError as exc:  # e.g. "file is not a database"
                conn.close()
                raise StoreOpenError(path, f"not a flowledger database ({exc})") from exc
            except BaseException:
                conn.close()
                raise
            if version is None:
                conn.close()
                raise StoreOpenError(
                    path, "not a flowledger database (it has no flowledger schema)"
                )
            if version < SCHEMA_VERSION:
                conn.close()
                raise StoreOpenError(
                    path,
                    f"written by an older flowledger (schema version {version}); a command "
                    "that writes (such as `flowledger start`) upgrades it first",
                )
            return conn
        assert last is not None
        raise StoreOpenError(path, _open_failure(path, last)) from last

    def check_files(self) -> None:
        """Refuse to write (`StoreBrokenError`, sticky) once the files changed under us.

        SQLite cannot survive its database file being replaced, or its ``-wal`` or
        ``-shm`` file being deleted, while a connection is open: this connection would
        keep writing to the unlinked files while the next process to open the path
        starts afresh, without our last commits or our locks - so two owners could
        write at once and the database be corrupted. Nothing notices from within
        SQLite; this check is what can be detected from outside, before every write
        and at every lease renewal (which a live owner makes every ``ttl / 3``).
        """
        if self.broken is not None:
            raise self.broken
        if self._identity is None:
            return  # opened read-only: it never writes
        try:
            info = os.stat(self.path)
        except FileNotFoundError:
            problem = "the database file was deleted or moved away"
        else:
            problem = ""
            if (info.st_dev, info.st_ino) != self._identity:
                problem = "the database file was replaced by another file"
            for companion in self._companions:
                if not problem and not os.path.exists(companion):
                    suffix = companion[len(self.path) :]
                    problem = f"its {suffix} file was deleted"
        if problem:
            self.broken = StoreBrokenError(self.path, problem)
            raise self.broken

    @staticmethod
    def _enable_wal(conn: sqlite3.Connection, timeout_ms: int) -> None:
        # Leaving rollback-journal mode takes an exclusive lock without consulting
        # the busy handler, so processes opening a fresh file together retry here.
        deadline = time.monotonic() + timeout_ms / 1000
        pause = 0.001
        while True:
            try:
                mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
                break
            except sqlite3.OperationalError as exc:
                if "locked" not in str(exc) and "busy" not in str(exc):
                    raise
                if time.monotonic() >= deadline:
                    raise
                time.sleep(pause)
                pause = min(pause * 2, 0.05)
        if str(mode).lower() != "wal":
            raise StorageError(f"sqlite refused journal_mode=WAL (it stayed {mode!r})")

    def _ensure_schema(self, conn: sqlite3.Connection) -> None:
        if self._check_version(conn) == SCHEMA_VERSION:
            return  # the common case: no write lock needed to open
        conn.create_function("flowledger_crc32", 1, checksum, deterministic=True)
        conn.create_function("flowledger_rebind_kv", 4, _rebind_kv, deterministic=True)
        conn.create_function("flowledger_rebind_blob", 3, _rebind_blob, deterministic=True)
        conn.create_function("flowledger_rebind_record", 4, _rebind_record, deterministic=True)
        conn.execute("BEGIN IMMEDIATE")
        try:
            conn.execute(_CREATE_META)
            # Re-read under the write lock: another process may have migrated meanwhile.
            version = self._check_version(conn) or 0
            for number in range(version + 1, SCHEMA_VERSION + 1):
                for statement in _MIGRATIONS[number - 1]:
                    conn.execute(statement)
            conn.execute(_SET_VERSION, (str(SCHEMA_VERSION),))
            conn.execute("COMMIT")
        except BaseException:
            _rollback(conn)
            raise

    def _check_version(self, conn: sqlite3.Connection) -> int | None:
        """The stored schema version (None if absent); `SchemaVersionError` if unknown."""
        if conn.execute(_HAS_META).fetchone() is None:
            return None
        row = conn.execute(_GET_VERSION).fetchone()
        if row is None:
            return None
        raw = row[0]
        if not isinstance(raw, str) or not _DIGITS.fullmatch(raw):
            raise SchemaVersionError(self.path, raw, SCHEMA_VERSION)
        version = int(raw)
        # 0 was never written.
        if not 1 <= version <= SCHEMA_VERSION:
            raise SchemaVersionError(self.path, version, SCHEMA_VERSION)
        return version

    def close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()

    def run(self, fn: Callable[[sqlite3.Connection], _T]) -> _T:
        """Run ``fn`` on the raw connection (tests and diagnostics)."""
        return fn(self.conn)

    # KV

    def kv_get(self, key: str) -> Entry:
        row = self.conn.execute(_KV_GET, (key,)).fetchone()
        if row is None:
            raise KeyNotFoundError(key)
        place = kv_place(key, row[1])
        return Entry(verified(row[0], row[2], place, f"value of key {key!r}"), row[1])

    def kv_put(self, key: str, value: bytes, expected: int, fence: Fence | None) -> int:
        conn = self.conn
        self.check_files()
        conn.execute("BEGIN IMMEDIATE")
        try:
            self._check_fence(fence)
            row = conn.execute(_KV_REVISION, (key,)).fetchone()
            actual = 0 if row is None else row[0]
            if actual != expected:
                raise ConflictError(key, expected, actual)
            if actual == 0:
                conn.execute(_KV_INSERT, (key, value, bound_checksum(kv_place(key, 1), value)))
            else:
                crc = bound_checksum(kv_place(key, actual + 1), value)
                conn.execute(_KV_UPDATE, (actual + 1, value, crc, key))
            conn.execute("COMMIT")
        except BaseException:
            _rollback(conn)
            raise
        return actual + 1

    def kv_delete(self, key: str, fence: Fence | None) -> None:
        self._write_one(_KV_DELETE, (key,), fence)

    def kv_keys(self, low: str, high: str) -> list[str]:
        return [row[0] for row in self.conn.execute(_KV_KEYS, (low, high))]

    def kv_page(self, query: str, bounds: tuple[str, str], limit: int) -> list[str]:
        return [row[0] for row in self.conn.execute(query, (*bounds, limit))]

    # Blobs

    def blob_put(self, key: str, data: bytes, fence: Fence | None) -> None:
        conn = self.conn
        self.check_files()
        conn.execute("BEGIN IMMEDIATE")
        try:
            self._check_fence(fence)
            crc = bound_checksum(blob_place(key), data)
            if conn.execute(_BLOB_INSERT, (key, data, crc)).rowcount == 0:
                (same,) = conn.execute(_BLOB_SAME, (data, key)).fetchone()
                if not same:
                    raise BlobConflictError(key)
            conn.execute("COMMIT")
        except BaseException:
            _rollback(conn)
            raise

    def blob_get(self, key: str) -> bytes:
        row = self.conn.execute(_BLOB_GET, (key,)).fetchone()
        if row is None:
            raise BlobNotFoundError(key)
        return verified(row[0], row[1], blob_place(key), f"blob {key!r}")

    def blob_delete(self, key: str, fence: Fence | None) -> None:
        self._write_one(_BLOB_DELETE, (key,), fence)

    def blob_list(self, low: str, high: str) -> list[str]:
        return [row[0] for row in self.conn.execute(_BLOB_LIST, (low, high))]

    # Ledger

    def _log_id(self, name: str, *, fresh: bool = False) -> int | None:
        # Ids are assigned once and never reused (AUTOINCREMENT), so a cached id is either
        # right or, if another process dropped the log, points at no records: whoever
        # finds a cached log empty looks its id up again (``fresh``).
        if fresh:
            self._log_ids.pop(name, None)
        known = self._log_ids.get(name)
        if known is None:
            row = self.conn.execute(_LOG_ID, (name,)).fetchone()
            if row is not None:
                known = self._log_ids[name] = int(row[0])
        return known

    def _tip(self, log: int) -> int:
        base = log << _SEQ_BITS
        row = self.conn.execute(_LEDGER_TIP, (base, base | MAX_SEQ)).fetchone()
        return 0 if row is None or row[0] is None else int(row[0]) - base

    def ledger_append(self, append: _Append) -> int:
        """One append as its own transaction (the path of a lone writer)."""
        conn = self.conn
        self.check_files()
        conn.execute("BEGIN IMMEDIATE")
        try:
            tip, log, refs = self._append_rows(append)
            self._commit()
        except BaseException:
            _rollback(conn)
            self._log_ids.pop(append.name, None)  # a rolled-back insert assigned no id
            raise
        self._log_ids[append.name] = log
        self._known_refs.add(refs)
        return tip

    def _append_rows(self, append: _Append) -> tuple[int, int, list[tuple[int, bytes]]]:
        """Every check and row of one append, inside the caller's transaction: the fence,
        the compare on the tip, the attachments it names, the records, the attachments and
        the references. Returns the new tip, the log's id and the references inserted
        (neither cached yet: the transaction may still roll back). The one place of the
        per-append SQL, shared by a lone append and a member of a group."""
        conn = self.conn
        name, payloads, expected = append.name, append.payloads, append.expected
        self._check_fence(append.fence)
        log = self._log_id(name)
        actual = 0 if log is None else self._tip(log)
        if actual == 0 and log is not None:  # dropped (and re-created?) elsewhere
            log = self._log_id(name, fresh=True)
            actual = 0 if log is None else self._tip(log)
        if actual != expected:
            raise LedgerConflictError(name, expected, actual)
        if actual + len(payloads) > MAX_SEQ:
            raise StorageError(f"ledger {name!r} is full ({MAX_SEQ} records)")
        for digest in append.needed:  # named but not sent: must be stored already
            key = bytes.fromhex(digest)
            if (log is None or (log, key) not in self._known_refs) and (
                conn.execute(_ATTACHMENT_EXISTS, (key,)).fetchone() is None
            ):
                raise AttachmentNotFoundError(digest)
        if log is None:
            log = int(conn.execute(_LOG_INSERT, (name,)).lastrowid or 0)
        base = (log << _SEQ_BITS) + actual
        rows = [
            (base + i, p, bound_checksum(record_place(name, actual + i), p))
            for i, p in enumerate(payloads, 1)
        ]
        if len(rows) == 1:
            conn.execute(_LEDGER_INSERT, rows[0])
        else:
            conn.executemany(_LEDGER_INSERT, rows)
        if append.blobs:
            conn.executemany(
                _ATTACHMENT_INSERT,
                [(bytes.fromhex(d), data) for d, data in append.blobs.items()],
            )
        refs = [(log, bytes.fromhex(d)) for d in (*append.blobs, *append.needed)]
        refs = [ref for ref in refs if ref not in self._known_refs]
        if refs:
            conn.executemany(_REF_INSERT, refs)
        return actual + len(payloads), log, refs

    def begin_group(self, appends: Sequence[_Append]) -> list[int | BaseException]:
        """Open one transaction and run every append of ``appends`` in it, each inside
        its own savepoint: a member whose checks fail (a conflict, a fence) is rolled
        back to its savepoint and gets its exception; the others stay. The transaction
        is left open for `commit_group`. If the transaction itself is lost (SQLite rolls
        back the whole of it on some I/O errors), it raises and nothing is written."""
        conn = self.conn
        self.check_files()
        conn.execute("BEGIN IMMEDIATE")
        outcomes: list[int | BaseException] = []
        self._group_refs = []
        try:
            for append in appends:
                conn.execute("SAVEPOINT member")
                try:
                    tip, _log, refs = self._append_rows(append)
                except Exception as exc:
                    if not conn.in_transaction:
                        raise  # the whole transaction is gone, not just this member
                    conn.execute("ROLLBACK TO member")
                    conn.execute("RELEASE member")
                    outcomes.append(exc)
                else:
                    conn.execute("RELEASE member")
                    outcomes.append(tip)
                    self._group_refs.extend(refs)
        except BaseException:
            _rollback(conn)
            for append in appends:
                self._log_ids.pop(append.name, None)
            raise
        return outcomes

    def commit_group(self, appends: Sequence[_Append]) -> None:
        """Commit the transaction `begin_group` left open (one fsync with ``FULL``); on
        failure roll it back and raise: then no member of the group was written."""
        refs, self._group_refs = self._group_refs, []
        try:
            self._commit()
        except BaseException:
            _rollback(self.conn)
            for append in appends:
                self._log_ids.pop(append.name, None)  # ids read or assigned in it may be gone
            raise
        self._known_refs.add(refs)

    def _commit(self) -> None:
        self.conn.execute("COMMIT")

    def ledger_read(self, name: str, after: int, limit: int) -> list[Record]:
        if after >= MAX_SEQ:
            return []
        log = self._log_id(name)
        if log is None:
            return []
        base = log << _SEQ_BITS
        rows = self.conn.execute(_LEDGER_READ, (base + after + 1, base | MAX_SEQ, limit)).fetchall()
        if not rows and self._tip(log) == 0:  # dropped (and re-created?) elsewhere
            log = self._log_id(name, fresh=True)
            if log is None:
                return []
            base = log << _SEQ_BITS
            rows = self.conn.execute(
                _LEDGER_READ, (base + after + 1, base | MAX_SEQ, limit)
            ).fetchall()
        records = []
        for key, payload, crc in rows:
            seq = key - base
            what = f"record {seq} of log {name!r}"
            records.append(Record(seq, verified(payload, crc, record_place(name, seq), what)))
        return records

    def ledger_tip(self, name: str) -> int:
        log = self._log_id(name)
        tip = 0 if log is None else self._tip(log)
        if tip == 0 and log is not None:  # dropped (and re-created?) elsewhere
            log = self._log_id(name, fresh=True)
            tip = 0 if log is None else self._tip(log)
        return tip

    def ledger_names(self, low: str, high: str) -> list[str]:
        return [row[0] for row in self.conn.execute(_LEDGER_NAMES, (low, high))]

    def ledger_attachments(self, digests: list[str]) -> dict[str, bytes]:
        conn = self.conn
        found: dict[str, bytes] = {}
        for digest in digests:
            if digest in found:
                continue
            row = conn.execute(_ATTACHMENT_GET, (bytes.fromhex(digest),)).fetchone()
            if row is None:
                raise AttachmentNotFoundError(digest)
            found[digest] = row[0]
        return found

    def _refs_complete(self) -> bool:
        row = self.conn.execute(_REFS_COMPLETE).fetchone()
        return row is not None and row[0] == "1"

    def ledger_drop(self, names: list[str]) -> int:
        """Drop ``names`` in one transaction; return how many existed."""
        conn = self.conn
        self.check_files()
        conn.execute("BEGIN IMMEDIATE")
        dropped = 0
        try:
            for name in names:
                log = self._log_id(name, fresh=True)
                if log is None:
                    continue
                base = log << _SEQ_BITS
                records, refs, row = _LOG_DROP
                conn.execute(records, (base, base | MAX_SEQ))
                conn.execute(refs, (log,))
                conn.execute(row, (log,))
                dropped += 1
            conn.execute("COMMIT")
        except BaseException:
            _rollback(conn)
            raise
        finally:
            for name in names:
                self._log_ids.pop(name, None)
        return dropped

    def ledger_sweep_page(self, after: bytes, limit: int, dry_run: bool) -> list[tuple[bytes, int]]:
        """One page of the sweep, in one transaction: the unreferenced attachments with
        digests after ``after`` (at most ``limit``), deleted unless ``dry_run``. Under the
        write lock no append can add a reference between the check and the delete."""
        conn = self.conn
        if not dry_run:
            self.check_files()
        conn.execute("BEGIN" if dry_run else "BEGIN IMMEDIATE")
        try:
            if not self._refs_complete():
                raise RefsIncompleteError()
            rows = [(bytes(d), int(n)) for d, n in conn.execute(_SWEEP_PAGE, (after, limit))]
            if rows and not dry_run:
                conn.executemany(_ATTACHMENT_DELETE, [(d,) for d, _ in rows])
            conn.execute("COMMIT")
        except BaseException:
            _rollback(conn)
            raise
        return rows

    def ledger_usage(self, names: list[str]) -> LedgerUsage:
        conn = self.conn
        conn.execute("BEGIN")  # one snapshot for the three sums
        try:
            if not self._refs_complete():
                raise RefsIncompleteError()
            ids = [log for log in (self._log_id(n, fresh=True) for n in names) if log is not None]
            records = size = 0
            for log in ids:
                base = log << _SEQ_BITS
                count, total = conn.execute(_RECORDS_USAGE, (base, base | MAX_SEQ)).fetchone()
                records += int(count)
                size += int(total)
            (exclusive,) = conn.execute(_EXCLUSIVE_USAGE, (json.dumps(ids),)).fetchone()
            conn.execute("COMMIT")
        except BaseException:
            _rollback(conn)
            raise
        return LedgerUsage(records, size, int(exclusive))

    def ledger_add_refs(self, name: str, digests: list[str]) -> int:
        conn = self.conn
        self.check_files()
        conn.execute("BEGIN IMMEDIATE")
        try:
            log = self._log_id(name, fresh=True)
            stored = []
            if log is not None:
                for digest in dict.fromkeys(digests):
                    key = bytes.fromhex(digest)
                    if conn.execute(_ATTACHMENT_EXISTS, (key,)).fetchone() is not None:
                        stored.append((log, key))
                conn.executemany(_REF_INSERT, stored)
            conn.execute("COMMIT")
        except BaseException:
            _rollback(conn)
            raise
        return len(stored)

    def ledger_refs_complete(self) -> bool:
        return self._refs_complete()

    def ledger_mark_refs_complete(self) -> None:
        self._write_one(_MARK_REFS_COMPLETE, ())

    def incremental_vacuum(self) -> int:
        """Give up to `_VACUUM_PAGES` pages freed by a drop or sweep back to the file
        system (only a file with ``auto_vacuum=INCREMENTAL`` can; others keep them for
        reuse); return how many free pages are left to give back."""
        conn = self.conn
        if conn.execute("PRAGMA auto_vacuum").fetchone()[0] != _AUTO_VACUUM_INCREMENTAL:
            return 0
        self.check_files()
        # executescript steps the pragma to its end; execute would free a single page.
        conn.executescript(f"PRAGMA incremental_vacuum({_VACUUM_PAGES});")
        return int(conn.execute("PRAGMA freelist_count").fetchone()[0])

    def vacuum(self) -> None:
        conn = self.conn
        self.check_files()
        conn.execute("PRAGMA auto_vacuum = INCREMENTAL")  # takes effect with the VACUUM
        conn.execute("VACUUM")
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()

    # Leases

    def lease_acquire(self, name: str, holder: str, ttl: float) -> int:
        conn = self.conn
        self.check_files()
        conn.execute("BEGIN IMMEDIATE")
        try:
            now = time.time()  # read under the write lock: the wait for it may be long
            row = conn.execute(_LEASE_GET, (name,)).fetchone()
            if row is None:
                epoch = 1
                conn.execute(_LEASE_INSERT, (name, holder, now + ttl))
            else:
                epoch, current, expires_at = row
                if current is not None and expires_at > now:
                    raise LeaseHeldError(name, epoch)
                epoch += 1
                conn.execute(_LEASE_GRANT, (epoch, holder, now + ttl, name))
            conn.execute("COMMIT")
        except BaseException:
            _rollback(conn)
            raise
        return int(epoch)

    def lease_renew(self, name: str, epoch: int, holder: str, ttl: float) -> RenewStatus:
        conn = self.conn
        self.check_files()
        conn.execute("BEGIN IMMEDIATE")
        try:
            now = time.time()
            row = conn.execute(_LEASE_GET, (name,)).fetchone()
            status: RenewStatus
            if row is None or row[0] != epoch or row[1] != holder:
                status = "taken over"
            elif row[2] <= now:
                status = "expired"
            else:
                status = "renewed"
                conn.execute(_LEASE_EXTEND, (now + ttl, name))
            conn.execute("COMMIT")
        except BaseException:
            _rollback(conn)
            raise
        return status

    def lease_release(self, name: str, epoch: int, holder: str) -> None:
        if self.broken is not None:
            return  # writing is what must not happen now; the grant runs out by its TTL
        self._write_one(_LEASE_RELEASE, (time.time(), name, epoch, holder))

    def lease_status(self, name: str) -> LeaseStatus:
        row = self.conn.execute(_LEASE_GET, (name,)).fetchone()
        if row is None:
            return LeaseStatus(0, False, None)
        epoch, holder, expires_at = row
        held = holder is not None and expires_at > time.time()
        # 0.0: released by a version that did not record when
        until = datetime.fromtimestamp(expires_at, UTC) if expires_at > 0 else None
        return LeaseStatus(int(epoch), held, until)

    def _check_fence(self, fence: Fence | None) -> None:
        """Inside a write transaction (which holds the database's write lock until it
        ends, so no grant can change meanwhile): `FencedWriteError` unless ``fence``'s
        grant is current."""
        if fence is None:
            return
        row = self.conn.execute(_LEASE_GET, (fence.lease,)).fetchone()
        live = row is not None and row[1] is not None and row[2] > time.time()
        if row is None or row[0] != fence.epoch or not live:
            current = 0 if row is None else int(row[0])
            raise refused(FencedWriteError(fence.lease, fence.epoch, current, live))

    def _write_one(self, sql: str, params: tuple[object, ...], fence: Fence | None = None) -> None:
        conn = self.conn
        self.check_files()
        conn.execute("BEGIN IMMEDIATE")
        try:
            self._check_fence(fence)
            conn.execute(sql, params)
            conn.execute("COMMIT")
        except BaseException:
            _rollback(conn)
            raise


# The migration to version 3 (SQL functions over each stored row).


def _rebind_kv(key: str, revision: int, content: bytes, crc: int) -> int:
    return rebound(kv_place(key, revision), content, crc)


def _rebind_blob(key: str, content: bytes, crc: int) -> int:
    return rebound(blob_place(key), content, crc)


def _rebind_record(log: str | None, seq: int, content: bytes, crc: int) -> int:
    if log is None:
        return crc  # a record of no log: nothing can ever read it
    return rebound(record_place(log, seq), content, crc)


def _rollback(conn: sqlite3.Connection) -> None:
    if conn.in_transaction:
        conn.execute("ROLLBACK")


@dataclass(frozen=True, slots=True)
class _Append:
    """The validated arguments of one ledger append."""

    name: str
    payloads: list[bytes]
    expected: int
    blobs: dict[str, bytes]
    needed: list[str]  # digests the records name without sending them (`check_refs`)
    fence: Fence | None


# A lone append commits on the event loop's thread (no hand-off to the writer thread)
# once this many groups in a row held a single append; one group of two or more appends
# switches to committing on the writer thread.
_LONE_STREAK: Final = 4
_FIRST_PAUSE: Final = 0.0005
_MAX_PAUSE: Final = 0.02


@dataclass(eq=False, slots=True)
class _Job:
    """A call waiting in line: a ledger append (joins the next group) or any other call."""

    loop: asyncio.AbstractEventLoop
    future: asyncio.Future[Any]
    deadline: float  # time.monotonic() after which a wait for another process's lock fails
    append: _Append | None = None
    fn: Callable[..., Any] | None = None
    args: tuple[Any, ...] = ()


class _Worker:
    """Runs a store's database calls, one transaction at a time, and group-commits appends.

    A call other than a ledger append is a whole transaction (or one read) run on the
    caller's thread when the connection is free; it never spans an ``await``. SQLite's
    own busy handler is off (it would sleep inside the event loop); a call that finds
    the database locked by another connection is retried after an asynchronous pause,
    until the store's ``busy_timeout`` has passed. An uncontended call costs no thread
    hand-off: on this kind of machine waking a thread after an fsync cost more than the
    transaction itself.

    Ledger appends wait in line for one pass of the event loop, so that appends ready in
    the same pass (many runs in one process) form a *group*: one ``BEGIN IMMEDIATE``
    transaction in which each member's checks and rows (`_Database._append_rows`) run
    inside its own savepoint - a member that fails its checks is rolled back alone and
    raises its own error - and one ``COMMIT`` (one fsync with ``FULL``). That COMMIT runs
    on a writer thread while the event loop keeps running; appends that arrive meanwhile
    form the next group. Every member's await returns after the COMMIT that holds its
    records has returned (is durable), in the order of the line; if the COMMIT itself
    fails, every member of that group raises (the same `sqlite3.Error` class, saying the
    group's commit failed and nothing of it was written) and later groups go on. A lone
    writer commits on its own thread as before, without a hand-off (see `_LONE_STREAK`).
    """

    def __init__(self, db: _Database) -> None:
        self.db = db
        # The connection: one call or one group at a time. Stores may be shared by threads
        # with their own event loops; a group holds it from BEGIN until its COMMIT is done
        # (so it is released by the writer thread).
        self._lock = threading.Lock()
        self._mutex = threading.Lock()  # the line and the flags below
        self._queue: list[_Job] = []
        self._draining = False  # a drain is scheduled (or running) on some event loop
        self._committing = False  # a group's COMMIT is in flight on the writer thread
        self._lone = _LONE_STREAK  # groups in a row of a single append
        self._last_log = ""  # the log of the latest append
        self._pause = _FIRST_PAUSE
        self._writer: _Writer | None = None
        self._closed = False

    async def call(self, fn: Callable[..., _T], *args: Any) -> _T:
        deadline: float | None = None
        pause = _FIRST_PAUSE
        while True:
            if not self._lock.acquire(blocking=False):
                # A group is committing, or another thread's call runs: wait in line.
                return await self._wait_in_line(self._job(fn=fn, args=args))  # type: ignore[no-any-return]
            try:
                if self._closed:
                    raise StoreClosedError()
                try:
                    return fn(*args)
                except sqlite3.OperationalError as exc:
                    if not _is_busy(exc):
                        raise
            finally:
                self._lock.release()
            now = time.monotonic()
            if deadline is None:
                deadline = now + self.db.settings.busy_timeout_ms / 1000
            if now >= deadline:
                raise _locked()
            await asyncio.sleep(pause)
            pause = min(pause * 2, _MAX_PAUSE)

    async def append(self, append: _Append) -> int:
        """Append in the next group; return the new tip once its COMMIT is durable.

        A lone writer - the previous append went to the same log, recent groups held a
        single append, nothing waits in line - appends at once, as its own transaction,
        without waiting for the rest of the pass of the event loop."""
        lone = self._lone >= _LONE_STREAK and append.name == self._last_log
        self._last_log = append.name
        idle = not (self._queue or self._draining or self._committing)
        if lone and idle and self._lock.acquire(blocking=False):
            try:
                if self._closed:
                    raise StoreClosedError()
                return self.db.ledger_append(append)
            except sqlite3.OperationalError as exc:
                if not _is_busy(exc):
                    raise
            finally:
                self._lock.release()
        return await self._wait_in_line(self._job(append=append))  # type: ignore[no-any-return]

    def _job(self, **what: Any) -> _Job:
        loop = asyncio.get_running_loop()
        deadline = time.monotonic() + self.db.settings.busy_timeout_ms / 1000
        return _Job(loop, loop.create_future(), deadline, **what)

    async def _wait_in_line(self, job: _Job) -> Any:
        with self._mutex:
            if self._closed:
                raise StoreClosedError()
            self._queue.append(job)
            kick = not self._draining and not self._committing
            self._draining = self._draining or kick
        if kick:
            job.loop.call_soon(self._drain)  # after the rest of this pass of the loop
        try:
            return await job.future
        except asyncio.CancelledError:
            with self._mutex:
                if job in self._queue:  # not started: nothing of it is written
                    self._queue.remove(job)
            raise

    def _drain(self) -> None:
        """On an event loop's thread: run everything in line (unless a COMMIT is in
        flight: the writer thread calls this again when it is done)."""
        while True:
            with self._mutex:
                if self._committing or not self._queue:
                    self._draining = False
                    return
                jobs, self._queue = self._queue, []
            retry: list[_Job] = []
            self._lock.acquire()  # at most one statement of another thread's call
            handed = False
            try:
                handed = self._run(jobs, retry)
            finally:
                if not handed:
                    self._lock.release()
            if handed:
                return
            if retry:  # another process holds the write lock: try again after a pause
                with self._mutex:
                    self._queue[:0] = retry
                asyncio.get_running_loop().call_later(self._pause, self._drain)
                self._pause = min(self._pause * 2, _MAX_PAUSE)
                return
            self._pause = _FIRST_PAUSE

    def _run(self, jobs: list[_Job], retry: list[_Job]) -> bool:
        """Run ``jobs`` (holding the connection); True if a group's COMMIT was handed to
        the writer thread, which then owns the connection until it is done."""
        now = time.monotonic()
        answers: list[tuple[_Job, object]] = []
        appends: list[_Job] = []
        for job in jobs:
            if job.future.done():  # cancelled while waiting: never started
                continue
            if job.append is not None:
                appends.append(job)
                continue
            assert job.fn is not None
            try:
                answers.append((job, job.fn(*job.args)))
            except sqlite3.OperationalError as exc:
                if not _is_busy(exc):
                    answers.append((job, exc))
                elif now < job.deadline:
                    retry.append(job)
                else:
                    answers.append((job, _locked()))
            except Exception as exc:
                answers.append((job, exc))
        handed = False
        try:
            if appends:
                handed = self._run_appends(appends, retry, answers, now)
        finally:
            _answer(answers)
        return handed

    def _run_appends(
        self,
        jobs: list[_Job],
        retry: list[_Job],
        answers: list[tuple[_Job, object]],
        now: float,
    ) -> bool:
        self._lone = self._lone + 1 if len(jobs) == 1 else 0
        try:
            if len(jobs) == 1 and self._lone >= _LONE_STREAK:
                answers.append((jobs[0], self.db.ledger_append(jobs[0].append)))  # type: ignore[arg-type]
                return False
            outcomes = self.db.begin_group([job.append for job in jobs])  # type: ignore[misc]
        except sqlite3.OperationalError as exc:
            for job in jobs:
                if not _is_busy(exc):
                    answers.append((job, _group_failed(exc, len(jobs))))
                elif now < job.deadline:
                    retry.append(job)
                else:
                    answers.append((job, _locked()))
            return False
        except Exception as exc:
            answers.extend((job, _group_failed(exc, len(jobs))) for job in jobs)
            return False
        with self._mutex:
            self._committing = True
            self._draining = False  # from now on the writer thread starts the next drain
        if self._writer is None:
            self._writer = _Writer()
        self._writer.submit(lambda: self._commit(jobs, outcomes))
        return True

    def _commit(self, jobs: list[_Job], outcomes: list[int | BaseException]) -> None:
        """On the writer thread, holding the connection: commit the group, release the
        connection, answer the members, and start the next drain if appends are waiting."""
        answers: list[tuple[_Job, object]]
        try:
            self.db.commit_group([job.append for job in jobs])  # type: ignore[misc]
        except Exception as exc:
            answers = [
                (job, out if isinstance(out, BaseException) else _group_failed(exc, len(jobs)))
                for job, out in zip(jobs, outcomes, strict=True)
            ]
        else:
            answers = list(zip(jobs, outcomes, strict=True))
        finally:
            with self._mutex:
                self._committing = False
                kick = bool(self._queue) and not self._draining
                self._draining = self._draining or kick
                target = self._queue[0].loop if kick else None
            self._lock.release()
        _answer(answers)
        if target is not None:
            try:
                target.call_soon_threadsafe(self._drain)
            except RuntimeError:  # that loop is closed; whoever waits next kicks again
                with self._mutex:
                    self._draining = False

    def check_open(self) -> None:
        if self._closed:
            raise StoreClosedError()

    async def close(self) -> None:
        """Refuse new calls, let the calls already in line finish, close the connection."""
        with self._mutex:
            if self._closed:
                return
            self._closed = True
        while True:
            with self._mutex:
                busy = self._queue or self._committing or self._draining
            if not busy:
                break
            # Rare (a close racing its own calls), so a short poll rather than a signal
            # that every thread's loop would have to deliver.
            await asyncio.sleep(0.001)
        with self._lock:
            self.db.close()
        if self._writer is not None:
            self._writer.stop()


class _Writer:
    """The thread that runs group COMMITs (fsyncs) while the event loop keeps running."""

    def __init__(self) -> None:
        self._tasks: queue.SimpleQueue[Callable[[], None] | None] = queue.SimpleQueue()
        self._thread = threading.Thread(
            target=self._serve, name="flowledger-sqlite-commit", daemon=True
        )
        self._thread.start()

    def submit(self, task: Callable[[], None]) -> None:
        self._tasks.put(task)

    def _serve(self) -> None:
        while (task := self._tasks.get()) is not None:
            task()

    def stop(self) -> None:
        self._tasks.put(None)
        if threading.current_thread() is not self._thread:
            self._thread.join()


def _answer(answers: Iterable[tuple[_Job, object]]) -> None:
    """Settle each job's future on its own event loop: directly if that is this thread's
    loop, else with one thread-safe callback per loop."""
    try:
        here: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
    except RuntimeError:
        here = None
    elsewhere: dict[asyncio.AbstractEventLoop, list[tuple[_Job, object]]] = {}
    for job, outcome in answers:
        if job.loop is here:
            _settle(job, outcome)
        else:
            elsewhere.setdefault(job.loop, []).append((job, outcome))
    for loop, batch in elsewhere.items():
        with contextlib.suppress(RuntimeError):  # that loop is closed: nobody waits
            loop.call_soon_threadsafe(_settle_all, batch)


def _settle_all(answers: list[tuple[_Job, object]]) -> None:
    for job, outcome in answers:
        _settle(job, outcome)


def _settle(job: _Job, outcome: object) -> None:
    if job.future.done():
        return
    if isinstance(outcome, BaseException):
        job.future.set_exception(outcome)
    else:
        job.future.set_result(outcome)


def _locked() -> sqlite3.OperationalError:
    return sqlite3.OperationalError("database is locked (busy_timeout passed)")


def _group_failed(error: Exception, size: int) -> Exception:
    """What each member of a group is told when the group could not be written: the same
    error class (so callers that handle a database error still do), saying so."""
    what = (
        "this append was not written"
        if size == 1
        else f"the commit of a group of {size} ledger appends failed: none of them, "
        "this one included, was written"
    )
    failed: Exception
    if isinstance(error, sqlite3.Error):
        failed = type(error)(f"{error} ({what})")
        for attribute in ("sqlite_errorcode", "sqlite_errorname"):
            if hasattr(error, attribute):
                setattr(failed, attribute, getattr(error, attribute))
    elif size == 1:
        return error
    else:
        failed = StorageError(f"{error} ({what})")
    failed.__cause__ = error
    return failed


def _open_failure(path: str, exc: sqlite3.Error) -> str:
    """Why SQLite could not open (or first write) ``path``, in words: its own message
    (``unable to open database file``) does not say."""
    parent = os.path.dirname(path)
    text = str(exc)
    exists = os.path.exists(path)
    if _read_only_file_system(parent):
        return f"the file system holding {parent} is read-only ({text})"
    if exists and not os.access(path, os.R_OK):
        return f"permission denied: the file cannot be read ({text})"
    if exists and not os.access(path, os.W_OK):
        return f"the database file is read-only ({text})"
    if not os.access(parent, os.W_OK):
        if exists:
            return (
                f"the directory {parent} is read-only (SQLite keeps the -wal and -shm "
                f"files next to the database); commands that only read can open it ({text})"
            )
        return f"permission denied: the directory {parent} is not writable ({text})"
    if "readonly" in text:
        return f"the database is read-only ({text})"
    return text


def _read_only_file_system(directory: str) -> bool:
    try:
        return bool(os.statvfs(directory).f_flag & os.ST_RDONLY)
    except OSError:
        return False


def _is_busy(exc: sqlite3.OperationalError) -> bool:
    code = getattr(exc, "sqlite_errorcode", None)
    if code is not None:
        return code & 0xFF in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)
    text = str(exc)
    return "locked" in text or "busy" in text


# --- the async primitives -----------------------------------------------------------------


class SQLiteKV:
    def __init__(self, worker: _Worker) -> None:
        self._worker = worker
        self._db = worker.db

    async def get(self, key: str) -> Entry:
        validate_name(key)
        return await self._worker.call(self._db.kv_get, key)

    async def put(
        self, key: str, value: bytes, *, expected: int, fence: Fence | None = None
    ) -> int:
        validate_name(key)
        check_revision("expected", expected)
        check_bytes("value", value, MAX_KV_VALUE_BYTES)
        check_fence(fence)
        return await self._worker.call(self._db.kv_put, key, value, expected, fence)

    async def delete(self, key: str, *, fence: Fence | None = None) -> None:
        validate_name(key)
        check_fence(fence)
        await self._worker.call(self._db.kv_delete, key, fence)

    async def keys(self, prefix: str = "") -> list[str]:
        bounds = _prefix_bounds(prefix)
        if bounds is None:
            self._worker.check_open()
            return []
        return await self._worker.call(self._db.kv_keys, *bounds)

    async def keys_page(
        self, prefix: str = "", *, start: str = "", limit: int = 100, descending: bool = False
    ) -> list[str]:
        check_page(start, limit)
        page = _page_query(prefix, start, descending)
        if page is None:
            self._worker.check_open()
            return []
        return await self._worker.call(self._db.kv_page, *page, limit)


class SQLiteBlobs:
    def __init__(self, worker: _Worker) -> None:
        self._worker = worker
        self._db = worker.db

    async def put(self, key: str, data: bytes, *, fence: Fence | None = None) -> None:
        validate_name(key)
        check_bytes("blob", data, MAX_BLOB_BYTES)
        check_fence(fence)
        await self._worker.call(self._db.blob_put, key, data, fence)

    async def get(self, key: str) -> bytes:
        validate_name(key)
        return await self._worker.call(self._db.blob_get, key)

    async def delete(self, key: str, *, fence: Fence | None = None) -> None:
        validate_name(key)
        check_fence(fence)
        await self._worker.call(self._db.blob_delete, key, fence)

    async def list(self, prefix: str = "") -> list[str]:
        bounds = _prefix_bounds(prefix)
        if bounds is None:
            self._worker.check_open()
            return []
        return await self._worker.call(self._db.blob_list, *bounds)


class SQLiteLedger:
    def __init__(self, worker: _Worker) -> None:
        self._worker = worker
        self._db = worker.db

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
        return await self._worker.append(_Append(name, payloads, expected, blobs, needed, fence))

    async def read(self, name: str, *, after: int = 0, limit: int = 100) -> list[Record]:
        validate_name(name)
        check_read(after, limit)
        return await self._worker.call(self._db.ledger_read, name, min(after, _MAX_SQL_INT), limit)

    async def tip(self, name: str) -> int:
        validate_name(name)
        return await self._worker.call(self._db.ledger_tip, name)

    async def names(self, prefix: str = "") -> list[str]:
        bounds = _prefix_bounds(prefix)
        if bounds is None:
            self._worker.check_open()
            return []
        return await self._worker.call(self._db.ledger_names, *bounds)

    async def attachments(self, digests: Iterable[str]) -> dict[str, bytes]:
        wanted = check_digests(digests)
        return await self._worker.call(self._db.ledger_attachments, wanted)

    async def drop(self, names: Iterable[str]) -> int:
        wanted = check_names(names)
        self._worker.check_open()
        dropped = 0
        for start in range(0, len(wanted), _DROP_BATCH):
            batch = wanted[start : start + _DROP_BATCH]
            dropped += await self._worker.call(self._db.ledger_drop, batch)
        if dropped:
            await self._give_back()
        return dropped

    async def sweep(self, *, dry_run: bool = False) -> SweepReport:
        self._worker.check_open()
        count = size = 0
        after = b""
        while True:
            page = await self._worker.call(self._db.ledger_sweep_page, after, _SWEEP_BATCH, dry_run)
            count += len(page)
            size += sum(n for _, n in page)
            if len(page) < _SWEEP_BATCH:
                break
            after = page[-1][0]
        if count and not dry_run:
            await self._give_back()
        return SweepReport(count, size)

    async def _give_back(self) -> None:
        left = await self._worker.call(self._db.incremental_vacuum)
        while left:  # in chunks, so other writers get the lock in between
            before, left = left, await self._worker.call(self._db.incremental_vacuum)
            if left >= before:
                break  # other writers are freeing pages as fast: the next drop goes on

    async def usage(self, names: Iterable[str]) -> LedgerUsage:
        wanted = check_names(names)
        return await self._worker.call(self._db.ledger_usage, wanted)

    async def vacuum(self) -> None:
        await self._worker.call(self._db.vacuum)

    async def add_refs(self, name: str, digests: Iterable[str]) -> int:
        validate_name(name)
        wanted = check_digests(digests)
        return await self._worker.call(self._db.ledger_add_refs, name, wanted)

    async def refs_complete(self) -> bool:
        return await self._worker.call(self._db.ledger_refs_complete)

    async def mark_refs_complete(self) -> None:
        await self._worker.call(self._db.ledger_mark_refs_complete)


class SQLiteLeaseBackend:
    """`LeaseBackend` over the ``leases`` table, on the wall clock so processes agree."""

    def __init__(self, worker: _Worker) -> None:
        self._worker = worker
        self._db = worker.db

    async def try_acquire(self, name: str, holder: str, ttl: float) -> int:
        return await self._worker.call(self._db.lease_acquire, name, holder, ttl)

    async def renew(self, name: str, epoch: int, holder: str, ttl: float) -> RenewStatus:
        return await self._worker.call(self._db.lease_renew, name, epoch, holder, ttl)

    async def release(self, name: str, epoch: int, holder: str) -> None:
        await self._worker.call(self._db.lease_release, name, epoch, holder)

    async def status(self, name: str) -> LeaseStatus:
        return await self._worker.call(self._db.lease_status, name)


async def connect_sqlite(url: str, *, read_only: bool = False) -> Store:
    """Open (creating if needed) the SQLite store named by ``url``; with ``read_only``,
    open an existing one for reading only (`StoreNotFoundError` if there is none, and
    writes fail) - it works in a read-only directory or on a read-only file."""
    settings = parse_sqlite_url(url)
    worker = _Worker(_Database(settings, read_only=read_only))
    try:
        await worker.call(worker.db.open)
    except BaseException:
        await worker.close()
        raise
    return Store(
        url,
        SQLiteKV(worker),
        SQLiteBlobs(worker),
        SQLiteLedger(worker),
        Leaser(SQLiteLeaseBackend(worker)),
        read_only=read_only,
        _close_backend=worker.close,
    )
