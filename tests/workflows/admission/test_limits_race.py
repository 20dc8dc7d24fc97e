"""Admission through the supervisor: ``max_running`` per definition, per deployment and
per session,
with several owners (sessions) over one store racing for slots (memory, SQLite,
PostgreSQL). Every run-record write is watched, so the limit is checked at every
transition, not only at the end."""

from __future__ import annotations

import asyncio
import contextlib
import json
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import pytest

from flowledger import flow, storage
from flowledger.storage.fence import fencing
from flowledger.workflows.admission import (
    Admission,
    InvalidLimitError,
    Limits,
    deployment_scope_name,
    queued_at,
)
from flowledger.workflows.authoring.definition import TypedDefinition
from flowledger.workflows.authoring.metadata import Metadata, VertexMetadata
from flowledger.workflows.records.registry import RunRegistry
from flowledger.workflows.records.run import RunStatus, decode_run
from flowledger.workflows.runtime.supervisor import Supervisor

from ..conftest import COUNTER_SCHEMA, Counter, Session, build_session

LIMIT = 2
RUNS = 20
OWNERS = 3
DEPLOYED_VERSIONS = ("r1", "r2")  # how the deploy layer names revisions 1 and 2


async def eventually(check: Callable[[], Awaitable[bool]], seconds: float = 300.0) -> None:
    """Wait until ``check()`` holds; the deadline only catches a hang."""
    async with asyncio.timeout(seconds):
        while not await check():  # noqa: ASYNC110 - other owners change the store
            await asyncio.sleep(0.02)


async def completed(session: Session, run_id: str) -> bool:
    run = await session.registry.get(session.session_id, run_id)
    return run.status is RunStatus.COMPLETED


@dataclass
class Watcher:
    """A KV that sees every run-record write before it is issued. A run counts as
    running from the moment its ``running`` write is issued until its terminal write is
    issued: a start that was admitted only after another run ended is issued after that
    run's terminal write, so this never over-counts an admitted start, and catches
    three runs admitted together."""

    inner: storage.KV
    running: set[str] = field(default_factory=set)
    peak: int = 0
    started: list[str] = field(default_factory=list)
    finished: set[str] = field(default_factory=set)
    enqueued: dict[str, int] = field(default_factory=dict)  # run -> len(started) then
    violations: list[str] = field(default_factory=list)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def get(self, key: str) -> storage.Entry:
        return await self.inner.get(key)

    async def keys(self, prefix: str = "") -> list[str]:
        return await self.inner.keys(prefix)

    async def delete(self, key: str, *, fence: storage.Fence | None = None) -> None:
        await self.inner.delete(key, fence=fence)

    async def put(
        self, key: str, value: bytes, *, expected: int, fence: storage.Fence | None = None
    ) -> int:
        self._see(key, value)
        return await self.inner.put(key, value, expected=expected, fence=fence)

    def _see(self, key: str, value: bytes) -> None:
        if key.startswith("admission/queue/"):
            run_id = json.loads(value)["run"]
            self.enqueued.setdefault(run_id, len(self.started))
            return
        if "/workflows/runs/" not in key:
            return
        run = decode_run(key, value)
        if run.status is RunStatus.RUNNING and run.id not in self.running:
            if run.id not in self.started:
                self.started.append(run.id)
            self.running.add(run.id)
            self.peak = max(self.peak, len(self.running))
            if len(self.running) > LIMIT:
                self.violations.append(f"{sorted(self.running)} running at once")
        elif run.status.terminal or run.status is RunStatus.INTERRUPTED:
            self.running.discard(run.id)
            if run.status.terminal:
                self.finished.add(run.id)


OVERLAP_WAIT = 30.0  # how long a run waits for the limit to be reached (catches a hang)


def slow_definition(
    store: flow.CheckpointStore, watcher: Watcher | None = None, version: str = "v1"
) -> TypedDefinition[Counter]:
    """One vertex that yields for a moment, so admitted runs overlap. With ``watcher``,
    the vertex holds until the limit has been reached once, so the race reaches it
    whatever the machine's load (a gate that admitted one run at a time never would: the
    hold then ends at its cap, and ``peak`` says so)."""
    graph: flow.Graph[Counter] = flow.Graph("slow", state=Counter)

    @graph.vertex("work")
    async def work(state: Counter) -> dict[str, Any]:
        await asyncio.sleep(0.02)
        if watcher is not None:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(OVERLAP_WAIT):
                    while watcher.peak < LIMIT:  # noqa: ASYNC110 - other owners start runs
                        await asyncio.sleep(0.01)
        return {"count": state.count + 1}

    runner = graph.compile(entry="work", finish="work", store=store)
    metadata = Metadata(
        "slow",
        version,
        description="takes a moment",
        input_schema=COUNTER_SCHEMA,
        vertices=[VertexMetadata("work a moment", "work")],
    )
    return TypedDefinition(metadata, runner)


def owners(session: Session, watcher: Watcher) -> list[tuple[Session, Supervisor]]:
    built = []
    for _ in range(OWNERS):
        other = build_session(session.store)
        other.registry = RunRegistry(watcher)  # type: ignore[arg-type]
        for version in ("v1", *DEPLOYED_VERSIONS):  # and a deployment "slow", 2 revisions
            other.catalog.register(slow_definition(other.checkpoints, watcher, version))
        built.append((other, other.supervisor(poll_interval=0.02)))
    return built


async def run_race(session: Session, kind: str) -> tuple[Watcher, list[Any]]:
    watcher = Watcher(session.store.kv)
    sessions = owners(session, watcher)
    limits = Limits(session.store.kv)
    versions = ["v1"]
    if kind == "definition":
        await limits.set("definition", "slow", LIMIT)
    elif kind == "deployment":  # a deployment belongs to one session: its runs are there
        sessions = sessions[:1]
        scope = deployment_scope_name(sessions[0][0].session_id, "slow")
        await limits.set("deployment", scope, LIMIT)
        versions = list(DEPLOYED_VERSIONS)  # one limit across the deployment's revisions
    else:  # every owner's session gets the limit; one session holds all runs
        sessions = sessions[:1]
        await limits.set("session", sessions[0][0].session_id, LIMIT)
    for _, supervisor in sessions:
        await supervisor.activate()
    created = []
    for i in range(RUNS):
        owner, _ = sessions[i % len(sessions)]
        version = versions[i % len(versions)]
        created.append(await owner.create_run("slow", definition_version=version))

    async def all_finished() -> bool:
        return len(watcher.finished) == RUNS

    try:
        await eventually(all_finished)
    finally:
        for _, supervisor in sessions:
            await supervisor.shutdown()
    return watcher, created


def assert_fifo(watcher: Watcher, created: list[Any]) -> None:
    """Among queued runs: an older run queued before a newer one started, started first."""
    order = {run.id: i for i, run in enumerate(created)}
    position = {run_id: i for i, run_id in enumerate(watcher.started)}
    for older, queued_when in watcher.enqueued.items():
        for newer in watcher.enqueued:
            if order[older] < order[newer] and queued_when <= position[newer]:
                assert position[older] < position[newer], (older, newer)


@pytest.mark.parametrize("kind", ["definition", "deployment", "session"])
async def test_twenty_starts_never_exceed_the_limit_and_keep_fifo(
    session: Session, kind: str
) -> None:
    watcher, created = await run_race(session, kind)
    assert watcher.violations == []
    assert watcher.peak == LIMIT  # the limit was reached, so the check had teeth
    assert len(watcher.enqueued) >= RUNS // 2  # most starts waited in the queue
    assert_fifo(watcher, created)
    for run in created:
        done = await session.registry.get(run.session_id, run.id)
        assert done.status is RunStatus.COMPLETED
    assert await session.store.kv.keys("admission/queue/") == []


async def test_a_queued_run_shows_its_position_and_cancel_removes_it(session: Session) -> None:
    session.catalog.register(slow_definition(session.checkpoints))
    session.gates.close("one")  # the counter runs hold their slots until opened
    await Limits(session.store.kv).set("definition", "counter", 1)
    supervisor = session.supervisor(poll_interval=0.02)
    await supervisor.activate()
    first = await session.create_run()
    second = await session.create_run()
    third = await session.create_run()

    async def third_queued() -> bool:
        return await queued_at(session.store.kv, third) is not None

    await eventually(third_queued)
    async with asyncio.timeout(60):  # only catches a hang
        await session.gates.entered["one"].wait()
    assert (await session.registry.get(session.session_id, first.id)).status is RunStatus.RUNNING
    second_at = await queued_at(session.store.kv, second)
    third_at = await queued_at(session.store.kv, third)
    assert second_at is not None and third_at is not None
    assert (second_at.scope, second_at.position) == ("definition/counter", 1)
    assert third_at.to_json() == {"scope": "definition/counter", "position": 2}
    cancelled = await supervisor.cancel(second.id, "not needed")
    assert cancelled is not None and cancelled.status is RunStatus.CANCELLED
    assert await queued_at(session.store.kv, cancelled) is None
    session.gates.open("one")
    assert await supervisor.wait_idle() is None
    await eventually(lambda: completed(session, third.id))
    assert (await session.registry.get(session.session_id, second.id)).status is (
        RunStatus.CANCELLED
    )
    assert await session.store.kv.keys("admission/queue/") == []
    await supervisor.shutdown()


@pytest.mark.parametrize("bad", [0, -1, 1.5, "2", True, None, 10_001])
async def test_bad_limits_are_typed_errors_naming_the_field(session: Session, bad: object) -> None:
    limits = Limits(session.store.kv)
    with pytest.raises(InvalidLimitError) as caught:
        await limits.set("definition", "counter", bad)
    assert caught.value.field == "max_running"
    assert "max_running" in str(caught.value)
    assert await session.store.kv.keys("admission/") == []


async def test_a_slot_held_by_a_run_that_ended_is_free(session: Session) -> None:
    """A crash between a run's end and any release leaks nothing: the slot's holder is
    terminal, so the next start takes the slot over."""
    await Limits(session.store.kv).set("session", session.session_id, 1)
    ghost = str(uuid.uuid4())
    stale = json.dumps({"session": session.session_id, "run": ghost}).encode()
    await session.store.kv.put(f"admission/slots/session/{session.session_id}/0", stale, expected=0)
    supervisor = session.supervisor(poll_interval=0.02)
    await supervisor.activate()
    run = await session.create_run()
    await eventually(lambda: completed(session, run.id))
    await supervisor.shutdown()


async def test_a_stale_owner_takes_no_slot_and_queues_nothing(session: Session) -> None:
    """Admission writes carry the owner's fence: after the lease moved on, the first
    write is refused inside its transaction and nothing is written."""
    await Limits(session.store.kv).set("definition", "counter", 1)
    run = await session.create_run()
    lease = await session.store.leases.acquire("admission-test-lease", ttl=30)
    stale = lease.fence
    await lease.release()
    newer = await session.store.leases.acquire("admission-test-lease", ttl=30)
    assert newer.fence.epoch > stale.epoch
    gate = Admission(session.store.kv, session.registry)
    with fencing(stale), pytest.raises(storage.FencedWriteError):
        await gate.admit(run)
    assert await session.store.kv.keys("admission/queue/") == []
    assert await session.store.kv.keys("admission/slots/") == []
    with fencing(newer.fence):
        assert await gate.admit(run) is True
    assert len(await session.store.kv.keys("admission/slots/")) == 1
    await newer.release()


async def test_a_deployment_limit_counts_only_that_sessions_deployed_runs(
    session: Session,
) -> None:
    """``deployment/<session>/<name>`` limits the runs of revisions (``r<N>``) of that
    session's deployment: a Python definition of the same name (``v1``) and another
    session's runs of an ``r1`` of the same name are not counted, nor queued."""
    await Limits(session.store.kv).set(
        "deployment", deployment_scope_name(session.session_id, "slow"), 1
    )
    gate = Admission(session.store.kv, session.registry)
    python = await session.create_run("slow")
    first = await session.create_run("slow", definition_version="r1")
    second = await session.create_run("slow", definition_version="r2")
    elsewhere = build_session(session.store)
    foreign = await elsewhere.create_run("slow", definition_version="r1")
    assert [scope.path for scope in await gate.scopes(first)] == [
        f"deployment/{session.session_id}/slow"
    ]
    assert await gate.scopes(python) == [] and await gate.scopes(foreign) == []
    assert await gate.admit(first) is True
    assert await gate.admit(second) is False  # r2 shares r1's limit
    queued = await queued_at(session.store.kv, second)
    assert queued is not None
    assert queued.to_json() == {"scope": f"deployment/{session.session_id}/slow", "position": 1}
    assert await gate.admit(python) is True and await gate.admit(foreign) is True
