"""PostgreSQL references and collection: what the ledger's attachments are kept for.

See `ledger` and docs/storage.md. ``attachment_refs`` holds one row per log
and digest it refers to. An append, in its one statement, share-locks (``FOR KEY
SHARE``, in digest order) every stored attachment it sends or names in refs, claims its
log's row only if every ref was there to be locked (else it raises
`AttachmentNotFoundError`, having written nothing), and inserts records, attachments and
references. A sweep page locks unreferenced attachments ``FOR
UPDATE SKIP LOCKED`` (passing over those an append in flight holds; an append that comes
later waits for the sweep's commit and finds the row gone), then deletes, in a new
statement whose fresh snapshot sees every reference committed before the locks were
granted, those still unreferenced. A single ``DELETE ... WHERE NOT EXISTS`` would be
wrong: after waiting for an append's lock it re-checks the row but not the subquery.
A drop deletes the log rows first (waiting for appends holding them), then, in new
statements, their records and references. Space is reclaimed by autovacuum;
`PostgresLedger.vacuum` runs ``VACUUM (ANALYZE)`` on the ledger's tables. A drop, a sweep
page and ``add_refs`` are idempotent, so a lost acknowledgement is simply raised.
"""

from __future__ import annotations

from typing import Final

from ..errors import RefsIncompleteError
from ..ledger import LedgerUsage, SweepReport
from . import queries
from .database import Database
from .queries import Conn

__all__ = [
    "DROP_BATCH",
    "SWEEP_BATCH",
    "add_refs",
    "drop",
    "mark_refs_complete",
    "refs_complete",
    "sweep_count",
    "sweep_page",
    "usage",
    "vacuum",
]

# Logs per drop transaction, attachments per sweep transaction.
DROP_BATCH: Final = 64
SWEEP_BATCH: Final = 1000


async def drop(db: Database, names: list[str]) -> int:
    async def body(conn: Conn) -> int:
        ids = [int(i) for (i,) in await queries.rows(conn, db.q.logs_drop, (names,))]
        if ids:
            await conn.execute(db.q.records_drop, (ids,))
            await conn.execute(db.q.refs_drop, (ids,))
        return len(ids)

    # No resolution: a drop is idempotent, so a lost acknowledgement is retried.
    return await db.write(body)


async def sweep_page(db: Database, after: bytes, limit: int) -> tuple[bytes | None, list[int]]:
    """Lock and delete one page of unreferenced attachments after ``after``; return
    the last digest looked at (None when there were none) and the deleted sizes."""

    async def body(conn: Conn) -> tuple[bytes | None, list[int]]:
        complete = await queries.one(conn, db.q.refs_complete, ())
        if complete is None or not complete[0]:
            raise RefsIncompleteError()
        locked = [bytes(d) for (d,) in await queries.rows(conn, db.q.sweep_lock, (after, limit))]
        if not locked:
            return None, []
        sizes = await queries.rows(conn, db.q.sweep_delete, (locked,))
        return locked[-1], [int(n) for (n,) in sizes]

    return await db.write(body)


async def sweep_count(db: Database) -> SweepReport:
    row = await db.read(lambda conn: queries.one(conn, db.q.sweep_count, ()))
    assert row is not None
    if not row[0]:
        raise RefsIncompleteError()
    return SweepReport(int(row[1]), int(row[2]))


async def usage(db: Database, names: list[str]) -> LedgerUsage:
    row = await db.read(lambda conn: queries.one(conn, db.q.usage, (names,)))
    assert row is not None
    if not row[0]:
        raise RefsIncompleteError()
    return LedgerUsage(int(row[1]), int(row[2]), int(row[3]))


async def add_refs(db: Database, name: str, digests: list[str]) -> int:
    keys = list(dict.fromkeys(bytes.fromhex(d) for d in digests))

    async def body(conn: Conn) -> int:
        log = await queries.one(conn, db.q.log_lock, (name,))
        if log is None or not keys:
            return 0
        stored = [bytes(d) for (d,) in await queries.rows(conn, db.q.attachments_lock, (keys,))]
        await conn.execute(db.q.refs_insert, (log[0], stored))
        return len(stored)

    return await db.write(body)


async def refs_complete(db: Database) -> bool:
    row = await db.read(lambda conn: queries.one(conn, db.q.refs_complete, ()))
    return row is not None and bool(row[0])


async def mark_refs_complete(db: Database) -> None:
    async def body(conn: Conn) -> None:
        await conn.execute(db.q.mark_refs_complete)

    await db.write(body)


async def vacuum(db: Database) -> None:
    # VACUUM cannot run in a transaction: the pool's connections are autocommit.
    await db.read(lambda conn: conn.execute(db.q.vacuum))
