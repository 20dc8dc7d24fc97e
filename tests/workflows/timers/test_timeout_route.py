"""A Python vertex that routes on its pause's deadline: `flow.timed_out` written to state,
read by a route (docs/flow.md, "Deadlines"). Through the tools bundle on a ManualClock
over memory, SQLite and PostgreSQL: the deadline goes to ``escalate``, an answer - even
one equal to ``on_timeout`` - to ``publish``, and resumes racing the deadlines have one
winner per run, whose route the run took."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import pytest

from flowledger import flow
from flowledger.clock import Clock, ManualClock
from flowledger.storage import open_store
from flowledger.tools.bundle import WorkflowTools
from flowledger.tools.errors import ToolError
from flowledger.workflows.authoring.definition import TypedDefinition
from flowledger.workflows.authoring.metadata import Metadata, VertexMetadata
from flowledger.workflows.runtime.catalog import Catalog
from flowledger.workflows.runtime.session import WorkflowSession

from ._app import ANSWER_SCHEMA
from .conftest import Env


@dataclass
class Review:
    approved: bool = False
    expired: bool = False
    outcome: str = ""


def escalator(clock: Clock) -> TypedDefinition[Review]:
    graph: flow.Graph[Review] = flow.Graph("escalator", state=Review)

    @graph.vertex("ask")
    def ask(state: Review) -> dict[str, Any]:
        answer = flow.interrupt(
            {"question": "approve?"}, timeout=60, on_timeout={"approved": False}
        )
        return {"approved": answer["approved"], "expired": flow.timed_out()}

    @graph.vertex("escalate")
    def escalate(state: Review) -> dict[str, Any]:
        return {"outcome": "escalated"}

    @graph.vertex("publish")
    def publish(state: Review) -> dict[str, Any]:
        return {"outcome": "published" if state.approved else "rejected"}

    @graph.vertex("done")
    def done(state: Review) -> dict[str, Any]:
        return {}

    graph.add_route(
        "ask",
        targets=["escalate", "publish"],
        pick=lambda state: "escalate" if state.expired else "publish",
    )
    graph.add_edge("escalate", "done")
    graph.add_edge("publish", "done")
    runner = graph.compile(entry="ask", finish="done", clock=clock)
    metadata = Metadata(
        "escalator",
        "v1",
        description="asks for approval; escalates when nobody answered in time",
        input_schema={"type": "object", "additionalProperties": False},
        resume_schema=ANSWER_SCHEMA,
        vertices=[
            VertexMetadata("ask", "ask"),
            VertexMetadata("escalate", "escalate"),
            VertexMetadata("publish", "publish"),
            VertexMetadata("done", "done"),
        ],
    )
    return TypedDefinition(metadata, runner, summarizer=lambda s: s.outcome)


@pytest.fixture
async def routing(store_url: str) -> AsyncIterator[Env]:
    clock = ManualClock()
    catalog = Catalog()
    catalog.register(escalator(clock))
    async with open_store(store_url) as store:
        session = WorkflowSession.build(store, str(uuid.uuid4()), catalog, clock=clock)
        await session.supervisor.activate()
        try:
            yield Env(store, clock, session, WorkflowTools.for_session(session))
        finally:
            await session.supervisor.shutdown()


async def _summary(env: Env, run_id: str) -> str:
    return str((await env.get(run_id))["status_summary"])


async def test_the_deadline_routes_to_escalate_and_an_answer_to_publish(routing: Env) -> None:
    env = routing
    late = await env.start("escalator", {})
    answered = await env.start("escalator", {})
    # the very payload on_timeout declares, sent by a person: an answer, not a deadline
    await env.call("workflow_run_resume", run_id=answered, resume={"approved": False})
    await env.until(lambda: env.status_is(answered, "completed"))
    env.clock.advance(60)
    await env.until(lambda: env.status_is(late, "completed"))
    assert await _summary(env, late) == "escalated"
    assert await _summary(env, answered) == "rejected"


async def test_resumes_racing_deadlines_have_one_winner_whose_route_is_taken(
    routing: Env,
) -> None:
    env = routing
    runs = [await env.start("escalator", {}) for _ in range(12)]

    async def resume(run_id: str, turns: int) -> bool:
        for _ in range(turns):  # let some of the owner's wakes get ahead
            await asyncio.sleep(0)
        try:
            await env.call("workflow_run_resume", run_id=run_id, resume={"approved": True})
        except ToolError as refused:
            assert "interrupted" in str(refused), refused  # a definite answer
            return False
        return True

    env.clock.advance(60)
    won = await asyncio.gather(*(resume(run_id, 3 * n) for n, run_id in enumerate(runs)))
    for run_id in runs:
        await env.until(lambda run_id=run_id: env.status_is(run_id, "completed"))  # type: ignore[misc]
    for run_id, resumed in zip(runs, won, strict=True):
        assert await _summary(env, run_id) == ("published" if resumed else "escalated")


def test_timed_out_outside_a_task_says_so() -> None:
    with pytest.raises(RuntimeError, match=r"flow.timed_out\(\) can only be called inside"):
        flow.timed_out()
