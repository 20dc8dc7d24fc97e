"""Closing a store, the same on every backend: idempotent, and every later call raises
`StoreClosedError` without touching anything."""

from __future__ import annotations

import pytest

from flowledger.storage import StoreClosedError, digest_of, open_store


async def test_every_call_after_close_raises(store_url: str) -> None:
    store = await open_store(store_url)
    await store.kv.put("k", b"v", expected=0)
    await store.close()
    await store.close()  # idempotent
    digest = digest_of(b"")
    calls = [
        store.kv.get("k"),
        store.kv.put("k", b"v", expected=1),
        store.kv.delete("k"),
        store.kv.keys(),
        store.kv.keys("é"),
        store.blobs.put("b", b""),
        store.blobs.get("b"),
        store.blobs.delete("b"),
        store.blobs.list(),
        store.blobs.list("\x00"),
        store.ledger.append("l", [b"r"], expected=0),
        store.ledger.read("l"),
        store.ledger.tip("l"),
        store.ledger.names(),
        store.ledger.attachments([digest]),
        store.ledger.attachments([]),
        store.leases.acquire("lease"),
    ]
    for call in calls:
        with pytest.raises(StoreClosedError, match="store is closed"):
            await call
