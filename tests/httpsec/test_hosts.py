"""`flowledger.httpsec.hosts.SessionHosts`: one served session per tenant, each in its
own task; one that cannot open fails only its own requests."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest

from flowledger.httpsec import ServerStoppingError, SessionHosts

log = logging.getLogger("tests.httpsec")


class Sessions:
    """An opener recording what each session did, in which task."""

    def __init__(self) -> None:
        self.opened: list[str | None] = []
        self.closed: list[str | None] = []
        self.tasks: dict[str | None, set[asyncio.Task[object] | None]] = {}
        self.failures: dict[str | None, int] = {}
        self.gates: dict[str | None, asyncio.Event] = {}
        self.stuck: set[str | None] = set()

    @asynccontextmanager
    async def open(self, session_id: str | None) -> AsyncIterator[str]:
        self.tasks.setdefault(session_id, set()).add(asyncio.current_task())
        if session_id in self.gates:
            await self.gates[session_id].wait()
        if self.failures.get(session_id, 0) > 0:
            self.failures[session_id] -= 1
            raise RuntimeError(f"cannot open {session_id}")
        self.opened.append(session_id)
        yield f"served {session_id}"
        if session_id in self.stuck:
            await asyncio.Event().wait()  # never stops by itself
        self.tasks[session_id].add(asyncio.current_task())
        self.closed.append(session_id)


async def test_a_session_is_opened_once_in_a_task_of_its_own() -> None:
    sessions = Sessions()
    hosts = SessionHosts(sessions.open, log=log)
    assert await hosts.get("a") == "served a"
    assert await hosts.get("a") == "served a"
    assert await hosts.get(None) == "served None"
    assert sessions.opened == ["a", None]
    await hosts.close()
    assert sorted(sessions.closed, key=str) == [None, "a"]
    for tasks in sessions.tasks.values():
        assert len(tasks) == 1  # entered and left by the same task...
        assert asyncio.current_task() not in tasks  # ...not the caller's


async def test_a_failure_reaches_each_waiter_and_the_next_request_tries_again() -> None:
    sessions = Sessions()
    sessions.failures["a"] = 1
    sessions.gates["a"] = asyncio.Event()
    hosts = SessionHosts(sessions.open, log=log)
    waiters = [asyncio.create_task(hosts.get("a")) for _ in range(3)]
    await asyncio.sleep(0)
    sessions.gates["a"].set()
    results = await asyncio.gather(*waiters, return_exceptions=True)
    assert all(isinstance(r, RuntimeError) and str(r) == "cannot open a" for r in results)
    assert await hosts.get("a") == "served a"
    await hosts.close()


async def test_one_session_opening_never_holds_up_another() -> None:
    sessions = Sessions()
    sessions.gates["slow"] = asyncio.Event()
    hosts = SessionHosts(sessions.open, log=log)
    slow = asyncio.create_task(hosts.get("slow"))
    assert await hosts.get("fast") == "served fast"
    assert not slow.done()
    sessions.gates["slow"].set()
    assert await slow == "served slow"
    await hosts.close()


async def test_close_stops_every_session_then_refuses() -> None:
    sessions = Sessions()
    sessions.stuck.add("stuck")
    hosts = SessionHosts(sessions.open, log=log, stop_timeout=0.05)
    await hosts.get("a")
    await hosts.get("stuck")
    await hosts.close()  # "a" leaves normally; "stuck" is cancelled after stop_timeout
    assert sessions.closed == ["a"]
    with pytest.raises(ServerStoppingError, match="the server is stopping"):
        await hosts.get("a")
