"""A SQLite store's connection, and what every write on it does.

* Every call validates its arguments with the shared contract checks before
  touching the database, so a rejected call changes nothing.
* Every write is one ``BEGIN IMMEDIATE`` ... ``COMMIT`` transaction, so each
  call is atomic and isolated against every other connection and process: a
  KV compare-and-swap, a blob put (insert, or compare with what is there), and
  a ledger append - the tip check, all of its records and the insert-if-absent
  of all of its attachments commit together or not at all (appends made
  together are group-committed, see `worker`).
* A fenced write (see `fence`) reads its lease's row inside its ``BEGIN
  IMMEDIATE`` transaction, before anything else.
* Listings (KV keys, blob keys, log names) are sorted by byte order (the default
  ``BINARY`` collation; names are ASCII).
* Before every write (and every lease renewal) the store checks that its files are
  still the ones it opened (`Database.check_files`); once they are not, it refuses
  to write (`StoreBrokenError`).

Settings: ``journal_mode=WAL`` (readers never block the writer and vice versa),
``busy_timeout`` and ``synchronous`` from the URL (see `url`). Each `Store` owns one
connection. A new file is created with ``auto_vacuum=INCREMENTAL`` (see `collection`).
SQLite errors other than the contract's (for example ``database is locked`` after
``busy_timeout``, or a full disk) propagate as `sqlite3.Error` after the transaction is
rolled back.

Every KV value, blob and ledger record is stored with its CRC-32 bound to its
place (key and revision, blob key, log and sequence number) and checked on
every read: damaged bytes, or a row copied to another place, raise
`CorruptDataError` (naming the key, or the log and sequence number) instead of
being returned. Attachments are checked by their reader against their SHA-256.
"""

from __future__ import annotations

import errno
import os
import sqlite3
import time
from collections.abc import Callable
from typing import Final, TypeVar
from urllib.parse import quote

from ..errors import (
    FencedWriteError,
    StorageError,
    StoreBrokenError,
    StoreClosedError,
    StoreNotFoundError,
    StoreOpenError,
)
from ..fence import Fence, refused
from ..ledger import KnownRefs
from .folder import QuietFolder
from .schema import SCHEMA_VERSION, check_version, ensure_schema
from .url import SQLiteSettings

__all__ = [
    "LEASE_GET",
    "Database",
    "is_busy",
    "prefix_bounds",
    "rollback",
]

_T = TypeVar("_T")

LEASE_GET: Final = "SELECT epoch, holder, expires_at FROM leases WHERE name = ?"


class Database:
    """A store's connection: opening it, checking its files, fenced writes. Used by one
    call at a time (see `worker`); the operations live with their tables (`kv`, ...)."""

    def __init__(self, settings: SQLiteSettings, *, read_only: bool = False) -> None:
        self.settings = settings
        self.read_only = read_only
        self.path = ""
        self._conn: sqlite3.Connection | None = None
        self._cursor: sqlite3.Cursor | None = None
        # The ledger's caches (see `ledger`): log ids, and the references this store
        # committed (`KnownRefs`) or has in its open group.
        self.log_ids: dict[str, int] = {}
        self.known_refs = KnownRefs()
        self.group_refs: list[tuple[int, bytes]] = []
        self._identity: tuple[int, int] | None = None  # (device, inode) of the open file
        self._companions: tuple[str, ...] = ()  # the -wal and -shm files that must stay
        self._folder: QuietFolder | None = None  # skips those checks while nothing changed
        self.broken: StoreBrokenError | None = None

    @property
    def conn(self) -> sqlite3.Connection:
        if self._conn is None:
            raise StoreClosedError()
        return self._conn

    @property
    def cursor(self) -> sqlite3.Cursor:
        """A cursor of the connection, kept for the statements of the write paths run
        often (an append's): ``conn.execute`` makes a new cursor per statement (and
        registers it with the connection), a good part of a small statement's cost. The
        store runs one call at a time, each statement's rows are fetched before the next
        statement, so one cursor serves them all."""
        cursor = self._cursor
        if cursor is None:
            cursor = self._cursor = self.conn.cursor()
        return cursor

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
        if os.path.exists(path) and (not os.access(path, os.W_OK) or read_only_file_system(parent)):
            # SQLite would open it read-only without a word and fail at the first write.
            refused = sqlite3.OperationalError("attempt to write a readonly database")
            raise StoreOpenError(path, open_failure(path, refused))
        timeout_ms = self.settings.busy_timeout_ms
        try:
            conn = sqlite3.connect(
                path, timeout=timeout_ms / 1000, isolation_level=None, check_same_thread=False
            )
        except sqlite3.OperationalError as exc:
            raise StoreOpenError(path, open_failure(path, exc)) from exc
        try:
            conn.execute(f"PRAGMA busy_timeout = {timeout_ms}")
            # Only a file without tables takes it: the freed pages of a new file can then
            # be given back (`incremental_vacuum`); an older file needs `vacuum`.
            conn.execute("PRAGMA auto_vacuum = INCREMENTAL")
            self._enable_wal(conn, timeout_ms)
            conn.execute(f"PRAGMA synchronous = {self.settings.synchronous}")
            ensure_schema(conn, path)
            # From here on, `Worker.call` waits for locks without blocking the event loop.
            conn.execute("PRAGMA busy_timeout = 0")
            # The schema check read the file, so WAL mode has created both companions;
            # they stay until the last connection closes, which cannot happen while ours
            # is open.
            info = os.stat(path)
            self._identity = (info.st_dev, info.st_ino)
            self._companions = tuple(
                path + suffix for suffix in ("-wal", "-shm") if os.path.exists(path + suffix)
            )
            self._folder = QuietFolder(parent)
        except sqlite3.OperationalError as exc:
            conn.close()
            if is_busy(exc):
                raise
            raise StoreOpenError(path, open_failure(path, exc)) from exc
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
                version = check_version(conn, path)
            except sqlite3.OperationalError as exc:
                conn.close()
                if is_busy(exc):
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
        raise StoreOpenError(path, open_failure(path, last)) from last

    def check_files(self) -> None:
        """Refuse to write (`StoreBrokenError`, sticky) once the files changed under us.

        SQLite cannot survive its database file being replaced, or its ``-wal`` or
        ``-shm`` file being deleted, while a connection is open: this connection would
        keep writing to the unlinked files while the next process to open the path
        starts afresh, without our last commits or our locks - so two owners could
        write at once and the database be corrupted. Nothing notices from within
        SQLite; this check is what can be detected from outside, before every write
        and at every lease renewal (which a live owner makes every ``ttl / 3``). While
        the directory holding the files shows no change since the last check that
        passed, one ``stat`` of it stands for the three of the files (`QuietFolder`).
        """
        if self.broken is not None:
            raise self.broken
        if self._identity is None or self._folder is None:
            return  # opened read-only: it never writes
        if self._folder.unchanged():
            return
        mark = self._folder.read()
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
        self._folder.passed(mark)

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

    def close(self) -> None:
        conn, self._conn = self._conn, None
        self._cursor = None
        if conn is not None:
            conn.close()

    def run(self, fn: Callable[[sqlite3.Connection], _T]) -> _T:
        """Run ``fn`` on the raw connection (tests and diagnostics)."""
        return fn(self.conn)

    def commit(self) -> None:
        self.cursor.execute("COMMIT")

    def check_fence(self, fence: Fence | None) -> None:
        """Inside a write transaction (which holds the database's write lock until it
        ends, so no grant can change meanwhile): `FencedWriteError` unless ``fence``'s
        grant is current."""
        if fence is None:
            return
        row = self.conn.execute(LEASE_GET, (fence.lease,)).fetchone()
        live = row is not None and row[1] is not None and row[2] > time.time()
        if row is None or row[0] != fence.epoch or not live:
            current = 0 if row is None else int(row[0])
            raise refused(FencedWriteError(fence.lease, fence.epoch, current, live))

    def write_one(self, sql: str, params: tuple[object, ...], fence: Fence | None = None) -> None:
        conn = self.conn
        self.check_files()
        conn.execute("BEGIN IMMEDIATE")
        try:
            self.check_fence(fence)
            conn.execute(sql, params)
            conn.execute("COMMIT")
        except BaseException:
            rollback(conn)
            raise


def rollback(conn: sqlite3.Connection) -> None:
    if conn.in_transaction:
        conn.execute("ROLLBACK")


def open_failure(path: str, exc: sqlite3.Error) -> str:
    """Why SQLite could not open (or first write) ``path``, in words: its own message
    (``unable to open database file``) does not say."""
    parent = os.path.dirname(path)
    text = str(exc)
    exists = os.path.exists(path)
    if read_only_file_system(parent):
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


def read_only_file_system(directory: str) -> bool:
    try:
        return bool(os.statvfs(directory).f_flag & os.ST_RDONLY)
    except OSError:
        return False


def is_busy(exc: sqlite3.OperationalError) -> bool:
    code = getattr(exc, "sqlite_errorcode", None)
    if code is not None:
        return code & 0xFF in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)
    text = str(exc)
    return "locked" in text or "busy" in text


def prefix_bounds(prefix: str) -> tuple[str, str] | None:
    """The half-open key range holding exactly the names that start with ``prefix``.

    Names are ASCII below 0x7f, so ``prefix + "\\x7f"`` bounds them; a prefix that
    is not ASCII matches no name at all.
    """
    if not isinstance(prefix, str):
        raise TypeError(f"prefix must be a str, not {type(prefix).__name__}")
    if not prefix.isascii():
        return None
    return prefix, prefix + "\x7f"
