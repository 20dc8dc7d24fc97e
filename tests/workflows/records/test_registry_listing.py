"""`RunRegistry.list_newest` over every storage backend: newest-first pages off the run
order index, filtered by status and definition, a run-ID prefix search, the backfill of
runs written before the index, and the same pages from a store without ``keys_page``."""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator, Iterator
from datetime import timedelta
from pathlib import Path

import pytest

from flowledger import storage
from flowledger.storage import Entry, Store, open_store
from flowledger.workflows.records.registry import RunRegistry
from flowledger.workflows.records.run import RunStatus, encode_run, run_key

from ..._postgres import postgres_url
from .test_registry import SID, T0, advance, make_run, rid


@pytest.fixture(params=["memory", "sqlite", "postgres"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "memory":
        yield "memory://"
    elif request.param == "sqlite":
        yield f"sqlite:///{tmp_path}/w.db"
    else:
        with postgres_url() as url:
            yield url


@pytest.fixture
async def store(store_url: str) -> AsyncIterator[Store]:
    async with open_store(store_url) as opened:
        yield opened


@pytest.fixture
def registry(store: Store) -> RunRegistry:
    return RunRegistry(store.kv)


async def walk(registry: RunRegistry, limit: int, **filters: str) -> list[list[str]]:
    pages: list[list[str]] = []
    cursor = ""
    while True:
        page = await registry.list_newest(SID, cursor=cursor, limit=limit, **filters)
        pages.append([run.id for run in page.runs])
        if not page.next:
            return pages
        cursor = page.next


async def create(registry: RunRegistry, n: int, **changes: object) -> str:
    moment = T0 + timedelta(seconds=n)
    run = make_run(run_id=rid(n), created_at=moment, updated_at=moment, **changes)
    await registry.create(run)
    return run.id


async def test_pages_are_newest_first_and_see_every_run_once(registry: RunRegistry) -> None:
    # Run IDs in the opposite order of their starts: the order is time, not ID.
    ids = [await create(registry, 100 - n) for n in range(7)]
    newest = sorted(ids)[::-1]
    assert await walk(registry, 3) == [newest[:3], newest[3:6], newest[6:]]
    assert await walk(registry, 7) == [newest]
    assert await walk(registry, 100) == [newest]
    assert (await registry.list_newest(SID)).runs[0].id == newest[0]
    assert (await registry.list_newest("b0000000-0000-4000-8000-000000000001")).runs == []


async def test_filters_follow_status_moves(registry: RunRegistry) -> None:
    ids = [await create(registry, n) for n in range(1, 6)]
    other = await create(registry, 9, definition_name="other")
    run = await registry.get(SID, ids[1])
    await advance(registry, run, RunStatus.RUNNING, RunStatus.COMPLETED)
    assert await walk(registry, 10, status="completed") == [[ids[1]]]
    assert await walk(registry, 10, status="pending") == [[other, *ids[4:1:-1], ids[0]]]
    assert await walk(registry, 10, status="running") == [[]]
    assert await walk(registry, 10, definition="other") == [[other]]
    assert await walk(registry, 2, definition="counter") == [
        [ids[4], ids[3]],
        [ids[2], ids[1]],
        [ids[0]],
    ]
    both = await walk(registry, 10, status="pending", definition="counter")
    assert both == [[ids[4], ids[3], ids[2], ids[0]]]


async def test_a_rare_match_gives_short_pages_not_a_scan(registry: RunRegistry) -> None:
    rare = await create(registry, 1)
    for n in range(2, 30):
        await create(registry, n, definition_name="common")
    # Newest first, the common runs come before the rare one; pages of 2 read at most
    # 8 entries each, so the search reaches it over several short pages.
    pages = await walk(registry, 2, status="pending", definition="counter")
    assert [run for page in pages for run in page] == [rare]
    assert len(pages) > 1 and all(page == [] for page in pages[:-1])


async def test_run_id_prefix_search(registry: RunRegistry) -> None:
    ids = [await create(registry, n) for n in (0x10, 0x11, 0x12, 0x20)]
    assert await walk(registry, 2, run_id_prefix="000000") == [ids[:2], ids[2:]]
    assert await walk(registry, 10, run_id_prefix="0000001") == [ids[:3]]
    assert await walk(registry, 10, run_id_prefix=ids[3]) == [[ids[3]]]
    assert await walk(registry, 10, run_id_prefix="0000001", status="running") == [[]]
    assert await walk(registry, 10, run_id_prefix="zz%") == [[]]


async def test_runs_stored_before_the_index_are_backfilled(
    store: Store, registry: RunRegistry
) -> None:
    old = make_run(run_id=rid(5), artifact_session_id=SID, artifact_run_id=rid(5))
    await store.kv.put(run_key(SID, old.id), encode_run(old), expected=0)
    new = await create(registry, 7)
    assert await walk(registry, 10) == [[new, old.id]]
    assert await walk(registry, 10, status="pending") == [[new, old.id]]


async def test_invalid_cursor_and_limit(registry: RunRegistry) -> None:
    with pytest.raises(ValueError, match="cursor"):
        await registry.list_newest(SID, cursor=rid(1))
    with pytest.raises(ValueError, match="cursor"):
        await registry.list_newest(SID, run_id_prefix="00", cursor="x")
    with pytest.raises(ValueError, match="limit"):
        await registry.list_newest(SID, limit=101)


class _WholeKV:
    """A KV with no ``keys_page``: the registry lists it whole, to the same pages."""

    def __init__(self, kv: storage.KV) -> None:
        self._kv = kv

    async def get(self, key: str) -> Entry:
        return await self._kv.get(key)

    async def put(
        self, key: str, value: bytes, *, expected: int, fence: storage.Fence | None = None
    ) -> int:
        return await self._kv.put(key, value, expected=expected, fence=fence)

    async def delete(self, key: str, *, fence: storage.Fence | None = None) -> None:
        await self._kv.delete(key, fence=fence)

    async def keys(self, prefix: str = "") -> list[str]:
        return await self._kv.keys(prefix)


async def test_a_store_without_keys_page_gives_the_same_pages(
    store: Store, registry: RunRegistry
) -> None:
    ids = [await create(registry, 100 - n) for n in range(5)]
    run = await registry.get(SID, ids[2])
    await advance(registry, dataclasses.replace(run), RunStatus.RUNNING)
    whole = RunRegistry(_WholeKV(store.kv))
    assert not isinstance(whole, storage.PagedKV)
    for filters in ({}, {"status": "running"}, {"status": "pending"}, {"run_id_prefix": "0"}):
        assert await walk(whole, 2, **filters) == await walk(registry, 2, **filters)
