"""What the owner writes to a run's registry record, and when (Dashboard II, items 2, 3).

Regressions: every activation (``flowledger web``, a CLI command, an MCP server taking the
session) re-recorded each paused run's status through the registry, moving its revision
and ``updated_at`` to the activation's time although nothing had changed; and a running
run's record kept its start time and checkpoint revision 0 until the run stopped, so the
runs list and the run page did not move."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from flowledger import flow
from flowledger.examples.review import review_definition
from flowledger.host import open_session
from flowledger.tools import WorkflowTools
from flowledger.workflows import Catalog, Metadata, TypedDefinition, VertexMetadata
from flowledger.workflows.records.pending import pending_key


def catalog() -> Catalog:
    catalog = Catalog()
    catalog.register(review_definition())
    return catalog


async def test_activating_a_session_over_paused_runs_rewrites_none_of_them(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'quiet.db'}"
    async with open_session(url, catalog()) as session:
        tools = WorkflowTools.for_session(session)
        run_ids = []
        for title in ("first", "second"):
            started = await tools.call(
                "workflow_run_start",
                {
                    "definition_name": "document_review",
                    "definition_version": "v1",
                    "input": {"title": title, "document": "One sentence. Another one."},
                },
            )
            run_ids.append(started["run_id"])
        await session.supervisor.wait_idle()
        session_id = session.session_id
        before = {}
        for run_id in run_ids:
            run = await session.registry.get(session_id, run_id)
            assert run.status.value == "interrupted"
            pending = await session.store.kv.get(pending_key(session_id, run_id))
            before[run_id] = (run, pending.revision)

    for _ in range(2):  # each activation adopts the paused runs again
        async with open_session(url, catalog()) as session:
            await session.supervisor.wait_idle()
            for run_id in run_ids:
                run = await session.registry.get(session_id, run_id)
                pending = await session.store.kv.get(pending_key(session_id, run_id))
                assert (run, pending.revision) == before[run_id]


class Steps(BaseModel):
    done: list[str] = []


def stepping(gate: asyncio.Event) -> TypedDefinition[Steps]:
    """``one`` -> ``two`` -> ``held`` (waits for ``gate``)."""

    async def one(state: Steps) -> dict[str, Any]:
        return {"done": [*state.done, "one"]}

    async def two(state: Steps) -> dict[str, Any]:
        return {"done": [*state.done, "two"]}

    async def held(state: Steps) -> dict[str, Any]:
        await gate.wait()
        return {"done": [*state.done, "held"]}

    graph: flow.Graph[Steps] = flow.Graph("steps", state=Steps)
    for name, task in (("one", one), ("two", two), ("held", held)):
        graph.add_vertex(name, task)
    graph.add_edge("one", "two")
    graph.add_edge("two", "held")
    metadata = Metadata(
        "steps",
        "v1",
        input_schema={"type": "object", "additionalProperties": False},
        vertices=[VertexMetadata(name.title(), name) for name in ("one", "two", "held")],
    )
    return TypedDefinition(metadata, graph.compile(entry="one", finish="held", version="1"))


async def test_a_running_runs_record_follows_its_checkpoints(tmp_path: Path) -> None:
    gate = asyncio.Event()
    definitions = Catalog()
    definitions.register(stepping(gate))
    async with open_session(f"sqlite:///{tmp_path / 'moving.db'}", definitions) as session:
        tools = WorkflowTools.for_session(session)
        started = await tools.call(
            "workflow_run_start",
            {"definition_name": "steps", "definition_version": "v1", "input": {}},
        )
        run_id = started["run_id"]
        try:
            async with asyncio.timeout(60):  # a hang guard only
                while True:
                    run = await session.registry.get(session.session_id, run_id)
                    if run.activity_cursor >= 3:  # one and two are durable and published
                        break
                    await asyncio.sleep(0.01)
            assert run.status.value == "running"
            assert run.checkpoint_revision >= 2
            assert run.updated_at > run.created_at
        finally:
            gate.set()
        await session.supervisor.wait_idle()
        done = await session.registry.get(session.session_id, run_id)
        assert done.status.value == "completed"
        assert done.updated_at >= run.updated_at
