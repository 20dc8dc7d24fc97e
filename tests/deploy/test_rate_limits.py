"""Per-source call rate limits (docs/sources.md, "Call rate limits"): at most ``calls``
calls to a registered source in any ``per`` seconds, global per source, kept in storage
with compare-and-swap (SQLite and PostgreSQL).

* With the injectable clock: two processes' worth of stores race reservations, and at
  every step of the clock exactly ``calls`` more went through.
* Through deployed runs of two owners (two sessions, two store connections) calling a
  real MCP server that counts the calls it receives: never more than the limit reached
  it, the other calls waited (the runs stayed running, none failed), and they went on
  when the operator raised the limit.
* Bad input is a typed error naming the field, with nothing written."""

from __future__ import annotations

import asyncio
import contextlib
import sys
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from flowledger.clock import ManualClock
from flowledger.deploy import DeployService
from flowledger.deploy.registry.rates import InvalidRateError, RateLimits, parse_per
from flowledger.deploy.registry.store import SourceRegistry
from flowledger.storage import Store, open_store
from flowledger.workflows import Catalog
from flowledger.workflows.runtime.session import WorkflowSession

from .._postgres import postgres_url
from .runs.app import HERE as RUNS
from .servers import REPO

ARTIFACT = (RUNS / "rated.yaml").read_text()
OWNERS = [str(uuid.UUID(int=31, version=4)), str(uuid.UUID(int=32, version=4))]
DEPLOYMENT = {
    "format": "flowledger.deployment/v1",
    "name": "rated_dep",
    "artifact": {"name": "rated", "version": "1"},
    "sources": {"paid": {"source": "paid", "allow_tools": ["tick"]}},
}


def paid_source(count_file: Path) -> dict[str, Any]:
    return {
        "format": "flowledger.source/v1",
        "name": "paid",
        "stdio": {
            "command": sys.executable,
            "args": ["-m", "tests.deploy.runs.counting_server"],
            "cwd": str(REPO),
            "env": {"COUNT_FILE": str(count_file)},
        },
    }


def calls_at_server(count_file: Path) -> int:
    return len(count_file.read_text().splitlines()) if count_file.exists() else 0


@pytest.fixture(params=["sqlite", "postgres"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'rates.db'}"
    else:
        with postgres_url() as found:
            yield found


async def eventually(check: Callable[[], Awaitable[bool] | bool], seconds: float = 180.0) -> None:
    """Wait until ``check()`` holds; the deadline only catches a hang."""
    async with asyncio.timeout(seconds):
        while True:
            found = check()
            if await found if not isinstance(found, bool) else found:
                return
            await asyncio.sleep(0.05)


async def test_no_window_holds_more_than_the_limit_under_racing_reservations(
    url: str, tmp_path: Path
) -> None:
    clock = ManualClock()
    async with open_store(url) as first, open_store(url) as second:
        await SourceRegistry.over(first).add(paid_source(tmp_path / "unused"))
        limits = [RateLimits(SourceRegistry.over(s), clock) for s in (first, second)]
        await limits[0].set("paid", 3, "60s")
        done: list[int] = []

        async def call(i: int) -> None:
            await limits[i % 2].acquire("paid")
            done.append(i)

        tasks = [asyncio.create_task(call(i)) for i in range(10)]
        try:
            for step in range(4):
                expected = min(10, 3 * (step + 1))
                await eventually(lambda e=expected: len(done) >= e)  # type: ignore[misc]
                # everyone else is waiting on the clock: nobody more gets through
                await eventually(lambda e=expected: limits[0].waiting + limits[1].waiting == 10 - e)  # type: ignore[misc]
                assert len(done) == expected
                assert await limits[0].in_window("paid") == min(3, 10 - 3 * step)
                clock.advance(60)
            await asyncio.gather(*tasks)
        finally:
            for task in tasks:
                task.cancel()
        assert sorted(done) == list(range(10))


@contextlib.asynccontextmanager
async def owner(url: str, session_id: str) -> AsyncIterator[tuple[DeployService, Store]]:
    async with open_store(url) as store:
        built = WorkflowSession.build(store, session_id, Catalog())
        await built.supervisor.activate()
        try:
            yield DeployService(built, check_timeout=60), store
        finally:
            await built.supervisor.shutdown()


async def test_deployed_runs_of_two_owners_never_exceed_the_limit_at_the_server(
    url: str, tmp_path: Path
) -> None:
    count_file = tmp_path / "calls"
    runs_per_owner, limit = 3, 2
    async with owner(url, OWNERS[0]) as (a, store), owner(url, OWNERS[1]) as (b, _):
        await SourceRegistry.over(store).add(paid_source(count_file))
        operator = RateLimits(SourceRegistry.over(store))
        await operator.set("paid", limit, "1h")  # nothing leaves the window while we look
        for deploy, session_id in ((a, OWNERS[0]), (b, OWNERS[1])):
            await deploy.artifacts.save(session_id, ARTIFACT)
            await deploy.deployment_save(DEPLOYMENT)
        started: list[tuple[DeployService, str]] = []
        for _ in range(runs_per_owner):
            for deploy in (a, b):
                result = await deploy.run_deployment("rated_dep", {}, wait_seconds=0)
                assert result["status"] in ("pending", "running", "completed"), result
                started.append((deploy, result["run_id"]))
        total = len(started)
        gates = (a.environment.rates, b.environment.rates)

        await eventually(lambda: sum(g.waiting for g in gates) == total - limit)
        assert calls_at_server(count_file) == limit
        for deploy, run_id in started:  # waiting is not failing
            status = (await deploy.session.registry.get(deploy.session.session_id, run_id)).status
            assert status.value in ("running", "completed")

        await operator.set("paid", total, "1h")  # the waiting calls go on
        for deploy, run_id in started:

            async def completed(deploy: DeployService = deploy, run_id: str = run_id) -> bool:
                run = await deploy.session.registry.get(deploy.session.session_id, run_id)
                assert run.status.value not in ("failed", "cancelled"), run
                return run.status.value == "completed"

            await eventually(completed)
        assert calls_at_server(count_file) == total
        assert await operator.in_window("paid") == total


@pytest.mark.parametrize(
    ("source", "calls", "per", "field"),
    [
        ("paid", 0, "60s", "calls"),
        ("paid", -1, "60s", "calls"),
        ("paid", 1.5, "60s", "calls"),
        ("paid", True, "60s", "calls"),
        ("paid", 10_001, "60s", "calls"),
        ("paid", 5, "0s", "per"),
        ("paid", 5, "-5s", "per"),
        ("paid", 5, "soon", "per"),
        ("paid", 5, 0, "per"),
        ("paid", 5, "2d", "per"),
        ("nobody", 5, "60s", "source"),
        ("", 5, "60s", "source"),
        ("Bad Name", 5, "60s", "source"),
    ],
)
async def test_bad_limits_are_typed_errors_naming_the_field(
    tmp_path: Path, source: Any, calls: Any, per: Any, field: str
) -> None:
    async with open_store(f"sqlite:///{tmp_path / 'bad.db'}") as store:
        registry = SourceRegistry.over(store)
        await registry.add(paid_source(tmp_path / "unused"))
        with pytest.raises(InvalidRateError) as caught:
            await RateLimits(registry).set(source, calls, per)
        assert caught.value.field == field
        assert caught.value.code == "invalid_rate_limit"
        assert str(caught.value).startswith(f"{field}:")
        assert await store.kv.keys("deploy/rates/") == []


def test_durations() -> None:
    assert parse_per("500ms") == 0.5
    assert parse_per("60s") == parse_per("1m") == parse_per(60) == 60.0
    assert parse_per("1h") == 3600.0
    assert parse_per("1d") == 86_400.0
