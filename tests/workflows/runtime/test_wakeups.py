"""Workers and owners woken by front doors instead of polling (issue #33, item 1).

Every worker here polls every 60 s at the earliest and beats its heartbeat every 200 s
(``lease_ttl`` 600 s), while every wait is bounded by a 30 s hang deadline: a run that
completes was picked up by a wake-up, not by a poll. No assertion bounds a time.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from flowledger.host import open_session
from flowledger.storage import Store, open_store
from flowledger.storage.postgres.wakeups import PostgresListener
from flowledger.workflows.records.run import RunStatus
from flowledger.workflows.runtime.frontdoor import FrontDoor
from flowledger.workflows.runtime.session import WorkflowSession
from flowledger.workflows.runtime.waiting import FAST_POLL
from flowledger.workflows.runtime.worker import Worker, WorkerSettings

from ..._pgbouncer import pgbouncer_url
from ..._postgres import drop_schema, new_schema, postgres_url, require_postgres, with_options
from ..conftest import Gates
from .test_worker import app, create_run, status

HANG = 30.0  # seconds: only catches a hang (the fallback poll is at least 48 s)
SLOW = WorkerSettings(lease_ttl=600, poll=60, idle_release=600)


async def eventually(check: Callable[[], Awaitable[bool]]) -> None:
    async with asyncio.timeout(HANG):
        while True:
            if await check():
                return
            await asyncio.sleep(0.01)


@contextlib.asynccontextmanager
async def running(worker: Worker, *, live: bool = True) -> AsyncIterator[Worker]:
    """Run ``worker`` until its first tick is done and its wake-ups are ``live``."""
    stop = asyncio.Event()
    task = asyncio.ensure_future(worker.run(stop))

    async def ready() -> bool:
        waiter = worker.waiter
        return worker.ticks >= 1 and waiter is not None and waiter.live is live

    try:
        await eventually(ready)
        yield worker
    finally:
        stop.set()
        await asyncio.wait_for(task, HANG)


def door(store: Store, catalog: Any, sid: str) -> FrontDoor:
    return FrontDoor.for_session(
        WorkflowSession.build(store, sid, catalog), start_timeout=HANG, request_timeout=HANG
    )


async def test_front_door_starts_resumes_and_cancels_wake_the_worker(store_url: str) -> None:
    gates = Gates()
    catalog = app(gates)
    sid = str(uuid.uuid4())
    async with open_store(store_url) as store, running(Worker(store, catalog, SLOW)):
        front = door(store, catalog, sid)
        run = await create_run(store, catalog, sid)
        await asyncio.wait_for((await front.start(run.id)).wait(), HANG)

        async def done() -> bool:
            return await status(store, run) is RunStatus.COMPLETED

        await eventually(done)
        asker = await create_run(store, catalog, sid, "asker", 1)
        doomed = await create_run(store, catalog, sid, "asker", 1)
        for started in (asker, doomed):
            await asyncio.wait_for((await front.start(started.id)).wait(), HANG)

        async def paused() -> bool:
            states = [await status(store, r) for r in (asker, doomed)]
            return states == [RunStatus.INTERRUPTED] * 2

        await eventually(paused)
        resumed, cancelled = await asyncio.wait_for(
            asyncio.gather(front.resume(asker.id, b'{"increment":2}'), front.cancel(doomed.id)),
            HANG,
        )
        assert resumed.status is RunStatus.COMPLETED
        assert cancelled.status is RunStatus.CANCELLED


async def test_a_second_store_on_the_database_wakes_the_worker(
    store_url: str, tmp_path: Any
) -> None:
    """A front door on a store of its own (another process, on PostgreSQL; another
    store on the same file, on SQLite - other processes on it are not woken)."""
    if store_url.startswith("memory"):
        pytest.skip("a memory store is private to its opener")
    gates = Gates()
    catalog = app(gates)
    sid = str(uuid.uuid4())
    async with (
        open_store(store_url) as worker_store,
        open_store(store_url) as door_store,
        running(Worker(worker_store, catalog, SLOW)),
    ):
        run = await create_run(door_store, catalog, sid)
        await asyncio.wait_for((await door(door_store, catalog, sid).start(run.id)).wait(), HANG)


class _Counting:
    """A storage primitive that counts the calls made on it outside a worker's tick."""

    def __init__(self, inner: object, calls: list[str], ticking: list[bool]) -> None:
        self._inner = inner
        self._calls = calls
        self._ticking = ticking

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self._inner, name)
        if not callable(attribute):
            return attribute

        def counted(*args: Any, **kwargs: Any) -> Any:
            where = "tick" if self._ticking[0] else "idle"
            self._calls.append(f"{where}:{name}")
            return attribute(*args, **kwargs)

        return counted


class _TickFlag(Worker):
    ticking = [False]

    async def tick(self) -> None:
        self.ticking[0] = True
        try:
            await super().tick()
        finally:
            self.ticking[0] = False


async def test_an_idle_worker_issues_no_queries_between_polls(store_url: str) -> None:
    """Every call on the store's KV, blobs and ledger is counted; an idle worker makes
    its first tick and then none (its fallback poll is 60 s away), so nothing."""
    calls: list[str] = []
    ticking = [False]
    async with open_store(store_url) as store:
        counted = dataclasses.replace(
            store,
            kv=_Counting(store.kv, calls, ticking),
            blobs=_Counting(store.blobs, calls, ticking),
            ledger=_Counting(store.ledger, calls, ticking),
        )
        worker = _TickFlag(counted, app(Gates()), SLOW)
        worker.ticking = ticking
        async with running(worker):
            assert calls and all(c.startswith("tick:") for c in calls)  # the first tick
            ticks, seen = worker.ticks, len(calls)
            await asyncio.sleep(1.5)  # three ticks' worth of the old 0.5 s poll
            assert worker.ticks == ticks
            assert len(calls) == seen
            assert all(c.startswith("tick:") for c in calls)


async def test_a_killed_listener_reconnects_and_no_work_is_lost() -> None:
    """``pg_terminate_backend`` on the worker's listening connection: work written while
    it is away is found (the reconnection wakes the worker; meanwhile it polls fast),
    and later work wakes it through the new connection."""
    pytest.importorskip("psycopg")
    gates = Gates()
    catalog = app(gates)
    sid = str(uuid.uuid4())
    with postgres_url() as url:
        async with open_store(url) as store, running(Worker(store, catalog, SLOW)) as worker:
            assert worker.waiter is not None
            listener = worker.waiter.listener
            assert isinstance(listener, PostgresListener)
            pid = listener.backend_pid
            assert pid is not None
            front = door(store, catalog, sid)
            database = store.kv._db  # type: ignore[attr-defined]
            async with database.connection() as conn:
                await conn.execute("SELECT pg_terminate_backend(%s)", (pid,))
            lost = await create_run(store, catalog, sid)
            await asyncio.wait_for((await front.start(lost.id)).wait(), HANG)

            async def back() -> bool:
                return listener.live and listener.backend_pid not in (None, pid)

            await eventually(back)
            assert listener.connects >= 2
            later = await create_run(store, catalog, sid)
            await asyncio.wait_for((await front.start(later.id)).wait(), HANG)


@pytest.mark.parametrize("direct", [True, False], ids=["listen_url", "pooled-only"])
async def test_a_worker_behind_pgbouncer_in_transaction_mode(tmp_path: Path, direct: bool) -> None:
    """The documented ``?prepare=off`` set-up behind a transaction-mode PgBouncer. With a
    direct ``listen_url`` the worker is woken (its fallback poll is 60 s away); with only
    the pooled URL there are no wake-ups and it polls every ``FAST_POLL`` instead - the
    start is found either way."""
    pytest.importorskip("psycopg")
    gates = Gates()
    catalog = app(gates)
    sid = str(uuid.uuid4())
    schema = new_schema()
    options: dict[str, object] = {"schema": schema, "prepare": "off"}
    if direct:
        options["listen_url"] = require_postgres()
    try:
        with pgbouncer_url(tmp_path) as pooled:
            url = with_options(pooled, **options)
            async with (
                open_store(url) as store,
                running(Worker(store, catalog, SLOW), live=direct) as worker,
            ):
                assert worker.waiter is not None
                assert worker.waiter.interval == (60 if direct else FAST_POLL)
                run = await create_run(store, catalog, sid)
                front = door(store, catalog, sid)
                await asyncio.wait_for((await front.start(run.id)).wait(), HANG)
    finally:
        drop_schema(schema)


def patient_door(store: Store, catalog: Any, sid: str) -> FrontDoor:
    """A front door whose own polling is 60 s apart: what it waits for within the 30 s
    hang deadline was announced by the owner's ``replies.<session>`` wake-up."""
    session = WorkflowSession.build(store, sid, catalog)
    return FrontDoor(
        sid,
        catalog=session.catalog,
        registry=session.registry,
        checkpoints=session.checkpoints,
        journal=session.journal,
        requests=session.requests,
        start_timeout=HANG,
        request_timeout=HANG,
        outcome_timeout=HANG,
        poll=60,
        max_poll=60,
        wakeups=store.wakeups,
    )


async def test_a_front_door_waiting_for_a_seed_is_woken_by_the_owner(store_url: str) -> None:
    gates = Gates()
    catalog = app(gates)
    sid = str(uuid.uuid4())
    async with open_store(store_url) as store, running(Worker(store, catalog, SLOW)):
        front = patient_door(store, catalog, sid)
        for _ in range(2):  # the first opens the front door's listener, the second reuses it
            run = await create_run(store, catalog, sid)
            ticket = await front.start(run.id)
            await asyncio.wait_for(ticket.wait(), HANG)
            assert await status(store, run) is not RunStatus.PENDING


async def test_a_front_door_waiting_for_a_resume_or_cancel_is_woken_by_the_owner(
    store_url: str,
) -> None:
    """Resume (carried out, then refused) and cancel: each returns after one wake-up of
    the owner's, not after the door's 60 s poll."""
    gates = Gates()
    catalog = app(gates)
    sid = str(uuid.uuid4())
    async with open_store(store_url) as store, running(Worker(store, catalog, SLOW)):
        front = patient_door(store, catalog, sid)
        asker = await create_run(store, catalog, sid, "asker", 1)
        doomed = await create_run(store, catalog, sid, "asker", 1)
        for run in (asker, doomed):
            await asyncio.wait_for((await front.start(run.id)).wait(), HANG)

        async def paused() -> bool:
            states = [await status(store, r) for r in (asker, doomed)]
            return states == [RunStatus.INTERRUPTED] * 2

        await eventually(paused)
        resumed = await asyncio.wait_for(front.resume(asker.id, b'{"increment":2}'), HANG)
        assert resumed.status is RunStatus.COMPLETED
        cancelled = await asyncio.wait_for(front.cancel(doomed.id), HANG)
        assert cancelled.status is RunStatus.CANCELLED


async def test_an_idle_owner_polls_only_as_a_fallback_where_front_doors_wake_it(
    store_url: str,
) -> None:
    """`open_session`'s owner: where a front door in any process wakes it (PostgreSQL),
    it looks for requests every `OWNER_FALLBACK_POLL` (5 s) unless woken, so an idle
    second and a half passes without a look (the old 1 s poll made one); where only this
    process can wake it (SQLite, memory) it keeps the 1 s poll. A front door's start,
    resume and cancel are still carried out (woken)."""
    gates = Gates()
    catalog = app(gates)
    sid = str(uuid.uuid4())
    async with open_store(store_url) as probe:
        across = probe.wakeups.across_processes
    assert across is store_url.startswith("postgres")
    async with open_session(store_url, catalog, sid) as session:
        owner = session.supervisor
        polls = [0]
        poll = owner.poll

        async def counted(*args: Any, **kwargs: Any) -> None:
            polls[0] += 1
            await poll(*args, **kwargs)

        owner.poll = counted  # type: ignore[method-assign]
        await asyncio.sleep(1.5)
        assert (polls[0] == 0) is across
        front = patient_door(session.store, catalog, sid)
        run = await create_run(session.store, catalog, sid, "asker", 1)
        await asyncio.wait_for((await front.start(run.id)).wait(), HANG)

        async def paused() -> bool:
            return await status(session.store, run) is RunStatus.INTERRUPTED

        await eventually(paused)
        resumed = await asyncio.wait_for(front.resume(run.id, b'{"increment":2}'), HANG)
        assert resumed.status is RunStatus.COMPLETED
