"""`RunRegistry.create` writes a run's unfinished-index entry, index marker, order
entries and record in one transaction where the KV batches them (every bundled backend),
instead of one commit each. Counted at the KV contract (each ``put`` and ``write_many``
is one transaction), on memory, SQLite and PostgreSQL; a create of an existing run is
still refused and changes nothing, and a create retried after a crash that left the
entries but no record (one at a time, as before) completes."""

from __future__ import annotations

import dataclasses
from collections import Counter
from typing import Any

import pytest

from flowledger.storage import open_store
from flowledger.workflows.errors import ConflictError
from flowledger.workflows.records.registry import RunRegistry, order_prefix
from flowledger.workflows.records.run import RunStatus, run_key
from flowledger.workflows.records.unfinished import UnfinishedIndex

from .test_registry import SID, make_run, rid


class Counting:
    """The store's KV; counts its write transactions by kind."""

    def __init__(self, inner: Any, counts: Counter[str]) -> None:
        self._inner = inner
        self.counts = counts

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self._inner, name)
        if name not in ("put", "delete", "write_many"):
            return attribute

        def counted(*args: Any, **kwargs: Any) -> Any:
            self.counts[name] += 1
            return attribute(*args, **kwargs)

        return counted


async def test_a_create_is_one_transaction(store_url: str) -> None:
    counts: Counter[str] = Counter()
    async with open_store(store_url) as store:
        kv = Counting(store.kv, counts)
        index = UnfinishedIndex(kv)  # type: ignore[arg-type]
        registry = RunRegistry(kv, index=index)  # type: ignore[arg-type]
        first = await registry.create(make_run(run_id=rid(1)))  # the session's first: marker
        assert counts == Counter(write_many=1)
        second = await registry.create(make_run(run_id=rid(2), status=RunStatus.PENDING))
        assert counts == Counter(write_many=2)
        assert first.revision == second.revision == 1
        assert await registry.get(SID, rid(2)) == second
        assert set(await index.runs(SID)) == {rid(1), rid(2)}
        newest = await registry.list_newest(SID)  # through the order entries
        assert {run.id for run in newest.runs} == {rid(1), rid(2)}
        assert await store.kv.get(order_prefix(SID) + "indexed")

        with pytest.raises(ConflictError, match="run already exists"):
            await registry.create(make_run(run_id=rid(2)))
        assert await registry.get(SID, rid(2)) == second


async def test_a_create_retried_after_its_entries_were_left_completes(store_url: str) -> None:
    """Entries written one at a time by a create that crashed before its record: the
    batch conflicts on them and the writes one at a time keep them."""
    async with open_store(store_url) as store:
        registry = RunRegistry(store.kv, index=UnfinishedIndex(store.kv))
        run = make_run(run_id=rid(3))
        created = await registry.create(run)
        await store.kv.delete(run_key(SID, run.id))  # as if the record never came
        again = await registry.create(dataclasses.replace(run, revision=0))
        assert again.revision == created.revision == 1
        assert await registry.get(SID, run.id) == again
