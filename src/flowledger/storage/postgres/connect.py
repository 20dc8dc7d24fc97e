"""Opening a PostgreSQL store: `connect_postgres`."""

from __future__ import annotations

from ..lease import Leaser
from ..store import Store
from .blobs import PostgresBlobs
from .database import Database
from .integrity import PostgresIntegrity
from .kv import PostgresKV
from .leases import PostgresLeaseBackend
from .ledger import PostgresLedger
from .url import parse_postgres_url
from .wakeups import PostgresWakeups

__all__ = ["connect_postgres"]


async def connect_postgres(url: str) -> Store:
    """Open the PostgreSQL store named by ``url``, creating or migrating its schema."""
    settings = parse_postgres_url(url)
    db = Database(settings)
    await db.open()
    return Store(
        url,
        PostgresKV(db),
        PostgresBlobs(db),
        PostgresLedger(db),
        Leaser(PostgresLeaseBackend(db)),
        integrity=PostgresIntegrity(db),
        wakeups=PostgresWakeups(db),
        _close_backend=db.close,
    )
