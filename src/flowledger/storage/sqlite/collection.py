"""SQLite references and collection: what the ledger's attachments are kept for.

``attachment_refs`` holds one row per log and digest it refers to (see docs/storage.md).
An append checks its refs and inserts its references inside its ``BEGIN IMMEDIATE``
transaction (`ledger.append_rows`); a sweep selects a page of attachments without
references and deletes them inside another, so the database's single write lock
serialises every sweep page with every append: an append either committed its reference
first (kept) or finds the attachment gone (`AttachmentNotFoundError`, nothing written).
A drop deletes a log's records, references and row in one transaction.

A new file is created with ``auto_vacuum=INCREMENTAL`` and drops and sweeps run
``incremental_vacuum``; an older file needs `SQLiteLedger.vacuum` (a full ``VACUUM``) to
shrink.
"""

from __future__ import annotations

import json
from typing import Final

from ..errors import RefsIncompleteError
from ..ledger import LedgerUsage
from . import ledger
from .database import Database, rollback

__all__ = [
    "DROP_BATCH",
    "SWEEP_BATCH",
    "add_refs",
    "drop",
    "incremental_vacuum",
    "mark_refs_complete",
    "refs_complete",
    "sweep_page",
    "usage",
    "vacuum",
]

# What one drop transaction deletes at most - up to `DROP_BATCH` logs, and no further log
# once `DROP_RECORDS` records went - and attachments per sweep transaction: each holds the
# write lock, so other writers wait at most one batch. Bounded by records, not logs only:
# a prune drops hundreds of small logs (each transaction is an fsync), a long run's log
# alone may be many thousand records.
DROP_BATCH: Final = 256
DROP_RECORDS: Final = 4096
SWEEP_BATCH: Final = 500

_REFS_COMPLETE: Final = "SELECT value FROM flowledger_meta WHERE key = 'refs_complete'"
_MARK_REFS_COMPLETE: Final = (
    "INSERT OR REPLACE INTO flowledger_meta (key, value) VALUES ('refs_complete', '1')"
)
_LOG_DROP: Final = (
    "DELETE FROM ledger_records WHERE key BETWEEN ? AND ?",
    "DELETE FROM attachment_refs WHERE log_id = ?",
    "DELETE FROM ledger_logs WHERE id = ?",
)
# Keyset pages of unreferenced attachments; length() of a blob does not read its bytes.
_SWEEP_PAGE: Final = (
    "SELECT digest, length(content) FROM attachments a WHERE digest > ? AND NOT EXISTS "
    "(SELECT 1 FROM attachment_refs r WHERE r.digest = a.digest) ORDER BY digest LIMIT ?"
)
_ATTACHMENT_DELETE: Final = "DELETE FROM attachments WHERE digest = ?"
_RECORDS_USAGE: Final = (
    "SELECT count(*), total(length(content)) FROM ledger_records WHERE key BETWEEN ? AND ?"
)
# ``?1`` is a JSON array of the set's log ids.
_EXCLUSIVE_USAGE: Final = (
    "SELECT total(length(a.content)) FROM attachments a WHERE a.digest IN "
    "(SELECT digest FROM attachment_refs WHERE log_id IN (SELECT value FROM json_each(?1))) "
    "AND NOT EXISTS (SELECT 1 FROM attachment_refs r WHERE r.digest = a.digest "
    "AND r.log_id NOT IN (SELECT value FROM json_each(?1)))"
)

_AUTO_VACUUM_INCREMENTAL: Final = 2  # what PRAGMA auto_vacuum reports for INCREMENTAL
_VACUUM_PAGES: Final = 2048  # pages given back per write transaction


def refs_complete(db: Database) -> bool:
    row = db.conn.execute(_REFS_COMPLETE).fetchone()
    return row is not None and row[0] == "1"


def drop(db: Database, names: list[str]) -> tuple[int, int]:
    """Drop the first of ``names`` in one transaction, as many as the bounds allow (at
    least one; see `DROP_BATCH`); return how many existed and how many were taken."""
    conn = db.conn
    db.check_files()
    conn.execute("BEGIN IMMEDIATE")
    dropped = deleted = taken = 0
    try:
        for name in names[:DROP_BATCH]:
            if deleted >= DROP_RECORDS:
                break
            taken += 1
            log = ledger.log_id(db, name, fresh=True)
            if log is None:
                continue
            base = log << ledger.SEQ_BITS
            records, refs, row = _LOG_DROP
            deleted += max(0, conn.execute(records, (base, base | ledger.MAX_SEQ)).rowcount)
            conn.execute(refs, (log,))
            conn.execute(row, (log,))
            dropped += 1
        conn.execute("COMMIT")
    except BaseException:
        rollback(conn)
        raise
    finally:
        for name in names[:DROP_BATCH]:  # a cache: forgetting more is harmless
            db.log_ids.pop(name, None)
    return dropped, taken


def sweep_page(db: Database, after: bytes, limit: int, dry_run: bool) -> list[tuple[bytes, int]]:
    """One page of the sweep, in one transaction: the unreferenced attachments with
    digests after ``after`` (at most ``limit``), deleted unless ``dry_run``. Under the
    write lock no append can add a reference between the check and the delete."""
    conn = db.conn
    if not dry_run:
        db.check_files()
    conn.execute("BEGIN" if dry_run else "BEGIN IMMEDIATE")
    try:
        if not refs_complete(db):
            raise RefsIncompleteError()
        rows = [(bytes(d), int(n)) for d, n in conn.execute(_SWEEP_PAGE, (after, limit))]
        if rows and not dry_run:
            conn.executemany(_ATTACHMENT_DELETE, [(d,) for d, _ in rows])
        conn.execute("COMMIT")
    except BaseException:
        rollback(conn)
        raise
    return rows


def usage(db: Database, names: list[str]) -> LedgerUsage:
    conn = db.conn
    conn.execute("BEGIN")  # one snapshot for the three sums
    try:
        if not refs_complete(db):
            raise RefsIncompleteError()
        ids = [log for log in (ledger.log_id(db, n, fresh=True) for n in names) if log is not None]
        records = size = 0
        for log in ids:
            base = log << ledger.SEQ_BITS
            count, total = conn.execute(_RECORDS_USAGE, (base, base | ledger.MAX_SEQ)).fetchone()
            records += int(count)
            size += int(total)
        (exclusive,) = conn.execute(_EXCLUSIVE_USAGE, (json.dumps(ids),)).fetchone()
        conn.execute("COMMIT")
    except BaseException:
        rollback(conn)
        raise
    return LedgerUsage(records, size, int(exclusive))


def add_refs(db: Database, name: str, digests: list[str]) -> int:
    conn = db.conn
    db.check_files()
    conn.execute("BEGIN IMMEDIATE")
    try:
        log = ledger.log_id(db, name, fresh=True)
        stored = []
        if log is not None:
            for digest in dict.fromkeys(digests):
                key = bytes.fromhex(digest)
                if conn.execute(ledger.ATTACHMENT_EXISTS, (key,)).fetchone() is not None:
                    stored.append((log, key))
            conn.executemany(ledger.REF_INSERT, stored)
        conn.execute("COMMIT")
    except BaseException:
        rollback(conn)
        raise
    return len(stored)


def mark_refs_complete(db: Database) -> None:
    db.write_one(_MARK_REFS_COMPLETE, ())


def incremental_vacuum(db: Database) -> int:
    """Give up to `_VACUUM_PAGES` pages freed by a drop or sweep back to the file
    system (only a file with ``auto_vacuum=INCREMENTAL`` can; others keep them for
    reuse); return how many free pages are left to give back."""
    conn = db.conn
    if conn.execute("PRAGMA auto_vacuum").fetchone()[0] != _AUTO_VACUUM_INCREMENTAL:
        return 0
    db.check_files()
    # executescript steps the pragma to its end; execute would free a single page.
    conn.executescript(f"PRAGMA incremental_vacuum({_VACUUM_PAGES});")
    return int(conn.execute("PRAGMA freelist_count").fetchone()[0])


def vacuum(db: Database) -> None:
    conn = db.conn
    db.check_files()
    conn.execute("PRAGMA auto_vacuum = INCREMENTAL")  # takes effect with the VACUUM
    conn.execute("VACUUM")
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
