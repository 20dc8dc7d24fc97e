"""A freed slot wakes the queue: a run that ends wakes the owner of the run next in line,
so a queued run starts without waiting for its owner's fallback poll (memory, SQLite,
PostgreSQL). The owners here poll only every hour: every pass they make was woken."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from flowledger.workflows.admission import Limits, queued_at
from flowledger.workflows.records.run import RunStatus
from flowledger.workflows.records.wakeups import wake_session
from flowledger.workflows.runtime.supervisor import Supervisor, queue_wake

from ..conftest import Session, build_session

HOUR = 3600.0  # the fallback poll: never reached while the test runs


async def eventually(check: Callable[[], Awaitable[bool]], seconds: float = 120.0) -> None:
    """Wait until ``check()`` holds; the deadline only catches a hang."""
    async with asyncio.timeout(seconds):
        while not await check():  # noqa: ASYNC110 - owners change the store
            await asyncio.sleep(0.02)


def counting_polls(supervisor: Supervisor) -> list[int]:
    """Count the passes ``supervisor`` makes (the poll loop calls ``poll``)."""
    count = [0]
    inner = supervisor.poll

    async def poll(*args: Any, **kwargs: Any) -> Any:
        count[0] += 1
        return await inner(*args, **kwargs)

    supervisor.poll = poll  # type: ignore[method-assign]
    return count


async def test_a_run_that_ends_wakes_the_owner_of_the_next_queued_run(
    session: Session, monkeypatch: pytest.MonkeyPatch
) -> None:
    woken: list[str] = []  # the sessions a run's end woke (`queue_wake`)

    async def waking(wakeups: Any, session_id: str) -> None:
        woken.append(session_id)
        await wake_session(wakeups, session_id)

    monkeypatch.setattr(queue_wake, "wake_session", waking)
    first_owner = build_session(session.store, gates=session.gates)
    second_owner = build_session(session.store, gates=session.gates)
    session.gates.close("one")  # the first run holds its slot until the gate opens
    await Limits(session.store.kv).set("definition", "counter", 1)
    wakeups = session.store.wakeups
    first = first_owner.supervisor(poll_interval=HOUR, wakeups=wakeups)
    second = second_owner.supervisor(poll_interval=HOUR, wakeups=wakeups)
    polls = counting_polls(second)
    # Each run exists before its owner takes the session, so activation starts it.
    holder = await first_owner.create_run()
    await first.activate()
    async with asyncio.timeout(120):  # only catches a hang
        await session.gates.entered["one"].wait()
    waiting = await second_owner.create_run()
    await second.activate()

    async def queued() -> bool:
        return await queued_at(session.store.kv, waiting) is not None

    await eventually(queued)

    async def listening() -> bool:  # the second owner's poll loop hears its channel
        await wake_session(wakeups, second_owner.session_id)
        return polls[0] > 0

    await eventually(listening)
    await asyncio.sleep(0.1)  # let that pass finish (its count is all that is read)
    polls_while_queued = polls[0]
    assert (await second_owner.registry.get(waiting.session_id, waiting.id)).status is (
        RunStatus.PENDING
    )

    assert woken == []
    session.gates.open("one")  # the holder ends; its slot frees; the queue is woken

    async def started_and_done() -> bool:
        run = await second_owner.registry.get(waiting.session_id, waiting.id)
        return run.status is RunStatus.COMPLETED

    await eventually(started_and_done)
    done = await first_owner.registry.get(holder.session_id, holder.id)
    assert done.status is RunStatus.COMPLETED
    # The second owner made a pass after the slot freed although its poll is an hour
    # away: the end woke it (a handful of passes, not a poll loop).
    assert woken == [second_owner.session_id]  # the holder's end woke the next in line
    assert polls[0] > polls_while_queued
    assert polls[0] <= polls_while_queued + 10
    assert await session.store.kv.keys("admission/queue/") == []
    await first.shutdown()
    await second.shutdown()
