"""Conformance: ``Ledger.drop(names)`` deletes whole logs (every bundled backend)."""

from __future__ import annotations

import pytest

from flowledger.storage import (
    MAX_READ_LIMIT,
    InvalidNameError,
    InvalidValueError,
    LedgerConflictError,
    Store,
    digest_of,
    open_store,
)


async def test_drop_removes_records_tip_and_name(store: Store) -> None:
    await store.ledger.append("a/one", [b"1", b"2"], expected=0)
    await store.ledger.append("a/two", [b"x"], expected=0)
    await store.ledger.append("b/keep", [b"k"], expected=0)
    await store.ledger.drop(["a/one", "a/two"])  # type: ignore[attr-defined]
    assert await store.ledger.names("") == ["b/keep"]
    assert await store.ledger.tip("a/one") == 0
    assert await store.ledger.read("a/one", limit=MAX_READ_LIMIT) == []
    assert [r.payload for r in await store.ledger.read("b/keep")] == [b"k"]


async def test_dropped_log_starts_again_at_one(store: Store) -> None:
    await store.ledger.append("log", [b"old1", b"old2"], expected=0)
    await store.ledger.drop(["log"])  # type: ignore[attr-defined]
    with pytest.raises(LedgerConflictError):
        await store.ledger.append("log", [b"stale"], expected=2)
    assert await store.ledger.append("log", [b"new"], expected=0) == 1
    assert [r.payload for r in await store.ledger.read("log")] == [b"new"]
    assert await store.ledger.names("") == ["log"]


async def test_drop_is_idempotent_and_keeps_attachments(store: Store) -> None:
    data = b"shared state field"
    await store.ledger.append("log", [b"r"], expected=0, attachments={digest_of(data): data})
    await store.ledger.drop(["log", "log", "never/written"])  # type: ignore[attr-defined]
    await store.ledger.drop(["log"])  # type: ignore[attr-defined]
    await store.ledger.drop([])  # type: ignore[attr-defined]
    assert await store.ledger.names("") == []
    assert await store.ledger.attachments([digest_of(data)]) == {digest_of(data): data}


async def test_drop_validates_names_before_touching_anything(store: Store) -> None:
    await store.ledger.append("log", [b"r"], expected=0)
    with pytest.raises(InvalidValueError):
        await store.ledger.drop("log")  # type: ignore[attr-defined]
    with pytest.raises(InvalidNameError):
        await store.ledger.drop(["log", "Bad Name"])  # type: ignore[attr-defined]
    assert await store.ledger.tip("log") == 1


async def test_drop_is_seen_by_another_connection(store_url: str) -> None:
    if store_url.startswith("memory"):
        pytest.skip("a memory store has one connection")
    async with open_store(store_url) as first, open_store(store_url) as second:
        await first.ledger.append("log", [b"a"], expected=0)
        assert await second.ledger.tip("log") == 1  # the second one knows the log now
        await first.ledger.drop(["log"])  # type: ignore[attr-defined]
        assert await second.ledger.tip("log") == 0
        assert await second.ledger.names("") == []
        # An append by the connection that knew the old log lands where everyone reads.
        assert await second.ledger.append("log", [b"b"], expected=0) == 1
        assert [r.payload for r in await first.ledger.read("log")] == [b"b"]
        assert await first.ledger.names("") == ["log"]
