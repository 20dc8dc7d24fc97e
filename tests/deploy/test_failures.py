"""Failure outcomes and retries of tool nodes (docs/deploy.md, "Failures"), each kind
produced for real: server-everything's error result and a slow call past its timeout,
the tests' own flaky server refusing to start, killed before a request is written and
exiting after it was, and a SIGKILL of the run's owner in the middle of a retried call
of a tool that is not idempotent."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from flowledger.deploy import ArtifactValidationError, Source, compile_artifact, validate_artifact
from flowledger.deploy.sources.errors import ConnectionLostError
from flowledger.deploy.sources.session import SourceSession
from flowledger.workflows import Catalog

from .runs.failures_app import RETRIED_WRITE, flaky_source, one_call
from .servers import REPO
from .test_runs import adopting, outcome, session, settle, start, trace_of, wait_for


@pytest.fixture
def flaky(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The flaky server's folder (``FLAKY_DIR``)."""
    folder = tmp_path / "flaky"
    folder.mkdir()
    monkeypatch.setenv("FLAKY_DIR", str(folder))
    return folder


def lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


async def run_one(
    url: str, document: Mapping[str, Any], source: Source, text: str = "x"
) -> tuple[dict[str, Any], dict[str, Any], list[Any]]:
    """Run ``document`` (its dependency bound to ``source``) to a terminal state: the
    run as ``workflow_run_get`` shows it, its final state and the trace entries of its
    tool node ``call``."""
    validated = validate_artifact(dict(document))
    catalog = Catalog()
    dependency = next(iter(document["dependencies"]))
    catalog.register(compile_artifact(validated, sources={dependency: source}))
    async with session(url, catalog) as (built, tools):
        run_id = await start(tools, validated.name, {"text": text})
        got = await settle(built, tools, run_id)
        state = await outcome(built, validated.name, run_id)
        page = await trace_of(built, validated.name, run_id)
    return got, state, [entry for entry in page.entries if entry.node == "call"]


def issues_of(document: Mapping[str, Any]) -> list[tuple[str, str]]:
    with pytest.raises(ArtifactValidationError) as caught:
        validate_artifact(dict(document))
    return [(issue.place, issue.code) for issue in caught.value.issues]


# -- validation ------------------------------------------------------------------------------


def test_bad_retry_and_on_error_are_placed_issues() -> None:
    bad = one_call(
        retry={"attempts": 11, "on": ["unavailable", "flaky", "unavailable"]},
        on_error={"next": "nowhere", "kinds": ["oops"]},
    )
    bad["nodes"]["call"]["on_error"]["assign"]["nothing"] = "${ error.why }"
    found = issues_of(bad)
    assert ("nodes.call.retry.attempts", "retry_out_of_range") in found
    assert ("nodes.call.retry.on[1]", "unknown_failure_kind") in found
    assert ("nodes.call.retry.on[2]", "duplicate") in found
    assert ("nodes.call.on_error.kinds[0]", "unknown_failure_kind") in found
    assert ("nodes.call.on_error.assign.nothing", "unknown_state_field") in found
    assert ("nodes.call.on_error.assign.nothing", "unknown_field") in found
    assert ("nodes.call.on_error.next", "unknown_node") in found
    backoff = one_call(retry={"attempts": 2, "on": [], "backoff": {"factor": 0.5, "max": -1}})
    assert set(issues_of(backoff)) == {
        ("nodes.call.retry.backoff.factor", "retry_out_of_range"),
        ("nodes.call.retry.backoff.max", "retry_out_of_range"),
        ("nodes.call.retry.on", "retry_out_of_range"),
    }
    # `error` is in scope only in on_error.assign; `result` is not in scope there
    scoped = one_call(on_error={})
    scoped["nodes"]["call"]["assign"]["kind"] = "${ error.kind }"
    scoped["nodes"]["call"]["on_error"]["assign"]["answer"] = "${ result.text }"
    assert issues_of(scoped) == [
        ("nodes.call.assign.kind", "not_in_scope"),
        ("nodes.call.on_error.assign.answer", "not_in_scope"),
    ]
    assert validate_artifact(RETRIED_WRITE).artifact.nodes["call"].retry is not None


def test_an_on_error_target_counts_for_reachability_and_branches() -> None:
    """The failure route is an edge like any other: a node reached only through it is
    reachable, and it may not jump into another parallel branch."""
    document = one_call(on_error={})
    assert validate_artifact(document)  # `failed` is reached only through on_error
    document["nodes"]["call"].pop("on_error")
    assert ("nodes.failed", "unreachable_node") in issues_of(document)
    branched = one_call(on_error={"next": "right"})
    nodes = branched["nodes"]
    nodes["fan"] = {"kind": "parallel", "branches": ["call", "right"], "join": "joined"}
    nodes["right"] = {"kind": "set", "assign": {"code": "r"}, "next": "joined"}
    nodes["joined"] = {"kind": "set", "assign": {"kind": "j"}, "next": "done"}
    nodes["call"]["next"] = "joined"
    nodes.pop("failed")
    branched["start"] = "fan"
    assert ("nodes.call.on_error.next", "into_branch") in issues_of(branched)
    nodes["call"]["on_error"]["next"] = "joined"  # failing, the branch still reaches the join
    nodes["call"]["on_error"]["assign"] = {"attempt": "${ error.attempt }"}
    assert validate_artifact(branched).branches["fan"][0] == frozenset({"call"})


async def test_a_failure_routed_to_a_join_waits_for_the_other_branch(
    tmp_path: Path, flaky: Path
) -> None:
    """A tool node in one branch of a parallel routes its failure to the join (through
    the join's gate, like a `next` into it): both branches' writes are there when the
    join runs, and the run ends normally."""
    document = one_call(on_error={"next": "joined"})
    nodes = document["nodes"]
    nodes["fan"] = {"kind": "parallel", "branches": ["call", "right"], "join": "joined"}
    nodes["right"] = {"kind": "set", "assign": {"code": "right"}, "next": "joined"}
    nodes["joined"] = {"kind": "set", "assign": {"answer": "joined"}, "next": "done"}
    nodes["call"]["next"] = "joined"
    nodes["call"]["on_error"]["assign"] = {"kind": "${ error.kind }"}
    nodes.pop("failed")
    document["start"] = "fan"
    (flaky / "error-upto").write_text("1")
    got, state, trace = await run_one(f"sqlite:///{tmp_path / 'join.db'}", document, flaky_source())
    assert got["status_summary"] == "outcome done", got
    assert (state["kind"], state["code"], state["answer"]) == ("tool_error", "right", "joined")
    assert [(e.status, e.failure) for e in trace] == [("routed", "tool_error")]


# -- the source layer: written or not -----------------------------------------------------


async def test_a_lost_connection_is_unavailable_before_the_write_and_unknown_after(
    flaky: Path,
) -> None:
    """Killed before the request is written: nothing was sent (``unavailable``), the
    server never saw a call. Exiting after it read the request: ``outcome_unknown``."""
    async with SourceSession(flaky_source()) as before:
        [pid] = lines(flaky / "launches")
        os.kill(int(pid), signal.SIGKILL)
        await asyncio.to_thread(wait_for, lambda: not before.is_open, "the session's end", 60)
        with pytest.raises(ConnectionLostError) as caught:
            await before.call_tool("append", {"text": "a"})
    assert caught.value.failure_kind == "unavailable"
    assert "nothing was sent" in str(caught.value)
    assert lines(flaky / "calls") == []
    (flaky / "exit-at").write_text("1")
    async with SourceSession(flaky_source()) as after:
        with pytest.raises(ConnectionLostError) as caught:
            await after.call_tool("append", {"text": "b"})
    assert caught.value.failure_kind == "outcome_unknown"
    assert "may or may not have taken effect" in str(caught.value)
    assert lines(flaky / "calls") == ["b"]


# -- runs: routed, retried, refused --------------------------------------------------------


async def test_tool_error_and_timeout_are_routed_with_error_in_scope(
    tmp_path: Path, everything: Source
) -> None:
    """server-everything's get-resource-reference answers an error result for a
    resource id that is no integer; its slow operation outlasts a 0.5 s timeout. Both
    reach the ``failed`` end with ``error`` assigned; without on_error the run fails."""
    url = f"sqlite:///{tmp_path / 'routed.db'}"
    error_call = one_call(
        "get-resource-reference",
        {"resourceId": 1.5},
        dependency="everything",
        on_error={},
    )
    got, state, trace = await run_one(url, error_call, everything)
    assert got["run_status"] == "completed" and got["status_summary"] == "outcome failed"
    assert (state["kind"], state["code"], state["attempt"]) == ("tool_error", "tool_error", 1)
    [entry] = trace
    assert (entry.status, entry.failure, entry.error_type) == (
        "routed",
        "tool_error",
        "ToolErrorResult",
    )

    slow = one_call(
        "trigger-long-running-operation",
        {"duration": 20, "steps": 20},
        dependency="everything",
        on_error={"kinds": ["timeout"]},
        timeout=0.5,
    )
    got, state, trace = await run_one(url, slow, everything)
    assert got["status_summary"] == "outcome failed"
    assert (state["kind"], state["code"]) == ("timeout", "tool_timeout")
    assert [(e.status, e.failure) for e in trace] == [("routed", "timeout")]

    error_call["nodes"]["call"].pop("on_error")
    error_call["nodes"].pop("failed")
    got, _, trace = await run_one(url, error_call, everything)
    assert got["run_status"] == "failed" and got["error"]["type"] == "ToolErrorResult"
    assert [(e.status, e.failure) for e in trace] == [("error", "tool_error")]


async def test_a_timeout_of_a_read_only_tool_is_retried_then_routed_without_kinds(
    tmp_path: Path, everything: Source
) -> None:
    """server-everything annotates its slow operation read-only, so the table lets a
    listed ``timeout`` retry: each attempt outlasts the 0.5 s timeout and is one trace
    entry; when attempts run out, ``on_error`` without ``kinds`` routes the last one."""
    slow = one_call(
        "trigger-long-running-operation",
        {"duration": 20, "steps": 20},
        dependency="everything",
        retry={"attempts": 2, "on": ["timeout"], "backoff": {"initial": 0}},
        on_error={},
        timeout=0.5,
    )
    got, state, trace = await run_one(f"sqlite:///{tmp_path / 'slow.db'}", slow, everything)
    assert got["status_summary"] == "outcome failed", got
    assert (state["kind"], state["code"], state["attempt"]) == ("timeout", "tool_timeout", 2)
    assert [(e.attempt, e.status, e.failure) for e in trace] == [
        (1, "error", "timeout"),
        (2, "routed", "timeout"),
    ]


async def test_a_listed_timeout_of_a_tool_that_is_not_idempotent_is_not_retried_at_run_time(
    tmp_path: Path, flaky: Path
) -> None:
    """``append`` (no annotations) holds its first call past the 0.5 s timeout. Run
    without a deployment, the call-time check of the table refuses the listed
    ``timeout`` retry: one call, one trace entry, routed by ``on_error`` without
    ``kinds`` (the table names only ``outcome_unknown`` for explicit routing)."""
    (flaky / "hold-at").write_text("1")
    document = one_call(
        retry={"attempts": 3, "on": ["timeout"], "backoff": {"initial": 0}},
        on_error={},
        timeout=0.5,
    )
    try:
        got, state, trace = await run_one(
            f"sqlite:///{tmp_path / 'held.db'}", document, flaky_source()
        )
    finally:
        (flaky / "release").touch()
    assert got["status_summary"] == "outcome failed", got
    assert (state["kind"], state["code"], state["attempt"]) == ("timeout", "tool_timeout", 1)
    assert [(e.attempt, e.status, e.failure) for e in trace] == [(1, "routed", "timeout")]
    assert lines(flaky / "calls") == ["x"]  # never called again


async def test_unavailable_and_listed_tool_errors_are_retried_with_durable_attempts(
    tmp_path: Path, flaky: Path
) -> None:
    """A source that refuses its first two launches is retried (``unavailable`` is
    always retryable); a tool error is retried when listed, each attempt one call and
    one trace entry, until attempts run out: then on_error routes the last failure."""
    url = f"sqlite:///{tmp_path / 'retried.db'}"
    (flaky / "refuse-launches").write_text("2")
    document = one_call(retry={"attempts": 3, "backoff": {"initial": 0.01, "max": 0.02}})
    got, state, trace = await run_one(url, document, flaky_source(), "first")
    assert got["status_summary"] == "outcome done" and state["answer"] == "1"
    assert [(e.attempt, e.status, e.failure) for e in trace] == [
        (1, "error", "unavailable"),
        (2, "error", "unavailable"),
        (3, "ok", ""),
    ]
    assert lines(flaky / "calls") == ["first"]

    (flaky / "calls").unlink()
    (flaky / "error-upto").write_text("5")
    document = one_call(
        retry={"attempts": 3, "on": ["tool_error"], "backoff": {"initial": 0}}, on_error={}
    )
    got, state, trace = await run_one(url, document, flaky_source())
    assert got["status_summary"] == "outcome failed"
    assert (state["kind"], state["attempt"]) == ("tool_error", 3)
    assert [(e.attempt, e.status) for e in trace] == [(1, "error"), (2, "error"), (3, "routed")]
    assert len(lines(flaky / "calls")) == 3  # one call per attempt


async def test_an_unknown_outcome_of_a_tool_that_is_not_idempotent_is_handled_only_by_name(
    tmp_path: Path, flaky: Path
) -> None:
    """The server exits after reading the call: ``outcome_unknown``. ``on_error``
    without ``kinds`` does not route it (the run fails), nor does a retry listing it
    repeat the call (the table refuses it for this tool, also at run time); naming it
    in ``kinds`` routes it."""
    url = f"sqlite:///{tmp_path / 'unknown.db'}"
    (flaky / "exit-at").write_text("1")
    quiet = one_call(on_error={}, retry={"attempts": 3, "on": ["outcome_unknown"]})
    got, _, trace = await run_one(url, quiet, flaky_source())
    assert got["run_status"] == "failed" and got["error"]["type"] == "ConnectionLostError"
    assert [(e.attempt, e.status, e.failure) for e in trace] == [(1, "error", "outcome_unknown")]
    assert len(lines(flaky / "calls")) == 1  # never called again

    (flaky / "calls").unlink()
    named = one_call(on_error={"kinds": ["outcome_unknown"]})
    got, state, trace = await run_one(url, named, flaky_source())
    assert got["status_summary"] == "outcome failed"
    assert (state["kind"], state["code"]) == ("outcome_unknown", "connection_lost")
    assert len(lines(flaky / "calls")) == 1


async def test_a_result_breaking_its_output_schema_is_invalid_result_retried_when_read_only(
    tmp_path: Path, flaky: Path
) -> None:
    """``shape`` (read-only) answers structured content its output schema refuses:
    ``invalid_result``, which the table lets a read-only tool retry; when attempts run
    out the last one is routed."""
    document = one_call(
        "shape",
        {},
        retry={"attempts": 2, "on": ["invalid_result"], "backoff": {"initial": 0}},
        on_error={"kinds": ["invalid_result"]},
    )
    got, state, trace = await run_one(
        f"sqlite:///{tmp_path / 'shape.db'}", document, flaky_source()
    )
    assert got["status_summary"] == "outcome failed"
    assert (state["kind"], state["code"], state["attempt"]) == (
        "invalid_result",
        "tool_result_invalid",
        2,
    )
    assert [(e.attempt, e.status, e.failure) for e in trace] == [
        (1, "error", "invalid_result"),
        (2, "routed", "invalid_result"),
    ]
    assert len(lines(flaky / "shapes")) == 2


# -- a crash in the middle of a retried call ------------------------------------------------


@pytest.mark.parametrize("held", [1, 2])
async def test_a_killed_owner_never_makes_more_calls_than_the_trace_records(
    tmp_path: Path, flaky: Path, held: int
) -> None:
    """``retried_write`` retries tool errors of ``append`` (not idempotent) up to 3
    attempts; the first call answers an error. The owner (a ``flowledger start``
    process) is SIGKILLed while call ``held`` is under way (the first attempt, or the
    retry); the next owner adopts the run. The file never holds more calls than the
    attempts the trace records, the attempt in flight is never repeated (its unknown
    outcome is routed because ``kinds`` names it), and the count went on from where the
    killed owner left it."""
    db = f"sqlite:///{tmp_path / 'crash.db'}"
    (flaky / "error-upto").write_text("1")
    (flaky / "hold-at").write_text(str(held))
    owner = subprocess.Popen(  # noqa: ASYNC220 - one child, killed below
        [
            sys.executable, "-m", "flowledger", "start", "retried_write", "1",
            "--input", json.dumps({"text": "paid"}), "--db", db,
            "--app", "tests.deploy.runs.failures_app:catalog",
        ],
        cwd=REPO,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )  # fmt: skip
    try:
        await asyncio.to_thread(wait_for, lambda: (flaky / f"held-{held}").exists(), "the call")
    finally:
        os.killpg(owner.pid, signal.SIGKILL)
        await asyncio.to_thread(owner.wait, 60)
    (flaky / "release").touch()
    from .runs.failures_app import catalog

    async with adopting(db, catalog()) as adopted:
        assert await adopted.supervisor.wait_idle() is None
        [run] = (await adopted.registry.list(adopted.session_id)).runs
        from flowledger.tools import WorkflowTools

        final = await WorkflowTools.for_session(adopted).call(
            "workflow_run_get", {"run_id": run.id}
        )
        state = await outcome(adopted, "retried_write", run.id)
        page = await trace_of(adopted, "retried_write", run.id)
        trace = [entry for entry in page.entries if entry.node == "call"]
    calls = lines(flaky / "calls")
    attempts = {entry.attempt for entry in trace}
    assert len(calls) == held  # the held call was the last one made
    assert len(calls) <= len(attempts), (calls, trace)
    assert final["status_summary"] == "outcome failed", final
    assert (state["kind"], state["code"], state["attempt"]) == (
        "outcome_unknown",
        "tool_outcome_unknown",  # found by the next owner, not raised by a source
        held,
    )
    assert trace[-1].failure == "outcome_unknown" and trace[-1].status == "routed"
    if held == 2:  # the first attempt's failure came from the killed owner
        assert trace[0].attempt == 1 and trace[0].failure == "tool_error"


# -- deployments: the table where annotations are known --------------------------------------


async def test_a_deployment_refuses_retries_the_table_forbids_unless_declared_idempotent(
    tmp_path: Path, flaky: Path
) -> None:
    """Retrying ``outcome_unknown`` of ``append`` (no annotations) makes the start
    ``unrunnable`` with ``retry_not_allowed`` placed at the node, nothing started; the
    deployment's ``idempotent: [append]`` allows it, and the run retries the call whose
    server exited after reading it (the pin keeps the declaration)."""
    from flowledger.deploy import DeployService

    from .test_deployed_runs import SESSION as DEPLOY_SESSION
    from .test_deployed_runs import codes, service

    document = one_call(retry={"attempts": 2, "on": ["outcome_unknown"], "backoff": {"initial": 0}})
    binding: dict[str, Any] = {
        "stdio": {
            "command": sys.executable,
            "args": ["-m", "tests.deploy.runs.flaky_server"],
            "env": {"FLAKY_DIR": str(flaky)},
            "cwd": str(REPO),
        },
        "allow_tools": ["append"],
    }
    deployment = {
        "format": "flowledger.deployment/v1",
        "name": "flaky_dep",
        "artifact": {"name": "flaky_call", "version": "1"},
        "sources": {"flaky": binding},
    }
    (flaky / "exit-at").write_text("1")
    async with service(f"sqlite:///{tmp_path / 'dep.db'}") as (deploy, _):
        assert isinstance(deploy, DeployService)
        await deploy.artifacts.save(DEPLOY_SESSION, document)
        await deploy.deployment_save(deployment)
        refused = await deploy.run_deployment("flaky_dep", {"text": "x"})
        assert refused["status"] == "unrunnable", refused
        assert codes(refused) == [("retry_not_allowed", "error")]
        [diagnostic] = refused["diagnostics"]
        assert diagnostic["message"].startswith("flaky_call.nodes.call.retry.on: outcome_unknown")
        assert "idempotent" in diagnostic["hint"]
        assert lines(flaky / "calls") == []
        binding["idempotent"] = ["append"]
        await deploy.deployment_save(deployment)
        done = await deploy.run_deployment("flaky_dep", {"text": "y"})
    assert done["status"] == "completed", done
    assert done["outcome"] == "done"
    assert lines(flaky / "calls") == ["y", "y"]  # the unknown first call, then the retry
    binding["idempotent"] = ["other"]
    from flowledger.deploy import validate_deployment
    from flowledger.deploy.deployments.document import DeploymentValidationError

    with pytest.raises(DeploymentValidationError) as caught:
        validate_deployment(deployment)
    assert [(i.place, i.code) for i in caught.value.issues] == [
        ("sources.flaky.idempotent[0]", "idempotent_not_allowed")
    ]


# -- a tenant ---------------------------------------------------------------------------------


async def test_a_tenants_retries_start_only_its_registered_source_and_errors_carry_no_secret(
    tmp_path: Path, flaky: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A tenant (`SourceAccess.TENANT`, what an MCP-over-HTTP client gets) runs a retried
    call of a registered source that stops starting after its probe: every attempt
    launches only that source (no other command, at most ``attempts`` launches), the
    routed ``error`` it may read names no secret value, and its deployment cannot turn
    an inline command into a retried one (refused, nothing started)."""
    import hashlib

    from flowledger.deploy.registry.access import SourceAccess
    from flowledger.deploy.registry.errors import InlineSourceRefusedError
    from flowledger.deploy.registry.store import SourceRegistry

    from .test_deployed_runs import SESSION as DEPLOY_SESSION
    from .test_deployed_runs import snapshot, stored_bytes
    from .test_registered_runs import service

    secret = "tenant-must-not-see-this"
    monkeypatch.setenv("FLAKY_TEST_TOKEN", secret)
    document = one_call(
        retry={"attempts": 3, "backoff": {"initial": 0}},
        on_error={"kinds": ["unavailable"]},
    )
    document["state"]["problem"] = {}
    document["nodes"]["call"]["on_error"]["assign"]["problem"] = "${ error.message }"
    document["output_schema"]["properties"]["problem"] = {"type": ["string", "null"]}
    document["nodes"]["failed"]["output"] = {"answer": None, "problem": "${ state.problem }"}
    registered = {
        "format": "flowledger.source/v1",
        "name": "flaky",
        "stdio": {
            "command": sys.executable,
            "args": ["-m", "tests.deploy.runs.flaky_server"],
            "env": {"FLAKY_DIR": str(flaky), "TOKEN": {"secret": "token"}},
            "cwd": str(REPO),
        },
        "secrets": {"token": {"env": "FLAKY_TEST_TOKEN", "sessions": [DEPLOY_SESSION]}},
    }
    deployment: dict[str, Any] = {
        "format": "flowledger.deployment/v1",
        "name": "flaky_dep",
        "artifact": {"name": "flaky_call", "version": "1"},
        "sources": {"flaky": {"source": "flaky", "allow_tools": ["append"]}},
    }
    url = f"sqlite:///{tmp_path / 'tenant.db'}"
    (flaky / "refuse-from").write_text("2")  # the start's probe is launch 1
    async with service(url) as (_, store):
        await SourceRegistry.over(store).add(registered)
    async with service(url, access=SourceAccess.TENANT) as (tenant, store):
        await tenant.artifacts.save(DEPLOY_SESSION, document)
        await tenant.deployment_save(deployment)
        done = await tenant.run_deployment("flaky_dep", {"text": "x"}, wait_seconds=120)
        assert done["status"] == "completed", done
        assert done["outcome"] == "failed"
        problem = done["output"]["problem"]
        assert "unreachable" in problem and secret not in problem
        assert secret.encode() not in b"".join(stored_bytes(await snapshot(store)))
        inline = {
            **deployment,
            "name": "inline_dep",
            "sources": {
                "flaky": {
                    "stdio": {"command": sys.executable, "args": ["-c", "print()"]},
                    "allow_tools": ["append"],
                    "idempotent": True,
                }
            },
        }
        with pytest.raises(InlineSourceRefusedError):
            await tenant.deployment_save(inline)
    assert len(lines(flaky / "launches")) == 1 + 3  # the probe, then one per attempt
    assert (flaky / "secret-digest").read_text() == hashlib.sha256(secret.encode()).hexdigest()
    assert lines(flaky / "calls") == []
