"""`Worker` in this process: finding sessions through the unfinished-run index, sharing
them, releasing idle ones, carrying out front-door requests, adopting the sessions of a
worker that went silent. (Killing worker processes: ``test_chaos.py`` and
``tests/cli/test_worker.py``.)"""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from flowledger import flow
from flowledger.storage import Store, open_store
from flowledger.workflows.records.inputs import canonical_json
from flowledger.workflows.records.registry import RunRegistry
from flowledger.workflows.records.run import Run, RunStatus
from flowledger.workflows.records.unfinished import UnfinishedIndex
from flowledger.workflows.runtime.catalog import Catalog
from flowledger.workflows.runtime.frontdoor import FrontDoor
from flowledger.workflows.runtime.session import WorkflowSession
from flowledger.workflows.runtime.supervisor import Supervisor
from flowledger.workflows.runtime.worker import (
    WORKERS_PREFIX,
    Worker,
    WorkerSettings,
    read_workers,
    reindex,
    worker_key,
)

from ..._postgres import postgres_url
from ..conftest import Gates, counter_definition

FAST = WorkerSettings(lease_ttl=0.5, poll=0.02, idle_release=0.05)
# for tests where no lease may run out: a busy machine can stall a process past 0.5 s,
# and a session lost and adopted again re-runs the step that was in flight
STEADY = WorkerSettings(lease_ttl=60.0, poll=0.02, idle_release=0.05)
HANG = 120.0  # seconds: catches a hang, never a timing bound


def app(gates: Gates) -> Catalog:
    placeholder = flow.MemoryCheckpointStore()  # every host rebinds it to its database
    catalog = Catalog()
    catalog.register(counter_definition(placeholder, gates))
    catalog.register(counter_definition(placeholder, gates, interrupting=True))
    return catalog


async def create_run(
    store: Store, catalog: Catalog, session_id: str, name: str = "counter", count: int = 0
) -> Run:
    """What the start tool writes (through an indexed registry)."""
    session = WorkflowSession.build(store, session_id, catalog)
    ref = await session.inputs.put(session_id, canonical_json({"count": count}))
    graph_run_id = str(uuid.uuid4())
    now = datetime.now(UTC)
    run = Run(
        session_id=session_id,
        tool_execution_id=str(uuid.uuid4()),
        definition_name=name,
        definition_version="v1",
        id=str(uuid.uuid4()),
        graph_run_id=graph_run_id,
        input=ref,
        ledger_locator=f"flow/runs/{graph_run_id}",
        created_at=now,
        updated_at=now,
    )
    return await session.registry.create(run)


async def settle(worker: Worker) -> None:
    """Wait until every session the worker owns has finished adopting its runs."""
    for session_id in worker.sessions:
        await worker._owned[session_id].session.supervisor.wait_idle()


async def status(store: Store, run: Run) -> RunStatus:
    return (await RunRegistry(store.kv).get(run.session_id, run.id)).status


async def eventually(check: Callable[[], Awaitable[bool]], seconds: float = HANG) -> None:
    deadline = time.monotonic() + seconds
    while not await check():
        assert time.monotonic() < deadline, f"not within {seconds} s: {check.__name__}"
        await asyncio.sleep(0.02)


@contextlib.asynccontextmanager
async def running(worker: Worker) -> AsyncIterator[Worker]:
    stop = asyncio.Event()
    task = asyncio.ensure_future(worker.run(stop))
    try:
        yield worker
    finally:
        stop.set()
        await asyncio.wait_for(task, 60)


@pytest.fixture
async def store(store_url: str) -> AsyncIterator[Store]:
    async with open_store(store_url) as opened:
        yield opened


def test_settings_are_checked() -> None:
    with pytest.raises(ValueError, match="lease_ttl"):
        WorkerSettings(lease_ttl=0)
    with pytest.raises(ValueError, match="poll"):
        WorkerSettings(poll=0)
    with pytest.raises(ValueError, match="max_sessions"):
        WorkerSettings(max_sessions=0)
    with pytest.raises(ValueError, match="runs_per_session"):
        WorkerSettings(runs_per_session=65)
    assert WorkerSettings(poll=1).release_after == 4
    with pytest.raises(ValueError, match="worker ID"):
        worker_key("w1")


async def test_a_worker_runs_every_session_then_lets_them_go(store: Store) -> None:
    gates = Gates()
    catalog = app(gates)
    sessions = [str(uuid.uuid4()) for _ in range(3)]
    runs = [await create_run(store, catalog, sid) for sid in sessions for _ in range(2)]
    worker = Worker(store, catalog, STEADY)  # each step runs once: no lease may run out
    async with running(worker):

        async def all_done() -> bool:
            return all([await status(store, r) is RunStatus.COMPLETED for r in runs])

        await eventually(all_done)
        assert gates.runs == {"one": 6, "two": 6}

        async def released() -> bool:
            return worker.sessions == []

        await eventually(released)
        records = await read_workers(store)
        assert [r.worker_id for r in records] == [worker.worker_id]
    assert await UnfinishedIndex(store.kv).scan() == {}
    assert await store.kv.keys(WORKERS_PREFIX) == []  # the record goes with the worker
    for sid in sessions:  # and no lease is left behind
        session = WorkflowSession.build(store, sid, catalog)
        await session.supervisor.activate()
        await session.supervisor.shutdown()


async def test_workers_share_the_sessions(store: Store) -> None:
    """Two workers split six sessions (paused runs keep them owned); when one stops, the
    other takes all of them."""
    catalog = app(Gates())
    sessions = [str(uuid.uuid4()) for _ in range(6)]
    for sid in sessions:
        await create_run(store, catalog, sid, "asker", 1)
    first = Worker(store, catalog, FAST)
    second = Worker(store, catalog, FAST)
    await first.tick()  # both announce themselves before claiming much
    await second.tick()
    for _ in range(6):
        await first.tick()
        await second.tick()
    assert sorted(first.sessions + second.sessions) == sorted(sessions)
    assert len(first.sessions) == len(second.sessions) == 3
    await first.close()
    for _ in range(3):
        await second.tick()
    assert sorted(second.sessions) == sorted(sessions)
    await second.close()


async def test_a_worker_carries_out_front_door_requests(store: Store) -> None:
    gates = Gates()
    catalog = app(gates)
    sid = str(uuid.uuid4())
    paused = await create_run(store, catalog, sid, "asker", 1)
    doomed = await create_run(store, catalog, sid, "asker", 1)
    door = FrontDoor.for_session(
        WorkflowSession.build(store, sid, catalog), start_timeout=60, request_timeout=60
    )
    async with running(Worker(store, catalog, FAST)):

        async def both_paused() -> bool:
            return all([await status(store, r) is RunStatus.INTERRUPTED for r in (paused, doomed)])

        await eventually(both_paused)
        resumed, cancelled = await asyncio.gather(
            door.resume(paused.id, b'{"increment":2}'), door.cancel(doomed.id, "no")
        )
        assert resumed.status is RunStatus.COMPLETED
        assert cancelled.status is RunStatus.CANCELLED
        late = await create_run(store, catalog, sid)
        await (await door.start(late.id)).wait()

        async def late_done() -> bool:
            return await status(store, late) is RunStatus.COMPLETED

        await eventually(late_done)


async def test_reindex_finds_runs_written_without_the_index(store: Store) -> None:
    gates = Gates()
    catalog = app(gates)
    sid = str(uuid.uuid4())
    session = WorkflowSession.build(store, sid, catalog)
    ref = await session.inputs.put(sid, canonical_json({"count": 0}))
    indexed = await create_run(store, catalog, sid)
    now = datetime.now(UTC)
    graph_run_id = str(uuid.uuid4())
    old = await RunRegistry(store.kv).create(  # as versions before the index wrote it
        Run(
            session_id=sid,
            tool_execution_id=str(uuid.uuid4()),
            definition_name="counter",
            definition_version="v1",
            id=str(uuid.uuid4()),
            graph_run_id=graph_run_id,
            input=ref,
            ledger_locator=f"flow/runs/{graph_run_id}",
            created_at=now,
            updated_at=now,
        )
    )
    assert await UnfinishedIndex(store.kv).scan() == {sid: [indexed.id]}
    assert await reindex(store) == 1
    assert await reindex(store) == 0
    assert sorted((await UnfinishedIndex(store.kv).scan())[sid]) == sorted([indexed.id, old.id])


@pytest.fixture(params=["sqlite", "postgres"])
def shared_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'shared.db'}"
    else:
        with postgres_url() as url:
            yield url


async def test_the_sessions_of_a_silent_worker_are_adopted(shared_url: str) -> None:
    """A worker that stops renewing (a stalled or dead process) loses its sessions after
    its lease TTL; another worker on another connection claims them and carries out the
    requests waiting there."""
    gates = Gates()
    catalog = app(gates)
    sid = str(uuid.uuid4())
    async with open_store(shared_url) as mine, open_store(shared_url) as theirs:
        run = await create_run(mine, catalog, sid, "asker", 1)
        silent = Worker(theirs, catalog, FAST)
        await silent.tick()

        async def paused() -> bool:
            return await status(mine, run) is RunStatus.INTERRUPTED

        await eventually(paused)
        assert silent.sessions == [sid]
        for lease in list(theirs.leases._live):  # it stops renewing: it went silent
            await lease._stop_renewing()
        door = FrontDoor.for_session(
            WorkflowSession.build(mine, sid, catalog), start_timeout=60, request_timeout=60
        )
        async with running(Worker(mine, catalog, FAST)) as heir:
            resumed = await door.resume(run.id, b'{"increment":1}')
            assert resumed.status is RunStatus.COMPLETED
            assert gates.runs == {"ask": 2}
            assert heir.ticks > 0
        with contextlib.suppress(Exception):
            await silent.close()


async def test_a_worker_that_joins_later_gets_its_share(store: Store) -> None:
    """A worker alone with six sessions owns them all; a second one that joins later gets
    half of them, handed over one idle session per tick: nothing runs again, and every
    handed-over run is still there to be resumed."""
    gates = Gates()
    catalog = app(gates)
    sessions = [str(uuid.uuid4()) for _ in range(6)]
    runs = [await create_run(store, catalog, sid, "asker", 1) for sid in sessions]
    first = Worker(store, catalog, FAST)
    for _ in range(8):
        await first.tick()
    assert sorted(first.sessions) == sorted(sessions)
    await settle(first)
    executed = dict(gates.runs)
    second = Worker(store, catalog, FAST)
    for _ in range(12):
        await second.tick()
        await first.tick()
    assert len(first.sessions) == len(second.sessions) == 3
    assert sorted(first.sessions + second.sessions) == sorted(sessions)
    for _ in range(6):  # and it stays that way
        await second.tick()
        await first.tick()
    assert len(first.sessions) == len(second.sessions) == 3
    assert gates.runs == executed
    assert {await status(store, r) for r in runs} == {RunStatus.INTERRUPTED}
    door_of = {sid: WorkflowSession.build(store, sid, catalog) for sid in sessions}
    moved = runs[sessions.index(second.sessions[0])]
    door = FrontDoor.for_session(door_of[moved.session_id], start_timeout=60, request_timeout=60)
    async with running(first), running(second):
        resumed = await door.resume(moved.id, b'{"increment":2}')
    assert resumed.status is RunStatus.COMPLETED


async def test_busy_sessions_and_full_peers_are_not_handed_over(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Only idle sessions move, and only to a peer with room under its own
    ``max_sessions``."""
    catalog = app(Gates())
    sessions = [str(uuid.uuid4()) for _ in range(4)]
    for sid in sessions:
        await create_run(store, catalog, sid, "asker", 1)
    first = Worker(store, catalog, FAST)
    for _ in range(6):
        await first.tick()
    await settle(first)
    full = Worker(store, catalog, WorkerSettings(lease_ttl=0.5, poll=0.02, max_sessions=1))
    for _ in range(10):
        await first.tick()
        await full.tick()
    assert len(full.sessions) == 1
    assert len(first.sessions) == 3
    working = set(first.sessions)  # pretend every session of the first worker is busy
    idle = vars(Supervisor)["idle"]
    monkeypatch.setattr(
        Supervisor, "idle", property(lambda s: s.session_id not in working and idle.fget(s))
    )
    busy = Worker(store, catalog, FAST)
    for _ in range(10):
        await first.tick()
        await busy.tick()
    assert busy.sessions == []
    assert len(first.sessions) == 3
    working.clear()
    for worker in (first, full, busy):
        await worker.close()
