"""`RetentionStorage`: the few storage operations pruning needs, over whatever a store has.

Pruning deletes KV keys and blobs through their public ``delete``, and whole ledger logs
through ``Ledger.drop(names)``. Two more are optional, used only where the store's ledger
offers them: ``usage(names)`` (bytes the logs occupy; without it, the payload bytes of
their records are summed by reading them) and ``sweep(dry_run=...)`` (deleting the
attachments no log refers to any more; without it, checkpoint state attachments of
pruned runs stay until a sweep runs, and reports say so).
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

from ..storage import MAX_READ_LIMIT, BlobNotFoundError, KeyNotFoundError, Store

__all__ = ["RetentionStorage", "Swept"]

_DROP_BATCH: Final = 64


@dataclass(frozen=True)
class Swept:
    """What an attachment sweep did (or would do): how many, and how many bytes."""

    attachments: int
    bytes: int


class RetentionStorage:
    """Deletes and measures on one store (see the module documentation)."""

    def __init__(self, store: Store) -> None:
        self.store = store

    @property
    def can_drop_logs(self) -> bool:
        return callable(getattr(self.store.ledger, "drop", None))

    @property
    def can_sweep(self) -> bool:
        return callable(getattr(self.store.ledger, "sweep", None))

    @property
    def measures_logs(self) -> bool:
        """Whether log bytes come from the backend (``usage``) rather than record payloads."""
        return callable(getattr(self.store.ledger, "usage", None))

    async def drop_logs(self, names: Sequence[str]) -> None:
        drop: Any = getattr(self.store.ledger, "drop", None)
        if not callable(drop):
            raise TypeError(f"the ledger of {self.store.url!r} cannot delete logs (no drop)")
        for start in range(0, len(names), _DROP_BATCH):
            await drop(list(names[start : start + _DROP_BATCH]))

    async def delete_keys(self, keys: Sequence[str]) -> None:
        for key in keys:
            await self.store.kv.delete(key)

    async def log_bytes(self, names: Sequence[str]) -> int:
        usage: Any = getattr(self.store.ledger, "usage", None)
        if callable(usage):
            return int(await usage(list(names)))
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

    async def sweep(self, *, dry_run: bool) -> Swept | None:
        """The ledger's attachment sweep, if it has one (else None: nothing was counted)."""
        sweep: Any = getattr(self.store.ledger, "sweep", None)
        if not callable(sweep):
            return None
        report = await sweep(dry_run=dry_run)
        return Swept(int(report.attachments), int(report.bytes))
