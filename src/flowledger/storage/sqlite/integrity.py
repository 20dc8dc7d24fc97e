"""`SQLiteIntegrity`: confirming a miss without the index that missed, and
``PRAGMA integrity_check``.

Every lookup by name goes through an index: ``kv`` and ``blobs`` by their key's index,
a ledger log by the index of ``ledger_logs.name``. A flipped byte in an index page makes
the lookup miss a row the table still holds, and `PRAGMA integrity_check` is what
reports it ("row 2 missing from index ..."). `confirm_absent` checks the one table the
lookup used and its indexes (``PRAGMA integrity_check(<table>)``) and looks for the name
by a scan of the table itself (``NOT INDEXED``); for a log whose row is there without
records it also checks the records' table. So its cost is a scan of that table: callers
use it only where a miss contradicts another record. An SQLite error that says the file
is damaged (``SQLITE_CORRUPT``, ``SQLITE_NOTADB``) is a `CorruptDataError` too.

Both run on the store's connection like any read (`worker`), on the caller's thread.
"""

from __future__ import annotations

import re
import sqlite3
from typing import Final

from ..errors import CorruptDataError
from ..integrity import EngineCheck, Kind, check_kind, check_limit
from ..names import validate_name
from .database import Database
from .ledger import MAX_SEQ, SEQ_BITS
from .worker import Worker

__all__ = ["SQLiteIntegrity"]

# kind -> (table, column a lookup compares, how a message names it)
_TABLES: Final[dict[str, tuple[str, str, str]]] = {
    "kv": ("kv", "key", "key"),
    "blob": ("blobs", "key", "blob"),
    "log": ("ledger_logs", "name", "ledger log"),
}
# The codes SQLite gives a damaged file (the primary code is the low byte).
_DAMAGED: Final = frozenset({sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB})
_ANY_RECORD: Final = "SELECT 1 FROM ledger_records WHERE key BETWEEN ? AND ? LIMIT 1"
_INDEX_NAMED: Final = re.compile(r"(?:missing from|entries in|entry in) index (\S+)")
_TABLE_OF_INDEX: Final = "SELECT tbl_name FROM sqlite_schema WHERE type = 'index' AND name = ?"
# table -> (kind, every row's id and name by a scan, the lookup by name that uses the index)
_LOOKUPS: Final[dict[str, tuple[str, str, str]]] = {
    "kv": (
        "kv",
        "SELECT rowid, key FROM kv NOT INDEXED",
        "SELECT rowid FROM kv WHERE key = ?",
    ),
    "blobs": (
        "blob",
        "SELECT rowid, key FROM blobs NOT INDEXED",
        "SELECT rowid FROM blobs WHERE key = ?",
    ),
    "ledger_logs": (
        "log",
        "SELECT id, name FROM ledger_logs NOT INDEXED",
        "SELECT id FROM ledger_logs WHERE name = ?",
    ),
    "attachments": (
        "attachment",
        "SELECT rowid, digest FROM attachments NOT INDEXED",
        "SELECT rowid FROM attachments WHERE digest = ?",
    ),
}


def _problems(conn: sqlite3.Connection, table: str | None, limit: int) -> list[str]:
    """``PRAGMA integrity_check`` of one table and its indexes, or of everything."""
    target = f"({table})" if table is not None else f"({limit})"
    rows = conn.execute(f"PRAGMA integrity_check{target}").fetchall()
    found = [str(row[0]) for row in rows]
    return [] if found == ["ok"] else found[:limit]


def _damaged(exc: sqlite3.DatabaseError) -> bool:
    code = getattr(exc, "sqlite_errorcode", None)
    return isinstance(code, int) and code & 0xFF in _DAMAGED


def _confirm_absent(db: Database, kind: Kind, name: str) -> None:
    table, column, noun = _TABLES[kind]
    what = f"{noun} {name!r}"
    conn = db.conn
    try:
        problems = _problems(conn, table, 1)
        if problems:
            raise CorruptDataError(
                what,
                f"a lookup did not find it, and the table {table} or one of its indexes "
                f"is damaged ({problems[0]})",
            )
        found = conn.execute(
            f"SELECT rowid FROM {table} NOT INDEXED WHERE {column} = ?", (name,)
        ).fetchone()
        if found is None:
            return
        if kind == "log":
            base = int(found[0]) << SEQ_BITS
            if conn.execute(_ANY_RECORD, (base, base | MAX_SEQ)).fetchone() is None:
                records = _problems(conn, "ledger_records", 1)
                if not records:
                    return  # a log row without records, in an intact database: empty
                raise CorruptDataError(
                    what,
                    f"its records were not found, and the table ledger_records is "
                    f"damaged ({records[0]})",
                )
        raise CorruptDataError(what, f"the table {table} holds it, but its index missed it")
    except sqlite3.DatabaseError as exc:
        if not _damaged(exc):
            raise
        raise CorruptDataError(what, f"the database file is damaged ({exc})") from exc


def _check(db: Database, limit: int) -> EngineCheck:
    try:
        problems = _problems(db.conn, None, limit)
        rows = _rows(db.conn, problems, limit)
    except sqlite3.DatabaseError as exc:
        if not _damaged(exc):
            raise
        problems, rows = [f"the database file is damaged: {exc}"], []
    return EngineCheck("sqlite integrity_check", tuple(problems), rows=tuple(rows))


def _rows(conn: sqlite3.Connection, problems: list[str], limit: int) -> list[tuple[str, str]]:
    """The values the problems are about, for the indexes they name (``row N missing from
    index I``, ``wrong # of entries in index I``; N counts rows, it is no rowid): each row
    of the index's table, read by a scan, whose lookup through the index does not find
    that very row."""
    tables: list[str] = []
    for problem in problems:
        match = _INDEX_NAMED.search(problem)
        if match is None:
            continue
        table = conn.execute(_TABLE_OF_INDEX, (match[1],)).fetchone()
        if table is not None and str(table[0]) in _LOOKUPS and str(table[0]) not in tables:
            tables.append(str(table[0]))
    found: list[tuple[str, str]] = []
    for table in tables:
        kind, scan, lookup = _LOOKUPS[table]
        for rowid, name in conn.execute(scan).fetchall():
            hit = conn.execute(lookup, (name,)).fetchone()
            if hit is None or hit[0] != rowid:
                shown = bytes(name).hex() if isinstance(name, bytes) else str(name)
                found.append((kind, shown))
                if len(found) >= limit:
                    return found
    return found


class SQLiteIntegrity:
    def __init__(self, worker: Worker) -> None:
        self._worker = worker
        self._db = worker.db

    async def confirm_absent(self, kind: Kind, name: str) -> None:
        check_kind(kind)
        validate_name(name)
        await self._worker.call(_confirm_absent, self._db, kind, name)

    async def check(self, *, limit: int = 100) -> EngineCheck:
        return await self._worker.call(_check, self._db, check_limit(limit))
