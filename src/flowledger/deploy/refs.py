"""`backfill_refs`: record which attachments the logs of an older database refer to.

The ledger records, with every append, which attachments a log refers to, and only
sweeps those no log refers to (`storage.Ledger.sweep`). A database written before it
did (SQLite or PostgreSQL schema version 3 or older) has logs without such references,
so `sweep` refuses (`storage.RefsIncompleteError`) until they are registered. The
storage cannot parse records; the layers that wrote them can. The logs that carry
attachments are the checkpoint logs (``flow/runs/...``, states split into content-
addressed fields: `flow.LedgerCheckpointStore.backfill_refs`) and the deployed runs'
pins (``deploy/pins/...``, snapshots of what they pin: `PinStore.backfill_refs`);
journals, traces and tool intents carry none.

Run it once after upgrading, when every process that writes to the store runs this
version (a process of an older one appends without references; on SQLite and
PostgreSQL it fails loudly when it sends attachments, as the migration renamed their
column). It may run while runs go on; it is idempotent, so running it again is
harmless. It ends by marking the references complete, which allows sweeping.
"""

from __future__ import annotations

from .. import flow, storage
from .deployments.pin import PinStore

__all__ = ["backfill_refs"]


async def backfill_refs(store: storage.Store) -> int:
    """Register the references of every checkpoint and pin log of ``store``, then mark
    them complete (`storage.Ledger.mark_refs_complete`); return how many logs were read."""
    logs = await flow.LedgerCheckpointStore(store.ledger).backfill_refs()
    logs += await PinStore(store.ledger).backfill_refs()
    await store.ledger.mark_refs_complete()
    return logs
