"""PostgreSQL leases and `PostgresLeaseBackend`.

Leases live in one row per name ``{epoch, holder, expires_at}`` and use the
*database's* clock (``clock_timestamp()``), so machines whose clocks
disagree still agree on expiry. An acquire bumps the epoch only when the
name is free or its holder's TTL has passed (otherwise `LeaseHeldError` with
the holder's epoch); a renewal extends the grant only while epoch and holder
still match and it has not expired (``"renewed"``, ``"expired"`` or
``"taken over"``); a release clears the holder, keeps the epoch and records
when (in ``expires_at``).

A lost acknowledgement of an acquire succeeds if the row names this grant's holder, of a
release if the grant is no longer current; a failed renewal is retried by the renewal
loop until its proven expiry (see `lease`). Fenced writes read the same rows
(`Database.check_fence`).
"""

from __future__ import annotations

from datetime import UTC

import psycopg

from ..errors import LeaseHeldError, StorageError
from ..lease import LeaseStatus, RenewStatus
from . import queries
from .database import Database
from .queries import Conn

__all__ = ["PostgresLeaseBackend"]


async def _acquire(db: Database, name: str, holder: str, ttl: float) -> int:
    async def body(conn: Conn) -> int:
        row = await queries.one(conn, db.q.lease_acquire, (name, holder, ttl, ttl))
        if row is not None:
            return int(row[0])
        held = await queries.one(conn, db.q.lease_epoch, (name,))  # locked by the upsert
        if held is None:
            raise StorageError(f"lease row {name!r} vanished while locked")
        raise LeaseHeldError(name, int(held[0]))

    async def resolve(lost: psycopg.OperationalError) -> int:
        row = await db.read(lambda conn: queries.one(conn, db.q.lease_get, (name,)))
        if row is not None and row[1] == holder:
            return int(row[0])  # our grant committed (holders are random tokens)
        raise lost

    return await db.write(body, resolve)


async def _renew(db: Database, name: str, epoch: int, holder: str, ttl: float) -> RenewStatus:
    async def body(conn: Conn) -> RenewStatus:
        if await queries.one(conn, db.q.lease_extend, (ttl, name, epoch, holder)) is not None:
            return "renewed"
        row = await queries.one(conn, db.q.lease_get, (name,))
        if row is None or row[0] != epoch or row[1] != holder:
            return "taken over"
        return "expired"

    # No resolution: the renewal loop retries a failed renewal until its proven expiry.
    return await db.write(body)


async def _status(db: Database, name: str) -> LeaseStatus:
    row = await db.read(lambda conn: queries.one(conn, db.q.lease_status, (name,)))
    if row is None:
        return LeaseStatus(0, False, None)
    return LeaseStatus(int(row[0]), bool(row[1]), row[2].astimezone(UTC))


async def _release(db: Database, name: str, epoch: int, holder: str) -> None:
    async def body(conn: Conn) -> None:
        await conn.execute(db.q.lease_release, (name, epoch, holder))

    async def resolve(lost: psycopg.OperationalError) -> None:
        row = await db.read(lambda conn: queries.one(conn, db.q.lease_get, (name,)))
        if row is not None and row[0] == epoch and row[1] == holder:
            raise lost  # still ours: the release did not happen (yet)

    await db.write(body, resolve)


class PostgresLeaseBackend:
    """`LeaseBackend` over the ``leases`` table, on the database's clock so machines agree."""

    def __init__(self, db: Database) -> None:
        self._db = db

    async def try_acquire(self, name: str, holder: str, ttl: float) -> int:
        return await _acquire(self._db, name, holder, float(ttl))

    async def renew(self, name: str, epoch: int, holder: str, ttl: float) -> RenewStatus:
        return await _renew(self._db, name, epoch, holder, float(ttl))

    async def release(self, name: str, epoch: int, holder: str) -> None:
        await _release(self._db, name, epoch, holder)

    async def status(self, name: str) -> LeaseStatus:
        return await _status(self._db, name)
