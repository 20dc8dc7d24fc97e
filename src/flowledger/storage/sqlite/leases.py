"""SQLite leases: the ``leases`` table and `SQLiteLeaseBackend`.

Leases use the wall clock (`time.time`), so they work across processes on one machine
(not `flowledger.clock`: a lease is shared by every process on the database, so its
clock must be the one they share, and a test's ManualClock in one process must never
expire another's lease);
an acquire bumps the epoch only when the name is free or its holder's TTL has passed,
and a release clears the holder but keeps the epoch (and records when, in
``expires_at``). Every operation but the status is one ``BEGIN IMMEDIATE``
transaction, whose write lock is held while the clock is read. (Fenced writes read the
same rows: `Database.check_fence`.)
"""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Final

from ..errors import LeaseHeldError
from ..lease import LeaseStatus, RenewStatus
from .database import LEASE_GET, Database, rollback
from .worker import Worker

__all__ = ["SQLiteLeaseBackend"]

_LEASE_INSERT: Final = "INSERT INTO leases (name, epoch, holder, expires_at) VALUES (?, 1, ?, ?)"
_LEASE_GRANT: Final = "UPDATE leases SET epoch = ?, holder = ?, expires_at = ? WHERE name = ?"
_LEASE_EXTEND: Final = "UPDATE leases SET expires_at = ? WHERE name = ?"
_LEASE_RELEASE: Final = (  # expires_at keeps the moment of release (`LeaseStatus.until`)
    "UPDATE leases SET holder = NULL, expires_at = ? WHERE name = ? AND epoch = ? AND holder = ?"
)


def _acquire(db: Database, name: str, holder: str, ttl: float) -> int:
    conn = db.conn
    db.check_files()
    conn.execute("BEGIN IMMEDIATE")
    try:
        now = time.time()  # read under the write lock: the wait for it may be long
        row = conn.execute(LEASE_GET, (name,)).fetchone()
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
        rollback(conn)
        raise
    return int(epoch)


def _renew(db: Database, name: str, epoch: int, holder: str, ttl: float) -> RenewStatus:
    conn = db.conn
    db.check_files()
    conn.execute("BEGIN IMMEDIATE")
    try:
        now = time.time()
        row = conn.execute(LEASE_GET, (name,)).fetchone()
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
        rollback(conn)
        raise
    return status


def _release(db: Database, name: str, epoch: int, holder: str) -> None:
    if db.broken is not None:
        return  # writing is what must not happen now; the grant runs out by its TTL
    db.write_one(_LEASE_RELEASE, (time.time(), name, epoch, holder))


def _status(db: Database, name: str) -> LeaseStatus:
    row = db.conn.execute(LEASE_GET, (name,)).fetchone()
    if row is None:
        return LeaseStatus(0, False, None)
    epoch, holder, expires_at = row
    held = holder is not None and expires_at > time.time()
    # 0.0: released by a version that did not record when
    until = datetime.fromtimestamp(expires_at, UTC) if expires_at > 0 else None
    return LeaseStatus(int(epoch), held, until)


class SQLiteLeaseBackend:
    """`LeaseBackend` over the ``leases`` table, on the wall clock so processes agree."""

    def __init__(self, worker: Worker) -> None:
        self._worker = worker
        self._db = worker.db

    async def try_acquire(self, name: str, holder: str, ttl: float) -> int:
        return await self._worker.call(_acquire, self._db, name, holder, ttl)

    async def renew(self, name: str, epoch: int, holder: str, ttl: float) -> RenewStatus:
        return await self._worker.call(_renew, self._db, name, epoch, holder, ttl)

    async def release(self, name: str, epoch: int, holder: str) -> None:
        await self._worker.call(_release, self._db, name, epoch, holder)

    async def status(self, name: str) -> LeaseStatus:
        return await self._worker.call(_status, self._db, name)
