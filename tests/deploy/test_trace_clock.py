"""A deployed run's records are timed by its session's clock, like its checkpoints: an
artifact compiled without a clock (directly, or by a `DeployService`), run in a session
built with a ManualClock set years before the machine's time, is stamped, pinned and
traced at the manual clock's instants."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from flowledger.clock import ManualClock
from flowledger.deploy import (
    ArtifactDefinition,
    DeployService,
    compile_artifact,
    validate_artifact,
)
from flowledger.storage import open_store
from flowledger.tools import WorkflowTools
from flowledger.workflows import Catalog
from flowledger.workflows.runtime.session import WorkflowSession

from .conftest import minimal
from .test_wait import Env, asking

T0 = datetime(2020, 3, 1, 9, 30, tzinfo=UTC)


@pytest.fixture(params=["memory", "sqlite"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    return "memory://" if request.param == "memory" else f"sqlite:///{tmp_path / 't.db'}"


async def test_trace_times_follow_the_session_clock(url: str) -> None:
    clock = ManualClock(T0)
    catalog = Catalog()
    document = asking(timeout=600, on_timeout={"approved": False})
    catalog.register(compile_artifact(validate_artifact(document), sources={}))  # no clock
    async with open_store(url) as store:
        built = WorkflowSession.build(store, str(uuid.uuid4()), catalog, clock=clock)
        await built.supervisor.activate()
        try:
            e = Env(clock, built, WorkflowTools.for_session(built))
            run_id = await e.start("approval", {})
            definition = built.catalog.resolve("approval", "1")
            assert isinstance(definition, ArtifactDefinition)
            graph_run_id = (await built.registry.get(built.session_id, run_id)).graph_run_id

            paused = (await definition.trace.read(graph_run_id)).entries
            assert [(t.node, t.status) for t in paused] == [("ask", "paused")]
            assert (paused[0].started_at, paused[0].ended_at) == (T0, T0)

            clock.advance(600)
            await e.until(lambda: e.status_in(run_id, "completed"))
            later = T0 + timedelta(seconds=600)
            entries = (await definition.trace.read(graph_run_id)).entries
            assert [t.node for t in entries] == ["ask", "ask", "done"]
            assert {t.started_at for t in entries[1:]} == {t.ended_at for t in entries[1:]}
            assert {t.started_at for t in entries[1:]} == {later}
        finally:
            await built.supervisor.shutdown()


async def test_a_deployed_run_is_pinned_stamped_and_traced_on_the_session_clock(url: str) -> None:
    clock = ManualClock(T0)
    async with open_store(url) as store:
        built = WorkflowSession.build(store, str(uuid.uuid4()), Catalog(), clock=clock)
        deploy = DeployService(built, check_timeout=30)
        assert deploy.environment.rates.clock is clock  # call rate windows: the same clock
        await deploy.serve_deployments()
        await built.supervisor.activate()
        try:
            await deploy.artifact_save(minimal(name="stamped"))
            await deploy.deployment_save(
                {
                    "format": "flowledger.deployment/v1",
                    "name": "stamped",
                    "artifact": {"name": "stamped", "version": "1"},
                    "sources": {},
                }
            )
            started = await deploy.run_deployment("stamped", {}, wait_seconds=30)
            run = await built.registry.get(built.session_id, str(started["run_id"]))
            assert run.status.terminal and (run.created_at, run.updated_at) == (T0, T0)
            pin = await deploy.pins.read(run.graph_run_id)
            assert pin.document["pinned_at"] == "2020-03-01T09:30:00.000000Z"
            definition = built.catalog.resolve(run.definition_name, run.definition_version)
            assert isinstance(definition, ArtifactDefinition)
            (entry,) = (await definition.trace.read(run.graph_run_id)).entries
            assert (entry.node, entry.started_at, entry.ended_at) == ("done", T0, T0)
        finally:
            await built.supervisor.shutdown()
