"""The PostgreSQL ledger: appends, reads, tips and attachments, and `PostgresLedger`.

Ledger sequence numbers are 1-based and contiguous per log; a log has a row in
``ledger_logs`` whose ``tip`` is its last sequence number and whose row lock serialises
the log's appenders. An append claims the tip, then inserts its records and (if absent)
its attachments and references, all or nothing, in one statement (see
`Database.statement`) that first share-locks the stored attachments it refers to and
claims the tip only if all of its refs were there to lock (see `collection`). A lost
acknowledgement is resolved by re-reading the records (see `database`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Mapping, Sequence
from typing import Final

import psycopg

from ..checksum import record_checksums, record_place, verified
from ..errors import AttachmentNotFoundError, FencedWriteError, LedgerConflictError
from ..fence import Fence, check_fence, refused
from ..ledger import (
    LedgerUsage,
    Record,
    SweepReport,
    check_append,
    check_digests,
    check_names,
    check_read,
    check_refs,
)
from ..names import validate_name
from . import collection, queries
from .arrays import ByteaArray, IntegerArray
from .database import Database, prefix_bounds
from .queries import Conn

__all__ = ["PostgresLedger"]

# Sequence numbers never get near this; clamping keeps huge ``after`` values bindable.
_MAX_BIGINT: Final = 2**63 - 1


async def _append(
    db: Database,
    name: str,
    payloads: list[bytes],
    expected: int,
    blobs: dict[str, bytes],
    needed: list[str],
    fence: Fence | None,
) -> int:
    tip = expected + len(payloads)
    crcs = record_checksums(name, expected, payloads)
    digests = [bytes.fromhex(d) for d in blobs]
    datas = list(blobs.values())
    if expected == 0:
        query = db.q.append_create_fenced if fence else db.q.append_create
        claim: tuple[object, ...] = (name, tip)
    else:
        query = db.q.append_advance_fenced if fence else db.q.append_advance
        claim = (tip, name, expected)
    guard = (fence.lease, fence.epoch) if fence else ()
    refs = [bytes.fromhex(d) for d in needed]
    referred = ByteaArray(sorted(digests + refs))
    held = (referred, ByteaArray(refs))
    arrays = (ByteaArray(payloads), IntegerArray(crcs), referred, ByteaArray(digests))
    params = (*guard, *held, *claim, len(refs), expected, *arrays, ByteaArray(datas))

    async def resolve(lost: psycopg.OperationalError) -> int:
        async def reread(conn: Conn) -> tuple[list[bytes], int, int]:
            rows = await queries.rows(conn, db.q.ledger_read, (name, expected, len(payloads)))
            count = await queries.one(conn, db.q.attachments_count, (digests,))
            current = await queries.one(conn, db.q.ledger_tip, (name,))
            return (
                [payload for _seq, payload, _crc in rows],
                0 if count is None else int(count[0]),
                0 if current is None else int(current[0]),
            )

        found, attached, actual = await db.read(reread)
        if found == payloads and attached == len(digests):
            return tip
        if not found:
            raise lost
        raise LedgerConflictError(name, expected, actual)

    while True:
        row, retried = await db.statement(query, params, resolve)
        if row is None:
            return tip  # a lost acknowledgement, resolved: it had committed
        claimed, refs_held, epoch, live = row or (None, None, fence and fence.epoch, True)
        if fence is not None and (epoch != fence.epoch or not live):
            current = 0 if epoch is None else int(epoch)
            raise refused(FencedWriteError(fence.lease, fence.epoch, current, bool(live)))
        if claimed is not None:
            return tip
        actual = await _tip(db, name)
        if actual != expected:
            if retried:  # the first attempt may have landed after all
                with contextlib.suppress(psycopg.OperationalError):
                    return await resolve(psycopg.OperationalError("append retried"))
            raise LedgerConflictError(name, expected, actual)
        if refs_held is not None and refs_held < len(refs):
            # A ref is not stored (or a sweep deleted it while this waited for its lock).
            stored = await db.read(lambda conn: queries.rows(conn, db.q.attachments_in, (refs,)))
            present = {bytes(d).hex() for (d,) in stored}
            missing = next((d for d in needed if d not in present), None)
            if missing is not None:
                raise AttachmentNotFoundError(missing)
            # Stored again since (another writer re-sent it): claim again.
            continue
        # The tip is back where we expected (a claim that raced a creator that rolled
        # back): claim again.


async def _read(db: Database, name: str, after: int, limit: int) -> list[Record]:
    rows = await db.read(lambda conn: queries.rows(conn, db.q.ledger_read, (name, after, limit)))
    return [
        Record(
            int(seq),
            verified(payload, crc, record_place(name, seq), f"record {seq} of log {name!r}"),
        )
        for seq, payload, crc in rows
    ]


async def _tip(db: Database, name: str) -> int:
    row = await db.read(lambda conn: queries.one(conn, db.q.ledger_tip, (name,)))
    return 0 if row is None else int(row[0])


async def _names(db: Database, low: str, high: str) -> list[str]:
    return await db.read(lambda conn: queries.column(conn, db.q.ledger_names, (low, high)))


async def _attachments(db: Database, digests: list[str]) -> dict[str, bytes]:
    wanted = list(dict.fromkeys(digests))
    if not wanted:
        db.check_open()
        return {}
    keys = [bytes.fromhex(d) for d in wanted]
    rows = await db.read(lambda conn: queries.rows(conn, db.q.attachments_get, (keys,)))
    by_digest = {bytes(digest).hex(): data for digest, data in rows}
    found: dict[str, bytes] = {}
    for digest in wanted:
        data = by_digest.get(digest)
        if data is None:
            raise AttachmentNotFoundError(digest)
        found[digest] = data
    return found


class PostgresLedger:
    def __init__(self, db: Database) -> None:
        self._db = db

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
        if expected + len(payloads) > _MAX_BIGINT:
            # No log ever gets there (and the new tip would not fit in a bigint).
            raise LedgerConflictError(name, expected, await _tip(self._db, name))
        return await _append(self._db, name, payloads, expected, blobs, needed, fence)

    async def read(self, name: str, *, after: int = 0, limit: int = 100) -> list[Record]:
        validate_name(name)
        check_read(after, limit)
        return await _read(self._db, name, min(after, _MAX_BIGINT), limit)

    async def tip(self, name: str) -> int:
        validate_name(name)
        return await _tip(self._db, name)

    async def names(self, prefix: str = "") -> list[str]:
        bounds = prefix_bounds(prefix)
        if bounds is None:
            self._db.check_open()
            return []
        return await _names(self._db, *bounds)

    async def attachments(self, digests: Iterable[str]) -> dict[str, bytes]:
        wanted = check_digests(digests)
        return await _attachments(self._db, wanted)

    async def drop(self, names: Iterable[str]) -> int:
        wanted = check_names(names)
        self._db.check_open()
        dropped = 0
        for start in range(0, len(wanted), collection.DROP_BATCH):
            dropped += await collection.drop(
                self._db, wanted[start : start + collection.DROP_BATCH]
            )
        return dropped

    async def sweep(self, *, dry_run: bool = False) -> SweepReport:
        if dry_run:
            return await collection.sweep_count(self._db)
        count = size = 0
        after: bytes | None = b""
        while after is not None:
            after, sizes = await collection.sweep_page(self._db, after, collection.SWEEP_BATCH)
            count += len(sizes)
            size += sum(sizes)
        return SweepReport(count, size)

    async def usage(self, names: Iterable[str]) -> LedgerUsage:
        wanted = check_names(names)
        return await collection.usage(self._db, wanted)

    async def vacuum(self) -> None:
        await collection.vacuum(self._db)

    async def add_refs(self, name: str, digests: Iterable[str]) -> int:
        validate_name(name)
        wanted = check_digests(digests)
        return await collection.add_refs(self._db, name, wanted)

    async def refs_complete(self) -> bool:
        return await collection.refs_complete(self._db)

    async def mark_refs_complete(self) -> None:
        await collection.mark_refs_complete(self._db)
