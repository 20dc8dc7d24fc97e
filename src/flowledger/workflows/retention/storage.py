"""`RetentionStorage`: the storage operations pruning needs, in one place.

Pruning deletes KV keys and blobs through their public ``delete``, whole ledger logs
through ``Ledger.drop(names)``, and then the attachments no log refers to any more through
``Ledger.sweep`` (see docs/storage.md, "Deleting logs and attachments"). ``Ledger.usage``
measures the logs. A store written before references were kept (`RefsIncompleteError`)
cannot sweep or measure until ``flowledger.deploy.backfill_refs(store)`` has run: its logs
are then measured by reading their records, and its attachments stay (reports say so).
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from ...storage import (
    MAX_READ_LIMIT,
    BlobNotFoundError,
    KeyNotFoundError,
    RefsIncompleteError,
    Store,
)

__all__ = ["RetentionStorage", "Swept"]

_DROP_BATCH: Final = 64


@dataclass(frozen=True)
class Swept:
    """What an attachment sweep did (or would do): how many, and how many bytes. A dry run
    also counts ``exclusive_bytes``: attachments only the runs it would prune refer to,
    which the real pass frees with its sweep (so a real pass reports them in ``bytes``)."""

    attachments: int
    bytes: int
    exclusive_bytes: int = 0


class RetentionStorage:
    """Deletes and measures on one store (see the module documentation)."""

    def __init__(self, store: Store) -> None:
        self.store = store

    async def drop_logs(self, names: Sequence[str]) -> None:
        for start in range(0, len(names), _DROP_BATCH):
            await self.store.ledger.drop(list(names[start : start + _DROP_BATCH]))

    async def delete_keys(self, keys: Sequence[str]) -> None:
        for key in keys:
            await self.store.kv.delete(key)

    async def log_bytes(self, names: Sequence[str]) -> int:
        """The payload bytes of the logs' records."""
        with contextlib.suppress(RefsIncompleteError):
            return (await self.store.ledger.usage(list(names))).bytes
        total = 0
        for name in names:
            after = 0
            while True:
                records = await self.store.ledger.read(name, after=after, limit=MAX_READ_LIMIT)
                if not records:
                    break
                total += sum(len(record.payload) for record in records)
                after = records[-1].seq
        return total

    async def key_bytes(self, keys: Sequence[str]) -> int:
        total = 0
        for key in keys:
            with contextlib.suppress(KeyNotFoundError):
                total += len((await self.store.kv.get(key)).value)
        return total

    async def blob_bytes(self, key: str) -> int:
        try:
            return len(await self.store.blobs.get(key))
        except BlobNotFoundError:
            return 0

    async def sweep(self, *, dry_run: bool, planned: Sequence[str] = ()) -> Swept | None:
        """Sweep the store's unreferenced attachments (a dry run counts them, and the bytes
        of those only the ``planned`` logs refer to); None where references are incomplete."""
        try:
            report = await self.store.ledger.sweep(dry_run=dry_run)
            exclusive = 0
            if dry_run and planned:
                usage = await self.store.ledger.usage(list(planned))
                exclusive = usage.exclusive_attachment_bytes
        except RefsIncompleteError:
            return None
        return Swept(report.attachments, report.bytes, exclusive)
