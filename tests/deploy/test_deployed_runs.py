"""Deployed runs through `DeployService` against real MCP servers: validation before
start (``unrunnable``, nothing written), the pin, revalidation of the *pinned*
environment before resume (blocked, then ready again), drift policies, secrets by
reference, and a deployment edit that cannot redirect a paused run.

The test server is ``tests/deploy/runs/env_server.py`` (it answers its ``LABEL`` and the
SHA-256 of its ``SECRET_TOKEN``), launched through a shell script in the test's
directory, so removing the script removes the pinned command."""

from __future__ import annotations

import asyncio
import hashlib
import stat
import sys
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from flowledger.deploy import DeployService, StdioSource
from flowledger.storage import Store, open_store
from flowledger.workflows import Catalog
from flowledger.workflows.runtime.session import WorkflowSession

from .._postgres import postgres_url
from .runs.app import HERE as RUNS
from .servers import REPO

SESSION = str(uuid.UUID(int=11, version=4))
ARTIFACT = (RUNS / "pinned_env.yaml").read_text()


@pytest.fixture(params=["sqlite", "postgres"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'deployed.db'}"
    else:
        with postgres_url() as found:
            yield found


@asynccontextmanager
async def service(url: str) -> AsyncIterator[tuple[DeployService, Store]]:
    """A session over ``url`` (the same database and session every time it is opened)."""
    async with open_store(url) as store:
        built = WorkflowSession.build(store, SESSION, Catalog())
        await built.supervisor.activate()
        try:
            yield DeployService(built, check_timeout=30), store
        finally:
            await built.supervisor.shutdown()


def server_script(folder: Path) -> Path:
    """An executable that starts the env server: the pinned stdio command."""
    script = folder / "env-server"
    script.write_text(
        f"#!/bin/sh\ncd {REPO} && exec {sys.executable} -m tests.deploy.runs.env_server\n"
    )
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return script


def deployment(
    command: Path | str,
    *,
    label: str = "one",
    env: dict[str, Any] | None = None,
    allow: tuple[str, ...] = ("whoami", "secret_digest"),
    drift: str = "block",
    sources: dict[str, Any] | None = None,
) -> dict[str, Any]:
    binding = {
        "stdio": {"command": str(command), "env": {"LABEL": label, **(env or {})}},
        "allow_tools": list(allow),
    }
    return {
        "format": "flowledger.deployment/v1",
        "name": "env_dep",
        "artifact": {"name": "pinned_env", "version": "1"},
        "sources": {"env": binding} if sources is None else sources,
        "drift": drift,
    }


async def prepared(deploy: DeployService, document: dict[str, Any]) -> None:
    await deploy.artifacts.save(SESSION, ARTIFACT)
    await deploy.deployment_save(document)


def codes(result: dict[str, Any]) -> list[tuple[str, str]]:
    found = result.get("diagnostics") or result["resume_readiness"].get("diagnostics", [])
    return [(item["code"], item["severity"]) for item in found]


async def snapshot(store: Store) -> dict[str, Any]:
    """Every KV key (value and revision), blob and ledger record of the database."""
    kv = {}
    for key in await store.kv.keys(""):
        entry = await store.kv.get(key)
        kv[key] = (entry.value, entry.revision)
    blobs = {key: await store.blobs.get(key) for key in await store.blobs.list("")}
    logs = {}
    for name in await store.ledger.names(""):
        records, after = [], 0
        while batch := await store.ledger.read(name, after=after, limit=100):
            records += [record.payload for record in batch]
            after = batch[-1].seq
        logs[name] = records
    return {"kv": kv, "blobs": blobs, "ledger": logs}


def stored_bytes(snap: dict[str, Any]) -> list[bytes]:
    found = [key.encode() for key in snap["kv"]]
    found += [value for value, _ in snap["kv"].values()]
    found += list(snap["blobs"].values())
    found += [record for records in snap["ledger"].values() for record in records]
    return found


# -- before start ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("case", "expected"),
    [
        ("binding_missing", [("binding_missing", "error")]),
        ("credential_missing", [("credential_missing", "error")]),
        ("source_unreachable", [("source_unreachable", "error")]),
        ("tool_not_allowed", [("tool_not_allowed", "error")]),
        ("tool_missing", [("tool_missing", "error"), ("tool_missing", "error")]),
        ("deployment_missing", [("deployment_missing", "error")]),
        ("arguments_incompatible", [("arguments_incompatible", "error")]),
    ],
)
async def test_an_unrunnable_start_writes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, case: str, expected: list[Any]
) -> None:
    """Testing Strategy: dependency validation before start. Each blocking diagnostic
    makes ``run_deployment`` answer ``unrunnable`` with the diagnostics (each with a
    hint); no run exists and every KV key and value, blob and ledger record of the
    database is byte for byte what it was."""
    monkeypatch.delenv("SOURCE_TEST_UNSET", raising=False)
    script = server_script(tmp_path)
    shape = tmp_path / "shape"
    shape.write_text("required")  # whoami requires `mode`, which the artifact never sends
    document = {
        "binding_missing": deployment(script, sources={}),
        "credential_missing": deployment(
            script, env={"SECRET_TOKEN": {"secret": "SOURCE_TEST_UNSET"}}
        ),
        "source_unreachable": deployment(tmp_path / "no-such-server"),
        "tool_not_allowed": deployment(script, allow=("whoami",)),
        "tool_missing": deployment(Path(sys.executable).parent / "mcp-server-time"),
        "deployment_missing": deployment(script),
        "arguments_incompatible": deployment(script, env={"SHAPE_FILE": str(shape)}),
    }[case]
    async with service(f"sqlite:///{tmp_path / 'u.db'}") as (deploy, store):
        await prepared(deploy, document)
        before = await snapshot(store)
        name = "other_dep" if case == "deployment_missing" else "env_dep"
        result = await deploy.run_deployment(name, {})
        after = await snapshot(store)
        runs = await deploy.session.registry.list(SESSION)
    assert result["status"] == "unrunnable", result
    assert "run_id" not in result
    assert codes(result) == expected
    assert all(item["hint"] for item in result["diagnostics"])
    if case == "arguments_incompatible":
        assert result["diagnostics"][0]["message"].startswith("env.whoami: ")
        assert "mode" in result["diagnostics"][0]["message"]
    assert after == before
    assert list(runs.runs) == []


# -- pinned runs and resume ------------------------------------------------------------------


async def test_a_removed_pinned_command_blocks_resume_until_it_is_back(
    url: str, tmp_path: Path
) -> None:
    """Testing Strategy: pinned dependency disabled after pause: resume is blocked and
    state remains interrupted and unmodified; pinned dependency restored: later resume
    succeeds; server/service recreation followed by successful resume_run."""
    script = server_script(tmp_path)
    async with service(url) as (deploy, _):
        await prepared(deploy, deployment(script))
        started = await deploy.run_deployment("env_dep", {})
        assert started["status"] == "interrupted", started
        assert started["resume_readiness"]["status"] == "ready"
        assert started["interrupt"]["vertex_id"] == "ask"
        assert started["interrupt"]["info"] == {"question": "Go?"}
        assert started["deployment"] == {"name": "env_dep", "revision": 1}
        run_id = started["run_id"]
        script.unlink()
        record = await deploy.session.registry.get(SESSION, run_id)
        blocked = await deploy.resume_run(run_id, {"go": True})
        assert blocked["resumed"] is False
        assert blocked["status"] == "interrupted"
        assert blocked["resume_readiness"]["status"] == "blocked"
        assert codes(blocked) == [("source_unreachable", "error")]
        assert blocked["interrupt"]["vertex_id"] == "ask"  # the payload was not consumed
        unchanged = await deploy.session.registry.get(SESSION, run_id)
        assert unchanged.revision == record.revision
        assert unchanged.checkpoint_revision == record.checkpoint_revision
        inspected = await deploy.inspect_run(run_id)
        assert inspected["resume_readiness"]["status"] == "blocked"
    server_script(tmp_path)  # the command is back
    async with service(url) as (deploy, _):  # another service over the same database
        ready = await deploy.inspect_run(run_id)
        assert ready["resume_readiness"] == {"status": "ready"}
        done = await deploy.resume_run(run_id, {"go": True})
    assert done["status"] == "completed", done
    assert done["outcome"] == "done"
    assert done["output"]["label"] == "one"
    assert done["trace_count"] == 5  # ask (paused), ask, who, digest, done


async def test_an_edited_deployment_cannot_redirect_a_paused_run(tmp_path: Path) -> None:
    """Testing Strategy: changed live configuration cannot silently redirect pinned
    source bindings. Revision 2 binds another label; the paused run of revision 1 keeps
    revision 1's source and pin, a new run uses revision 2, and rollback moves live back."""
    script = server_script(tmp_path)
    async with service(f"sqlite:///{tmp_path / 'e.db'}") as (deploy, _):
        await prepared(deploy, deployment(script, label="one"))
        first = await deploy.run_deployment("env_dep", {})
        pin = await deploy.pin_of(first["run_id"])
        assert pin is not None and pin.deployment["revision"] == 1
        saved = await deploy.deployment_save(deployment(script, label="two"))
        assert (saved["revision"], saved["live"]) == (2, True)
        second = await deploy.run_deployment("env_dep", {})
        assert second["deployment"] == {"name": "env_dep", "revision": 2}
        old = await deploy.resume_run(first["run_id"], {"go": True})
        new = await deploy.resume_run(second["run_id"], {"go": True})
        assert old["output"]["label"] == "one", old
        assert new["output"]["label"] == "two", new
        again = await deploy.pin_of(first["run_id"])
        assert again is not None and again.digest == pin.digest
        rolled = await deploy.deployments.rollback(SESSION, "env_dep")
        assert (rolled.revision, rolled.live) == (1, True)
        third = await deploy.run_deployment("env_dep", {})
        assert third["deployment"]["revision"] == 1


async def test_a_secret_reaches_the_server_and_no_stored_byte(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A secret by reference is read from the environment when the source connects: the
    server sees it (it answers its digest), the pin names the variable only, and the
    value appears in no KV key or value, blob or ledger record. Unset after the pause,
    the resume is blocked with credential_missing; set again, it continues."""
    secret = "s3cr3t-" + uuid.uuid4().hex
    monkeypatch.setenv("SOURCE_TEST_SECRET", secret)
    script = server_script(tmp_path)
    document = deployment(script, env={"SECRET_TOKEN": {"secret": "SOURCE_TEST_SECRET"}})
    async with service(f"sqlite:///{tmp_path / 's.db'}") as (deploy, store):
        await prepared(deploy, document)
        started = await deploy.run_deployment("env_dep", {})
        run_id = started["run_id"]
        pin = await deploy.pin_of(run_id)
        assert pin is not None
        assert pin.sources["env"]["identity"]["secrets"] == ["SOURCE_TEST_SECRET"]
        assert pin.sources["env"]["identity"]["env"] == ["LABEL", "SECRET_TOKEN"]
        monkeypatch.delenv("SOURCE_TEST_SECRET")
        blocked = await deploy.resume_run(run_id, {"go": True})
        assert codes(blocked) == [("credential_missing", "error")]
        assert "SOURCE_TEST_SECRET" in blocked["resume_readiness"]["diagnostics"][0]["hint"]
        monkeypatch.setenv("SOURCE_TEST_SECRET", secret)
        done = await deploy.resume_run(run_id, {"go": True})
        assert done["status"] == "completed", done
        assert done["output"]["digest"] == hashlib.sha256(secret.encode()).hexdigest()
        trace = await deploy.read_run_trace(run_id, start=0, limit=100)
        shown = [done, trace, await deploy.deployment_show("env_dep")]
        everything = stored_bytes(await snapshot(store))
    assert not [data for data in everything if secret.encode() in data]
    assert secret not in repr(shown)


@pytest.mark.parametrize(
    ("drift", "shape", "expected", "outcome"),
    [
        ("block", "optional", [("schema_drift", "error")], "blocked"),
        ("compatible", "optional", [("schema_drift", "warning")], "completed"),
        ("compatible", "required", [("schema_drift", "error")], "blocked"),
        ("warn", "required", [("schema_drift", "warning")], "failed"),
    ],
)
async def test_the_drift_policy_decides_what_a_changed_contract_means(
    tmp_path: Path, drift: str, shape: str, expected: list[Any], outcome: str
) -> None:
    """A pinned tool's input schema changes while the run is paused: ``block`` refuses
    the resume; ``compatible`` allows it while the call site's arguments still validate
    (an optional property) and refuses it once they cannot (a required one); ``warn``
    allows it, and the call that no longer validates then fails the run (Testing
    Strategy: failure during execution produces failed, not interrupted)."""
    script = server_script(tmp_path)
    shape_file = tmp_path / "shape"
    document = deployment(script, env={"SHAPE_FILE": str(shape_file)}, drift=drift)
    async with service(f"sqlite:///{tmp_path / 'd.db'}") as (deploy, _):
        await prepared(deploy, document)
        started = await deploy.run_deployment("env_dep", {})
        run_id = started["run_id"]
        shape_file.write_text(shape)
        inspected = await deploy.inspect_run(run_id)
        assert codes(inspected) == expected
        unchecked = await deploy.inspect_run(run_id, revalidate=False)
        assert unchecked["resume_readiness"] == {"status": "ready", "revalidated": False}
        result = await deploy.resume_run(run_id, {"go": True})
    if outcome == "blocked":
        assert (result["resumed"], result["status"]) == (False, "interrupted")
    else:
        assert result["status"] == outcome, result
    if outcome == "failed":
        assert result["error"]["type"] == "ToolArgumentsError"


async def test_a_changed_description_or_server_only_warns(tmp_path: Path) -> None:
    """Revalidation against the pin: a pinned fingerprint edited to differ in the full
    fingerprint only is a description_changed warning, another server version a
    server_changed warning; neither blocks."""
    from flowledger.deploy.deployments.validation import check_pinned

    script = server_script(tmp_path)
    async with service(f"sqlite:///{tmp_path / 'w.db'}") as (deploy, _):
        await prepared(deploy, deployment(script))
        started = await deploy.run_deployment("env_dep", {})
        pin = await deploy.pin_of(started["run_id"])
        assert pin is not None
        revision = await deploy.deployments.get(SESSION, "env_dep", 1)
        sources = pin.to_json()["sources"]
        sources["env"]["server"]["version"] = "0.9"
        sources["env"]["tools"]["whoami"]["full"] = "sha256:" + "0" * 64
        found = await check_pinned(
            sources, revision.validated.bindings(), "block", (), deploy.environment, seconds=30
        )
    assert [(d.code, d.severity) for d in found] == [
        ("server_changed", "warning"),
        ("description_changed", "warning"),
    ]


async def test_the_trace_is_read_in_ranges(tmp_path: Path) -> None:
    """Testing Strategy: trace retrieval is ranged and reports total trace count."""
    script = server_script(tmp_path)
    async with service(f"sqlite:///{tmp_path / 't.db'}") as (deploy, _):
        await prepared(deploy, deployment(script))
        run_id = (await deploy.run_deployment("env_dep", {}))["run_id"]
        await deploy.resume_run(run_id, {"go": True})
        page = await deploy.read_run_trace(run_id, start=1, limit=2)
        beyond = await deploy.read_run_trace(run_id, start=9, limit=2)
    assert page["total"] == 5
    assert [(e["node"], e["status"]) for e in page["entries"]] == [("ask", "ok"), ("who", "ok")]
    assert page["entries"][1]["dependency"] == "env"
    # one base: the page read from `start` 1 begins with the entry whose `seq` is 1
    assert [e["seq"] for e in page["entries"]] == [1, 2]
    assert (page["start"], page["run_id"]) == (1, run_id)
    assert (beyond["total"], beyond["entries"]) == (5, [])


async def test_a_deployed_definition_never_runs_without_a_pin(tmp_path: Path) -> None:
    """Started through the plain ``workflow_run_start`` (no validation, no pin), a
    deployed definition fails the run instead of running unvalidated."""
    script = server_script(tmp_path)
    async with service(f"sqlite:///{tmp_path / 'p.db'}") as (deploy, _):
        await prepared(deploy, deployment(script))
        await deploy.run_deployment("env_dep", {})  # registers env_dep@r1 in the catalog
        started = await deploy.tools.call(
            "workflow_run_start",
            {"definition_name": "env_dep", "definition_version": "r1", "input": {}},
        )
        await deploy.session.supervisor.wait_idle()
        got = await deploy.inspect_run(started["run_id"])
        # what a host asks before resuming such a run: pin_missing, naming the graph run
        record = await deploy.session.registry.get(SESSION, started["run_id"])
        definition = deploy.session.catalog.resolve("env_dep", "r1")
        found = await definition.check_resume(record.graph_run_id)
    assert got["status"] == "failed", got
    assert got["error"]["type"] == "PinMissingError"
    assert "pin" not in got and got["trace_count"] == 1  # the first node, refused
    [diagnostic] = found
    assert (diagnostic.code, diagnostic.severity) == ("pin_missing", "error")
    assert diagnostic.message == f"graph run {record.graph_run_id} has no pinned environment"
    assert got["error"]["message"] == diagnostic.message


def test_the_env_server_spec_is_a_stdio_source(tmp_path: Path) -> None:
    """The binding of the tests resolves to the source the pin describes."""
    from flowledger.deploy import validate_deployment

    script = server_script(tmp_path)
    validated = validate_deployment(deployment(script))
    source = validated.bindings()["env"].source({})
    assert source == StdioSource(str(script), env={"LABEL": "one"})


async def test_a_missing_child_makes_the_start_unrunnable(
    tmp_path: Path, time_server: StdioSource, everything: StdioSource
) -> None:
    """The closure is read before anything else: a child artifact whose record is gone
    (here removed behind the store's back; the store itself refuses to delete a
    referenced child) is child_missing, and nothing is written. With the child in place
    the same deployment starts and pins the child's digest."""
    db = f"sqlite:///{tmp_path / 'c.db'}"
    async with service(db) as (deploy, store):
        await deploy.artifacts.save(SESSION, (RUNS / "sign_off.yaml").read_text())
        await deploy.artifacts.save(SESSION, (RUNS / "digest.yaml").read_text())

        def binding(source: StdioSource, tools: list[str]) -> dict[str, Any]:
            return {"stdio": {"command": source.command, "args": list(source.args)},
                    "allow_tools": tools}  # fmt: skip

        document = {
            "format": "flowledger.deployment/v1",
            "name": "digest_dep",
            "artifact": {"name": "daily_digest", "version": "1"},
            "sources": {
                "clock": binding(time_server, ["get_current_time"]),
                "everything": binding(everything, ["echo", "get-sum"]),
            },
        }
        await deploy.deployment_save(document)
        started = await deploy.run_deployment(
            "digest_dep", {"city": "Oslo", "a": 1, "b": 2, "review": False}
        )
        assert started["status"] == "interrupted", started
        pin = await deploy.pin_of(started["run_id"])
        assert pin is not None
        child = await deploy.artifacts.record(SESSION, "sign_off", "1")
        assert pin.document["children"] == [
            {"name": "sign_off", "version": "1", "digest": child.digest}
        ]
        assert sorted(pin.sources) == ["clock", "everything"]
        key = f"sessions/{SESSION}/deploy/artifacts/versions/sign_off/1"
        await store.kv.delete(key)
        before = await snapshot(store)
        refused = await deploy.run_deployment(
            "digest_dep", {"city": "Oslo", "a": 1, "b": 2, "review": False}
        )
        after = await snapshot(store)
    assert refused["status"] == "unrunnable"
    assert codes(refused) == [("child_missing", "error")]
    assert after == before


async def test_a_contract_that_changes_during_execution_fails_the_call(tmp_path: Path) -> None:
    """Under drift: block a deployed definition hands the pinned contracts to its tool
    nodes; a node whose tool lists another contract when it is called fails the run
    (ToolContractChangedError) without calling it. Shown with a definition whose pinned
    contract is deliberately wrong, and the mapping a real pin gives."""
    from flowledger.deploy import ArtifactDefinition, compile_artifact, validate_artifact
    from flowledger.tools import WorkflowTools

    script = server_script(tmp_path)
    async with service(f"sqlite:///{tmp_path / 'x.db'}") as (deploy, _):
        await prepared(deploy, deployment(script))
        started = await deploy.run_deployment("env_dep", {})
        pin = await deploy.pin_of(started["run_id"])
        assert pin is not None
        definition = deploy.session.catalog.resolve("env_dep", "r1")
        contracts = await definition.pinned_contracts(pin.graph_run_id)  # type: ignore[attr-defined]
    assert contracts == {
        "env": {tool: prints["contract"] for tool, prints in pin.sources["env"]["tools"].items()}
    }

    class Pinned(ArtifactDefinition):
        async def pinned_contracts(self, graph_run_id: str) -> Any:
            return {"env": {"whoami": "sha256:" + "0" * 64}}

    validated = validate_artifact(
        {
            "format": "flowledger.artifact/v1",
            "name": "one_call",
            "version": "1",
            "input_schema": {"type": "object", "additionalProperties": False},
            "output_schema": {"type": "object", "additionalProperties": False},
            "dependencies": {"env": {"tools": ["whoami"]}},
            "start": "call",
            "nodes": {
                "call": {"kind": "tool", "dependency": "env", "tool": "whoami", "next": "done"},
                "done": {"kind": "end", "outcome": "done"},
            },
        }
    )
    catalog = Catalog()
    catalog.register(
        compile_artifact(
            validated, sources={"env": StdioSource(str(script))}, definition_type=Pinned
        )
    )
    async with open_store(f"sqlite:///{tmp_path / 'y.db'}") as store:
        built = WorkflowSession.build(store, SESSION, catalog)
        await built.supervisor.activate()
        try:
            tools = WorkflowTools(
                SESSION,
                catalog=built.catalog,
                registry=built.registry,
                inputs=built.inputs,
                supervisor=built.supervisor,
                pending=built.pending,
            )
            run = await tools.call(
                "workflow_run_start",
                {"definition_name": "one_call", "definition_version": "1", "input": {}},
            )
            await built.supervisor.wait_idle()
            got = await tools.call("workflow_run_get", {"run_id": run["run_id"]})
        finally:
            await built.supervisor.shutdown()
    assert got["run_status"] == "failed", got
    assert got["error"]["type"] == "ToolContractChangedError"
    assert "the tool was not called" in got["error"]["message"]


async def test_a_deployed_run_forks_under_its_pin(tmp_path: Path) -> None:
    """A fork of a paused deployed run executes under a copy of its origin's pin (the same
    deployment revision, sources and tools; snapshots shared): it pauses where the origin
    paused, resumes to the origin's output, and the origin is untouched and still resumes.
    (Before, the fork was refused because it had no pin.)"""
    from flowledger.deploy.deployments.pin import PinStore
    from flowledger.tools import ForkTools

    script = server_script(tmp_path)
    async with service(f"sqlite:///{tmp_path / 'f.db'}") as (deploy, store):
        await prepared(deploy, deployment(script))
        started = await deploy.run_deployment("env_dep", {})
        assert started["status"] == "interrupted", started
        origin = started["run_id"]
        session = deploy.session
        tools = ForkTools(
            SESSION,
            catalog=session.catalog,
            registry=session.registry,
            supervisor=session.supervisor,
        )
        before = await session.registry.get(SESSION, origin)
        forked = await tools.call("workflow_run_fork", {"run_id": origin, "revision": 0})
        fork = forked["run_id"]
        assert forked["forked_from"]["run_id"] == origin
        record = await session.registry.get(SESSION, fork)
        pins = PinStore(store.ledger)
        theirs, mine = await pins.read(before.graph_run_id), await pins.read(record.graph_run_id)
        assert theirs is not None and mine is not None
        assert {**mine.document, "graph_run_id": ""} == {**theirs.document, "graph_run_id": ""}
        for _ in range(3000):  # the owner executes the fork up to its pause (hang deadline)
            inspected = await deploy.inspect_run(fork)
            if inspected["status"] not in ("pending", "running"):
                break
            await asyncio.sleep(0.01)
        assert inspected["status"] == "interrupted", inspected
        readiness = inspected["resume_readiness"]
        assert readiness["status"] == "ready", inspected
        # the owner's check when it adopted the fork (its revision 0) may be reused: said so
        assert set(readiness) <= {"status", "reused", "validated_at"}, inspected
        assert inspected["interrupt"]["vertex_id"] == "ask"
        done = await deploy.resume_run(fork, {"go": True})
        assert done["status"] == "completed", done
        assert done["output"]["label"] == "one"
        unchanged = await session.registry.get(SESSION, origin)
        assert unchanged.checkpoint_revision == before.checkpoint_revision
        assert (await deploy.resume_run(origin, {"go": True}))["status"] == "completed"
