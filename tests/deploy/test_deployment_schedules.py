"""Schedules that start a deployment (docs/schedules.md#deployments), through the Python
API on SQLite and PostgreSQL, with a `ManualClock` driving the owner's loop:

* ``add`` checks the deployment and its live revision's input schema (typed errors naming
  ``deployment`` / ``input``; nothing written); a session never finds another's deployment;
* each firing starts the revision live *then*, records it on the firing, pins the run as
  ``run_deployment`` does, and marks the run ``scheduled_by``;
* a deleted deployment, or a new revision whose schema refuses the input: the firing
  records a typed failure, starts no run, and the schedule keeps firing;
* an owner that died after claiming a firing: the next one starts the revision that
  firing chose, once, even though another revision is live now."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from flowledger.clock import ManualClock
from flowledger.deploy import DeployService
from flowledger.deploy.deployments.definition import revision_of, version_of
from flowledger.storage import Store, open_store
from flowledger.workflows import Catalog
from flowledger.workflows.admission import is_deployed_version
from flowledger.workflows.records.run import Run, RunStatus
from flowledger.workflows.runtime.session import WorkflowSession
from flowledger.workflows.schedules import (
    Firing,
    InvalidScheduleError,
    ScheduleLoop,
    Schedules,
    ScheduleStore,
    derived_id,
)
from flowledger.workflows.schedules.loop import _fenced_pass

from .._postgres import postgres_url
from .conftest import minimal

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
DEADLINE = 60.0  # seconds: only catches hangs
SESSION = str(uuid.UUID(int=281, version=4))
OTHER = str(uuid.UUID(int=282, version=4))


def greeting(version: str = "1", team: str = "string") -> dict[str, Any]:
    """An artifact whose input needs ``team`` of JSON type ``team``."""
    schema = {
        "type": "object",
        "properties": {"team": {"type": team}},
        "required": ["team"],
        "additionalProperties": False,
    }
    return minimal(name="greeting", version=version, input_schema=schema)


def deployment(version: str = "1") -> dict[str, Any]:
    return {
        "format": "flowledger.deployment/v1",
        "name": "greet",
        "artifact": {"name": "greeting", "version": version},
        "sources": {},
    }


@pytest.fixture(params=["sqlite", "postgres"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'sched.db'}"
    else:
        with postgres_url() as found:
            yield found


@pytest.fixture
async def store(url: str) -> AsyncIterator[Store]:
    async with open_store(url) as opened:
        yield opened


@asynccontextmanager
async def owner(
    store: Store, session_id: str = SESSION
) -> AsyncIterator[tuple[WorkflowSession, DeployService]]:
    """A process that owns the session and serves its deployments (as a worker does)."""
    session = WorkflowSession.build(store, session_id, Catalog())
    deploy = DeployService(session, check_timeout=30)
    await deploy.serve_deployments()
    await session.supervisor.activate()
    try:
        yield session, deploy
    finally:
        await session.supervisor.shutdown()


async def one_pass(loop: ScheduleLoop) -> None:
    await _fenced_pass(loop.session.supervisor, loop)


async def settled(session: WorkflowSession) -> list[Run]:
    """The scheduled runs once none is unfinished (bounded by DEADLINE)."""
    async with asyncio.timeout(DEADLINE):
        while True:
            await session.supervisor.wait_idle()
            page = await session.registry.list(session.session_id, limit=100)
            runs = [run for run in page.runs if run.scheduled_by is not None]
            if all(run.status.terminal for run in runs):
                return sorted(runs, key=lambda run: run.created_at)
            await asyncio.sleep(0.01)


def test_admission_knows_the_deploy_layers_version_form() -> None:
    """Admission (below deploy) repeats the ``r<N>`` form: the two must agree."""
    for revision in (1, 7, 42, 9_999_999_999):
        assert is_deployed_version(version_of(revision))
    for version in ("v1", "r0", "r01", "1", "r", "r1a", "rr1"):
        assert not is_deployed_version(version)
        assert revision_of(version) is None


async def test_add_checks_the_deployment_and_its_input_and_writes_nothing(store: Store) -> None:
    async with owner(store) as (session, deploy):
        await deploy.artifact_save(greeting())
        await deploy.deployment_save(deployment())
        schedules = Schedules(session, clock=ManualClock(T0))
        before = await store.kv.keys("")
        for arguments, field in [
            ({"deployment": "nope_nope", "input": {"team": "ops"}}, "deployment"),
            ({"deployment": "greet", "input": {"team": 5}}, "input"),
            ({"deployment": "greet", "input": {}}, "input"),
            ({"deployment": "greet", "definition_name": "greet", "input": {}}, "target"),
            ({"input": {"team": "ops"}}, "target"),
        ]:
            with pytest.raises(InvalidScheduleError) as caught:
                await schedules.add(every=60, **arguments)
            assert caught.value.field == field, arguments
        assert await store.kv.keys("") == before

        # another session (a tenant of a shared server) never finds this deployment
        other = WorkflowSession.build(store, OTHER, Catalog())
        await DeployService(other).serve_deployments()
        with pytest.raises(InvalidScheduleError) as foreign:
            await Schedules(other, clock=ManualClock(T0)).add(
                deployment="greet", input={"team": "ops"}, every=60
            )
        assert foreign.value.field == "deployment"
        assert await store.kv.keys("") == before


async def test_each_firing_starts_the_live_revision_and_records_it(store: Store) -> None:
    clock = ManualClock(T0)
    async with owner(store) as (session, deploy):
        await deploy.artifact_save(greeting())
        await deploy.artifact_save(greeting(version="2"))
        await deploy.deployment_save(deployment())
        schedules = Schedules(session, clock=clock)
        schedule = await schedules.add(deployment="greet", input={"team": "ops"}, every=60)
        assert schedule.to_json()["deployment"] == "greet"
        assert "definition_name" not in schedule.to_json()
        loop = ScheduleLoop(session, clock=clock)
        clock.advance(60)
        await one_pass(loop)
        await settled(session)
        await deploy.deployment_save(deployment(version="2"))  # revision 2 is live now
        clock.advance(60)
        await one_pass(loop)
        runs = await settled(session)

        assert [(run.definition_name, run.definition_version) for run in runs] == [
            ("greet", "r1"),
            ("greet", "r2"),
        ]
        assert {run.status for run in runs} == {RunStatus.COMPLETED}
        for run, revision in zip(runs, (1, 2), strict=True):
            assert run.scheduled_by is not None and run.scheduled_by.schedule_id == schedule.id
            pin = await deploy.pin_of(run.id)  # pinned as run_deployment pins
            assert pin is not None and pin.deployment["revision"] == revision
            inspected = await deploy.inspect_run(run.id)
            assert inspected["status"] == "completed"
        shown = await schedules.describe(await schedules.get(schedule.id), firings=True)
        assert [f["deployment_revision"] for f in shown["recent_firings"]] == [2, 1]
        assert (shown["fired"], shown.get("failed", 0)) == (2, 0)


async def test_a_deleted_deployment_or_a_refused_input_fails_the_firing_not_the_schedule(
    store: Store,
) -> None:
    clock = ManualClock(T0)
    async with owner(store) as (session, deploy):
        await deploy.artifact_save(greeting())
        await deploy.artifact_save(greeting(version="2", team="integer"))
        await deploy.deployment_save(deployment())
        schedules = Schedules(session, clock=clock)
        schedule = await schedules.add(deployment="greet", input={"team": "ops"}, every=60)
        loop = ScheduleLoop(session, clock=clock)

        await deploy.deployment_delete("greet")
        clock.advance(60)
        await one_pass(loop)
        # saved again, with a revision whose schema refuses the schedule's input
        await deploy.deployment_save(deployment(version="2"))
        clock.advance(60)
        await one_pass(loop)
        # and one that accepts it: the schedule kept going
        await deploy.deployment_save(deployment(version="1"))
        clock.advance(60)
        await one_pass(loop)
        runs = await settled(session)

        shown = await schedules.describe(await schedules.get(schedule.id), firings=True)
        failures = [f.get("failure", {}).get("code") for f in reversed(shown["recent_firings"])]
        assert failures == ["deployment_missing", "input_refused", None]
        assert (shown["fired"], shown["failed"], shown["paused"]) == (1, 2, False)
        assert [(run.definition_version, run.status) for run in runs] == [
            ("r3", RunStatus.COMPLETED)
        ]
        failed_ids = [f["run_id"] for f in shown["recent_firings"] if "failure" in f]
        for run_id in failed_ids:  # no run was created for a failed firing
            assert run_id not in {run.id for run in runs}


async def test_a_claimed_firing_is_completed_with_the_revision_it_chose(store: Store) -> None:
    """An owner died after writing the firing record (revision 1 chose) and before the
    run: the next owner starts revision 1 once, though revision 2 is live by then."""
    clock = ManualClock(T0)
    async with owner(store) as (session, deploy):
        await deploy.artifact_save(greeting())
        await deploy.deployment_save(deployment())
        schedules = Schedules(session, clock=clock)
        schedule = await schedules.add(deployment="greet", input={"team": "ops"}, every=60)
        slot = T0 + timedelta(seconds=60)
        run_id = derived_id(SESSION, schedule.id, slot, False, "run")
        store_ = ScheduleStore(store.kv)
        await store_.claim_firing(SESSION, Firing(schedule.id, slot, run_id, slot, False, 1))
        await deploy.deployment_save(deployment())  # revision 2, live
        clock.advance(60)
        loop = ScheduleLoop(session, clock=clock)
        await one_pass(loop)
        await one_pass(loop)
        runs = await settled(session)
        assert [(run.id, run.definition_version) for run in runs] == [(run_id, "r1")]
        pin = await deploy.pin_of(run_id)
        assert pin is not None and pin.deployment["revision"] == 1


async def test_owners_racing_a_deployment_slot_start_one_run(store: Store) -> None:
    clock = ManualClock(T0)
    async with owner(store) as (session, deploy):
        await deploy.artifact_save(greeting())
        await deploy.deployment_save(deployment())
        schedules = Schedules(session, clock=clock)
        schedule = await schedules.add(deployment="greet", input={"team": "ops"}, every=60)
        clock.advance(60)
        slot = T0 + timedelta(seconds=60)
        from flowledger.workflows.schedules import fire

        firings = await asyncio.gather(
            *(fire(session, schedules.store, schedule, slot, clock.now()) for _ in range(4))
        )
        assert len({firing.run_id for firing in firings}) == 1
        assert {firing.deployment_revision for firing in firings} == {1}
        runs = await settled(session)
        assert [run.id for run in runs] == [firings[0].run_id]


async def test_a_tenants_schedule_never_starts_an_inline_source_whoever_fires_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Tenant rule: a tenant cannot target a deployment with an inline (command line)
    binding; and when the operator makes one live after the tenant's schedule was added,
    a worker (operator access) firing it checks as the tenant: the firing is refused
    (``inline_source_refused``) and the command is never started (its marker stays
    absent)."""
    from flowledger.deploy.deployments.scheduling import deployment_schedules
    from flowledger.deploy.registry.access import SourceAccess
    from flowledger.deploy.registry.store import SourceRegistry

    from .test_deployed_runs import ARTIFACT
    from .test_deployed_runs import SESSION as GRANTED  # the session the secret is granted to
    from .test_registered_runs import bound, marked_server, source, starts

    monkeypatch.setenv("ENV_SOURCE_TOKEN", "registered-secret-value")
    script, marker = marked_server(tmp_path)
    inline = bound(stdio={"command": str(script)})
    clock = ManualClock(T0)
    async with open_store(f"sqlite:///{tmp_path / 'inline.db'}") as store:
        await SourceRegistry.over(store).add(source(script))
        async with owner(store, GRANTED) as (session, deploy):  # the worker's, operator access
            await deploy.artifacts.save(GRANTED, ARTIFACT)
            await deploy.deployment_save(inline)  # revision 1: inline, by the operator
            tenant = deployment_schedules(session, access=SourceAccess.TENANT)
            tenant.clock = clock
            before = await store.kv.keys("")
            with pytest.raises(InvalidScheduleError) as refused:
                await tenant.add(deployment="env_dep", input={}, every=60)
            assert refused.value.field == "deployment" and "inline" in str(refused.value)
            assert await store.kv.keys("") == before

            await deploy.deployment_save(bound(source="env"))  # revision 2: registered
            schedule = await tenant.add(deployment="env_dep", input={}, every=60)
            assert schedule.inline_sources is False
            await deploy.deployment_save(inline)  # revision 3: inline again, live

            clock.advance(60)
            await one_pass(ScheduleLoop(session, clock=clock))
            shown = await tenant.describe(await tenant.get(schedule.id), firings=True)
            (firing,) = shown["recent_firings"]
            assert firing["failure"]["code"] == "inline_source_refused", firing
            assert starts(marker) == 0  # the inline command was never started
            page = await session.registry.list(session.session_id, limit=10)
            assert page.runs == []


async def test_an_owner_that_does_not_serve_deployments_leaves_the_slot(store: Store) -> None:
    """An owner without the deploy layer (a bare `WorkflowSession`) decides nothing for a
    deployment's slot; the next owner that serves deployments fires it."""
    clock = ManualClock(T0)
    async with owner(store) as (session, deploy):
        await deploy.artifact_save(greeting())
        await deploy.deployment_save(deployment())
        schedule = await Schedules(session, clock=clock).add(
            deployment="greet", input={"team": "ops"}, every=60, catch_up="latest"
        )
    bare = WorkflowSession.build(store, SESSION, Catalog())
    await bare.supervisor.activate()
    try:
        clock.advance(60)
        await one_pass(ScheduleLoop(bare, clock=clock))
        untouched = await Schedules(bare, clock=clock).get(schedule.id)
        assert (untouched.cursor, untouched.fired, untouched.failed) == (T0, 0, 0)
        assert await ScheduleStore(store.kv).firings(SESSION, schedule.id, 10) == []
    finally:
        await bare.supervisor.shutdown()
    async with owner(store) as (session, _deploy):
        await one_pass(ScheduleLoop(session, clock=clock))
        runs = await settled(session)
        assert [run.definition_version for run in runs] == ["r1"]
