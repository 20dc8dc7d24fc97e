"""The PostgreSQL KV: its operations and `PostgresKV`.

KV revisions count 1, 2, 3, ... per key and restart at 1 after a delete. A put (an
``INSERT ... ON CONFLICT DO NOTHING`` for a create, an ``UPDATE ... WHERE revision =
expected`` otherwise) and a delete are single statements (see `Database.statement`);
a lost acknowledgement is resolved by re-reading the key (see `database`). A
``write_many`` batch is one transaction: the fence check (which share-locks the lease
row until the commit), then each write's statement; a lost acknowledgement is resolved
by re-reading every key of the batch.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence

import psycopg

from ..checksum import bound_checksum, kv_place, verified
from ..errors import ConflictError, KeyNotFoundError
from ..fence import Fence, check_fence
from ..kv import Entry, KVPut, KVWrite, check_page, check_writes
from ..limits import MAX_KV_VALUE_BYTES, check_bytes, check_revision
from ..names import validate_name
from ..wakeups import pending_wakes
from . import queries
from .database import Database, fenced_result, prefix_bounds
from .queries import Conn

__all__ = ["PostgresKV"]


async def _get(db: Database, key: str) -> Entry:
    async def body(conn: Conn) -> Entry:
        row = await queries.one(conn, db.q.kv_get, (key,))
        if row is None:
            raise KeyNotFoundError(key)
        place = kv_place(key, row[1])
        return Entry(verified(row[0], row[2], place, f"value of key {key!r}"), row[1])

    return await db.read(body)


async def _put(db: Database, key: str, value: bytes, expected: int, fence: Fence | None) -> int:
    # A create writes revision 1, an update ``expected + 1``: the same place either way.
    crc = bound_checksum(kv_place(key, expected + 1), value)
    guard = (fence.lease, fence.epoch) if fence else ()
    if expected == 0:
        query = db.q.kv_create_fenced if fence else db.q.kv_create
        params: tuple[object, ...] = (*guard, key, value, crc)
    else:
        query = db.q.kv_update_fenced if fence else db.q.kv_update
        params = (*guard, value, crc, key, expected)

    async def resolve(lost: psycopg.OperationalError) -> int:
        row = await db.read(lambda conn: queries.one(conn, db.q.kv_get, (key,)))
        actual = 0 if row is None else int(row[1])
        if actual == expected + 1 and row is not None and row[0] == value:
            return actual
        if actual == expected:
            raise lost
        raise ConflictError(key, expected, actual)

    wake = pending_wakes()
    while True:
        row, retried = await db.statement(query, params, resolve, wake)
        if row is None:
            return expected + 1  # a lost acknowledgement, resolved: it had committed
        written = fenced_result(row, fence)
        if written is not None:
            return int(written)
        current = await db.read(lambda conn: queries.one(conn, db.q.kv_revision, (key,)))
        actual = 0 if current is None else int(current[0])
        if actual != expected:
            if retried:  # the first attempt may have landed after all
                with contextlib.suppress(psycopg.OperationalError):
                    return await resolve(psycopg.OperationalError("put retried"))
            raise ConflictError(key, expected, actual)
        # The key changed between the two statements (deleted, or re-created up to
        # ``expected``), or a serialization failure: try again.


async def _delete(db: Database, key: str, fence: Fence | None) -> None:
    query = db.q.kv_delete_fenced if fence else db.q.kv_delete
    params = (fence.lease, fence.epoch, key) if fence else (key,)

    async def resolve(lost: psycopg.OperationalError) -> None:
        if await db.read(lambda conn: queries.one(conn, db.q.kv_exists, (key,))) is not None:
            raise lost  # still there: the delete did not happen (yet)

    while True:
        row, _retried = await db.statement(query, params, resolve)
        if row is None or row:
            fenced_result(row or (None, None, None), fence)
            return
        # A serialization failure (a stricter default isolation): nothing happened.


async def _write_many(db: Database, writes: list[KVWrite], fence: Fence | None) -> list[int]:
    wake = pending_wakes()

    async def body(conn: Conn) -> list[int]:
        await db.check_fence(conn, fence)
        revisions: list[int] = []
        for write in writes:
            if not isinstance(write, KVPut):
                await queries.one(conn, db.q.kv_delete, (write.key,))
                revisions.append(0)
                continue
            crc = bound_checksum(kv_place(write.key, write.expected + 1), write.value)
            if write.expected == 0:
                row = await queries.one(conn, db.q.kv_create, (write.key, write.value, crc))
            else:
                params = (write.value, crc, write.key, write.expected)
                row = await queries.one(conn, db.q.kv_update, params)
            if row is None:  # the compare failed: raising rolls the whole batch back
                current = await queries.one(conn, db.q.kv_revision, (write.key,))
                actual = 0 if current is None else int(current[0])
                raise ConflictError(write.key, write.expected, actual)
            revisions.append(int(row[0]))
        await db.notify(conn, wake)  # delivered at the commit, and only with it
        return revisions

    async def resolve(lost: psycopg.OperationalError) -> list[int]:
        # Committed if and only if every put holds our bytes at its new revision and
        # every deleted key is absent; anything else leaves the outcome unknown.
        async def check(conn: Conn) -> list[int] | None:
            revisions: list[int] = []
            for write in writes:
                row = await queries.one(conn, db.q.kv_get, (write.key,))
                if isinstance(write, KVPut):
                    landed = row is not None and int(row[1]) == write.expected + 1
                    if not landed or row is None or bytes(row[0]) != write.value:
                        return None
                    revisions.append(write.expected + 1)
                elif row is not None:
                    return None
                else:
                    revisions.append(0)
            return revisions

        found = await db.read(check)
        if found is None:
            raise lost
        return found

    return await db.write(body, resolve)


async def _keys(db: Database, low: str, high: str) -> list[str]:
    return await db.read(lambda conn: queries.column(conn, db.q.kv_keys, (low, high)))


async def _page(db: Database, bounds: tuple[str, ...], limit: int, descending: bool) -> list[str]:
    query = db.q.kv_page_down if descending else db.q.kv_page_up
    return await db.read(lambda conn: queries.column(conn, query, (*bounds, limit)))


def page_bounds(prefix: str, start: str, descending: bool) -> tuple[str, ...] | None:
    """The parameters of a keyset page query (see `prefix_bounds`)."""
    bounds = prefix_bounds(prefix)
    if bounds is None:
        return None
    low, high = bounds
    if descending:
        return (low, min(high, start) if start else high)
    return (low, start, high)


class PostgresKV:
    def __init__(self, db: Database) -> None:
        self._db = db

    async def get(self, key: str) -> Entry:
        validate_name(key)
        return await _get(self._db, key)

    async def put(
        self, key: str, value: bytes, *, expected: int, fence: Fence | None = None
    ) -> int:
        validate_name(key)
        check_revision("expected", expected)
        check_bytes("value", value, MAX_KV_VALUE_BYTES)
        check_fence(fence)
        return await _put(self._db, key, bytes(value), expected, fence)

    async def delete(self, key: str, *, fence: Fence | None = None) -> None:
        validate_name(key)
        check_fence(fence)
        await _delete(self._db, key, fence)

    async def write_many(
        self, writes: Sequence[KVWrite], *, fence: Fence | None = None
    ) -> list[int]:
        batch = check_writes(writes)
        check_fence(fence)
        if not batch:
            self._db.check_open()
            return []
        return await _write_many(self._db, batch, fence)

    async def keys(self, prefix: str = "") -> list[str]:
        bounds = prefix_bounds(prefix)
        if bounds is None:
            self._db.check_open()
            return []
        return await _keys(self._db, *bounds)

    async def keys_page(
        self, prefix: str = "", *, start: str = "", limit: int = 100, descending: bool = False
    ) -> list[str]:
        check_page(start, limit)
        bounds = page_bounds(prefix, start, descending)
        if bounds is None:
            self._db.check_open()
            return []
        return await _page(self._db, bounds, limit, descending)
