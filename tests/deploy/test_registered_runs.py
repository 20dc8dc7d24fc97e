"""Deployed runs bound to registered sources, and who may do what (docs/sources.md):

* a deployment binds ``source: NAME``; the pin records the name and revision, and the run
  talks to that revision (a later revision of the source does not redirect it);
* disabling the source blocks a paused run's resume (``source_disabled``) and enabling it
  unblocks; removing it is refused while the run is pinned to it;
* a secret reaches only the sessions it is granted to (``credential_missing`` for others);
* a tenant (`SourceAccess.TENANT`) cannot save, run, probe or resume anything inline: the
  command is never started (its marker file stays absent) and nothing is written;
* a read-only door compares a pin with the registry's last probe and starts nothing.

The server is ``tests/deploy/runs/env_server.py`` behind a shell script that appends a
line to a marker file each time it starts."""

from __future__ import annotations

import hashlib
import os
import sys
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from flowledger.deploy import DeployService
from flowledger.deploy.registry.access import SourceAccess
from flowledger.deploy.registry.errors import InlineSourceRefusedError, SourceInUseError
from flowledger.deploy.registry.store import SourceRegistry
from flowledger.storage import Store, open_store
from flowledger.workflows import Catalog
from flowledger.workflows.runtime.session import WorkflowSession

from .servers import REPO
from .test_deployed_runs import ARTIFACT, SESSION, codes, snapshot

OTHER = str(uuid.UUID(int=12, version=4))


def marked_server(folder: Path) -> tuple[Path, Path]:
    """An env-server launcher that appends a line to a marker file whenever it starts."""
    marker = folder / "started"
    script = folder / "env-server"
    script.write_text(
        f"#!/bin/sh\necho started >> {marker}\n"
        f"cd {REPO} && exec {sys.executable} -m tests.deploy.runs.env_server\n"
    )
    script.chmod(0o755)
    return script, marker


def starts(marker: Path) -> int:
    return len(marker.read_text().splitlines()) if marker.exists() else 0


def source(script: Path, *, label: str = "one", **changes: Any) -> dict[str, Any]:
    document: dict[str, Any] = {
        "format": "flowledger.source/v1",
        "name": "env",
        "stdio": {
            "command": str(script),
            "env": {"LABEL": label, "SECRET_TOKEN": {"secret": "token"}},
        },
        "secrets": {"token": {"env": "ENV_SOURCE_TOKEN", "sessions": [SESSION]}},
    }
    document.update(changes)
    return document


def bound(**binding: Any) -> dict[str, Any]:
    return {
        "format": "flowledger.deployment/v1",
        "name": "env_dep",
        "artifact": {"name": "pinned_env", "version": "1"},
        "sources": {"env": {"allow_tools": ["whoami", "secret_digest"], **binding}},
    }


@asynccontextmanager
async def service(
    url: str, *, session: str = SESSION, access: SourceAccess = SourceAccess.OPERATOR
) -> AsyncIterator[tuple[DeployService, Store]]:
    async with open_store(url) as store:
        built = WorkflowSession.build(store, session, Catalog())
        await built.supervisor.activate()
        try:
            yield DeployService(built, check_timeout=30, access=access), store
        finally:
            await built.supervisor.shutdown()


@pytest.fixture(autouse=True)
def token(monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("ENV_SOURCE_TOKEN", "registered-secret-value")
    return "registered-secret-value"


async def test_a_run_keeps_its_pinned_revision_and_the_operator_controls_the_source(
    tmp_path: Path, token: str
) -> None:
    script, marker = marked_server(tmp_path)
    url = f"sqlite:///{tmp_path / 'r.db'}"
    async with service(url) as (deploy, store):
        registry = SourceRegistry.over(store)
        await registry.add(source(script))
        await deploy.artifacts.save(SESSION, ARTIFACT)
        await deploy.deployment_save(bound(source="env"))
        started = await deploy.run_deployment("env_dep", {})
        assert started["status"] == "interrupted", started
        run_id = started["run_id"]
        pin = await deploy.pin_of(run_id)
        assert pin is not None
        identity = pin.sources["env"]["identity"]
        assert (identity["source"], identity["revision"]) == ("env", 1)
        assert identity["secrets"] == ["token"]
        assert await registry.uses("env") == [(SESSION, run_id)]

        # the operator changes the source: the paused run keeps revision 1
        await registry.set(source(script, label="two"))
        with pytest.raises(SourceInUseError) as in_use:
            await registry.remove("env", _unfinished(deploy))
        assert in_use.value.runs == (run_id,)

        await registry.disable("env")
        before = starts(marker)
        blocked = await deploy.resume_run(run_id, {"go": True})
        assert (blocked["resumed"], blocked["status"]) == (False, "interrupted")
        assert codes(blocked) == [("source_disabled", "error")]
        assert starts(marker) == before  # a disabled source is not started
        await registry.enable("env")
        done = await deploy.resume_run(run_id, {"go": True}, wait_seconds=120)
        assert done["status"] == "completed", done
        assert done["output"] == {
            "label": "one",
            "digest": hashlib.sha256(token.encode()).hexdigest(),
        }
        await registry.remove("env", _unfinished(deploy))
        assert await registry.uses("env") == []
        # the secret's value is in no stored byte
        snap = await snapshot(store)
        assert token.encode() not in b"".join(
            [k.encode() for k in snap["kv"]]
            + [v for v, _ in snap["kv"].values()]
            + list(snap["blobs"].values())
            + [r for rs in snap["ledger"].values() for r in rs]
        )


def _unfinished(deploy: DeployService) -> Any:
    async def unfinished(session_id: str, run_id: str) -> bool:
        run = await deploy.session.registry.get(session_id, run_id)
        return run.status.value not in ("completed", "failed", "cancelled")

    return unfinished


async def test_a_secret_reaches_only_the_sessions_granted_it(tmp_path: Path) -> None:
    script, marker = marked_server(tmp_path)
    url = f"sqlite:///{tmp_path / 's.db'}"
    async with open_store(url) as store:
        await SourceRegistry.over(store).add(source(script))
    async with service(url, session=OTHER) as (deploy, store):
        await deploy.artifacts.save(OTHER, ARTIFACT)
        await deploy.deployment_save(bound(source="env"))
        before = await snapshot(store)
        refused = await deploy.run_deployment("env_dep", {})
        assert refused["status"] == "unrunnable"
        assert codes(refused) == [("credential_missing", "error")]
        assert "not granted" in refused["diagnostics"][0]["message"]
        assert await snapshot(store) == before
    assert starts(marker) == 0


async def test_a_tenant_reaches_no_command_line_and_writes_nothing(tmp_path: Path) -> None:
    script, marker = marked_server(tmp_path)
    url = f"sqlite:///{tmp_path / 't.db'}"
    inline = bound(stdio={"command": str(script), "env": {"LABEL": "x"}})
    async with service(url) as (operator, _):  # the operator saved an inline deployment
        await operator.artifacts.save(SESSION, ARTIFACT)
        await operator.deployment_save(inline)
        paused = await operator.run_deployment("env_dep", {})
        assert paused["status"] == "interrupted"
    operator_starts = starts(marker)
    async with service(url, access=SourceAccess.TENANT) as (tenant, store):
        before = await snapshot(store)
        with pytest.raises(InlineSourceRefusedError):
            await tenant.deployment_save(inline)
        with pytest.raises(InlineSourceRefusedError):
            await tenant.source_probe({"stdio": {"command": str(script)}})
        refused = await tenant.run_deployment("env_dep", {})
        assert codes(refused) == [("inline_source_refused", "error")]
        blocked = await tenant.resume_run(paused["run_id"], {"go": True})
        assert blocked["resumed"] is False
        assert codes(blocked) == [("inline_source_refused", "error")]
        assert await snapshot(store) == before
    assert starts(marker) == operator_starts


async def test_a_read_only_door_compares_with_the_last_probe_and_starts_nothing(
    tmp_path: Path,
) -> None:
    script, marker = marked_server(tmp_path)
    url = f"sqlite:///{tmp_path / 'o.db'}"
    async with service(url) as (deploy, store):
        registry = SourceRegistry.over(store)
        await registry.add(source(script))
        await deploy.artifacts.save(SESSION, ARTIFACT)
        await deploy.deployment_save(bound(source="env"))
        run_id = (await deploy.run_deployment("env_dep", {}))["run_id"]
    async with open_store(url) as store:
        built = WorkflowSession.build(store, SESSION, Catalog())
        reader = DeployService(built, access=SourceAccess.TENANT.read_only())
        count = starts(marker)
        unprobed = await reader.inspect_run(run_id)
        assert codes(unprobed) == [("not_revalidated", "warning")]
        assert starts(marker) == count
        await SourceRegistry.over(store).probe("env", dict(os.environ), seconds=30)
        count = starts(marker)
        probed = await reader.inspect_run(run_id)
        assert codes(probed) == [("checked_against_probe", "warning")]
        assert probed["resume_readiness"]["status"] == "ready"
        assert starts(marker) == count
