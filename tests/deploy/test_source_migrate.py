"""``flowledger source migrate`` on a database whose deployments bind sources inline.

Session A has ``env_dep`` (the env server, a label and a secret by reference) with a
paused run, and ``two_dep`` (another label); session B has its own ``env_dep`` with the
very same inline spec. Before the migration a tenant over HTTP cannot run A's
deployment (``inline_source_refused``); ``--dry-run`` writes nothing; the migration
registers two sources (the shared spec once, visible to A and B, its secret declared
for them) and rebinds the three deployments; then the tenant runs ``env_dep`` to the
end with the secret reaching the server, while the paused run keeps its inline pin and
is resumed by the operator. Running the migration again writes nothing."""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from flowledger.deploy import ArtifactStore, DeploymentStore, DeployService
from flowledger.deploy.deployments.migration import migrate_inline_sources
from flowledger.deploy.registry.store import SourceRegistry
from flowledger.mcp import session_for_token
from flowledger.storage import Store, open_store
from flowledger.workflows import Catalog
from flowledger.workflows.runtime.session import WorkflowSession

from ..mcp.conftest import http_client, http_server, payload
from .runs.app import HERE as RUNS
from .servers import REPO
from .test_deployed_runs import deployment, server_script, snapshot

TOKEN_A = "token-a-migrate-0123456789"
TOKEN_B = "token-b-migrate-0123456789"
A = session_for_token(TOKEN_A)
B = session_for_token(TOKEN_B)
ARTIFACT = (RUNS / "pinned_env.yaml").read_text()


@asynccontextmanager
async def operator(url: str, session_id: str) -> AsyncIterator[DeployService]:
    """The operator's own service over ``session_id`` (inline sources allowed)."""
    async with open_store(url) as store:
        session = WorkflowSession.build(store, session_id, Catalog())
        deploy = DeployService(session, check_timeout=60)
        await deploy.serve_deployments()
        await session.supervisor.activate()
        try:
            yield deploy
        finally:
            await session.supervisor.shutdown()


def migrate(url: str, *options: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("FLOWLEDGER_DEBUG", "FLOWLEDGER_DB")}
    env["COLUMNS"] = "200"
    return subprocess.run(
        [sys.executable, "-m", "flowledger", "source", "migrate", "--db", url, *options],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        encoding="utf-8",
        timeout=120,
        check=False,
    )


async def stored(url: str) -> dict[str, Any]:
    async with open_store(url) as store:
        return await snapshot(store)


def migrated(done: subprocess.CompletedProcess[str]) -> Any:
    assert done.returncode == 0, (done.stdout, done.stderr)
    return json.loads(done.stdout)


async def test_migrate_moves_inline_sources_into_the_registry(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    secret = "s3cr3t-" + uuid.uuid4().hex
    monkeypatch.setenv("SOURCE_TEST_SECRET", secret)
    url = f"sqlite:///{tmp_path / 'migrate.db'}"
    script = server_script(tmp_path)
    shared = {"SECRET_TOKEN": {"secret": "SOURCE_TEST_SECRET"}}
    async with operator(url, A) as deploy:
        await deploy.artifact_save(ARTIFACT)
        await deploy.deployment_save(deployment(script, env=shared))
        other = deployment(script, label="two")
        other["name"] = "two_dep"
        await deploy.deployment_save(other)
        paused = await deploy.run_deployment("env_dep", {})
        assert paused["status"] == "interrupted", paused
        old_pin = await deploy.pin_of(paused["run_id"])
    assert old_pin is not None
    async with operator(url, B) as deploy:
        await deploy.artifact_save(ARTIFACT)
        await deploy.deployment_save(deployment(script, env=shared))

    tokens = {TOKEN_A: A, TOKEN_B: B}
    async with http_server(url, tokens=tokens) as served, http_client(served, TOKEN_A) as a:
        refused = payload(
            await a.call_tool("run_deployment", {"deployment": "env_dep", "input": {}})
        )
        assert refused["status"] == "unrunnable"
        assert [d["code"] for d in refused["diagnostics"]] == ["inline_source_refused"]
        assert "flowledger source migrate" in refused["diagnostics"][0]["hint"]

    # a dry run says what would be done and writes nothing
    before = await stored(url)
    plan = migrated(await asyncio.to_thread(migrate, url, "--dry-run", "--json"))
    assert await stored(url) == before
    assert plan["dry_run"] is True and plan["sessions"] == 2
    assert [(s["name"], s["action"], s["revision"], s["sessions"]) for s in plan["sources"]] == [
        ("env_dep_env", "added", None, sorted([A, B])),
        ("two_dep_env", "added", None, [A]),
    ]
    assert [(d["session_id"], d["name"], d["to_revision"]) for d in plan["deployments"]] == sorted(
        [(A, "env_dep", None), (A, "two_dep", None), (B, "env_dep", None)]
    )

    done = await asyncio.to_thread(migrate, url)
    assert done.returncode == 0, done.stderr
    text = " ".join(done.stdout.split())
    assert "registered source env_dep_env revision 1 visible to 2 session(s)" in text
    assert f"rebound deployment env_dep (session {A}): revision 1 -> revision 2" in text
    assert "1 unfinished run(s) keep the inline sources they were pinned to" in text
    assert paused["run_id"] in text

    # the registered source: the spec, visible to A and B, the secret declared for them
    async with open_store(url) as store:
        registered = await SourceRegistry.over(store).get("env_dep_env")
    document = json.loads(registered.source.canonical)
    assert document["stdio"] == {
        "command": str(script),
        "env": {"LABEL": "one", "SECRET_TOKEN": {"secret": "SOURCE_TEST_SECRET"}},
    }
    assert document["sessions"] == sorted([A, B])
    assert document["secrets"] == {
        "SOURCE_TEST_SECRET": {"env": "SOURCE_TEST_SECRET", "sessions": sorted([A, B])}
    }
    assert secret.encode() not in b"".join(value for value, _ in (await stored(url))["kv"].values())

    # twice: nothing to migrate, nothing written
    before = await stored(url)
    again = migrated(await asyncio.to_thread(migrate, url, "--json"))
    assert (again["sources"], again["deployments"]) == ([], [])
    assert await stored(url) == before
    quiet = await asyncio.to_thread(migrate, url)
    assert "nothing to migrate" in quiet.stdout

    # a tenant runs the migrated deployment to the end; B sees its binding by name
    async with (
        http_server(url, tokens=tokens) as served,
        http_client(served, TOKEN_A) as a,
        http_client(served, TOKEN_B) as b,
    ):
        started = payload(
            await a.call_tool(
                "run_deployment", {"deployment": "env_dep", "input": {}, "wait_seconds": 120}
            )
        )
        assert started["status"] == "interrupted", started
        assert started["deployment"] == {"name": "env_dep", "revision": 2}
        finished = payload(
            await a.call_tool(
                "resume_run",
                {"run_id": started["run_id"], "payload": {"go": True}, "wait_seconds": 120},
            )
        )
        assert finished["status"] == "completed", finished
        assert finished["output"] == {
            "label": "one",
            "digest": hashlib.sha256(secret.encode()).hexdigest(),
        }
        shown = payload(await b.call_tool("deployment_show", {"name": "env_dep"}))
        assert shown["document"]["sources"]["env"] == {
            "source": "env_dep_env",
            "allow_tools": ["whoami", "secret_digest"],
        }

    # the paused run kept its inline pin; the operator resumes it
    async with operator(url, A) as deploy:
        pin = await deploy.pin_of(paused["run_id"])
        assert pin is not None and pin.digest == old_pin.digest
        assert "source" not in pin.sources["env"]["identity"]
        resumed = await deploy.resume_run(paused["run_id"], {"go": True}, wait_seconds=120)
    assert resumed["status"] == "completed", resumed
    assert resumed["deployment"] == {"name": "env_dep", "revision": 1}


def inline(name: str, dependency: str, command: str) -> dict[str, Any]:
    return {
        "format": "flowledger.deployment/v1",
        "name": name,
        "artifact": {"name": "pinned_env", "version": "1"},
        "sources": {
            dependency: {"stdio": {"command": command}, "allow_tools": ["whoami"]},
            "kept": {"source": "registered", "allow_tools": ["whoami"]},
        },
    }


async def test_names_are_unique_and_a_reused_source_is_widened(store: Store) -> None:
    """A name registered with another transport is skipped (``_2``); a source of the
    same transport is reused and made visible to the next session that used the spec;
    a long deployment name is cut to 64 characters; bindings that already name a
    registered source stay as they are."""
    deployments = DeploymentStore.over(store)
    registry = SourceRegistry.over(store)
    await registry.add(
        {"format": "flowledger.source/v1", "name": "env_dep_env", "http": {"url": "https://x/mcp"}}
    )
    long_name = "a" * 64
    for session_id in (A, B):
        await ArtifactStore.over(store).save(session_id, ARTIFACT)
        await deployments.save(session_id, inline("env_dep", "env", "same-server"))
    await deployments.save(A, inline(long_name, "long_dependency", "other-server"))

    first = await migrate_inline_sources(store, [A])
    cut = first.sources[0].name  # sources are in the order of their first use
    assert [(s.name, s.action, s.revision, s.sessions) for s in first.sources] == [
        (cut, "added", 1, [A]),
        ("env_dep_env_2", "added", 1, [A]),
    ]
    assert len(cut) == 64 and cut.startswith(f"{long_name[:55]}_")
    live = await deployments.get(A, "env_dep")
    assert live.revision == 2
    assert json.loads(live.validated.canonical)["sources"] == {
        "env": {"source": "env_dep_env_2", "allow_tools": ["whoami"]},
        "kept": {"source": "registered", "allow_tools": ["whoami"]},
    }
    assert (await registry.get("env_dep_env")).revision == 1  # the other source untouched

    second = await migrate_inline_sources(store, [B])
    assert [(s.name, s.action, s.revision, s.sessions) for s in second.sources] == [
        ("env_dep_env_2", "changed", 2, [B]),
    ]
    widened = await registry.get("env_dep_env_2")
    assert widened.source.document.sessions == sorted([A, B])
    assert [(d.session_id, d.name, d.from_revision, d.to_revision) for d in second.deployments] == [
        (B, "env_dep", 1, 2)
    ]
    third = await migrate_inline_sources(store)
    assert (third.sources, third.deployments, third.changed) == ([], [], False)
