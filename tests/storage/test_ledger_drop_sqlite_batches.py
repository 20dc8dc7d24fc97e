"""SQLite's `Ledger.drop` bounds each transaction by logs and by records
(`collection.DROP_BATCH`, `collection.DROP_RECORDS`): hundreds of small logs (what a
prune drops) go in a couple of transactions - each one an fsync - while a drop of big
logs still commits every few thousand records, so other writers wait at most that long.
Transactions are counted as calls of `collection.drop` (one ``BEGIN IMMEDIATE`` ...
``COMMIT`` each)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from flowledger.storage import Store, open_store
from flowledger.storage.sqlite import collection


def counting(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    taken: list[int] = []
    drop = collection.drop

    def counted(db: Any, names: list[str]) -> tuple[int, int]:
        existed, took = drop(db, names)
        taken.append(took)
        return existed, took

    monkeypatch.setattr(collection, "drop", counted)
    return taken


async def fill(store: Store, logs: int, records: int) -> list[str]:
    names = [f"runs/{i:04}" for i in range(logs)]
    for name in names:
        await store.ledger.append(name, [b"r"] * records, expected=0)
    return names


async def test_three_hundred_small_logs_drop_in_two_transactions(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    taken = counting(monkeypatch)
    async with open_store(f"sqlite:///{tmp_path / 'wf.db'}") as store:
        names = await fill(store, 300, 2)
        absent = "runs/absent"  # counted as taken, not as dropped
        assert await store.ledger.drop([*names, absent]) == 300
        assert taken == [collection.DROP_BATCH, 301 - collection.DROP_BATCH]
        assert await store.ledger.names("runs/") == []
        assert all([await store.ledger.tip(name) == 0 for name in names])


async def test_a_transaction_ends_after_the_log_that_reaches_the_record_bound(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(collection, "DROP_RECORDS", 5)
    taken = counting(monkeypatch)
    async with open_store(f"sqlite:///{tmp_path / 'wf.db'}") as store:
        names = await fill(store, 10, 2)
        big = "runs/big"
        await store.ledger.append(big, [b"r"] * 20, expected=0)
        assert await store.ledger.drop([big, *names]) == 11
        # the big log alone (20 records >= 5), then logs of 2 records three at a time
        assert taken == [1, 3, 3, 3, 1]
        assert await store.ledger.names("runs/") == []
