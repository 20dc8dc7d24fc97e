"""Prune writes in bounded batches. Its transactions are counted at the storage contract
(every ``put``, ``delete``, ``write_many`` and ``Ledger.drop`` is one transaction), on
SQLite and PostgreSQL, against a pass through the same store's KV without ``write_many``
(one transaction per key, the way prune wrote before batching)."""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Iterator, Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from flowledger.host import open_session
from flowledger.storage import KV, BatchKV, Entry, Fence, KVPut, KVWrite, Store, open_store
from flowledger.workflows.records.registry import RunRegistry
from flowledger.workflows.records.run import Run, run_key
from flowledger.workflows.retention import pruning
from flowledger.workflows.retention.pruning import PruneReport, RetentionPolicy, prune

from ..._postgres import postgres_url
from .._retention_support import Runs, backdate, catalog, owned_names, snapshot

OLD = RetentionPolicy(timedelta(days=30))


@pytest.fixture(params=["sqlite", "postgres"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'prune.db'}"
    else:
        with postgres_url() as found:
            yield found


class _OneKeyKV:
    """The store's KV without ``write_many``; counts its write transactions."""

    def __init__(self, inner: KV, counts: Counter[str]) -> None:
        self.inner = inner
        self.counts = counts

    async def get(self, key: str) -> Entry:
        return await self.inner.get(key)

    async def put(
        self, key: str, value: bytes, *, expected: int, fence: Fence | None = None
    ) -> int:
        self.counts["claims" if "/inputs-condemned/" in key else "kv"] += 1
        return await self.inner.put(key, value, expected=expected, fence=fence)

    async def delete(self, key: str, *, fence: Fence | None = None) -> None:
        self.counts["claims" if "/inputs-condemned/" in key else "kv"] += 1
        await self.inner.delete(key, fence=fence)

    async def keys(self, prefix: str = "") -> list[str]:
        return await self.inner.keys(prefix)


class _BatchKV(_OneKeyKV):
    """The same, with the store's ``write_many``."""

    async def write_many(
        self, writes: Sequence[KVWrite], *, fence: Fence | None = None
    ) -> list[int]:
        assert isinstance(self.inner, BatchKV)
        self.counts["kv"] += 1
        self.counts["batched puts"] += sum(isinstance(w, KVPut) for w in writes)
        return await self.inner.write_many(writes, fence=fence)


class _Drops:
    """The store's ledger; counts ``drop`` calls."""

    def __init__(self, inner: Any, counts: Counter[str]) -> None:
        self._inner = inner
        self.counts = counts

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    async def drop(self, names: Any) -> int:
        self.counts["drop"] += 1
        return int(await self._inner.drop(names))


async def _counted(
    store: Store, sid: str, policy: RetentionPolicy, *, batched: bool
) -> tuple[Counter[str], PruneReport]:
    counts: Counter[str] = Counter()
    kv = (_BatchKV if batched else _OneKeyKV)(store.kv, counts)
    counted = dataclasses.replace(store, kv=kv, ledger=_Drops(store.ledger, counts))
    return counts, await prune(counted, sid, policy)


async def test_batches_cost_a_few_transactions_where_one_key_at_a_time_costs_many(
    url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(pruning, "BATCH_RUNS", 4)  # 10 runs: batches of 4, 4 and 2
    async with open_session(url, catalog()) as session:
        runs = Runs(session)
        older = [await runs.completed(f"old {i}") for i in range(10)]
        newer = [await runs.completed(f"new {i}") for i in range(10)]
        waiting = await runs.interrupted("new 0")  # keeps its input
        sid = session.session_id
    async with open_store(url) as store:
        records: dict[str, Run] = {}
        for run_id in older:
            records[run_id] = await backdate(store, sid, run_id, timedelta(days=90))
        for run_id in [*newer, waiting]:
            records[run_id] = await backdate(store, sid, run_id, timedelta(days=40))
        owned = {r: await owned_names(store, sid, records[r]) for r in [*older, *newer]}

        before = await snapshot(store)
        one_key, report = await _counted(
            store, sid, RetentionPolicy(timedelta(days=60)), batched=False
        )
        assert sorted(report.runs) == sorted(older)
        gone = (before - await snapshot(store)).names()
        assert gone == set().union(*(owned[r] | {records[r].input.key} for r in older))

        before = await snapshot(store)
        dry = await prune(store, sid, RetentionPolicy(timedelta(days=30)), dry_run=True)
        batched, report = await _counted(
            store, sid, RetentionPolicy(timedelta(days=30)), batched=True
        )
        assert sorted(report.runs) == sorted(newer) == sorted(dry.runs)
        assert report.to_json()["deleted"] == dry.to_json()["deleted"]
        gone = (before - await snapshot(store)).names()
        inputs = {records[r].input.key for r in newer} - {records[waiting].input.key}
        assert gone == set().union(*(owned[r] for r in newer)) | inputs
        assert run_key(sid, waiting) in await store.kv.keys(run_key(sid, waiting))
        assert await RunRegistry(store.kv).get(sid, waiting)

    # The same ten runs' worth of work. One key at a time: a tombstone, the record, at
    # least one index entry and the tombstone again per run, and a drop per run's logs.
    # In batches: three KV transactions and one drop a batch. The input claims (written
    # by `InputClaims`, not batched) cost the same per input: ten inputs go in the first
    # pass, nine in the second (the waiting run keeps one).
    assert one_key["kv"] >= 10 * 4 and one_key["drop"] == 10, one_key
    assert batched["kv"] == 3 * 3 and batched["drop"] == 3, batched
    assert batched["batched puts"] == 10, batched  # every tombstone inside a batch
    assert batched["claims"] * 10 == one_key["claims"] * 9 > 0, (batched, one_key)


async def test_a_crash_inside_a_batch_leaves_its_tombstones_and_the_next_pass_finishes(
    url: str,
) -> None:
    async with open_session(url, catalog()) as session:
        runs = Runs(session)
        done = [await runs.completed(f"input {i}") for i in range(3)]
        sid = session.session_id
    async with open_store(url) as store:
        records = {r: await backdate(store, sid, r) for r in done}
        owned = set().union(*[await owned_names(store, sid, records[r]) for r in done])
        before = await snapshot(store)

        class Crash(Exception):
            pass

        async def crash(names: Any) -> int:
            raise Crash

        counts: Counter[str] = Counter()
        drops = _Drops(store.ledger, counts)
        drops.drop = crash  # type: ignore[method-assign]
        with pytest.raises(Crash):
            await prune(dataclasses.replace(store, ledger=drops), sid, OLD)
        middle = await snapshot(store)
        assert not {run_key(sid, r) for r in done} & middle.kv  # the records went together
        assert len([k for k in middle.kv if "/workflows/pruning/" in k]) == 3
        assert (await RunRegistry(store.kv).list(sid)).runs == []  # nobody sees them

        report = await prune(store, sid, OLD)
        assert report.leftover_runs == 3
        gone = (before - await snapshot(store)).names()
        assert gone == owned | {records[r].input.key for r in done}
