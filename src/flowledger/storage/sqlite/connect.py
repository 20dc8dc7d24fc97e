"""Opening a SQLite store: `connect_sqlite`."""

from __future__ import annotations

import os

from ..lease import Leaser
from ..store import Store
from ..wakeups import LocalWakeups
from .blobs import SQLiteBlobs
from .database import Database
from .integrity import SQLiteIntegrity
from .kv import SQLiteKV
from .leases import SQLiteLeaseBackend
from .ledger import SQLiteLedger
from .url import parse_sqlite_url
from .worker import Worker

__all__ = ["connect_sqlite"]


async def connect_sqlite(url: str, *, read_only: bool = False) -> Store:
    """Open (creating if needed) the SQLite store named by ``url``; with ``read_only``,
    open an existing one for reading only (`StoreNotFoundError` if there is none, and
    writes fail) - it works in a read-only directory or on a read-only file."""
    settings = parse_sqlite_url(url)
    worker = Worker(Database(settings, read_only=read_only))
    try:
        await worker.call(worker.db.open)
    except BaseException:
        await worker.close()
        raise
    # Every store open on this file in this process shares the wake-ups; other
    # processes on the file are not woken (they find the work on their fallback poll).
    path = await worker.call(os.path.realpath, worker.db.path)
    wakeups = LocalWakeups(("sqlite", path), "in-process: stores on this SQLite file here")
    return Store(
        url,
        SQLiteKV(worker, wakeups),
        SQLiteBlobs(worker),
        SQLiteLedger(worker),
        Leaser(SQLiteLeaseBackend(worker)),
        read_only=read_only,
        integrity=SQLiteIntegrity(worker),
        wakeups=wakeups,
        _close_backend=worker.close,
    )
