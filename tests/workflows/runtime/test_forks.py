"""Forking workflow runs (`workflows.records.forks`, through the ``workflow_run_fork`` tool):
forks of completed, interrupted, failed and cancelled runs, with and without a patch,
executed by the owning supervisor or, through a front door, by a polling owner; the
fork marker and ``forked_from``; the origin untouched; refusals write nothing. On
memory, SQLite and PostgreSQL (``store_url``)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import pytest

from flowledger import flow
from flowledger.storage import open_store
from flowledger.tools import ForkTools, ToolError
from flowledger.workflows import InvalidForkError, fork_marker_key
from flowledger.workflows.authoring.definition import TypedDefinition
from flowledger.workflows.authoring.metadata import Metadata, VertexMetadata
from flowledger.workflows.records.run import RunStatus
from flowledger.workflows.runtime.supervisor import Supervisor

from ..conftest import COUNTER_SCHEMA, Counter, build_session
from .test_frontdoor import POLL, Door, make_door


def failing_definition(store: flow.CheckpointStore) -> TypedDefinition[Counter]:
    """``work`` raises unless the note is ``ok``; ``on_error="fail"`` fails the run."""
    graph: flow.Graph[Counter] = flow.Graph("failer", state=Counter)

    @graph.vertex("work")
    async def work(state: Counter) -> dict[str, Any]:
        if state.note != "ok":
            raise RuntimeError("not ok")
        return {"count": state.count + 1}

    runner = graph.compile(entry="work", finish="work", store=store)
    metadata = Metadata(
        "failer",
        "v1",
        description="fails unless ok",
        input_schema=COUNTER_SCHEMA,
        vertices=[VertexMetadata("work", "work")],
    )
    return TypedDefinition(metadata, runner, on_error="fail")


@dataclass
class Env:
    door: Door

    @property
    def session(self) -> Any:
        return self.door.session

    def tools(self, control: Any) -> ForkTools:
        return ForkTools(
            self.session.session_id,
            catalog=self.session.catalog,
            registry=self.session.registry,
            supervisor=control,
            start_timeout=30,
        )

    async def status(self, run_id: str) -> RunStatus:
        return await self.door.status(run_id)

    async def settled(self, run_id: str) -> RunStatus:
        for _ in range(3000):
            status = await self.status(run_id)
            if status not in (RunStatus.PENDING, RunStatus.RUNNING):
                return status
            await asyncio.sleep(0.01)
        raise AssertionError(f"run {run_id} did not settle")

    async def run(self, owner: Supervisor, name: str, document: dict[str, Any]) -> str:
        run = await self.session.create_run(name, document)
        await (await owner.start(run.id)).wait()
        await owner.wait_idle()
        return run.id

    async def graph_run(self, run_id: str) -> str:
        return str((await self.session.registry.get(self.session.session_id, run_id)).graph_run_id)

    async def stored(self) -> tuple[dict[str, bytes], dict[str, list[bytes]], dict[str, bytes]]:
        """Every KV value, every ledger log's records and every blob, byte for byte."""
        store = self.session.store
        values = {key: bytes((await store.kv.get(key)).value) for key in await store.kv.keys("")}
        logs = {}
        for name in await store.ledger.names(""):
            records = await store.ledger.read(name, after=0, limit=10_000)
            logs[name] = [bytes(r.payload) for r in records]
        blobs = {key: bytes(await store.blobs.get(key)) for key in await store.blobs.list("")}
        return values, logs, blobs


@pytest.fixture
async def env(store_url: str) -> AsyncIterator[Env]:
    async with open_store(store_url) as store:
        session = build_session(store)
        session.catalog.register(failing_definition(session.checkpoints))
        yield Env(make_door(session, start_timeout=30, request_timeout=30))


async def test_forks_of_runs_of_every_status(env: Env) -> None:
    owner = env.door.owner()
    await owner.activate()
    tools = env.tools(owner)
    sid = env.session.session_id
    completed = await env.run(owner, "counter", {"count": 0})
    paused = await env.run(owner, "asker", {"count": 1})
    failed = await env.run(owner, "failer", {"count": 5})
    cancelled = await env.run(owner, "asker", {"count": 2})
    await owner.cancel(cancelled, "no")
    assert [await env.status(r) for r in (completed, paused, failed, cancelled)] == [
        RunStatus.COMPLETED,
        RunStatus.INTERRUPTED,
        RunStatus.FAILED,
        RunStatus.CANCELLED,
    ]
    before, logs_before, _ = await env.stored()
    cases: list[tuple[str, int, dict[str, Any] | None, RunStatus, int | None]] = [
        (completed, 0, None, RunStatus.COMPLETED, 2),
        (completed, 0, {"count": 10}, RunStatus.COMPLETED, 12),
        (paused, 0, {"count": 7}, RunStatus.INTERRUPTED, None),
        (failed, 0, {"note": "ok"}, RunStatus.COMPLETED, 6),
        (failed, 0, None, RunStatus.FAILED, None),
        (cancelled, 3, None, RunStatus.INTERRUPTED, None),
    ]
    for origin, revision, patch, outcome, count in cases:
        arguments: dict[str, Any] = {"run_id": origin, "revision": revision}
        if patch is not None:
            arguments["patch"] = patch
        result = await tools.call("workflow_run_fork", arguments)
        fork_id = result["run_id"]
        assert result["run_status"] != "pending"  # returned once the owner adopted it
        record = await env.session.registry.get(sid, fork_id)
        assert record.forked_from is not None
        assert result["forked_from"] == {
            "run_id": origin,
            "revision": revision,
            "checkpoint_digest": record.forked_from.checkpoint_digest,
        }
        origin_cp = (await env.session.checkpoints.history(await env.graph_run(origin)))[revision]
        assert record.forked_from.checkpoint_digest == flow.checkpoint_digest(origin_cp)
        key = fork_marker_key(sid, origin, fork_id)
        assert key == f"sessions/{sid}/workflows/forks/{origin}/{fork_id}"
        assert (await env.session.store.kv.get(key)).value == b""
        assert await env.settled(fork_id) is outcome, (origin, patch)
        state = (await env.session.checkpoints.latest(record.graph_run_id)).state
        if count is not None:
            assert state is not None and state["count"] == count
        seed = (await env.session.checkpoints.history(record.graph_run_id))[0]
        assert seed.origin is not None and seed.origin.run_id == await env.graph_run(origin)
    # The interrupted fork is an ordinary run: resume it.
    forks = [
        key.rsplit("/", 1)[1]
        for key in await env.session.store.kv.keys(f"sessions/{sid}/workflows/forks/{paused}/")
    ]
    assert len(forks) == 1
    resumed = await owner.resume(forks[0], b'{"increment": 3}')
    assert resumed is not None and resumed.status is RunStatus.COMPLETED
    assert (await env.session.checkpoints.latest(resumed.graph_run_id)).state == {
        "count": 10,
        "note": "",
    }
    after, logs_after, _ = await env.stored()
    for key, value in before.items():
        if "/workflows/runs/" in key and key.rsplit("/", 1)[1] in (
            completed,
            paused,
            failed,
            cancelled,
        ):
            assert after[key] == value  # the origins' records are unchanged
    for name, records in logs_before.items():
        if name.startswith("flow/runs/"):
            assert logs_after[name] == records  # and so are their checkpoints
    await owner.shutdown()


@pytest.mark.parametrize(
    ("arguments", "field", "words"),
    [
        ({"revision": -1}, "revision", "revisions 0..4"),
        ({"revision": 5}, "revision", "revisions 0..4"),
        ({"revision": 0, "patch": {"nope": 1}}, "patch", "'nope'"),
        ({"revision": 0, "patch": {"count": "1"}}, "patch", "'count'"),
        ({"revision": 0, "patch": {"count": None}}, "patch", "'count'"),
        ({"revision": 0, "definition_version": "v2"}, "definition", "version v1"),
        ({"revision": 0, "definition_name": "asker"}, "definition", "counter"),
    ],
)
async def test_refused_forks_write_nothing(
    env: Env, arguments: dict[str, Any], field: str, words: str
) -> None:
    owner = env.door.owner()
    await owner.activate()
    origin = await env.run(owner, "counter", {"count": 0})
    before = await env.stored()
    with pytest.raises(ToolError) as raised:
        await env.tools(owner).call("workflow_run_fork", {"run_id": origin, **arguments})
    cause = raised.value.cause
    assert isinstance(cause, InvalidForkError) and cause.field == field
    assert words in str(raised.value)
    if field == "patch" and "patch" in arguments:
        assert cause.state_field == next(iter(arguments["patch"]))
    assert await env.stored() == before
    await owner.shutdown()


async def test_a_fork_of_another_sessions_run_is_not_found(env: Env) -> None:
    owner = env.door.owner()
    await owner.activate()
    origin = await env.run(owner, "counter", {"count": 0})
    other = ForkTools(
        "11111111-2222-4333-8444-555555555555",
        catalog=env.session.catalog,
        registry=env.session.registry,
        supervisor=owner,
    )
    before = await env.stored()
    with pytest.raises(ToolError, match="not found"):
        await other.call("workflow_run_fork", {"run_id": origin, "revision": 0})
    assert await env.stored() == before
    await owner.shutdown()


async def test_a_front_door_fork_is_executed_by_the_polling_owner(env: Env) -> None:
    owner = env.door.owner(poll_interval=POLL)
    await owner.activate()
    origin = await env.run(owner, "counter", {"count": 0})
    result = await env.tools(env.door.door).call(
        "workflow_run_fork", {"run_id": origin, "revision": 1, "patch": {"count": 40}}
    )
    assert result["run_status"] in ("running", "completed")
    assert await env.settled(result["run_id"]) is RunStatus.COMPLETED
    fork = await env.session.registry.get(env.session.session_id, result["run_id"])
    state = (await env.session.checkpoints.latest(fork.graph_run_id)).state
    assert state == {"count": 42, "note": ""}
    history = await env.door.door.history(fork.id)
    assert history.records  # published like any run's
    await owner.shutdown()


async def test_a_fork_is_an_ordinary_run(env: Env) -> None:
    """Get, list, history and cancel work on a fork; a fork of a fork names its own
    origin."""
    owner = env.door.owner()
    await owner.activate()
    tools = env.tools(owner)
    sid = env.session.session_id
    origin = await env.run(owner, "asker", {"count": 1})
    fork = await tools.call("workflow_run_fork", {"run_id": origin, "revision": 0})
    assert await env.settled(fork["run_id"]) is RunStatus.INTERRUPTED
    again = await tools.call("workflow_run_fork", {"run_id": fork["run_id"], "revision": 0})
    assert again["forked_from"]["run_id"] == fork["run_id"]
    assert await env.settled(again["run_id"]) is RunStatus.INTERRUPTED
    listed = {run.id for run in (await env.session.registry.list(sid)).runs}
    assert {origin, fork["run_id"], again["run_id"]} <= listed
    history = await owner.history(fork["run_id"])
    assert [item.activity.kind for item in history.records][:1] == ["run_started"]
    cancelled = await owner.cancel(fork["run_id"], "enough")
    assert cancelled is not None and cancelled.status is RunStatus.CANCELLED
    assert await env.status(origin) is RunStatus.INTERRUPTED
    assert await env.status(again["run_id"]) is RunStatus.INTERRUPTED
    markers = await env.session.store.kv.keys(f"sessions/{sid}/workflows/forks/")
    assert markers == sorted(
        [
            fork_marker_key(sid, origin, fork["run_id"]),
            fork_marker_key(sid, fork["run_id"], again["run_id"]),
        ]
    )
    await owner.shutdown()


async def test_a_fork_of_a_run_being_pruned_is_refused(env: Env) -> None:
    """The fork half of the prune handshake: a prune writes the origin's tombstone before
    it lists the origin's fork markers, so a fork that finds the tombstone must give way
    (before this, the fork went ahead and its record named a run the prune deleted)."""
    from flowledger.workflows.records.run import pruning_key

    owner = env.door.owner()
    await owner.activate()
    origin = await env.run(owner, "counter", {"count": 0})
    store = env.session.store
    await store.kv.put(pruning_key(env.session.session_id, origin), b"{}", expected=0)
    before = await env.stored()
    with pytest.raises(ToolError) as raised:
        await env.tools(owner).call("workflow_run_fork", {"run_id": origin, "revision": 0})
    cause = raised.value.cause
    assert isinstance(cause, InvalidForkError) and "being pruned" in str(cause)
    assert await env.stored() == before  # the marker was taken back, no seed written
    await owner.shutdown()
