"""The queues panel of the Schedules page through Starlette's TestClient on a real
SQLite file, as two tenants: each sees the limits that concern its own runs (its
catalog's definitions, its own session, the sources it may use) and never another
session's limit or a source it may not use; no request changes a limit."""

from __future__ import annotations

import asyncio
import re
import sys
from pathlib import Path
from typing import Final

from flowledger.deploy.registry.rates import RateLimits
from flowledger.deploy.registry.store import SourceRegistry
from flowledger.storage import open_store
from flowledger.workflows.admission import Limits

from .conftest import dashboard

ALICE: Final = "11111111-1111-4111-8111-111111111111"
BOB: Final = "22222222-2222-4222-8222-222222222222"
TOKENS: Final = {"alice-token-0123456789": ALICE, "bob-token-0123456789ab": BOB}


def as_(session: str) -> dict[str, str]:
    token = next(token for token, sid in TOKENS.items() if sid == session)
    return {"authorization": f"Bearer {token}"}


def source(name: str, sessions: list[str] | None = None) -> dict[str, object]:
    document: dict[str, object] = {
        "format": "flowledger.source/v1",
        "name": name,
        "stdio": {"command": sys.executable, "args": ["-m", "http.server"]},
    }
    if sessions is not None:
        document["sessions"] = sessions
    return document


def limits(db: Path) -> None:
    async def write() -> None:
        async with open_store(f"sqlite:///{db}") as store:
            await Limits(store.kv).set("definition", "document_review", 2)
            await Limits(store.kv).set("session", BOB, 3)
            await Limits(store.kv).set("deployment", f"{BOB}/bobs_dep", 5)
            await Limits(store.kv).set("definition", "someone_elses_deployment", 4)
            registry = SourceRegistry.over(store)
            await registry.add(source("shared"))
            await registry.add(source("bobs_api", [BOB]))
            await RateLimits(registry).set("shared", 10, "1m")
            await RateLimits(registry).set("bobs_api", 7, "1h")

    asyncio.run(write())


def scopes(page: str) -> list[str]:
    return re.findall(r'<tr data-scope="([^"]+)">', page)


def test_each_tenant_sees_only_the_limits_that_concern_its_runs(tmp_path: Path) -> None:
    db = tmp_path / "q.db"
    limits(db)
    with dashboard(db, tokens=TOKENS) as client:
        alice = client.get("/schedules", headers=as_(ALICE))
        assert alice.status_code == 200, alice.text
        assert scopes(alice.text) == ["definition/document_review", "source/shared"]
        assert BOB not in alice.text and "bobs_api" not in alice.text
        assert "bobs_dep" not in alice.text
        assert "someone_elses_deployment" not in alice.text
        assert "at most 10 calls per 60s" in alice.text

        bob = client.get("/schedules", headers=as_(BOB)).text
        assert scopes(bob) == [
            "definition/document_review",
            f"deployment/{BOB}/bobs_dep",
            f"session/{BOB}",
            "source/bobs_api",
            "source/shared",
        ]
        # no route changes a limit: there is none to reach
        for path in ("/limits", "/schedules", "/sources/shared"):
            refused = client.post(path, headers=as_(ALICE), data={"calls": "1000"})
            assert refused.status_code in (403, 404, 405), (path, refused.status_code)

    async def unchanged() -> list[tuple[str, int]]:
        async with open_store(f"sqlite:///{db}") as store:
            rates = await RateLimits(SourceRegistry.over(store)).all()
            return [(name, rate.calls) for name, rate in rates]

    assert asyncio.run(unchanged()) == [("bobs_api", 7), ("shared", 10)]
