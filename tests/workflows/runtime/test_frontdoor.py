"""Front doors and the owner's side of their requests: the unfinished-run index, durable
resume and cancel requests, `Supervisor.poll`, and `FrontDoor` (ours: DESIGN "Scale-out").

A front door never owns the session. In these tests the owner is an in-process
supervisor that polls for requests (a worker does the same on every tick)."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, replace
from typing import Any

import pytest

from flowledger.storage import open_store
from flowledger.tools import ToolError, WorkflowTools
from flowledger.workflows.errors import (
    ConflictError,
    FrontDoorTimeoutError,
    InvalidInputError,
)
from flowledger.workflows.records.registry import RunRegistry
from flowledger.workflows.records.requests import (
    RunRequests,
    cancel_request_key,
    resume_request_key,
)
from flowledger.workflows.records.run import RunStatus
from flowledger.workflows.records.unfinished import ORPHAN_GRACE, UnfinishedIndex, unfinished_key
from flowledger.workflows.runtime.frontdoor import FrontDoor
from flowledger.workflows.runtime.supervisor import Supervisor

from ..conftest import Session, build_session

POLL = 0.02


@dataclass
class Door:
    session: Session
    index: UnfinishedIndex
    requests: RunRequests
    door: FrontDoor

    def owner(self, **options: Any) -> Supervisor:
        return self.session.supervisor(requests=self.requests, **options)

    def tools(self) -> WorkflowTools:
        return WorkflowTools(
            self.session.session_id,
            catalog=self.session.catalog,
            registry=self.session.registry,
            inputs=self.session.inputs,
            supervisor=self.door,
            start_timeout=self.door.start_timeout + 5,
        )

    async def indexed(self) -> list[str]:
        return await self.index.runs(self.session.session_id)

    async def status(self, run_id: str) -> RunStatus:
        return (await self.session.registry.get(self.session.session_id, run_id)).status


def make_door(session: Session, **timeouts: float) -> Door:
    index = UnfinishedIndex(session.store.kv)
    session = replace(session, registry=RunRegistry(session.store.kv, index=index))
    requests = RunRequests(session.store.kv)
    door = FrontDoor(
        session.session_id,
        catalog=session.catalog,
        registry=session.registry,
        checkpoints=session.checkpoints,
        journal=session.journal,
        requests=requests,
        poll=0.01,
        max_poll=0.05,
        **timeouts,
    )
    return Door(session, index, requests, door)


@pytest.fixture
async def door(store_url: str) -> AsyncIterator[Door]:
    async with open_store(store_url) as store:
        yield make_door(build_session(store), start_timeout=10, request_timeout=10)


async def eventually(check: Callable[[], Awaitable[bool]], seconds: float = 60.0) -> None:
    """Wait until ``check()`` holds (the owner cleans up just after the outcome is visible)."""
    for _ in range(int(seconds / 0.01)):
        if await check():
            return
        await asyncio.sleep(0.01)
    assert await check()


async def interrupted_run(door: Door, owner: Supervisor) -> str:
    run = await door.session.create_run("asker", {"count": 1})
    await (await owner.start(run.id)).wait()
    await owner.wait_idle()
    assert await door.status(run.id) is RunStatus.INTERRUPTED
    return run.id


# -- the index -----------------------------------------------------------------------------


async def test_the_index_holds_exactly_the_unfinished_runs(door: Door) -> None:
    """A created run is indexed before its record exists; a terminal one is not."""
    owner = door.owner()
    await owner.activate()
    done = await door.session.create_run()
    paused = await door.session.create_run("asker", {"count": 0})
    pending = await door.session.create_run()
    assert sorted(await door.indexed()) == sorted([done.id, paused.id, pending.id])
    for run in (done, paused):
        await (await owner.start(run.id)).wait()
    await owner.wait_idle()
    assert sorted(await door.indexed()) == sorted([paused.id, pending.id])
    await owner.cancel(paused.id, "no")
    await owner.cancel(pending.id, "no")
    assert await door.indexed() == []
    scan = await door.index.scan()
    assert scan == {}
    await owner.shutdown()


async def test_orphan_entries_are_removed_only_after_the_grace(door: Door) -> None:
    """An entry without a run record may be a record being written: it is kept for
    ORPHAN_GRACE seconds, then removed by the owner's poll."""
    clock = [time.time()]
    index = UnfinishedIndex(door.session.store.kv, clock=lambda: clock[0])
    sid = door.session.session_id
    orphan = "11111111-2222-4333-8444-555555555555"
    await index.add(sid, orphan)
    owner = door.owner()
    await owner.activate()
    await owner.poll()
    await owner.wait_idle()
    assert await door.indexed() == [orphan]
    clock[0] += ORPHAN_GRACE + 1
    assert await index.remove_orphan(sid, orphan)
    assert await door.indexed() == []
    await owner.shutdown()


async def test_activation_backfills_the_index_and_poll_drops_stale_entries(door: Door) -> None:
    """Runs written without the index are indexed by a full activation; an entry left for
    a run that is in fact terminal is removed by the next poll."""
    plain = build_session(door.session.store, door.session.session_id, door.session.gates)
    old = await plain.create_run("asker", {"count": 0})  # no index entry
    assert await door.indexed() == []
    owner = door.owner()
    await owner.activate()
    await owner.wait_idle()
    assert await door.indexed() == [old.id]
    await owner.cancel(old.id, "done")
    await door.index.add(door.session.session_id, old.id)  # as if a crash kept it
    await owner.poll()
    assert await door.indexed() == []
    key = unfinished_key(door.session.session_id, old.id)
    assert key not in await door.session.store.kv.keys("workflows/")
    await owner.shutdown()


# -- start -----------------------------------------------------------------------------------


async def test_front_door_start_returns_once_the_owner_seeded(door: Door) -> None:
    owner = door.owner(poll_interval=POLL)
    await owner.activate()
    result = await door.tools().call(
        "workflow_run_start",
        {"definition_name": "counter", "definition_version": "v1", "input": {"count": 0}},
    )
    assert result["run_status"] in ("running", "completed")
    run_id = result["run_id"]
    for _ in range(200):
        if await door.status(run_id) is RunStatus.COMPLETED:
            break
        await asyncio.sleep(0.02)
    assert await door.status(run_id) is RunStatus.COMPLETED
    assert door.session.gates.runs == {"one": 1, "two": 1}

    async def unindexed() -> bool:
        return await door.indexed() == []

    await eventually(unindexed)
    await owner.shutdown()


async def test_front_door_start_without_a_worker_says_so(store_url: str) -> None:
    async with open_store(store_url) as store:
        door = make_door(build_session(store), start_timeout=0.3)
        with pytest.raises(ToolError) as info:
            await door.tools().call(
                "workflow_run_start",
                {"definition_name": "counter", "definition_version": "v1", "input": {"count": 0}},
            )
        message = str(info.value)
        run_id = message.split("run ")[1].split(" ")[0]
        assert message == (
            f"workflow tools: no worker started run {run_id} within 0.3 s; is a "
            "`flowledger worker` running against this database?"
        )
        assert isinstance(info.value.cause, FrontDoorTimeoutError)
        assert await door.status(run_id) is RunStatus.PENDING  # a later worker starts it
        assert await door.indexed() == [run_id]
        owner = door.owner()
        await owner.activate()
        await owner.wait_idle()
        assert await door.status(run_id) is RunStatus.COMPLETED
        await owner.shutdown()


async def test_a_start_cut_short_before_its_seed_is_started_again(door: Door) -> None:
    """(ours) The owner died between the running transition and the durable seed: the next
    owner starts the run instead of failing it as "checkpoint missing"."""
    run = await door.session.create_run()
    running = replace(run, status=RunStatus.RUNNING, status_summary="workflow running")
    await door.session.registry.compare_and_swap(run.revision, running)
    owner = door.owner()
    await owner.activate()
    assert await owner.wait_idle() is None
    assert await door.status(run.id) is RunStatus.COMPLETED
    await owner.shutdown()


# -- resume ------------------------------------------------------------------------------------


async def test_front_door_resume_is_carried_out_by_the_owner(door: Door) -> None:
    owner = door.owner(poll_interval=POLL)
    await owner.activate()
    run_id = await interrupted_run(door, owner)
    result = await door.tools().call(
        "workflow_run_resume", {"run_id": run_id, "resume": {"increment": 2}}
    )
    assert result["run_status"] == "completed"
    assert door.session.gates.runs == {"ask": 2}
    sid = door.session.session_id
    assert await door.requests.resume_request(sid, run_id) is None
    run = await door.session.registry.get(sid, run_id)
    state = await door.session.catalog.resolve("asker", "v1").get(run.graph_run_id)
    assert state.state["count"] == 3
    assert await door.session.kinds(run_id) == [
        "run_started",
        "run_interrupted",
        "run_resumed",
        "vertex_completed",
        "run_completed",
    ]
    await owner.shutdown()


async def test_concurrent_front_door_resumes_execute_once(door: Door) -> None:
    owner = door.owner(poll_interval=POLL)
    await owner.activate()
    run_id = await interrupted_run(door, owner)
    outcomes = await asyncio.gather(
        *(door.door.resume(run_id, b'{"increment":1}') for _ in range(8)),
        return_exceptions=True,
    )
    winners = [o for o in outcomes if not isinstance(o, BaseException)]
    losers = [o for o in outcomes if isinstance(o, BaseException)]
    assert len(winners) == 1, outcomes
    assert all(isinstance(e, ConflictError) for e in losers), losers
    assert door.session.gates.runs == {"ask": 2}
    await owner.shutdown()


async def test_an_unanswered_resume_request_is_withdrawn(store_url: str) -> None:
    """Nobody owns the session: the request is withdrawn at the timeout, and a later
    owner does not carry it out."""
    async with open_store(store_url) as store:
        door = make_door(build_session(store), request_timeout=0.3)
        first = door.owner()
        await first.activate()
        run_id = await interrupted_run(door, first)
        await first.shutdown()
        with pytest.raises(FrontDoorTimeoutError) as info:
            await door.door.resume(run_id, b'{"increment":1}')
        assert not info.value.picked_up
        assert "no worker resumed run" in str(info.value)
        request = await door.requests.resume_request(door.session.session_id, run_id)
        assert request is not None and (request.state, request.error) == ("failed", "withdrawn")
        second = door.owner()
        await second.activate()
        await second.poll()
        await second.wait_idle()
        assert await door.status(run_id) is RunStatus.INTERRUPTED
        assert door.session.gates.runs == {"ask": 1}
        # A new request replaces the withdrawn one.
        second_poll = asyncio.ensure_future(_poll_until_done(second, door, run_id))
        after = await door.door.resume(run_id, b'{"increment":1}')
        await second_poll
        assert after.status is RunStatus.COMPLETED
        await second.shutdown()


async def _poll_until_done(owner: Supervisor, door: Door, run_id: str) -> None:
    for _ in range(500):
        await owner.poll()
        await owner.wait_idle()
        if await door.status(run_id) is RunStatus.COMPLETED:
            return
        await asyncio.sleep(0.01)


async def test_resume_requests_are_bound_to_their_interrupt(door: Door) -> None:
    """A request for an earlier interrupt is refused as stale; one for a run that is not
    interrupted is refused; the front door turns refusals into the owner's errors."""
    owner = door.owner()
    await owner.activate()
    run_id = await interrupted_run(door, owner)
    sid = door.session.session_id
    run = await door.session.registry.get(sid, run_id)
    stale = await door.requests.request_resume(
        sid, run_id, b'{"increment":1}', run.checkpoint_revision - 1
    )
    await owner.poll()
    await owner.wait_idle()
    refused = await door.requests.resume_request(sid, run_id)
    assert refused is not None and (refused.state, refused.error) == ("failed", "stale")
    assert stale.state == "requested"
    assert await door.status(run_id) is RunStatus.INTERRUPTED
    refusal = door.door._refusal(refused)
    assert isinstance(refusal, ConflictError) and refusal.reason == "run is not interrupted"
    await owner.cancel(run_id, "done")
    await owner.poll()
    await owner.wait_idle()
    with pytest.raises(ConflictError, match="not interrupted"):
        await door.door.resume(run_id, b'{"increment":1}')
    await owner.shutdown()


async def test_an_accepted_request_survives_its_owner(door: Door) -> None:
    """The owner accepted a request and died before the resume took effect: the next owner
    carries it out, once; a request whose resume took effect is just deleted."""
    owner = door.owner()
    await owner.activate()
    run_id = await interrupted_run(door, owner)
    await owner.shutdown()
    sid = door.session.session_id
    run = await door.session.registry.get(sid, run_id)
    request = await door.requests.request_resume(
        sid, run_id, b'{"increment":5}', run.checkpoint_revision
    )
    await door.requests.accept_resume(request)
    second = door.owner()
    await second.activate()
    await second.poll()
    await second.wait_idle()
    assert await door.status(run_id) is RunStatus.COMPLETED
    assert door.session.gates.runs == {"ask": 2}
    assert await door.requests.resume_request(sid, run_id) is None
    # Left behind after it took effect (the run moved on): deleted, not executed again.
    await door.session.store.kv.put(
        resume_request_key(sid, run_id),
        json.dumps(
            {
                "version": 1,
                "payload": '{"increment":5}',
                "checkpoint_revision": run.checkpoint_revision,
                "requested_at": 1.0,
                "state": "accepted",
                "error": "",
            }
        ).encode(),
        expected=0,
    )
    await second.poll()
    await second.wait_idle()
    assert await door.requests.resume_request(sid, run_id) is None
    assert door.session.gates.runs == {"ask": 2}
    await second.shutdown()


async def test_a_refused_payload_is_reported(door: Door) -> None:
    owner = door.owner(poll_interval=POLL)
    await owner.activate()
    run_id = await interrupted_run(door, owner)
    sid = door.session.session_id
    run = await door.session.registry.get(sid, run_id)
    await door.requests.request_resume(sid, run_id, b'{"increment":0}', run.checkpoint_revision)
    for _ in range(200):
        request = await door.requests.resume_request(sid, run_id)
        if request is not None and request.state == "failed":
            break
        await asyncio.sleep(0.01)
    assert request is not None and request.error == "invalid"
    assert isinstance(door.door._refusal(request), InvalidInputError)
    assert await door.status(run_id) is RunStatus.INTERRUPTED
    await owner.shutdown()


# -- cancel ------------------------------------------------------------------------------------


async def test_front_door_cancel_stops_a_running_run(door: Door) -> None:
    door.session.gates.close("one")
    owner = door.owner(poll_interval=POLL)
    await owner.activate()
    run = await door.session.create_run()
    await (await owner.start(run.id)).wait()
    await door.session.gates.entered["one"].wait()
    result = await door.tools().call(
        "workflow_run_cancel", {"run_id": run.id, "reason": "changed my mind"}
    )
    assert result["run_status"] == "cancelled"
    assert not result["idempotent"]
    sid = door.session.session_id

    async def answered() -> bool:
        keys = await door.session.store.kv.keys("sessions/")
        return cancel_request_key(sid, run.id) not in keys and await door.indexed() == []

    await eventually(answered)
    record = await door.session.registry.get(sid, run.id)
    assert record.cancel_requested
    latest = await door.session.checkpoints.latest(run.graph_run_id)
    assert latest.run.cancel_reason == "changed my mind"
    again = await door.tools().call("workflow_run_cancel", {"run_id": run.id})
    assert again["idempotent"]
    door.session.gates.open("one")
    await owner.shutdown()


async def test_front_door_cancel_of_pending_and_interrupted_runs(door: Door) -> None:
    owner = door.owner(poll_interval=POLL)
    paused_owner = door.owner()
    await paused_owner.activate()
    paused = await interrupted_run(door, paused_owner)
    await paused_owner.shutdown()
    pending = await door.session.create_run()
    door.session.gates.close("one")  # activation starts it; it waits in its first vertex
    await owner.activate()
    cancelled = await asyncio.gather(
        door.door.cancel(paused, "no"), door.door.cancel(pending.id, "no")
    )
    assert [r.status for r in cancelled] == [RunStatus.CANCELLED, RunStatus.CANCELLED]
    door.session.gates.open("one")
    with pytest.raises(ConflictError, match="terminal"):
        done = await door.session.create_run()
        await (await owner.start(done.id)).wait()
        await owner.wait_idle()
        await door.door.cancel(done.id, "too late")
    await owner.shutdown()


async def test_front_door_cancel_without_a_worker_says_so(store_url: str) -> None:
    async with open_store(store_url) as store:
        door = make_door(build_session(store), request_timeout=0.2)
        run = await door.session.create_run()
        with pytest.raises(ToolError, match=r"no worker cancelled run .* within 0\.2 s"):
            await door.tools().call("workflow_run_cancel", {"run_id": run.id})
        record = await door.session.registry.get(door.session.session_id, run.id)
        assert record.cancel_requested and record.status is RunStatus.PENDING
        owner = door.owner()
        await owner.activate()  # the durable intent is honoured by the next owner
        await owner.wait_idle()
        assert await door.status(run.id) is RunStatus.CANCELLED
        await owner.shutdown()


# -- races (Reliability II item 7) ---------------------------------------------------------


@pytest.mark.parametrize("via", ["front door", "owner"])
async def test_of_concurrent_cancels_exactly_one_is_not_idempotent(door: Door, via: str) -> None:
    """Two cancels of a running run at once, through front doors or through the owner's
    own tools: both end cancelled, and exactly one says ``idempotent: false``."""
    owner = door.owner(poll_interval=POLL)
    await owner.activate()
    owned = WorkflowTools(
        door.session.session_id,
        catalog=door.session.catalog,
        registry=door.session.registry,
        inputs=door.session.inputs,
        supervisor=owner,
    )
    for _ in range(3):
        door.session.gates.close("one")
        run = await door.session.create_run()
        await (await owner.start(run.id)).wait()
        await door.session.gates.entered["one"].wait()
        tools = [door.tools(), door.tools()] if via == "front door" else [owned, owned]
        results = await asyncio.wait_for(
            asyncio.gather(*(t.call("workflow_run_cancel", {"run_id": run.id}) for t in tools)),
            60,
        )
        assert [r["run_status"] for r in results] == ["cancelled", "cancelled"]
        assert sorted(r["idempotent"] for r in results) == [False, True], results
        door.session.gates.open("one")
    await owner.shutdown()


class _LingeringRequests(RunRequests):
    """The owner's requests, pausing after it deletes a carried-out resume request while
    it still holds the run's lock: a cancel waiting for that lock is then surely not done
    when the front door sees the request gone (the window the race needs, made wide)."""

    async def delete_resume(self, session_id: str, run_id: str) -> None:
        await super().delete_resume(session_id, run_id)
        await asyncio.sleep(0.3)


async def test_a_resume_racing_a_cancel_gets_a_definite_answer(door: Door) -> None:
    """A front-door resume whose segment a front-door cancel cuts short answers with the
    run paused or terminal (here: cancelled) or a typed error, never ``running``."""
    owner = door.session.supervisor(
        requests=_LingeringRequests(door.session.store.kv), poll_interval=POLL
    )
    await owner.activate()
    for _ in range(4):
        run_id = await interrupted_run(door, owner)
        door.session.gates.close("ask")  # the resumed segment waits in its vertex
        resuming = asyncio.ensure_future(door.door.resume(run_id, b'{"increment":1}'))
        await asyncio.wait_for(door.session.gates.entered["ask"].wait(), 60)
        cancelled = await asyncio.wait_for(door.door.cancel(run_id, "race"), 60)
        assert cancelled.status is RunStatus.CANCELLED
        try:
            resumed = await asyncio.wait_for(resuming, 60)
        except ConflictError:
            pass  # a typed error is a definite answer too
        else:
            assert resumed.status is RunStatus.CANCELLED, resumed
        door.session.gates.open("ask")
    await owner.shutdown()
