"""PostgreSQL blobs: their operations and `PostgresBlobs`.

A put is one transaction: insert if absent, else compare (by length and SHA-256, so a
big blob crosses the network once); a lost acknowledgement is resolved by comparing
again (see `database`).
"""

from __future__ import annotations

import hashlib

import psycopg

from ..checksum import blob_place, bound_checksum, verified
from ..errors import BlobConflictError, BlobNotFoundError
from ..fence import Fence, check_fence
from ..limits import MAX_BLOB_BYTES, check_bytes
from ..names import validate_name
from . import queries
from .database import Database, prefix_bounds
from .queries import Conn

__all__ = ["PostgresBlobs"]


async def _put(db: Database, key: str, data: bytes, fence: Fence | None) -> None:
    digest = hashlib.sha256(data).digest()
    crc = bound_checksum(blob_place(key), data)

    async def body(conn: Conn) -> None:
        await db.check_fence(conn, fence)
        while True:
            if await queries.one(conn, db.q.blob_insert, (key, data, crc)) is not None:
                return
            row = await queries.one(conn, db.q.blob_same, (len(data), digest, key))
            if row is None:
                continue  # deleted between the two statements: insert again
            if not row[0]:
                raise BlobConflictError(key)
            return

    async def resolve(lost: psycopg.OperationalError) -> None:
        row = await db.read(
            lambda conn: queries.one(conn, db.q.blob_same, (len(data), digest, key))
        )
        if row is None:
            raise lost
        if not row[0]:
            raise BlobConflictError(key)

    await db.write(body, resolve)


async def _get(db: Database, key: str) -> bytes:
    row = await db.read(lambda conn: queries.one(conn, db.q.blob_get, (key,)))
    if row is None:
        raise BlobNotFoundError(key)
    return verified(row[0], row[1], blob_place(key), f"blob {key!r}")


async def _delete(db: Database, key: str, fence: Fence | None) -> None:
    async def body(conn: Conn) -> None:
        await db.check_fence(conn, fence)
        await conn.execute(db.q.blob_delete, (key,))

    async def resolve(lost: psycopg.OperationalError) -> None:
        if await db.read(lambda conn: queries.one(conn, db.q.blob_exists, (key,))) is not None:
            raise lost  # still there: the delete did not happen (yet)

    await db.write(body, resolve)


async def _list(db: Database, low: str, high: str) -> list[str]:
    return await db.read(lambda conn: queries.column(conn, db.q.blob_list, (low, high)))


class PostgresBlobs:
    def __init__(self, db: Database) -> None:
        self._db = db

    async def put(self, key: str, data: bytes, *, fence: Fence | None = None) -> None:
        validate_name(key)
        check_bytes("blob", data, MAX_BLOB_BYTES)
        check_fence(fence)
        await _put(self._db, key, bytes(data), fence)

    async def get(self, key: str) -> bytes:
        validate_name(key)
        return await _get(self._db, key)

    async def delete(self, key: str, *, fence: Fence | None = None) -> None:
        validate_name(key)
        check_fence(fence)
        await _delete(self._db, key, fence)

    async def list(self, prefix: str = "") -> list[str]:
        bounds = prefix_bounds(prefix)
        if bounds is None:
            self._db.check_open()
            return []
        return await _list(self._db, *bounds)
