"""``flowledger_runs_waiting``: runs paused by kind (request, error, timer) and runs queued
for an admission slot, as the worker's census counts them from keys (SQLite, a real
supervisor). A run that pauses again with another kind moves to that kind; a queued run
that is admitted leaves the queue's count."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from flowledger import flow
from flowledger.cli.census import waiting_census
from flowledger.observability import metrics
from flowledger.storage import open_store
from flowledger.workflows.admission import Limits, queued_at
from flowledger.workflows.authoring.definition import TypedDefinition
from flowledger.workflows.authoring.metadata import Metadata, VertexMetadata
from flowledger.workflows.records.registry import RunRegistry
from flowledger.workflows.records.run import RunStatus
from flowledger.workflows.records.unfinished import UnfinishedIndex

from ..workflows.conftest import build_session
from ._scrape import parse, value

pytest.importorskip("prometheus_client")

GAUGE = "flowledger_runs_waiting"


@dataclass
class Waits:
    mode: str = ""
    said: str = ""


def waits_definition(store: flow.CheckpointStore) -> TypedDefinition[Waits]:
    """``wait`` sleeps an hour (``timer``), raises (``error``) or asks (``request``); an
    answer ``{"then": "fail"}`` makes it raise after all."""
    graph: flow.Graph[Waits] = flow.Graph("waits", state=Waits)

    @graph.vertex("wait")
    async def wait(state: Waits) -> dict[str, Any]:
        if state.mode == "timer":
            flow.sleep(3600)
        if state.mode == "error":
            raise ValueError("asked to fail")
        answer = flow.interrupt({"question": "then?"})
        if answer.get("then") == "fail":
            raise ValueError("told to fail")
        return {"said": "ok"}

    metadata = Metadata(
        "waits",
        "v1",
        description="waits in the way its input says",
        input_schema={
            "type": "object",
            "additionalProperties": False,
            "required": ["mode"],
            "properties": {"mode": {"enum": ["request", "timer", "error"]}},
        },
        resume_schema={
            "type": "object",
            "additionalProperties": False,
            "properties": {"then": {"type": "string"}},
        },
        vertices=[VertexMetadata("wait somehow", "wait")],
    )
    return TypedDefinition(metadata, graph.compile(entry="wait", finish="wait", store=store))


async def eventually(check: Callable[[], Awaitable[bool]]) -> None:
    async with asyncio.timeout(120):  # only catches a hang
        while not await check():  # noqa: ASYNC110 - the supervisor changes the store
            await asyncio.sleep(0.02)


async def waiting() -> dict[str, float]:
    samples = parse((await metrics.exposition()).decode())
    return {r: value(samples, GAUGE, reason=r) for r in ("request", "error", "timer", "queued")}


async def test_paused_runs_are_counted_by_kind_and_queued_runs_apart(tmp_path: Path) -> None:
    metrics.enable()
    async with open_store(f"sqlite:///{tmp_path / 'w.db'}") as store:
        metrics.add_census(GAUGE, "Runs waiting.", ("reason",), waiting_census(store))
        try:
            session = build_session(store)
            # as a worker's sessions keep it: the census finds sessions through this index
            session.registry = RunRegistry(store.kv, index=UnfinishedIndex(store.kv))
            session.catalog.register(waits_definition(session.checkpoints))
            supervisor = session.supervisor(poll_interval=0.02)
            await supervisor.activate()
            asked = [
                await session.create_run("waits", {"mode": mode})
                for mode in ("request", "request", "timer", "error")
            ]

            async def all_paused() -> bool:
                runs = [await session.registry.get(session.session_id, run.id) for run in asked]
                return all(run.status is RunStatus.INTERRUPTED for run in runs)

            await eventually(all_paused)
            # counter runs: one holds the definition's only slot, two queue behind it
            session.gates.close("one")
            await Limits(store.kv).set("definition", "counter", 1)
            counters = [await session.create_run() for _ in range(3)]

            async def two_queued() -> bool:
                return all([await queued_at(store.kv, run) is not None for run in counters[1:]])

            await eventually(two_queued)
            async with asyncio.timeout(120):  # only catches a hang
                await session.gates.entered["one"].wait()
            assert await waiting() == {"request": 2, "error": 1, "timer": 1, "queued": 2}

            # a request answered so that the vertex fails: the run pauses again, as an error
            after = await supervisor.resume(asked[0].id, json.dumps({"then": "fail"}))
            assert after is not None and after.status is RunStatus.INTERRUPTED
            # the held run finishes: the queued ones are admitted and complete
            session.gates.open("one")

            async def none_queued() -> bool:
                return (await waiting())["queued"] == 0

            await eventually(none_queued)
            assert await waiting() == {"request": 1, "error": 2, "timer": 1, "queued": 0}
            await supervisor.shutdown()
        finally:
            metrics.remove_census(GAUGE)  # its store closes: a later scrape must not read it
    samples = parse((await metrics.exposition()).decode())
    assert not [name for name, _ in samples if name == GAUGE]
