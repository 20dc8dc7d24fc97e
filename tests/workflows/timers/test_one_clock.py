"""A session built with a clock runs everything on it: definitions compiled without one
(on the system clock) are rebound to it, run records and checkpoints are stamped from it,
deadlines expire when it passes them, and a cancel intent, a fork and a retention age
follow it. The clock is set years before the machine's, so a time read from the system
clock cannot pass for it (and every run looks old to the system clock); nothing waits
on real time but `Env.until`'s hang deadline."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import pytest

from flowledger import flow
from flowledger.clock import ManualClock
from flowledger.mcp.prune_tool import PruneTool
from flowledger.storage import open_store
from flowledger.tools import ForkTools
from flowledger.tools.bundle import WorkflowTools
from flowledger.workflows.authoring.definition import TypedDefinition
from flowledger.workflows.records.run import RunStatus
from flowledger.workflows.runtime.frontdoor import FrontDoor
from flowledger.workflows.runtime.session import WorkflowSession

from ._app import catalog
from .conftest import HANG, Env

T0 = datetime(2020, 3, 1, 9, 30, tzinfo=UTC)


def at(text: object) -> datetime:
    """A time the tools return (RFC 3339, ``Z``)."""
    assert isinstance(text, str) and text.endswith("Z"), text
    return datetime.fromisoformat(text)


@pytest.fixture
async def env(store_url: str) -> AsyncIterator[Env]:
    clock = ManualClock(T0)
    async with open_store(store_url) as store:
        # catalog() compiles its graphs on the system clock: the session's clock wins
        session = WorkflowSession.build(store, str(uuid.uuid4()), catalog(), clock=clock)
        await session.supervisor.activate()
        try:
            yield Env(store, clock, session, WorkflowTools.for_session(session))
        finally:
            await session.supervisor.shutdown()


async def _checkpoint(env: Env, run_id: str) -> flow.Checkpoint:
    run = await env.session.registry.get(env.session.session_id, run_id)
    definition = env.session.catalog.resolve("asker", "v1")
    assert isinstance(definition, TypedDefinition)
    assert definition.runner.clock is env.clock  # rebound to the session's clock
    return await definition.runner.latest(run.graph_run_id)


async def _idle_on_clock(env: Env) -> bool:
    return env.clock.sleepers >= 1 and env.session.supervisor.idle


async def test_a_pause_is_stamped_by_the_session_clock_and_expires_on_it(env: Env) -> None:
    run_id = await env.start("asker", {"seconds": 30})
    got = await env.get(run_id)
    assert got["run_status"] == "interrupted"
    assert (at(got["created_at"]), at(got["updated_at"])) == (T0, T0)
    assert at(got["pending"]["wake_at"]) == T0 + timedelta(seconds=30)
    paused = await _checkpoint(env, run_id)
    assert paused.run.interrupted_at == T0
    assert paused.run.created_at == paused.run.updated_at == T0

    env.clock.advance(29.999)
    await env.until(lambda: _idle_on_clock(env))
    assert (await env.get(run_id))["run_status"] == "interrupted"  # not yet due
    env.clock.advance(0.001)
    await env.until(lambda: env.status_is(run_id, "completed"))
    done = await env.get(run_id)
    assert done["status_summary"] == "approved=False"  # the deadline's payload
    expired = T0 + timedelta(seconds=30)
    assert (at(done["created_at"]), at(done["updated_at"])) == (T0, expired)
    finished = await _checkpoint(env, run_id)
    assert finished.run.completed_at == finished.run.updated_at == expired


async def test_a_cancel_intent_and_a_fork_are_stamped_by_the_session_clock(env: Env) -> None:
    run_id = await env.start("asker", {"seconds": 3600})
    env.clock.advance(10)
    forks = ForkTools(
        env.session.session_id,
        catalog=env.session.catalog,
        registry=env.session.registry,
        supervisor=env.session.supervisor,
        clock=env.session.clock,
    )
    forked = await forks.call("workflow_run_fork", {"run_id": run_id, "revision": 0})
    fork_id = str(forked["run_id"])
    await env.until(lambda: env.status_is(fork_id, "interrupted"))
    assert at((await env.get(fork_id))["created_at"]) == T0 + timedelta(seconds=10)

    env.clock.advance(10)
    await env.call("workflow_run_cancel", run_id=run_id)
    await env.until(lambda: env.status_is(run_id, "cancelled"))
    assert at((await env.get(run_id))["updated_at"]) == T0 + timedelta(seconds=20)


async def test_a_front_door_stamps_its_cancel_intent_by_its_session_clock(env: Env) -> None:
    run_id = await env.start("asker", {"seconds": 3600})
    env.clock.advance(10)
    # another front end of the same session (as a CLI command is), on the same clock
    front = WorkflowSession.build(env.store, env.session.session_id, catalog(), clock=env.clock)
    door = FrontDoor.for_session(front, request_timeout=HANG, outcome_timeout=HANG)
    cancelling = asyncio.create_task(door.cancel(run_id))

    async def answered() -> bool:
        await env.session.supervisor.poll()  # the owner reads the request (as a worker does)
        return cancelling.done()

    await env.until(answered)
    assert (await cancelling).status is RunStatus.CANCELLED
    assert at((await env.get(run_id))["updated_at"]) == T0 + timedelta(seconds=10)


async def test_a_retention_age_is_measured_on_the_session_clock(env: Env) -> None:
    run_id = await env.start("asker", {"seconds": 3600})
    await env.call("workflow_run_cancel", run_id=run_id)
    await env.until(lambda: env.status_is(run_id, "cancelled"))
    prune = PruneTool(env.session, None)
    arguments = {"older_than": "30d", "statuses": "cancelled"}
    # months before the machine's time, but on the session's clock only a day old
    env.clock.advance(86_400)
    young = await prune.call("workflow_run_prune", arguments)
    assert young["run_ids"] == [], young
    env.clock.advance(30 * 86_400)
    old = await prune.call("workflow_run_prune", arguments)
    assert old["run_ids"] == [run_id], old
