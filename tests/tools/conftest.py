"""Fixtures for the tool bundle tests: a live session (counter, asker and a sentinel-carrying
"noter" workflow) behind an active supervisor, a fixed clock, deterministic IDs, and
recording wrappers around the registry and the supervisor."""

from __future__ import annotations

import itertools
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from flowledger import flow
from flowledger.storage import open_store
from flowledger.tools import ToolError, WorkflowTools
from flowledger.workflows.authoring.definition import TypedDefinition
from flowledger.workflows.authoring.metadata import Metadata, VertexMetadata
from flowledger.workflows.records.registry import RunPage, RunRegistry
from flowledger.workflows.records.run import Run
from flowledger.workflows.runtime.supervisor import StartTicket, Supervisor
from tests.workflows.conftest import Gates, Session, build_session

CLOCK = datetime(2026, 8, 10, 16, 0, 0, tzinfo=UTC)
CLOCK_TEXT = "2026-08-10T16:00:00Z"
SENTINEL = "secret-policy-text"
STATE_SENTINEL = "flow_state-sentinel-4c1d"
RESUME_SENTINEL = "model_output-sentinel-9e2a"
FORBIDDEN = (
    SENTINEL,
    STATE_SENTINEL,
    RESUME_SENTINEL,
    "input",
    "flow_state",
    "stack",
    "model_output",
    "ledger",
    "graph_run",
    "session",
    "tool_execution",
    "cancel_requested",
    "artifact_session",
)

NOTER_INPUT = {
    "type": "object",
    "additionalProperties": False,
    "required": ["count", "note"],
    "properties": {"count": {"type": "integer", "minimum": 0}, "note": {"type": "string"}},
}
NOTER_RESUME = {
    "type": "object",
    "additionalProperties": False,
    "required": ["memo"],
    "properties": {"memo": {"type": "string"}},
}


@dataclass
class Noted:
    count: int = 0
    note: str = ""
    memo: str = ""
    derived: str = ""


def noter_definition(store: flow.CheckpointStore) -> TypedDefinition[Noted]:
    """One vertex that copies private text into its state and pauses for a private memo."""
    graph: flow.Graph[Noted] = flow.Graph("noter", state=Noted)

    @graph.vertex("hold")
    async def hold(state: Noted) -> dict[str, Any]:
        answer = flow.interrupt({"question": STATE_SENTINEL})
        return {"memo": answer["memo"], "derived": STATE_SENTINEL + state.note}

    runner = graph.compile(entry="hold", finish="hold", store=store)
    metadata = Metadata(
        "noter",
        "v1",
        description="keeps a private note",
        input_schema=NOTER_INPUT,
        resume_schema=NOTER_RESUME,
        vertices=[VertexMetadata("hold the note", "hold")],
    )
    return TypedDefinition(metadata, runner, summarizer=lambda s: f"count={s.count}")


PAIR_INPUT = {
    "type": "object",
    "additionalProperties": False,
    "required": ["a", "z"],
    "properties": {"a": {"type": "integer"}, "z": {"type": "integer"}},
}


@dataclass
class Pair:
    a: int = 0
    z: int = 0
    total: int = 0


def pair_definition(store: flow.CheckpointStore, gates: Gates) -> TypedDefinition[Pair]:
    """One gated vertex that adds the two input numbers."""
    graph: flow.Graph[Pair] = flow.Graph("pair", state=Pair)

    @graph.vertex("add")
    async def add(state: Pair) -> dict[str, Any]:
        await gates.pass_through("add")
        return {"total": state.a + state.z}

    runner = graph.compile(entry="add", finish="add", store=store)
    metadata = Metadata(
        "pair",
        "v1",
        description="adds a and z",
        input_schema=PAIR_INPUT,
        vertices=[VertexMetadata("add the pair", "add")],
    )
    return TypedDefinition(metadata, runner)


class IdSource:
    """``…02``, ``…03``, ``…04``, … (run, graph run, tool execution for the first start)."""

    def __init__(self, first: int = 2) -> None:
        self._next = itertools.count(first)
        self.minted: list[str] = []

    def __call__(self) -> str:
        value = f"00000000-0000-0000-0000-{next(self._next):012d}"
        self.minted.append(value)
        return value


class RecordingRegistry:
    """The real registry, with every create recorded."""

    def __init__(self, inner: RunRegistry) -> None:
        self.inner = inner
        self.created: list[Run] = []

    async def create(self, run: Run) -> Run:
        self.created.append(run)
        return await self.inner.create(run)

    async def get(self, session_id: str, run_id: str) -> Run:
        return await self.inner.get(session_id, run_id)

    async def compare_and_swap(self, expected_revision: int, next: Run) -> Run:
        return await self.inner.compare_and_swap(expected_revision, next)

    async def list(self, session_id: str, *, after: str = "", limit: int = 0) -> RunPage:
        return await self.inner.list(session_id, after=after, limit=limit)


class RecordingSupervisor:
    """The real supervisor, with every call the tools make recorded as (method, run_id)."""

    def __init__(self, inner: Supervisor) -> None:
        self.inner = inner
        self.calls: list[tuple[str, str]] = []
        self.reasons: list[str] = []

    async def start(self, run_id: str) -> StartTicket:
        self.calls.append(("start", run_id))
        return await self.inner.start(run_id)

    async def resume(self, run_id: str, payload: bytes) -> Run | None:
        self.calls.append(("resume", run_id))
        return await self.inner.resume(run_id, payload)

    async def request_cancel(self, run_id: str) -> bool:
        return await self.inner.request_cancel(run_id)  # the intent only: not a call of note

    async def cancel(self, run_id: str, reason: str) -> Run | None:
        self.calls.append(("cancel", run_id))
        self.reasons.append(reason)
        return await self.inner.cancel(run_id, reason)

    async def history(
        self,
        run_id: str,
        *,
        after_revision: int = 0,
        after_event_id: str | None = None,
        limit: int = 0,
    ) -> Any:
        self.calls.append(("history", run_id))
        return await self.inner.history(
            run_id, after_revision=after_revision, after_event_id=after_event_id, limit=limit
        )


@dataclass
class Env:
    session: Session
    supervisor: Supervisor
    recorder: RecordingSupervisor
    registry: RecordingRegistry
    ids: IdSource
    tools: WorkflowTools
    results: list[dict[str, Any]] = field(default_factory=list)

    def bundle(self, **options: Any) -> WorkflowTools:
        """Another bundle over the same dependencies, with ``options`` overridden."""
        kwargs: dict[str, Any] = {
            "catalog": self.session.catalog,
            "registry": self.registry,
            "inputs": self.session.inputs,
            "supervisor": self.recorder,
            "now": lambda: CLOCK,
            "new_id": self.ids,
            "pending": self.session.pending,
        }
        kwargs.update(options)
        return WorkflowTools(self.session.session_id, **kwargs)

    async def call(self, name: str, arguments: Any = None) -> dict[str, Any]:
        """Call a tool; check the result is JSON (kept for the leak checks)."""
        result = await self.tools.call(name, arguments)
        json.dumps(result, allow_nan=False)
        self.results.append(result)
        return result

    async def start(self, name: str = "counter", document: Any = None) -> dict[str, Any]:
        return await self.call(
            "workflow_run_start",
            {
                "definition_name": name,
                "definition_version": "v1",
                "input": {"count": 0} if document is None else document,
            },
        )

    async def settle(self) -> None:
        assert await self.supervisor.wait_idle() is None

    async def record(self, run_id: str) -> Run:
        return await self.session.registry.get(self.session.session_id, run_id)

    async def blob_keys(self) -> list[str]:
        return await self.session.store.blobs.list("sessions/")

    async def registry_snapshot(self) -> dict[str, int]:
        kv = self.session.store.kv
        keys = await kv.keys("sessions/")
        return {key: (await kv.get(key)).revision for key in keys if "/workflows/runs/" in key}


async def refused(call: Any) -> ToolError:
    """Await ``call``; it must raise `ToolError`. Returns the error."""
    with pytest.raises(ToolError) as caught:
        await call
    return caught.value


@pytest.fixture(params=["memory", "sqlite"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    return "memory://" if request.param == "memory" else f"sqlite:///{tmp_path}/t.db"


@pytest.fixture
async def env(store_url: str) -> AsyncIterator[Env]:
    async with open_store(store_url) as store:
        session = build_session(store)
        session.catalog.register(noter_definition(session.checkpoints))
        session.catalog.register(pair_definition(session.checkpoints, session.gates))
        supervisor = session.supervisor()
        await supervisor.activate()
        recorder = RecordingSupervisor(supervisor)
        registry = RecordingRegistry(session.registry)
        ids = IdSource()
        tools = WorkflowTools(
            session.session_id,
            catalog=session.catalog,
            registry=registry,
            inputs=session.inputs,
            supervisor=recorder,
            now=lambda: CLOCK,
            new_id=ids,
            pending=session.pending,
        )
        built = Env(session, supervisor, recorder, registry, ids, tools)
        try:
            yield built
        finally:
            for gate in session.gates.closed.values():
                gate.set()
            await supervisor.shutdown()
