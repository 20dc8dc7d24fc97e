"""Runs far longer than one ledger read (10,000 records) finish in the registry with
their complete activity history, published incrementally (see `workflows.activities.projection`)."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

import pytest

from flowledger import flow
from flowledger.storage import open_store
from flowledger.workflows.activities.activity import event_id
from flowledger.workflows.authoring.definition import TypedDefinition
from flowledger.workflows.authoring.metadata import Metadata, VertexMetadata
from flowledger.workflows.records.inputs import canonical_json
from flowledger.workflows.records.run import Run, RunStatus
from flowledger.workflows.runtime.catalog import Catalog

from ..conftest import COUNTER_SCHEMA, Session, build_session

pytestmark = pytest.mark.slow


@dataclass
class Loop:
    count: int = 0
    goal: int = 0


def loop_definition(store: flow.CheckpointStore) -> TypedDefinition[Loop]:
    """``tick`` adds one and routes to itself until ``count`` reaches ``goal``, then
    ``stop`` ends the run: ``goal + 1`` steps (two checkpoints each, one per vertex and
    one at the step boundary)."""
    graph: flow.Graph[Loop] = flow.Graph("loop", state=Loop)

    @graph.vertex("tick")
    async def tick(state: Loop) -> dict[str, Any]:
        return {"count": state.count + 1}

    @graph.vertex("stop")
    async def stop(state: Loop) -> dict[str, Any]:
        return {}

    graph.add_route(
        "tick", targets=["tick", "stop"], pick=lambda s: "tick" if s.count < s.goal else "stop"
    )
    runner = graph.compile(entry="tick", finish="stop", store=store)
    schema = {
        "type": "object",
        "additionalProperties": False,
        "required": ["count", "goal"],
        "properties": {
            "count": COUNTER_SCHEMA["properties"]["count"],
            "goal": {"type": "integer", "minimum": 0},
        },
    }
    metadata = Metadata(
        "loop",
        "v1",
        description="counts to a goal, one step at a time",
        input_schema=schema,
        vertices=[VertexMetadata("tick", "tick"), VertexMetadata("stop", "stop")],
    )
    return TypedDefinition(metadata, runner, max_steps=100_000)


def loop_session(store: Any) -> Session:
    session = build_session(store)
    catalog = Catalog()
    catalog.register(loop_definition(session.checkpoints))
    session.catalog = catalog
    return session


async def create_loop_run(session: Session, goal: int) -> Run:
    ref = await session.inputs.put(session.session_id, canonical_json({"count": 0, "goal": goal}))
    graph_run_id = str(uuid.uuid4())
    now = datetime.now(UTC)
    return await session.registry.create(
        Run(
            session_id=session.session_id,
            tool_execution_id=str(uuid.uuid4()),
            definition_name="loop",
            definition_version="v1",
            id=str(uuid.uuid4()),
            graph_run_id=graph_run_id,
            input=ref,
            ledger_locator=f"flow/runs/{graph_run_id}",
            created_at=now,
            updated_at=now,
        )
    )


async def assert_complete_history(
    session: Session, run: Run, goal: int, *, longer_than: int = 10_000
) -> None:
    done = await session.registry.get(session.session_id, run.id)
    assert done.status is RunStatus.COMPLETED, done.status_summary
    history = await session.checkpoints.history(run.graph_run_id)
    assert len(history) > longer_than
    assert done.checkpoint_revision == history[-1].revision
    assert done.activity_cursor == len(history)
    records = await session.journal.records(session.session_id, run.id)
    kinds = [str(item.activity.kind) for item in records]
    assert kinds == ["run_started", *["vertex_completed"] * (goal + 1), "run_completed"]
    ticks = [item for item in records if item.activity.vertex_id == "tick"]
    assert [item.activity.event_id for item in ticks] == [
        event_id(session.session_id, run.id, "vertex_completed", item.revision, "tick", n)
        for n, item in enumerate(ticks)
    ]
    assert [item.activity.completed_vertices for item in records[-3:]] == [2, 2, 2]
    assert len({item.activity.event_id for item in records}) == len(records)
    revisions = [item.revision for item in records]
    assert revisions == sorted(revisions)
    assert records[-1].revision == history[-1].revision


async def test_a_twenty_thousand_step_run_finishes_with_its_whole_history() -> None:
    """Issue "Reliability II" 2: a 20,000-step loop through the supervisor (40,000
    checkpoints) ends ``completed`` with every activity, in order, each once."""
    goal = 20_000
    async with open_store("memory://") as store:
        session = loop_session(store)
        run = await create_loop_run(session, goal)
        supervisor = session.supervisor()
        await supervisor.activate()
        assert await supervisor.wait_idle() is None
        await assert_complete_history(session, run, goal)
        await supervisor.shutdown()


async def test_adoption_publishes_a_long_backlog_in_pages(tmp_path: Any) -> None:
    """A run whose whole long history is durable but unpublished (its owner died before
    publishing anything) is adopted by a new supervisor, which rebuilds the projection
    from revision 0 and publishes the backlog a page at a time."""
    goal = 6_000
    async with open_store(f"sqlite:///{tmp_path / 'wf.db'}") as store:
        session = loop_session(store)
        run = await create_loop_run(session, goal)
        definition = session.catalog.resolve("loop", "v1")
        token = definition.validate_input(canonical_json({"count": 0, "goal": goal}))
        result = await definition.start(token, graph_run_id=run.graph_run_id)
        assert result.run.status is flow.RunStatus.COMPLETED
        running = await session.registry.compare_and_swap(
            run.revision, replace(run, status=RunStatus.RUNNING, status_summary="workflow running")
        )
        assert running.activity_cursor == 0
        supervisor = session.supervisor()
        await supervisor.activate()
        assert await supervisor.wait_idle() is None
        await assert_complete_history(session, run, goal)
        await supervisor.shutdown()


class CountingStore(flow.LedgerCheckpointStore):
    """Counts the checkpoints every history read returns."""

    read = 0

    async def history(
        self, run_id: str, *, after: int = -1, limit: int | None = None
    ) -> list[flow.Checkpoint]:
        page = await super().history(run_id, after=after, limit=limit)
        self.read += len(page)
        return page


async def test_each_checkpoint_is_read_once_for_projection() -> None:
    """The work of publishing is linear: during a run's segment, live publication and the
    segment's end read every checkpoint exactly once (the old projection re-read the whole
    history each time, quadratic in the run's length)."""
    goal = 3_000
    async with open_store("memory://") as store:
        session = build_session(store)
        counting = CountingStore(store.ledger)
        catalog = Catalog()
        catalog.register(loop_definition(counting))
        session.catalog = catalog
        run = await create_loop_run(session, goal)
        supervisor = session.supervisor()
        await supervisor.activate()
        assert await supervisor.wait_idle() is None
        read = counting.read
        history = await session.checkpoints.history(run.graph_run_id)
        assert read == len(history)
        await assert_complete_history(session, run, goal, longer_than=5_000)
        await supervisor.shutdown()
