"""Fixtures for the supervisor and bridge tests: a counter workflow, a session, a store."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from flowledger import flow
from flowledger.storage import Store, open_store
from flowledger.workflows.activities.journal import ActivityJournal
from flowledger.workflows.authoring.definition import TypedDefinition
from flowledger.workflows.authoring.metadata import Metadata, VertexMetadata
from flowledger.workflows.records.inputs import InputStore, canonical_json
from flowledger.workflows.records.pending import PendingStore
from flowledger.workflows.records.registry import RunRegistry
from flowledger.workflows.records.run import Run
from flowledger.workflows.runtime.catalog import Catalog
from flowledger.workflows.runtime.supervisor import Supervisor

from .._postgres import postgres_url

COUNTER_SCHEMA = {
    "type": "object",
    "additionalProperties": False,
    "required": ["count"],
    "properties": {"count": {"type": "integer", "minimum": 0}},
}
RESUME_SCHEMA = {
    "type": "object",
    "additionalProperties": False,
    "required": ["increment"],
    "properties": {"increment": {"type": "integer", "minimum": 1}},
}


@dataclass
class Counter:
    count: int = 0
    note: str = ""


@dataclass
class Gates:
    """Per-vertex gates: a task waits for its gate (if closed) and counts its runs."""

    closed: dict[str, asyncio.Event] = field(default_factory=dict)
    entered: dict[str, asyncio.Event] = field(default_factory=dict)
    runs: dict[str, int] = field(default_factory=dict)

    def close(self, vertex: str) -> None:
        self.closed[vertex] = asyncio.Event()
        self.entered[vertex] = asyncio.Event()

    def open(self, vertex: str) -> None:
        self.closed[vertex].set()

    async def pass_through(self, vertex: str) -> None:
        self.runs[vertex] = self.runs.get(vertex, 0) + 1
        if vertex in self.entered:
            self.entered[vertex].set()
        gate = self.closed.get(vertex)
        if gate is not None:
            await gate.wait()


def counter_definition(
    store: flow.CheckpointStore, gates: Gates, *, interrupting: bool = False
) -> TypedDefinition[Counter]:
    """Two vertices that add 1 (``one``, ``two``); the interrupting variant has one vertex
    (``ask``) that pauses until a resume payload ``{"increment": n}`` arrives."""
    graph: flow.Graph[Counter] = flow.Graph("counter", state=Counter)
    if interrupting:

        @graph.vertex("ask")
        async def ask(state: Counter) -> dict[str, Any]:
            await gates.pass_through("ask")
            answer = flow.interrupt({"question": "how much?"})
            return {"count": state.count + int(answer["increment"])}

        runner = graph.compile(entry="ask", finish="ask", store=store)
        metadata = Metadata(
            "asker",
            "v1",
            description="asks for an increment",
            input_schema=COUNTER_SCHEMA,
            resume_schema=RESUME_SCHEMA,
            vertices=[VertexMetadata("ask for increment", "ask")],
        )
        return TypedDefinition(metadata, runner)

    @graph.vertex("one")
    async def one(state: Counter) -> dict[str, Any]:
        await gates.pass_through("one")
        return {"count": state.count + 1}

    @graph.vertex("two")
    async def two(state: Counter) -> dict[str, Any]:
        await gates.pass_through("two")
        return {"count": state.count + 1}

    graph.add_edge("one", "two")
    runner = graph.compile(entry="one", finish="two", store=store)
    metadata = Metadata(
        "counter",
        "v1",
        description="adds two",
        input_schema=COUNTER_SCHEMA,
        vertices=[VertexMetadata("increment one", "one"), VertexMetadata("increment two", "two")],
    )
    return TypedDefinition(metadata, runner, summarizer=lambda s: f"count={s.count}")


@dataclass
class Session:
    """Everything a supervisor needs, over one store."""

    store: Store
    session_id: str
    gates: Gates
    catalog: Catalog
    registry: RunRegistry
    inputs: InputStore
    journal: ActivityJournal
    checkpoints: flow.CheckpointStore

    def supervisor(self, **options: Any) -> Supervisor:
        options.setdefault("pending", self.pending)
        return Supervisor(
            self.session_id,
            catalog=self.catalog,
            registry=self.registry,
            inputs=self.inputs,
            leases=self.store.leases,
            publisher=self.journal,
            **options,
        )

    @property
    def pending(self) -> PendingStore:
        return PendingStore(self.store.kv)

    async def create_run(
        self, name: str = "counter", document: dict[str, Any] | None = None, **fields: Any
    ) -> Run:
        """What the start tool does before handing a run to the supervisor."""
        canonical = canonical_json({"count": 0} if document is None else document)
        ref = await self.inputs.put(self.session_id, canonical)
        graph_run_id = str(uuid.uuid4())
        now = datetime.now(UTC)
        run = Run(
            session_id=self.session_id,
            tool_execution_id=str(uuid.uuid4()),
            definition_name=name,
            definition_version=fields.pop("definition_version", "v1"),
            id=str(uuid.uuid4()),
            graph_run_id=graph_run_id,
            input=ref,
            ledger_locator=f"flow/runs/{graph_run_id}",
            created_at=now,
            updated_at=now,
            **fields,
        )
        return await self.registry.create(run)

    async def kinds(self, run_id: str) -> list[str]:
        return [str(p.activity.kind) for p in await self.journal.records(self.session_id, run_id)]


def build_session(
    store: Store, session_id: str | None = None, gates: Gates | None = None
) -> Session:
    gates = Gates() if gates is None else gates
    checkpoints = flow.LedgerCheckpointStore(store.ledger)
    catalog = Catalog()
    catalog.register(counter_definition(checkpoints, gates))
    catalog.register(counter_definition(checkpoints, gates, interrupting=True))
    return Session(
        store=store,
        session_id=session_id or str(uuid.uuid4()),
        gates=gates,
        catalog=catalog,
        registry=RunRegistry(store.kv),
        inputs=InputStore(store.blobs),
        journal=ActivityJournal(store.ledger),
        checkpoints=checkpoints,
    )


@pytest.fixture(params=["memory", "sqlite", "postgres"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A store URL: memory, a fresh SQLite file, or a fresh PostgreSQL schema (skipped
    without a server, failing instead when CI=true; see ``tests/_postgres.py``)."""
    if request.param == "memory":
        yield "memory://"
    elif request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'wf.db'}"
    else:
        with postgres_url() as url:
            yield url


@pytest.fixture
async def session(store_url: str) -> AsyncIterator[Session]:
    async with open_store(store_url) as store:
        yield build_session(store)
