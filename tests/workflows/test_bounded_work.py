"""Work that must not grow with the database (bench/scale.py, workload h): each test counts
what the operation reads from storage, through a counting wrapper, on a session with many
more runs than one page, over every backend."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from datetime import timedelta
from pathlib import Path

import pytest

from flowledger import storage
from flowledger.storage import Entry, Store, open_store
from flowledger.workflows.registry import RunRegistry

from .._postgres import postgres_url
from .test_registry import SID, T0, make_run, rid

RUNS = 40
PAGE = 5


class CountingKV:
    """A paged KV that counts the keys its listings return and the values it reads."""

    def __init__(self, kv: storage.KV) -> None:
        self._kv = kv
        self.keys_read = 0
        self.gets = 0

    async def get(self, key: str) -> Entry:
        self.gets += 1
        return await self._kv.get(key)

    async def put(
        self, key: str, value: bytes, *, expected: int, fence: storage.Fence | None = None
    ) -> int:
        return await self._kv.put(key, value, expected=expected, fence=fence)

    async def delete(self, key: str, *, fence: storage.Fence | None = None) -> None:
        await self._kv.delete(key, fence=fence)

    async def keys(self, prefix: str = "") -> list[str]:
        found = await self._kv.keys(prefix)
        self.keys_read += len(found)
        return found

    async def keys_page(
        self, prefix: str = "", *, start: str = "", limit: int = 100, descending: bool = False
    ) -> list[str]:
        assert isinstance(self._kv, storage.PagedKV)
        found = await self._kv.keys_page(prefix, start=start, limit=limit, descending=descending)
        self.keys_read += len(found)
        return found

    def reset(self) -> None:
        self.keys_read = self.gets = 0


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


async def test_a_run_id_page_reads_only_its_keys_first_page_or_last(store: Store) -> None:
    counting = CountingKV(store.kv)
    registry = RunRegistry(counting)
    for n in range(1, RUNS + 1):
        moment = T0 + timedelta(seconds=n)
        await registry.create(make_run(run_id=rid(n), created_at=moment, updated_at=moment))
    ids = sorted(rid(n) for n in range(1, RUNS + 1))

    counting.reset()
    first = await registry.list(SID, limit=PAGE)
    assert [run.id for run in first.runs] == ids[:PAGE]
    assert first.next == ids[PAGE - 1]
    assert counting.keys_read <= PAGE + 1
    assert counting.gets == PAGE

    counting.reset()
    last = await registry.list(SID, after=ids[-PAGE - 1], limit=PAGE)
    assert [run.id for run in last.runs] == ids[-PAGE:]
    assert last.next == ""
    assert counting.keys_read <= PAGE + 1
    assert counting.gets == PAGE
