"""Artifacts that wait on time: the ``wait`` node and interrupt deadlines, validated
(placed codes ``wait_time`` and ``interrupt_timeout``) and run through the tools bundle
on a ManualClock, parked durably until their owner's timer loop wakes them."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from datetime import timedelta
from typing import Any

import pytest

from flowledger.clock import ManualClock
from flowledger.deploy import ArtifactValidationError, compile_artifact, validate_artifact
from flowledger.deploy.artifacts.schema import artifact_json_schema
from flowledger.deploy.artifacts.store import ArtifactStore
from flowledger.deploy.drafts.edits import connect_operations
from flowledger.storage import open_store
from flowledger.tools import WorkflowTools
from flowledger.workflows import Catalog
from flowledger.workflows.runtime.session import WorkflowSession

HANG = 30.0
OBJECT = {"type": "object", "additionalProperties": False}


def waiting(wait: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {
        "format": "flowledger.artifact/v1",
        "name": "waiter",
        "version": "1",
        "input_schema": {
            **OBJECT,
            "properties": {"seconds": {"type": "number"}, "until": {"type": "string"}},
        },
        "output_schema": {**OBJECT, "properties": {"done": {"type": "boolean"}}},
        "start": "pause",
        "nodes": {
            "pause": {"kind": "wait", **wait, "next": "done"},
            "done": {"kind": "end", "outcome": "done", "output": {"done": True}},
        },
        **extra,
    }


def asking(**deadline: Any) -> dict[str, Any]:
    return {
        "format": "flowledger.artifact/v1",
        "name": "approval",
        "version": "1",
        "input_schema": OBJECT,
        "output_schema": {**OBJECT, "properties": {"approved": {"type": "boolean"}}},
        "state": {"approved": {}},
        "start": "ask",
        "nodes": {
            "ask": {
                "kind": "interrupt",
                "request": {"question": "approve?"},
                "resume_schema": {
                    **OBJECT,
                    "required": ["approved"],
                    "properties": {"approved": {"type": "boolean"}},
                },
                "assign": {"approved": "${ resume.approved }"},
                **deadline,
                "next": "done",
            },
            "done": {
                "kind": "end",
                "outcome": "decided",
                "output": {"approved": "${ state.approved }"},
            },
        },
    }


def issues_of(document: dict[str, Any]) -> list[tuple[str, str]]:
    with pytest.raises(ArtifactValidationError) as caught:
        validate_artifact(document)
    return [(issue.place, issue.code) for issue in caught.value.issues]


@pytest.mark.parametrize(
    "wait",
    [
        {},
        {"seconds": 5, "until": "2026-01-01T00:00:00Z"},
    ],
)
def test_a_wait_needs_exactly_one_time(wait: dict[str, Any]) -> None:
    assert issues_of(waiting(wait)) == [("nodes.pause", "wait_time")]


@pytest.mark.parametrize(
    ("wait", "place"),
    [
        ({"seconds": -1}, "nodes.pause.seconds"),
        ({"seconds": "ten"}, "nodes.pause.seconds"),
        ({"until": "tomorrow"}, "nodes.pause.until"),
        ({"until": "2026-06-01T09:00:00"}, "nodes.pause.until"),  # no offset
    ],
)
def test_bad_literal_times_are_placed_issues(wait: dict[str, Any], place: str) -> None:
    assert issues_of(waiting(wait)) == [(place, "wait_time")]


@pytest.mark.parametrize(
    ("deadline", "place"),
    [
        ({"timeout": 60}, "nodes.ask.on_timeout"),
        ({"on_timeout": {"approved": False}}, "nodes.ask.timeout"),
        ({"timeout": 0.0, "on_timeout": {"approved": False}}, "nodes.ask.timeout"),
        ({"timeout": 60, "on_timeout": {"approved": "no"}}, "nodes.ask.on_timeout"),
        ({"timeout": 60, "on_timeout": {}}, "nodes.ask.on_timeout"),
    ],
)
def test_bad_deadlines_are_placed_issues(deadline: dict[str, Any], place: str) -> None:
    assert issues_of(asking(**deadline)) == [(place, "interrupt_timeout")]


def test_good_waits_and_deadlines_validate() -> None:
    for wait in (
        {"seconds": 0},
        {"seconds": "${ input.seconds }"},
        {"until": "2026-01-01T09:00:00+02:00"},
        {"until": "${ input.until }"},
    ):
        assert validate_artifact(waiting(wait)).artifact.nodes["pause"].kind == "wait"
    validate_artifact(asking(timeout=60, on_timeout={"approved": False}))


class Env:
    def __init__(self, clock: ManualClock, built: WorkflowSession, tools: WorkflowTools) -> None:
        self.clock = clock
        self.built = built
        self.tools = tools

    async def start(self, name: str, document: dict[str, Any]) -> str:
        started = await self.tools.call(
            "workflow_run_start",
            {"definition_name": name, "definition_version": "1", "input": document},
        )
        run_id = str(started["run_id"])
        await self.until(lambda: self.status_in(run_id, "interrupted", "completed", "failed"))
        return run_id

    async def get(self, run_id: str) -> dict[str, Any]:
        return await self.tools.call("workflow_run_get", {"run_id": run_id})

    async def status_in(self, run_id: str, *statuses: str) -> bool:
        return (await self.get(run_id))["run_status"] in statuses

    async def until(self, check: Callable[[], Awaitable[bool]]) -> None:
        for _ in range(int(HANG / 0.005)):
            if await check():
                return
            await asyncio.sleep(0.005)
        assert await check()

    async def state(self, name: str, run_id: str) -> dict[str, Any]:
        run = await self.built.registry.get(self.built.session_id, run_id)
        result = await self.built.catalog.resolve(name, "1").get(run.graph_run_id)
        return dict(result.state)


@asynccontextmanager
async def env(url: str, *documents: dict[str, Any]) -> AsyncIterator[Env]:
    clock = ManualClock()
    catalog = Catalog()
    for document in documents:
        catalog.register(compile_artifact(validate_artifact(document), sources={}, clock=clock))
    async with open_store(url) as store:
        built = WorkflowSession.build(store, str(uuid.uuid4()), catalog, clock=clock)
        await built.supervisor.activate()
        try:
            yield Env(clock, built, WorkflowTools.for_session(built))
        finally:
            await built.supervisor.shutdown()


@pytest.fixture(params=["memory", "sqlite"])
def url(request: pytest.FixtureRequest, tmp_path: Any) -> str:
    return "memory://" if request.param == "memory" else f"sqlite:///{tmp_path / 'w.db'}"


async def test_a_wait_node_parks_the_run_until_its_time(url: str) -> None:
    async with env(url, waiting({"seconds": "${ input.seconds }"})) as e:
        run_id = await e.start("waiter", {"seconds": 3600})
        pending = (await e.get(run_id))["pending"]
        assert pending["kind"] == "timer" and pending["vertex_id"] == "pause"
        assert pending["wake_at"].startswith("2026-01-01T01:00:00")
        e.clock.advance(3599)
        await e.until(lambda: _idle(e))
        assert await e.status_in(run_id, "interrupted")
        e.clock.advance(1)
        await e.until(lambda: e.status_in(run_id, "completed"))


async def test_a_wait_until_a_computed_time(url: str) -> None:
    async with env(url, waiting({"until": "${ input.until }"})) as e:
        until = e.clock.now() + timedelta(days=2)
        run_id = await e.start("waiter", {"until": until.isoformat()})
        assert (await e.get(run_id))["pending"]["wake_at"].startswith("2026-01-03T00:00:00")
        e.clock.set(until)
        await e.until(lambda: e.status_in(run_id, "completed"))


@pytest.mark.parametrize(
    ("document", "words"),
    [
        ({"seconds": -3}, "nodes.pause.seconds: must not be negative"),
        ({"until": "2025-01-01T00:00:00Z"}, "nodes.pause.until: "),
        ({"until": "2026-05-01T00:00:00"}, "nodes.pause.until: a naive datetime"),
    ],
)
async def test_a_bad_computed_time_fails_the_run_naming_the_field(
    url: str, document: dict[str, Any], words: str
) -> None:
    field = next(iter(document))
    async with env(url, waiting({field: f"${{ input.{field} }}"})) as e:
        run_id = await e.start("waiter", document)
        got = await e.get(run_id)
        assert got["run_status"] == "failed"
        assert got["error"]["type"] == "TimerError"
        assert words in got["error"]["message"], got["error"]
        assert not await e.built.store.kv.keys(f"sessions/{e.built.session_id}/workflows/timers/")


async def test_an_interrupt_deadline_continues_with_on_timeout(url: str) -> None:
    async with env(url, asking(timeout=600, on_timeout={"approved": False})) as e:
        late = await e.start("approval", {})
        answered = await e.start("approval", {})
        pending = (await e.get(late))["pending"]
        assert pending["kind"] == "request" and pending["wake_at"].startswith("2026-01-01T00:10")
        await e.tools.call(
            "workflow_run_resume", {"run_id": answered, "resume": {"approved": True}}
        )
        e.clock.advance(600)
        await e.until(lambda: e.status_in(late, "completed"))
        assert (await e.state("approval", late))["approved"] is False
        assert (await e.state("approval", answered))["approved"] is True


async def _idle(e: Env) -> bool:
    return e.built.supervisor.idle and e.clock.sleepers >= 1


async def test_a_foreach_child_that_waits_is_refused_at_save() -> None:
    """A foreach item cannot pause: a child whose closure holds a wait node is refused
    like one with an interrupt node (``foreach_child_interrupt``, naming the node)."""
    session_id = str(uuid.uuid4())
    child = {**waiting({"seconds": 5}), "name": "napper"}
    parent = {
        "format": "flowledger.artifact/v1",
        "name": "each",
        "version": "1",
        "input_schema": {**OBJECT, "properties": {"items": {"type": "array"}}},
        "output_schema": OBJECT,
        "children": {"napper": "1"},
        "state": {"naps": {}},
        "start": "every",
        "nodes": {
            "every": {
                "kind": "foreach",
                "items": "${ input.items }",
                "body": {"kind": "workflow", "workflow": "napper", "input": {}},
                "into": "naps",
                "next": "done",
            },
            "done": {"kind": "end", "outcome": "done"},
        },
    }
    async with open_store("memory://") as store:
        artifacts = ArtifactStore.over(store)
        await artifacts.save(session_id, child)
        with pytest.raises(ArtifactValidationError) as refused:
            await artifacts.save(session_id, parent)
    (issue,) = refused.value.issues
    assert (issue.place, issue.code) == ("nodes.every.body.workflow", "foreach_child_interrupt")
    assert "wait node 'pause'" in issue.message


def test_the_artifact_json_schema_describes_wait_nodes_and_deadlines() -> None:
    schema = artifact_json_schema()
    definitions = schema["$defs"]
    assert set(definitions["WaitNode"]["properties"]) == {
        "kind",
        "label",
        "seconds",
        "until",
        "next",
    }
    assert {"timeout", "on_timeout"} <= set(definitions["InterruptNode"]["properties"])
    (node,) = schema["properties"]["nodes"]["patternProperties"].values()
    assert node["discriminator"]["mapping"]["wait"] == "#/$defs/WaitNode"


def test_a_draft_connects_a_wait_node_by_its_next() -> None:
    document = waiting({"seconds": 5})
    operations = connect_operations(document, source="pause", target="done")
    assert operations == [{"op": "add", "path": "/nodes/pause/next", "value": "done"}]
