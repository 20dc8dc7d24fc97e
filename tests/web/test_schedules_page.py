"""The Schedules page (``/schedules``) through Starlette's TestClient on a real SQLite
file: a tenant sees only its own session's schedules, with their next fire times, and the
dashboard, which owns the sessions it serves, fires their slots."""

from __future__ import annotations

import asyncio
import re
import time
from pathlib import Path
from typing import Any, Final

from flowledger.storage import open_store
from flowledger.workflows.records.registry import RunRegistry
from flowledger.workflows.runtime.session import WorkflowSession
from flowledger.workflows.schedules import Schedules

from . import web_app
from .conftest import dashboard

ALICE: Final = "11111111-1111-4111-8111-111111111111"
BOB: Final = "22222222-2222-4222-8222-222222222222"
TOKENS: Final = {"alice-token-0123456789": ALICE, "bob-token-0123456789ab": BOB}
REVIEW: Final = {"title": "t", "document": "d"}


def as_(session: str) -> dict[str, str]:
    token = next(token for token, sid in TOKENS.items() if sid == session)
    return {"authorization": f"Bearer {token}"}


def add(db: Path, session: str, **timing: Any) -> str:
    async def make() -> str:
        async with open_store(f"sqlite:///{db}") as store:
            built = WorkflowSession.build(store, session, web_app.catalog())
            schedule = await Schedules(built).add(
                definition_name="document_review",
                definition_version="v1",
                input=REVIEW,
                overlap="allow",
                **timing,
            )
            return schedule.id

    return asyncio.run(make())


def scheduled_runs(db: Path, session: str) -> int:
    async def count() -> int:
        async with open_store(f"sqlite:///{db}") as store:
            page = await RunRegistry(store.kv).list(session, limit=100)
            return sum(1 for run in page.runs if run.scheduled_by is not None)

    return asyncio.run(count())


def test_a_tenant_sees_its_schedules_and_the_dashboard_fires_them(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    mine = add(db, ALICE, every=1)
    theirs = add(db, BOB, cron="0 9 * * 1-5", timezone="Europe/Riga")
    with dashboard(db, tokens=TOKENS) as client:
        assert client.get("/schedules").status_code == 303  # sign in first
        page = client.get("/schedules", headers=as_(ALICE))
        assert page.status_code == 200, page.text
        assert '<a href="/schedules" aria-current="page">Schedules</a>' in page.text
        rows = dict(re.findall(r'<tr data-schedule="([0-9a-f-]+)">(.*?)</tr>', page.text, re.S))
        assert list(rows) == [mine]  # never Bob's
        assert theirs not in page.text
        assert "every 1s" in rows[mine] and len(re.findall("<time ", rows[mine])) == 3

        bobs = client.get("/schedules", headers=as_(BOB)).text
        assert "0 9 * * 1-5 (Europe/Riga)" in bobs and mine not in bobs

        deadline = time.monotonic() + 30  # only catches a hang
        while scheduled_runs(db, ALICE) == 0:
            assert time.monotonic() < deadline, "the dashboard's owner fired nothing"
            time.sleep(0.1)
        again = client.get("/schedules", headers=as_(ALICE)).text
        assert re.search(r'<a href="/runs/[0-9a-f-]+">', again)
    assert scheduled_runs(db, BOB) == 0


GREETING: Final[dict[str, Any]] = {
    "format": "flowledger.artifact/v1",
    "name": "greeting",
    "version": "1",
    "input_schema": {
        "type": "object",
        "properties": {"team": {"type": "string"}},
        "required": ["team"],
        "additionalProperties": False,
    },
    "output_schema": {"type": "object", "additionalProperties": False},
    "start": "done",
    "nodes": {"done": {"kind": "end", "outcome": "ok"}},
}


def add_deployment_schedule(db: Path, session: str) -> str:
    """Deploy ``greet`` in ``session`` and schedule it every second."""
    from flowledger.deploy import DeployService
    from flowledger.deploy.deployments.scheduling import deployment_schedules

    async def make() -> str:
        async with open_store(f"sqlite:///{db}") as store:
            built = WorkflowSession.build(store, session, web_app.catalog())
            deploy = DeployService(built)
            await deploy.artifact_save(GREETING)
            await deploy.deployment_save(
                {
                    "format": "flowledger.deployment/v1",
                    "name": "greet",
                    "artifact": {"name": "greeting", "version": "1"},
                    "sources": {},
                }
            )
            schedule = await deployment_schedules(built).add(
                deployment="greet", input={"team": "ops"}, every=1, overlap="allow"
            )
            return schedule.id

    return asyncio.run(make())


def deployed_runs(db: Path, session: str) -> list[tuple[str, str]]:
    async def read() -> list[tuple[str, str]]:
        async with open_store(f"sqlite:///{db}") as store:
            page = await RunRegistry(store.kv).list(session, limit=100)
            return [
                (run.definition_name, run.definition_version)
                for run in page.runs
                if run.scheduled_by is not None
            ]

    return asyncio.run(read())


def test_the_page_shows_a_deployment_target_and_the_dashboard_fires_it(tmp_path: Path) -> None:
    db = tmp_path / "d.db"
    schedule = add_deployment_schedule(db, ALICE)
    with dashboard(db, tokens=TOKENS) as client:
        page = client.get("/schedules", headers=as_(ALICE)).text
        rows = dict(re.findall(r'<tr data-schedule="([0-9a-f-]+)">(.*?)</tr>', page, re.S))
        assert re.search(r'deployment <span class="mono">greet</span>', rows[schedule])
        deadline = time.monotonic() + 30  # only catches a hang
        while not deployed_runs(db, ALICE):
            assert time.monotonic() < deadline, "the dashboard's owner fired nothing"
            time.sleep(0.1)
    assert {run for run in deployed_runs(db, ALICE)} == {("greet", "r1")}
