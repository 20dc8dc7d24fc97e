"""`RetentionStorage`: the storage operations pruning needs, in one place.

Pruning writes KV keys in bounded batches through ``KV.write_many`` (one transaction per
`MAX_KV_WRITES` writes; a KV without it, such as a test's wrapper, gets one ``put`` or
``delete`` per key), deletes blobs through their public ``delete``, whole ledger logs
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

from ...storage import (
    MAX_KV_BATCH_BYTES,
    MAX_KV_WRITES,
    MAX_READ_LIMIT,
    BatchKV,
    BlobNotFoundError,
    Fence,
    KeyNotFoundError,
    KVDelete,
    KVPut,
    KVWrite,
    RefsIncompleteError,
    Store,
)

__all__ = ["RetentionStorage", "Swept"]


def _chunks(writes: Sequence[KVWrite]) -> list[list[KVWrite]]:
    """``writes`` cut, in order, into chunks within `MAX_KV_WRITES` and `MAX_KV_BATCH_BYTES`."""
    chunks: list[list[KVWrite]] = []
    size = 0
    for write in writes:
        grows = len(write.value) if isinstance(write, KVPut) else 0
        if not chunks or len(chunks[-1]) >= MAX_KV_WRITES or size + grows > MAX_KV_BATCH_BYTES:
            chunks.append([])
            size = 0
        chunks[-1].append(write)
        size += grows
    return chunks


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
        """One ``Ledger.drop``: the backend cuts it into bounded transactions itself, and
        gives the freed space back once for all of them."""
        if names:
            await self.store.ledger.drop(list(names))

    @property
    def batched(self) -> bool:
        """Whether the store's KV writes many keys in one transaction."""
        return isinstance(self.store.kv, BatchKV)

    async def write(self, writes: Sequence[KVWrite], fence: Fence | None = None) -> None:
        """Apply ``writes`` in order, in as few transactions as the batch limits allow
        (each chunk all or nothing; a conflict stops at its chunk)."""
        kv = self.store.kv
        if not isinstance(kv, BatchKV):
            for write in writes:
                if isinstance(write, KVPut):
                    await kv.put(write.key, write.value, expected=write.expected, fence=fence)
                else:
                    await kv.delete(write.key, fence=fence)
            return
        for chunk in _chunks(writes):
            await kv.write_many(chunk, fence=fence)

    async def delete_keys(self, keys: Sequence[str], fence: Fence | None = None) -> None:
        await self.write([KVDelete(key) for key in dict.fromkeys(keys)], fence)

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
