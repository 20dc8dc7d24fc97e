"""Schedules through the Python API: bad input writes nothing; a ManualClock drives the
owner's loop (catch-up, overlap, pause/resume); every slot fires exactly once, with owners
racing it, crashing half-way or going stale (SQLite and PostgreSQL)."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from flowledger import flow
from flowledger.clock import ManualClock
from flowledger.storage import FencedWriteError, Store, open_store
from flowledger.workflows.records.run import Run, RunStatus
from flowledger.workflows.runtime.catalog import Catalog
from flowledger.workflows.runtime.session import WorkflowSession
from flowledger.workflows.schedules import (
    Firing,
    InvalidScheduleError,
    ScheduleLoop,
    ScheduleNotFoundError,
    Schedules,
    ScheduleStore,
    derived_id,
    fire,
)
from flowledger.workflows.schedules.loop import _fenced_pass

from ..._postgres import postgres_url
from ..conftest import Gates, counter_definition

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
DEADLINE = 30.0  # seconds: only catches hangs


def app(gates: Gates) -> Catalog:
    placeholder = flow.MemoryCheckpointStore()
    catalog = Catalog()
    catalog.register(counter_definition(placeholder, gates))
    catalog.register(counter_definition(placeholder, gates, interrupting=True))
    return catalog


@pytest.fixture(params=["sqlite", "postgres"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'sched.db'}"
    else:
        with postgres_url() as found:
            yield found


@pytest.fixture
async def store(url: str) -> AsyncIterator[Store]:
    async with open_store(url) as opened:
        yield opened


def build(store: Store, session_id: str, gates: Gates | None = None, **options: Any) -> Any:
    return WorkflowSession.build(store, session_id, app(gates or Gates()), **options)


async def scheduled_runs(session: WorkflowSession) -> list[Run]:
    page = await session.registry.list(session.session_id, limit=100)
    return [run for run in page.runs if run.scheduled_by is not None]


async def settled(session: WorkflowSession) -> list[Run]:
    """The scheduled runs once none is pending or running (bounded by DEADLINE)."""
    async with asyncio.timeout(DEADLINE):
        while True:
            await session.supervisor.wait_idle()
            runs = await scheduled_runs(session)
            if all(run.status.terminal for run in runs):
                return runs
            await asyncio.sleep(0.01)


async def one_pass(loop: ScheduleLoop) -> datetime | None:
    return await _fenced_pass(loop.session.supervisor, loop)


# -- bad input ---------------------------------------------------------------------------


BAD: list[tuple[dict[str, Any], str]] = [
    ({"cron": "every morning"}, "cron"),
    ({"cron": "0 9 * * *", "timezone": "Nowhere/Land"}, "timezone"),
    ({"every": 0}, "every"),
    ({"every": -1}, "every"),
    ({"every": 10, "definition_name": "nope"}, "target"),
    ({"every": 10, "definition_version": "v9"}, "target"),
    ({"every": 10, "input": {"count": -1}}, "input"),
    ({"every": 10, "input": {"count": 1, "extra": True}}, "input"),
    ({"every": 10, "input": {"count": float("nan")}}, "input"),
    ({"every": 10, "overlap": "sometimes"}, "overlap"),
    ({"every": 10, "catch_up": "most"}, "catch_up"),
    ({"every": 10, "cron": "* * * * *"}, "cron"),
    ({"every": 10, "start_at": "yesterday"}, "start_at"),
]


@pytest.mark.parametrize(("change", "field"), BAD)
async def test_bad_input_is_a_typed_error_and_writes_nothing(
    store: Store, change: dict[str, Any], field: str
) -> None:
    session = build(store, str(uuid.uuid4()))
    schedules = Schedules(session, clock=ManualClock(T0))
    arguments: dict[str, Any] = {
        "definition_name": "counter",
        "definition_version": "v1",
        "input": {"count": 0},
        **change,
    }
    before = await store.kv.keys("")
    with pytest.raises(InvalidScheduleError) as caught:
        await schedules.add(**arguments)
    assert caught.value.field == field
    assert await store.kv.keys("") == before


async def test_a_session_sees_and_changes_only_its_own_schedules(store: Store) -> None:
    mine = Schedules(build(store, str(uuid.uuid4())), clock=ManualClock(T0))
    theirs = Schedules(build(store, str(uuid.uuid4())), clock=ManualClock(T0))
    schedule = await theirs.add(
        definition_name="counter", definition_version="v1", input={"count": 0}, every=60
    )
    assert await mine.list() == []
    for attempt in (mine.get, mine.pause, mine.resume, mine.remove, mine.trigger):
        with pytest.raises(ScheduleNotFoundError):
            await attempt(schedule.id)
    assert not (await theirs.get(schedule.id)).paused


# -- the owner's loop --------------------------------------------------------------------


async def test_interval_slots_fire_once_each_and_record_their_slot(store: Store) -> None:
    clock = ManualClock(T0)
    session = build(store, str(uuid.uuid4()))
    await session.supervisor.activate()
    try:
        schedules = Schedules(session, clock=clock)
        schedule = await schedules.add(
            definition_name="counter", definition_version="v1", input={"count": 5}, every=60
        )
        loop = ScheduleLoop(session, clock=clock)
        assert await one_pass(loop) == T0 + timedelta(seconds=60)
        assert await scheduled_runs(session) == []
        for _ in range(3):
            clock.advance(60)
            await one_pass(loop)
            await one_pass(loop)  # a second pass at the same time fires nothing more
            await session.supervisor.wait_idle()  # (overlap: skip would skip a busy slot)
        runs = await settled(session)
        slots = sorted(run.scheduled_by.slot for run in runs if run.scheduled_by)
        assert slots == [T0 + timedelta(seconds=60 * k) for k in (1, 2, 3)]
        assert {run.status for run in runs} == {RunStatus.COMPLETED}
        assert all(run.scheduled_by and run.scheduled_by.schedule_id == schedule.id for run in runs)
        shown = await schedules.describe(await schedules.get(schedule.id), firings=True)
        assert shown["fired"] == 3 and shown["skipped"] == 0
        assert shown["next_fire_times"][0] == "2026-03-01T12:04:00Z"
        assert [f["run_id"] for f in shown["recent_firings"]] == [
            derived_id(session.session_id, schedule.id, T0 + timedelta(seconds=s), False, "run")
            for s in (180, 120, 60)
        ]
    finally:
        await session.supervisor.shutdown()


@pytest.mark.parametrize(("catch_up", "fired"), [("none", 0), ("latest", 1), ("all", 5)])
async def test_catch_up_after_downtime(store: Store, catch_up: str, fired: int) -> None:
    clock = ManualClock(T0)
    session = build(store, str(uuid.uuid4()))
    schedules = Schedules(session, clock=clock)
    schedule = await schedules.add(
        definition_name="counter",
        definition_version="v1",
        input={"count": 0},
        every=10,
        catch_up=catch_up,
        overlap="allow",  # (with skip, a burst of catch-up slots skips its own runs)
    )
    clock.advance(55)  # no owner: slots at 10..50 s came due, the newest 5 s ago (grace 5 s)
    clock.advance(1)
    await session.supervisor.activate()
    try:
        await one_pass(ScheduleLoop(session, clock=clock))
        runs = await settled(session)
        assert len(runs) == fired
        if catch_up == "latest":
            assert runs[0].scheduled_by and runs[0].scheduled_by.slot == T0 + timedelta(seconds=50)
        after = await schedules.get(schedule.id)
        assert (after.fired, after.skipped) == (fired, 5 - fired)
        assert after.cursor == T0 + timedelta(seconds=50)
    finally:
        await session.supervisor.shutdown()


async def test_catch_up_none_fires_a_slot_within_its_grace(store: Store) -> None:
    clock = ManualClock(T0)
    session = build(store, str(uuid.uuid4()))
    schedules = Schedules(session, clock=clock)
    await schedules.add(
        definition_name="counter", definition_version="v1", input={"count": 0}, every=10
    )
    clock.advance(14)  # 4 s late: within half the period
    await session.supervisor.activate()
    try:
        await one_pass(ScheduleLoop(session, clock=clock))
        assert len(await settled(session)) == 1
    finally:
        await session.supervisor.shutdown()


@pytest.mark.parametrize("overlap", ["skip", "queue", "allow"])
async def test_overlap_while_the_previous_run_is_paused(store: Store, overlap: str) -> None:
    clock = ManualClock(T0)
    session = build(store, str(uuid.uuid4()))
    await session.supervisor.activate()
    try:
        schedules = Schedules(session, clock=clock)
        schedule = await schedules.add(
            definition_name="asker",  # pauses until resumed: stays unfinished
            definition_version="v1",
            input={"count": 0},
            every=10,
            overlap=overlap,
            catch_up="all",
        )
        loop = ScheduleLoop(session, clock=clock)
        clock.advance(10)
        await one_pass(loop)
        await session.supervisor.wait_idle()
        clock.advance(10)
        await one_pass(loop)
        await session.supervisor.wait_idle()
        runs = await scheduled_runs(session)
        after = await schedules.get(schedule.id)
        expected = {"skip": (1, 1, 1), "queue": (1, 0, 1), "allow": (2, 0, 2)}[overlap]
        assert (len(runs), after.skipped, after.fired) == (expected[0], expected[1], expected[2])
        if overlap == "queue":  # the second slot fires once the first run has ended
            first = runs[0]
            await session.supervisor.cancel(first.id, "done waiting")
            await one_pass(loop)
            await session.supervisor.wait_idle()
            runs = await scheduled_runs(session)
            assert sorted(r.scheduled_by.slot for r in runs if r.scheduled_by) == [
                T0 + timedelta(seconds=10),
                T0 + timedelta(seconds=20),
            ]
    finally:
        await session.supervisor.shutdown()


async def test_pause_resume_and_trigger(store: Store) -> None:
    clock = ManualClock(T0)
    session = build(store, str(uuid.uuid4()))
    await session.supervisor.activate()
    try:
        schedules = Schedules(session, clock=clock)
        schedule = await schedules.add(
            definition_name="counter", definition_version="v1", input={"count": 0}, every=10
        )
        loop = ScheduleLoop(session, clock=clock)
        await schedules.pause(schedule.id)
        assert (await schedules.describe(await schedules.get(schedule.id)))["next_fire_times"] == []
        clock.advance(35)
        assert await one_pass(loop) is None  # nothing active
        assert await scheduled_runs(session) == []
        firing = await schedules.trigger(schedule.id)  # works while paused
        assert firing.manual and await schedules.trigger(schedule.id) == firing  # same second
        await schedules.resume(schedule.id)
        clock.advance(5)  # 40 s: the first slot after resuming
        await one_pass(loop)
        runs = await settled(session)
        assert sorted(
            (r.scheduled_by.manual, r.scheduled_by.slot) for r in runs if r.scheduled_by
        ) == [
            (False, T0 + timedelta(seconds=40)),
            (True, T0 + timedelta(seconds=35)),
        ]
        await schedules.remove(schedule.id)
        assert await schedules.list() == []
        assert await store.kv.keys(f"sessions/{session.session_id}/workflows/firings/") == []
        assert len(await scheduled_runs(session)) == 2  # its runs stay
    finally:
        await session.supervisor.shutdown()


async def test_the_background_loop_sleeps_until_the_next_slot(store: Store) -> None:
    clock = ManualClock(T0)
    session = build(store, str(uuid.uuid4()))
    await session.supervisor.activate()
    loop = ScheduleLoop(session, clock=clock, rescan=3600)
    try:
        schedules = Schedules(session, clock=clock, loop=loop)
        await schedules.add(
            definition_name="counter", definition_version="v1", input={"count": 0}, every=30
        )
        loop.start()
        async with asyncio.timeout(DEADLINE):
            while clock.sleepers == 0:  # noqa: ASYNC110 - the loop looked and went to sleep
                await asyncio.sleep(0.01)
            passes = loop.passes
            clock.advance(29)
            await asyncio.sleep(0.05)
            assert loop.passes == passes  # not due yet: still asleep
            clock.advance(1)
            while not await scheduled_runs(session):  # noqa: ASYNC110 - a database read
                await asyncio.sleep(0.01)
        assert len(await settled(session)) == 1
    finally:
        await loop.close()
        await session.supervisor.shutdown()


# -- exactly once ------------------------------------------------------------------------


async def test_owners_racing_one_slot_start_one_run(url: str) -> None:
    session_id = str(uuid.uuid4())
    async with open_store(url) as store:
        schedule = await Schedules(build(store, session_id), clock=ManualClock(T0)).add(
            definition_name="counter", definition_version="v1", input={"count": 0}, every=10
        )
    slot = T0 + timedelta(seconds=10)
    stores = [await open_store(url).__aenter__() for _ in range(4)]
    try:
        sessions = [build(s, session_id) for s in stores]
        firings = await asyncio.gather(
            *(
                fire(
                    s,
                    ScheduleStore(s.store.kv),
                    schedule,
                    slot,
                    T0 + timedelta(seconds=k),
                    start=False,
                )
                for k, s in enumerate(sessions)
            )
        )
        assert len({f.run_id for f in firings}) == 1
        assert len({f.fired_at for f in firings}) == 1  # every racer got the stored firing
        assert [r.id for r in await scheduled_runs(sessions[0])] == [firings[0].run_id]
    finally:
        for s in stores:
            await s.__aexit__(None, None, None)


async def test_a_crash_between_firing_record_and_run_is_completed_by_the_next_owner(
    store: Store,
) -> None:
    clock = ManualClock(T0)
    session_id = str(uuid.uuid4())
    first = build(store, session_id)
    schedules = Schedules(first, clock=clock)
    schedule = await schedules.add(
        definition_name="counter", definition_version="v1", input={"count": 0}, every=10
    )
    clock.advance(10)
    slot = T0 + timedelta(seconds=10)
    run_id = derived_id(session_id, schedule.id, slot, False, "run")
    # the dead owner got as far as the firing record
    await ScheduleStore(store.kv).claim_firing(session_id, Firing(schedule.id, slot, run_id, slot))
    assert await scheduled_runs(first) == []
    nxt = build(store, session_id)
    await nxt.supervisor.activate()
    try:
        await one_pass(ScheduleLoop(nxt, clock=clock))
        runs = await settled(nxt)
        assert [r.id for r in runs] == [run_id]
        assert (await schedules.get(schedule.id)).fired == 1
    finally:
        await nxt.supervisor.shutdown()


async def test_a_stale_owner_writes_nothing(store: Store) -> None:
    clock = ManualClock(T0)
    session_id = str(uuid.uuid4())
    stale = build(store, session_id, lease_ttl=0.2)
    schedules = Schedules(stale, clock=clock)
    schedule = await schedules.add(
        definition_name="counter", definition_version="v1", input={"count": 0}, every=10
    )
    await stale.supervisor.activate()
    lease = stale.supervisor._lease
    assert lease is not None
    await lease._stop_renewing()  # the owner stalls; its grant runs out
    await asyncio.sleep(0.5)
    fresh = build(store, session_id)
    await fresh.supervisor.activate()
    try:
        clock.advance(10)
        stale.supervisor._state = "active"  # it does not know yet
        stale.supervisor._fenced_off = False
        with pytest.raises(FencedWriteError):
            await one_pass(ScheduleLoop(stale, clock=clock))
        assert await scheduled_runs(fresh) == []
        assert (await schedules.get(schedule.id)).cursor == T0
        await one_pass(ScheduleLoop(fresh, clock=clock))
        assert len(await settled(fresh)) == 1
    finally:
        await fresh.supervisor.shutdown()
        await stale.supervisor.shutdown()


def test_schedule_record_round_trips() -> None:
    from flowledger.workflows.schedules import CatchUp, Overlap, Schedule, Timing
    from flowledger.workflows.schedules.record import decode_schedule, encode_schedule

    schedule = Schedule(
        id=str(uuid.uuid4()),
        session_id=str(uuid.uuid4()),
        definition_name="counter",
        definition_version="v1",
        input={"count": 1},
        timing=Timing.cron_in("0 9 * * 1-5", "Europe/Riga"),
        overlap=Overlap.QUEUE,
        catch_up=CatchUp.ALL,
        created_at=T0,
        cursor=T0,
        last_run_id=str(uuid.uuid4()),
        fired=3,
    )
    assert decode_schedule(encode_schedule(schedule), 7) == replace(schedule, revision=7)
