"""SQLite blobs: the ``blobs`` table, its operations, and `SQLiteBlobs`.

A put is one ``BEGIN IMMEDIATE`` transaction: insert, or compare with the bytes already
there (`BlobConflictError` if they differ).
"""

from __future__ import annotations

from typing import Final

from ..checksum import blob_place, bound_checksum, verified
from ..errors import BlobConflictError, BlobNotFoundError
from ..fence import Fence, check_fence
from ..limits import MAX_BLOB_BYTES, check_bytes
from ..names import validate_name
from .database import Database, prefix_bounds, rollback
from .worker import Worker

__all__ = ["SQLiteBlobs"]

_BLOB_INSERT: Final = (
    "INSERT INTO blobs (key, content, bound_crc) VALUES (?, ?, ?) ON CONFLICT (key) DO NOTHING"
)
_BLOB_SAME: Final = "SELECT content = ? FROM blobs WHERE key = ?"
_BLOB_GET: Final = "SELECT content, bound_crc FROM blobs WHERE key = ?"
_BLOB_DELETE: Final = "DELETE FROM blobs WHERE key = ?"
_BLOB_LIST: Final = "SELECT key FROM blobs WHERE key >= ? AND key < ? ORDER BY key"


def _put(db: Database, key: str, data: bytes, fence: Fence | None) -> None:
    conn = db.conn
    db.check_files()
    conn.execute("BEGIN IMMEDIATE")
    try:
        db.check_fence(fence)
        crc = bound_checksum(blob_place(key), data)
        if conn.execute(_BLOB_INSERT, (key, data, crc)).rowcount == 0:
            (same,) = conn.execute(_BLOB_SAME, (data, key)).fetchone()
            if not same:
                raise BlobConflictError(key)
        conn.execute("COMMIT")
    except BaseException:
        rollback(conn)
        raise


def _get(db: Database, key: str) -> bytes:
    row = db.conn.execute(_BLOB_GET, (key,)).fetchone()
    if row is None:
        raise BlobNotFoundError(key)
    return verified(row[0], row[1], blob_place(key), f"blob {key!r}")


def _delete(db: Database, key: str, fence: Fence | None) -> None:
    db.write_one(_BLOB_DELETE, (key,), fence)


def _list(db: Database, low: str, high: str) -> list[str]:
    return [row[0] for row in db.conn.execute(_BLOB_LIST, (low, high))]


class SQLiteBlobs:
    def __init__(self, worker: Worker) -> None:
        self._worker = worker
        self._db = worker.db

    async def put(self, key: str, data: bytes, *, fence: Fence | None = None) -> None:
        validate_name(key)
        check_bytes("blob", data, MAX_BLOB_BYTES)
        check_fence(fence)
        await self._worker.call(_put, self._db, key, data, fence)

    async def get(self, key: str) -> bytes:
        validate_name(key)
        return await self._worker.call(_get, self._db, key)

    async def delete(self, key: str, *, fence: Fence | None = None) -> None:
        validate_name(key)
        check_fence(fence)
        await self._worker.call(_delete, self._db, key, fence)

    async def list(self, prefix: str = "") -> list[str]:
        bounds = prefix_bounds(prefix)
        if bounds is None:
            self._worker.check_open()
            return []
        return await self._worker.call(_list, self._db, *bounds)
