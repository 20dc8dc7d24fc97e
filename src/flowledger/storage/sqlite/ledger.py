"""The SQLite ledger: logs, records and attachments, and `SQLiteLedger`.

A log's records live under rowid ``log id << 32 | seq`` (see `schema`); sequence numbers
are 1-based and contiguous per log. An append - the fence, the compare on the tip, the
attachments it names, its records, its attachments (insert-if-absent) and its
references - is one transaction, alone or as a member of a group (see `worker`); every
check and row of it is `append_rows`.

Log ids are ``AUTOINCREMENT``: a dropped log's id is never reused, so an id cached by
another store points at no records, and a store that finds a cached log empty looks its
id up again. For the same reason a store remembers the references it committed
(`KnownRefs`) and does not insert them again, nor re-check the attachments they name.
References, drops, sweeps and space are in `collection`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Final, NamedTuple

from ..checksum import record_checksums, record_place, verified
from ..errors import AttachmentNotFoundError, LedgerConflictError, StorageError
from ..fence import Fence, check_fence
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
from ..limits import MAX_RECORDS_PER_APPEND
from ..names import validate_name
from . import collection
from .database import Database, prefix_bounds

if TYPE_CHECKING:
    from .worker import Worker

__all__ = [
    "ATTACHMENT_EXISTS",
    "MAX_SEQ",
    "REF_INSERT",
    "SEQ_BITS",
    "Append",
    "SQLiteLedger",
    "append_rows",
    "log_id",
    "tip_of",
]

# Sequence numbers never get near this; clamping keeps huge ``after`` values bindable.
_MAX_SQL_INT: Final = 2**63 - 1

SEQ_BITS: Final = 32
MAX_SEQ: Final = (1 << SEQ_BITS) - 1
_LOG_ID: Final = "SELECT id FROM ledger_logs WHERE name = ?"
_LOG_INSERT: Final = "INSERT INTO ledger_logs (name) VALUES (?)"
_LEDGER_TIP: Final = "SELECT max(key) FROM ledger_records WHERE key BETWEEN ? AND ?"
# The insert of an append's records in one statement, by how many (1..64; 0 unused): one
# statement of n rows costs less than ``executemany`` running one of a row n times.
_INSERT: Final = tuple(
    "INSERT INTO ledger_records (key, content, bound_crc) VALUES " + ", ".join(["(?, ?, ?)"] * n)
    for n in range(MAX_RECORDS_PER_APPEND + 1)
)
_LEDGER_READ: Final = (
    "SELECT key, content, bound_crc FROM ledger_records "
    "WHERE key BETWEEN ? AND ? ORDER BY key LIMIT ?"
)
_LEDGER_NAMES: Final = "SELECT name FROM ledger_logs WHERE name >= ? AND name < ? ORDER BY name"
_ATTACHMENT_INSERT: Final = "INSERT OR IGNORE INTO attachments (digest, content) VALUES (?, ?)"
_ATTACHMENT_GET: Final = "SELECT content FROM attachments WHERE digest = ?"
ATTACHMENT_EXISTS: Final = "SELECT 1 FROM attachments WHERE digest = ?"
REF_INSERT: Final = "INSERT OR IGNORE INTO attachment_refs (log_id, digest) VALUES (?, ?)"


class Append(NamedTuple):
    """The validated arguments of one ledger append (a tuple: the cheapest to build)."""

    name: str
    payloads: list[bytes]
    expected: int
    blobs: dict[str, bytes]
    needed: list[str]  # digests the records name without sending them (`check_refs`)
    fence: Fence | None


def log_id(db: Database, name: str, *, fresh: bool = False) -> int | None:
    # Ids are assigned once and never reused (AUTOINCREMENT), so a cached id is either
    # right or, if another process dropped the log, points at no records: whoever
    # finds a cached log empty looks its id up again (``fresh``).
    if fresh:
        db.log_ids.pop(name, None)
    known = db.log_ids.get(name)
    if known is None:
        row = db.cursor.execute(_LOG_ID, (name,)).fetchone()
        if row is not None:
            known = db.log_ids[name] = int(row[0])
    return known


def tip_of(db: Database, log: int) -> int:
    base = log << SEQ_BITS
    row = db.cursor.execute(_LEDGER_TIP, (base, base | MAX_SEQ)).fetchone()
    return 0 if row is None or row[0] is None else int(row[0]) - base


def _log_and_tip(db: Database, name: str) -> tuple[int | None, int]:
    """The id (None if there is no such log) and the tip of log ``name``."""
    log = log_id(db, name)
    tip = 0 if log is None else tip_of(db, log)
    if tip == 0 and log is not None:  # dropped (and re-created?) elsewhere
        log = log_id(db, name, fresh=True)
        tip = 0 if log is None else tip_of(db, log)
    return log, tip


def _record_params(name: str, log: int, after: int, payloads: list[bytes]) -> list[object]:
    """The parameters of `_INSERT`: key, content and checksum of each
    record, as records ``after + 1``, ... of ``log``."""
    key = (log << SEQ_BITS) + after
    params: list[object] = []
    for payload, crc in zip(payloads, record_checksums(name, after, payloads), strict=True):
        key += 1
        params += (key, payload, crc)
    return params


def append_rows(db: Database, append: Append) -> tuple[int, int, list[tuple[int, bytes]]]:
    """Every check and row of one append, inside the caller's transaction: the fence,
    the compare on the tip, the attachments it names, the records, the attachments and
    the references. Returns the new tip, the log's id and the references inserted
    (neither cached yet: the transaction may still roll back). The one place of the
    per-append SQL, shared by a lone append and a member of a group."""
    cursor = db.cursor
    name, payloads, expected = append.name, append.payloads, append.expected
    count = len(payloads)
    db.check_fence(append.fence)
    log, actual = _log_and_tip(db, name)
    if actual != expected:
        raise LedgerConflictError(name, expected, actual)
    if actual + count > MAX_SEQ:
        raise StorageError(f"ledger {name!r} is full ({MAX_SEQ} records)")
    for digest in append.needed:  # named but not sent: must be stored already
        key = bytes.fromhex(digest)
        if (log is None or (log, key) not in db.known_refs) and (
            cursor.execute(ATTACHMENT_EXISTS, (key,)).fetchone() is None
        ):
            raise AttachmentNotFoundError(digest)
    if log is None:
        log = int(cursor.execute(_LOG_INSERT, (name,)).lastrowid or 0)
    cursor.execute(_INSERT[count], _record_params(name, log, actual, payloads))
    refs: list[tuple[int, bytes]] = []
    if append.blobs:
        cursor.executemany(
            _ATTACHMENT_INSERT,
            [(bytes.fromhex(d), data) for d, data in append.blobs.items()],
        )
    if append.blobs or append.needed:
        refs = [(log, bytes.fromhex(d)) for d in (*append.blobs, *append.needed)]
        refs = [ref for ref in refs if ref not in db.known_refs]
        if refs:
            cursor.executemany(REF_INSERT, refs)
    return actual + count, log, refs


def _read(db: Database, name: str, after: int, limit: int) -> list[Record]:
    if after >= MAX_SEQ:
        return []
    log = log_id(db, name)
    if log is None:
        return []
    base = log << SEQ_BITS
    rows = db.conn.execute(_LEDGER_READ, (base + after + 1, base | MAX_SEQ, limit)).fetchall()
    if not rows and tip_of(db, log) == 0:  # dropped (and re-created?) elsewhere
        log = log_id(db, name, fresh=True)
        if log is None:
            return []
        base = log << SEQ_BITS
        rows = db.conn.execute(_LEDGER_READ, (base + after + 1, base | MAX_SEQ, limit)).fetchall()
    records = []
    for key, payload, crc in rows:
        seq = key - base
        what = f"record {seq} of log {name!r}"
        records.append(Record(seq, verified(payload, crc, record_place(name, seq), what)))
    return records


def _tip(db: Database, name: str) -> int:
    return _log_and_tip(db, name)[1]


def _names(db: Database, low: str, high: str) -> list[str]:
    return [row[0] for row in db.conn.execute(_LEDGER_NAMES, (low, high))]


def _attachments(db: Database, digests: list[str]) -> dict[str, bytes]:
    conn = db.conn
    found: dict[str, bytes] = {}
    for digest in digests:
        if digest in found:
            continue
        row = conn.execute(_ATTACHMENT_GET, (bytes.fromhex(digest),)).fetchone()
        if row is None:
            raise AttachmentNotFoundError(digest)
        found[digest] = row[0]
    return found


def _checked(
    name: str,
    records: Sequence[bytes],
    expected: int,
    attachments: Mapping[str, bytes] | None,
    refs: Iterable[str],
    fence: Fence | None,
) -> Append:
    """An append's arguments checked (before the worker sees them), as the worker takes
    them."""
    validate_name(name)
    payloads, blobs = check_append(records, expected, attachments)
    needed = check_refs(refs, blobs)
    check_fence(fence)
    return Append(name, payloads, expected, blobs, needed, fence)


class SQLiteLedger:
    def __init__(self, worker: Worker) -> None:
        self._worker = worker
        self._db = worker.db

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
        return await self._worker.append(
            _checked(name, records, expected, attachments, refs, fence)
        )

    def append_blocking(
        self,
        name: str,
        records: Sequence[bytes],
        *,
        expected: int,
        attachments: Mapping[str, bytes] | None = None,
        refs: Iterable[str] = (),
        fence: Fence | None = None,
    ) -> int:
        """`append` from synchronous code (`BlockingAppend`; `Worker.append_blocking`)."""
        return self._worker.append_blocking(
            _checked(name, records, expected, attachments, refs, fence)
        )

    async def read(self, name: str, *, after: int = 0, limit: int = 100) -> list[Record]:
        validate_name(name)
        check_read(after, limit)
        return await self._worker.call(_read, self._db, name, min(after, _MAX_SQL_INT), limit)

    async def tip(self, name: str) -> int:
        validate_name(name)
        return await self._worker.call(_tip, self._db, name)

    async def names(self, prefix: str = "") -> list[str]:
        bounds = prefix_bounds(prefix)
        if bounds is None:
            self._worker.check_open()
            return []
        return await self._worker.call(_names, self._db, *bounds)

    async def attachments(self, digests: Iterable[str]) -> dict[str, bytes]:
        wanted = check_digests(digests)
        return await self._worker.call(_attachments, self._db, wanted)

    async def drop(self, names: Iterable[str]) -> int:
        wanted = check_names(names)
        self._worker.check_open()
        dropped = done = 0
        while done < len(wanted):  # one bounded transaction at a time (`collection.drop`)
            existed, taken = await self._worker.call(collection.drop, self._db, wanted[done:])
            dropped += existed
            done += taken
        if dropped:
            await self._give_back()
        return dropped

    async def sweep(self, *, dry_run: bool = False) -> SweepReport:
        self._worker.check_open()
        count = size = 0
        after = b""
        while True:
            page = await self._worker.call(
                collection.sweep_page, self._db, after, collection.SWEEP_BATCH, dry_run
            )
            count += len(page)
            size += sum(n for _, n in page)
            if len(page) < collection.SWEEP_BATCH:
                break
            after = page[-1][0]
        if count and not dry_run:
            await self._give_back()
        return SweepReport(count, size)

    async def _give_back(self) -> None:
        left = await self._worker.call(collection.incremental_vacuum, self._db)
        while left:  # in chunks, so other writers get the lock in between
            before, left = left, await self._worker.call(collection.incremental_vacuum, self._db)
            if left >= before:
                break  # other writers are freeing pages as fast: the next drop goes on

    async def usage(self, names: Iterable[str]) -> LedgerUsage:
        wanted = check_names(names)
        return await self._worker.call(collection.usage, self._db, wanted)

    async def vacuum(self) -> None:
        await self._worker.call(collection.vacuum, self._db)

    async def add_refs(self, name: str, digests: Iterable[str]) -> int:
        validate_name(name)
        wanted = check_digests(digests)
        return await self._worker.call(collection.add_refs, self._db, name, wanted)

    async def refs_complete(self) -> bool:
        return await self._worker.call(collection.refs_complete, self._db)

    async def mark_refs_complete(self) -> None:
        await self._worker.call(collection.mark_refs_complete, self._db)
