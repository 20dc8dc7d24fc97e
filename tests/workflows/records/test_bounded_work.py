"""Work that must not grow with the database (bench/scale.py, workload h): each test counts
what the operation reads from storage, through a counting wrapper, on a session with many
more runs than one page, over every backend."""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

import pytest

from flowledger import flow, storage
from flowledger.storage import Entry, Store, open_store
from flowledger.tools.bundle import WorkflowTools
from flowledger.workflows import Catalog, Metadata, TypedDefinition, VertexMetadata
from flowledger.workflows.records.registry import RunRegistry
from flowledger.workflows.records.run import RunStatus, runs_prefix
from flowledger.workflows.records.unfinished import UnfinishedIndex
from flowledger.workflows.runtime.session import WorkflowSession

from ..._postgres import postgres_url
from .test_registry import SID, T0, make_run, rid

RUNS = 40
PAGE = 5


class CountingKV:
    """A paged KV that counts the keys its listings return and the values it reads."""

    def __init__(self, kv: storage.KV) -> None:
        self._kv = kv
        self.keys_read = 0
        self.gets = 0
        self.got: list[str] = []

    async def get(self, key: str) -> Entry:
        self.gets += 1
        self.got.append(key)
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
        self.got.clear()


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


# -- activation ----------------------------------------------------------------------------


@dataclass
class Count:
    count: int = 0


async def _add(state: Count) -> dict[str, int]:
    return {"count": state.count + 1}


async def _ask(state: Count) -> dict[str, int]:
    answer = flow.interrupt({"question": "how much?"})
    return {"count": state.count + int(answer["count"])}


SCHEMA = {
    "type": "object",
    "additionalProperties": False,
    "properties": {"count": {"type": "integer"}},
}


def _catalog() -> Catalog:
    adder: flow.Graph[Count] = flow.Graph("adder", state=Count)
    adder.add_vertex("add", _add)
    asker: flow.Graph[Count] = flow.Graph("asker", state=Count)
    asker.add_vertex("ask", _ask)
    out = Catalog()
    for name, graph, vertex in (("adder", adder, "add"), ("asker", asker, "ask")):
        out.register(
            TypedDefinition(
                Metadata(
                    name,
                    "v1",
                    description=vertex,
                    input_schema=SCHEMA,
                    resume_schema=SCHEMA if vertex == "ask" else None,
                    vertices=[VertexMetadata(vertex, vertex)],
                ),
                graph.compile(entry=vertex, finish=vertex),
            )
        )
    return out


def _run_reads(counting: CountingKV, session_id: str) -> int:
    return sum(1 for key in counting.got if key.startswith(runs_prefix(session_id)))


async def _start(session: WorkflowSession, name: str) -> str:
    tools = WorkflowTools.for_session(session)
    started = await tools.call(
        "workflow_run_start",
        {"definition_name": name, "definition_version": "v1", "input": {"count": 0}},
    )
    await session.supervisor.wait_idle()
    return str(started["run_id"])


async def test_activation_reads_the_unfinished_runs_not_every_run(store: Store) -> None:
    """Once a session's index is complete, an owner adopts what the index names: with
    many finished runs and one interrupted, activating reads one run record."""
    sid = "c0000000-0000-4000-8000-000000000001"
    first = WorkflowSession.build(store, sid, _catalog())
    await first.supervisor.activate()
    for _ in range(RUNS // 4):
        await _start(first, "adder")
    paused = await _start(first, "asker")
    await first.supervisor.shutdown()

    counting = CountingKV(store.kv)
    second = WorkflowSession.build(dataclasses.replace(store, kv=counting), sid, _catalog())
    await second.supervisor.activate()
    await second.supervisor.wait_idle()
    try:
        assert second.supervisor.last_error is None
        assert _run_reads(counting, sid) <= 2  # the interrupted run, read by its adoption
        assert counting.keys_read <= 2  # its index entry (and nothing listed whole)
        resumed = await second.supervisor.resume(paused, b'{"count": 1}')
        assert resumed is not None and resumed.status is RunStatus.COMPLETED
    finally:
        await second.supervisor.shutdown()


async def test_a_failed_run_stays_indexed_until_its_activities_are_published(
    store: Store,
) -> None:
    """An owner that recorded a failure and died before publishing it leaves the run in
    the index; the next owner publishes the failure and only then drops the entry."""
    sid = "c0000000-0000-4000-8000-000000000002"
    first = WorkflowSession.build(store, sid, _catalog())
    await first.supervisor.activate()
    run_id = await _start(first, "asker")
    await first.supervisor.shutdown()
    index = UnfinishedIndex(store.kv)
    run = await first.registry.get(sid, run_id)
    # what an owner records on a definite failure, before it publishes the activity
    await first.registry.compare_and_swap(
        run.revision,
        dataclasses.replace(run, status=RunStatus.FAILED, status_summary="workflow failed"),
    )
    assert await index.runs(sid) == [run_id]

    second = WorkflowSession.build(store, sid, _catalog())
    await second.supervisor.activate()
    await second.supervisor.wait_idle()
    try:
        assert second.supervisor.last_error is None
        kinds = [item.activity.kind for item in await second.journal.records(sid, run_id)]
        assert kinds[-1] == "run_failed"
        assert await index.runs(sid) == []
    finally:
        await second.supervisor.shutdown()
