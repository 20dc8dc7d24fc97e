"""The SQLite KV: the ``kv`` table, its operations, and `SQLiteKV`.

KV revisions count 1, 2, 3, ... per key and restart at 1 after a delete. A put is
one ``BEGIN IMMEDIATE`` transaction (the fence, the compare on the revision, the
write), and so is a whole ``write_many`` batch; listings are sorted by byte order (the
default ``BINARY`` collation; names are ASCII).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from ..checksum import bound_checksum, kv_place, verified
from ..errors import ConflictError, KeyNotFoundError
from ..fence import Fence, check_fence
from ..kv import Entry, KVPut, KVWrite, check_page, check_writes
from ..limits import MAX_KV_VALUE_BYTES, check_bytes, check_revision
from ..names import validate_name
from ..wakeups import LocalWakeups, pending_wakes
from .database import Database, prefix_bounds, rollback
from .worker import Worker

__all__ = ["SQLiteKV"]

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


def _page_query(prefix: str, start: str, descending: bool) -> tuple[str, tuple[str, str]] | None:
    """The keyset page query and its bounds (see `prefix_bounds`)."""
    bounds = prefix_bounds(prefix)
    if bounds is None:
        return None
    low, high = bounds
    if descending:
        return _KV_PAGE_DOWN, (low, min(high, start) if start else high)
    if start >= low:
        return _KV_PAGE_AFTER, (start, high)
    return _KV_PAGE_UP, (low, high)


def _get(db: Database, key: str) -> Entry:
    row = db.conn.execute(_KV_GET, (key,)).fetchone()
    if row is None:
        raise KeyNotFoundError(key)
    place = kv_place(key, row[1])
    return Entry(verified(row[0], row[2], place, f"value of key {key!r}"), row[1])


def _put(db: Database, key: str, value: bytes, expected: int, fence: Fence | None) -> int:
    conn = db.conn
    db.check_files()
    conn.execute("BEGIN IMMEDIATE")
    try:
        db.check_fence(fence)
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
        rollback(conn)
        raise
    return actual + 1


def _write_many(db: Database, writes: list[KVWrite], fence: Fence | None) -> list[int]:
    conn = db.conn
    db.check_files()
    conn.execute("BEGIN IMMEDIATE")
    try:
        db.check_fence(fence)
        revisions: list[int] = []
        for write in writes:
            if not isinstance(write, KVPut):
                conn.execute(_KV_DELETE, (write.key,))
                revisions.append(0)
                continue
            row = conn.execute(_KV_REVISION, (write.key,)).fetchone()
            actual = 0 if row is None else row[0]
            if actual != write.expected:
                raise ConflictError(write.key, write.expected, actual)
            crc = bound_checksum(kv_place(write.key, actual + 1), write.value)
            if actual == 0:
                conn.execute(_KV_INSERT, (write.key, write.value, crc))
            else:
                conn.execute(_KV_UPDATE, (actual + 1, write.value, crc, write.key))
            revisions.append(actual + 1)
        conn.execute("COMMIT")
    except BaseException:
        rollback(conn)  # a conflict or a refused fence: none of the batch lands
        raise
    return revisions


def _delete(db: Database, key: str, fence: Fence | None) -> None:
    db.write_one(_KV_DELETE, (key,), fence)


def _keys(db: Database, low: str, high: str) -> list[str]:
    return [row[0] for row in db.conn.execute(_KV_KEYS, (low, high))]


def _page(db: Database, query: str, bounds: tuple[str, str], limit: int) -> list[str]:
    return [row[0] for row in db.conn.execute(query, (*bounds, limit))]


class SQLiteKV:
    def __init__(self, worker: Worker, wakeups: LocalWakeups | None = None) -> None:
        self._worker = worker
        self._db = worker.db
        self._wakeups = wakeups  # woken after a write made inside `waking` commits

    async def get(self, key: str) -> Entry:
        validate_name(key)
        return await self._worker.call(_get, self._db, key)

    async def put(
        self, key: str, value: bytes, *, expected: int, fence: Fence | None = None
    ) -> int:
        validate_name(key)
        check_revision("expected", expected)
        check_bytes("value", value, MAX_KV_VALUE_BYTES)
        check_fence(fence)
        revision = await self._worker.call(_put, self._db, key, value, expected, fence)
        if self._wakeups is not None:
            self._wakeups.wake_committed(pending_wakes())
        return revision

    async def delete(self, key: str, *, fence: Fence | None = None) -> None:
        validate_name(key)
        check_fence(fence)
        await self._worker.call(_delete, self._db, key, fence)

    async def write_many(
        self, writes: Sequence[KVWrite], *, fence: Fence | None = None
    ) -> list[int]:
        batch = check_writes(writes)
        check_fence(fence)
        if not batch:
            self._worker.check_open()
            return []
        revisions = await self._worker.call(_write_many, self._db, batch, fence)
        if self._wakeups is not None:
            self._wakeups.wake_committed(pending_wakes())
        return revisions

    async def keys(self, prefix: str = "") -> list[str]:
        bounds = prefix_bounds(prefix)
        if bounds is None:
            self._worker.check_open()
            return []
        return await self._worker.call(_keys, self._db, *bounds)

    async def keys_page(
        self, prefix: str = "", *, start: str = "", limit: int = 100, descending: bool = False
    ) -> list[str]:
        check_page(start, limit)
        page = _page_query(prefix, start, descending)
        if page is None:
            self._worker.check_open()
            return []
        return await self._worker.call(_page, self._db, *page, limit)
