"""Rows of the failure table (docs/deploy.md, "Failures") that depend on the tool's
annotations, each produced for real against ``proof_server.py``: ``write`` and
``write_shape`` are annotated not read-only and not idempotent, ``read`` read-only.

* ``invalid_result`` of a tool that is not idempotent: routed by ``on_error`` without
  ``kinds``, failing the run without it, never retried (the call took effect), and a
  deployment refusing the retry at start;
* ``outcome_unknown`` of the read-only tool retried (and routed without ``kinds``) vs
  of the tool that is not idempotent: not retried, routed only when ``kinds`` names it;
* ``tool_error`` not listed in ``retry.on`` is not retried, whatever the tool."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from .runs.failures_app import one_call
from .runs.proof_app import proof_source
from .servers import REPO
from .test_failures import run_one


def lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


@pytest.fixture
def proof(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The proof server's folder (``PROOF_DIR``)."""
    folder = tmp_path / "proof"
    folder.mkdir()
    monkeypatch.setenv("PROOF_DIR", str(folder))
    return folder


def call(tool: str, **policy: Any) -> dict[str, Any]:
    arguments = {} if tool == "read" else None
    return one_call(tool, arguments, dependency="proof", **policy)


# -- invalid_result ------------------------------------------------------------------------


async def test_an_invalid_result_of_a_tool_that_is_not_idempotent_is_routed_never_retried(
    tmp_path: Path, proof: Path
) -> None:
    """``write_shape`` appends (its effect) and answers structured content its output
    schema refuses: ``invalid_result``. A listed retry is refused at call time (the call
    took effect and the tool is not idempotent): one call, routed by ``on_error``
    without ``kinds``; without ``on_error`` the run fails with the error's type."""
    url = f"sqlite:///{tmp_path / 'shape.db'}"
    routed = call(
        "write_shape",
        retry={"attempts": 3, "on": ["invalid_result"], "backoff": {"initial": 0}},
        on_error={},
    )
    got, state, trace = await run_one(url, routed, proof_source())
    assert got["status_summary"] == "outcome failed", got
    assert (state["kind"], state["code"], state["attempt"]) == (
        "invalid_result",
        "tool_result_invalid",
        1,
    )
    assert [(e.attempt, e.status, e.failure, e.error_type) for e in trace] == [
        (1, "routed", "invalid_result", "ToolResultInvalidError")
    ]
    assert lines(proof / "write_shape.calls") == ["x"]

    unrouted = call("write_shape", retry={"attempts": 2, "on": ["invalid_result"]})
    got, _, trace = await run_one(url, unrouted, proof_source())
    assert got["run_status"] == "failed", got
    assert got["error"]["type"] == "ToolResultInvalidError"
    assert [(e.attempt, e.status, e.failure) for e in trace] == [(1, "error", "invalid_result")]
    assert lines(proof / "write_shape.calls") == ["x", "x"]  # one more run, one more call


@pytest.mark.parametrize(
    ("tool", "kind"), [("write_shape", "invalid_result"), ("write", "timeout")]
)
async def test_a_deployment_refuses_retrying_what_a_tool_not_idempotent_may_have_done(
    tmp_path: Path, proof: Path, tool: str, kind: str
) -> None:
    """Where the annotations are known (a deployment's start) a listed retry of
    ``invalid_result`` or ``timeout`` of a tool annotated not idempotent is
    ``retry_not_allowed``, placed at the node: nothing is called."""
    from .test_deployed_runs import SESSION as DEPLOY_SESSION
    from .test_deployed_runs import codes, service

    document = call(tool, retry={"attempts": 2, "on": [kind]})
    deployment = {
        "format": "flowledger.deployment/v1",
        "name": "proof_dep",
        "artifact": {"name": "flaky_call", "version": "1"},
        "sources": {
            "proof": {
                "stdio": {
                    "command": sys.executable,
                    "args": ["-m", "tests.deploy.runs.proof_server"],
                    "env": {"PROOF_DIR": str(proof)},
                    "cwd": str(REPO),
                },
                "allow_tools": [tool],
            }
        },
    }
    async with service(f"sqlite:///{tmp_path / 'dep.db'}") as (deploy, _):
        await deploy.artifacts.save(DEPLOY_SESSION, document)
        await deploy.deployment_save(deployment)
        refused = await deploy.run_deployment("proof_dep", {"text": "x"})
    assert refused["status"] == "unrunnable", refused
    assert codes(refused) == [("retry_not_allowed", "error")]
    [diagnostic] = refused["diagnostics"]
    assert diagnostic["message"].startswith(f"flaky_call.nodes.call.retry.on: {kind}")
    assert lines(proof / f"{tool}.calls") == []


# -- unavailable: any tool ------------------------------------------------------------------


async def test_an_unavailable_source_is_retried_by_default_and_routed_without_kinds(
    tmp_path: Path,
) -> None:
    """A source whose process exits before the handshake: ``unavailable`` (nothing was
    sent, whatever the tool), retried by the default ``retry.on``, one launch per
    attempt, then routed by ``on_error`` without ``kinds``."""
    from flowledger.deploy import StdioSource

    launches = tmp_path / "launches"
    script = f"open({str(launches)!r}, 'a').write('launch\\n'); raise SystemExit(1)"
    gone = StdioSource(sys.executable, ["-c", script])
    document = call("write", retry={"attempts": 3, "backoff": {"initial": 0}}, on_error={})
    got, state, trace = await run_one(f"sqlite:///{tmp_path / 'u.db'}", document, gone)
    assert got["status_summary"] == "outcome failed", got
    assert (state["kind"], state["code"], state["attempt"]) == (
        "unavailable",
        "source_unreachable",
        3,
    )
    assert [(e.attempt, e.status, e.failure) for e in trace] == [
        (1, "error", "unavailable"),
        (2, "error", "unavailable"),
        (3, "routed", "unavailable"),
    ]
    assert lines(launches) == ["launch"] * 3


# -- outcome_unknown: read-only vs not idempotent ---------------------------------------------


async def test_an_unknown_outcome_of_a_read_only_tool_is_retried_and_routed_without_kinds(
    tmp_path: Path, proof: Path
) -> None:
    """The server exits after reading the first ``read``: ``outcome_unknown``. The table
    lets a read-only tool retry it (the second call answers); without a retry,
    ``on_error`` without ``kinds`` routes it."""
    url = f"sqlite:///{tmp_path / 'read.db'}"
    (proof / "read.exit-at").write_text("1")
    retried = call("read", retry={"attempts": 2, "on": ["outcome_unknown"]})
    got, state, trace = await run_one(url, retried, proof_source())
    assert got["status_summary"] == "outcome done", got
    assert state["answer"] == "2"
    assert [(e.attempt, e.status, e.failure) for e in trace] == [
        (1, "error", "outcome_unknown"),
        (2, "ok", ""),
    ]
    assert len(lines(proof / "read.calls")) == 2

    (proof / "read.exit-at").write_text("3")
    got, state, trace = await run_one(url, call("read", on_error={}), proof_source())
    assert got["status_summary"] == "outcome failed", got
    assert (state["kind"], state["code"], state["attempt"]) == (
        "outcome_unknown",
        "connection_lost",
        1,
    )
    assert [(e.status, e.failure) for e in trace] == [("routed", "outcome_unknown")]
    assert len(lines(proof / "read.calls")) == 3


async def test_an_unknown_outcome_of_a_tool_annotated_not_idempotent_is_never_retried(
    tmp_path: Path, proof: Path
) -> None:
    """The same loss after ``write`` read the request: a listed retry is refused at call
    time and ``on_error`` without ``kinds`` does not route it (the run fails, one call);
    ``kinds: [outcome_unknown]`` routes it (one call)."""
    url = f"sqlite:///{tmp_path / 'write.db'}"
    (proof / "write.exit-at").write_text("1")
    quiet = call("write", retry={"attempts": 3, "on": ["outcome_unknown"]}, on_error={})
    got, _, trace = await run_one(url, quiet, proof_source())
    assert got["run_status"] == "failed", got
    assert got["error"]["type"] == "ConnectionLostError"
    assert [(e.attempt, e.status, e.failure) for e in trace] == [(1, "error", "outcome_unknown")]
    assert len(lines(proof / "write.calls")) == 1

    (proof / "write.exit-at").write_text("2")
    named = call("write", on_error={"kinds": ["outcome_unknown"]})
    got, state, trace = await run_one(url, named, proof_source())
    assert got["status_summary"] == "outcome failed", got
    assert (state["kind"], state["attempt"]) == ("outcome_unknown", 1)
    assert [(e.status, e.failure) for e in trace] == [("routed", "outcome_unknown")]
    assert len(lines(proof / "write.calls")) == 2


# -- tool_error: only when listed ----------------------------------------------------------


@pytest.mark.parametrize("tool", ["write", "read"])
async def test_a_tool_error_not_listed_is_not_retried_whatever_the_tool(
    tmp_path: Path, proof: Path, tool: str
) -> None:
    """``retry`` without ``on`` retries ``unavailable`` only: a tool error (of the tool
    that is not idempotent or of the read-only one) is one call, routed by default."""
    (proof / f"{tool}.error-upto").write_text("5")
    document = call(tool, retry={"attempts": 3, "backoff": {"initial": 0}}, on_error={})
    got, state, trace = await run_one(f"sqlite:///{tmp_path / 'e.db'}", document, proof_source())
    assert got["status_summary"] == "outcome failed", got
    assert (state["kind"], state["code"], state["attempt"]) == ("tool_error", "tool_error", 1)
    assert [(e.attempt, e.status, e.failure) for e in trace] == [(1, "routed", "tool_error")]
    assert len(lines(proof / f"{tool}.calls")) == 1


# -- a stdio server SIGKILLed before vs after the request was written ------------------------


async def test_a_server_killed_before_the_request_is_unavailable_and_after_it_unknown(
    tmp_path: Path, proof: Path
) -> None:
    """A run of ``write`` (not idempotent) retried on ``unavailable`` and routing every
    kind by name; the server SIGKILLed while it holds the request (written and read):
    ``outcome_unknown``, routed, never re-sent (not retried though ``unavailable`` is).
    The server SIGKILLed right after the handshake, before any request, at the session
    a tool node calls through: ``unavailable``, nothing sent. (A run retrying
    ``unavailable`` to success: tests/deploy/test_failures.py, a source refusing its
    first launches.)"""
    import asyncio
    import os
    import signal

    from flowledger.deploy.sources.errors import ConnectionLostError
    from flowledger.deploy.sources.session import SourceSession

    from .test_runs import wait_for

    url = f"sqlite:///{tmp_path / 'killed.db'}"
    every = ["tool_error", "invalid_result", "timeout", "unavailable", "outcome_unknown"]
    document = call(
        "write",
        retry={"attempts": 2, "on": ["unavailable"], "backoff": {"initial": 0}},
        on_error={"kinds": every},
    )
    (proof / "write.hold-at").write_text("1")
    running = asyncio.create_task(run_one(url, document, proof_source()))
    try:
        await asyncio.to_thread(wait_for, (proof / "write.held-1").exists, "the held call", 120)
        [pid] = lines(proof / "launches")
        os.kill(int(pid), signal.SIGKILL)
        got, state, trace = await asyncio.wait_for(running, 120)
    finally:
        running.cancel()
    assert got["status_summary"] == "outcome failed", got
    assert (state["kind"], state["code"], state["attempt"]) == (
        "outcome_unknown",
        "connection_lost",
        1,
    )
    assert [(e.attempt, e.status, e.failure) for e in trace] == [(1, "routed", "outcome_unknown")]
    assert lines(proof / "write.calls") == ["x"]

    # before the request: the same kill right after the handshake
    async with SourceSession(proof_source()) as session:
        os.kill(int(lines(proof / "launches")[-1]), signal.SIGKILL)
        await asyncio.to_thread(wait_for, lambda: not session.is_open, "the session's end", 60)
        with pytest.raises(ConnectionLostError) as caught:
            await session.call_tool("write", {"text": "never"})
    assert caught.value.failure_kind == "unavailable"
    assert lines(proof / "write.calls") == ["x"]  # nothing was sent


# -- JSON-RPC errors: refused before running vs an internal error --------------------------


async def test_a_request_refused_before_running_is_a_tool_error_and_an_internal_error_unknown(
    tmp_path: Path, proof: Path
) -> None:
    """The server answers ``write`` with JSON-RPC invalid params (-32602, nothing ran):
    ``tool_error``, retried when listed (no effect either time), then routed. With an
    internal error (-32603, after its effect): ``outcome_unknown``, neither retried nor
    routed by ``on_error`` without ``kinds`` for the write (the run fails, one call),
    retried and then routed without ``kinds`` for the read-only ``read``."""
    url = f"sqlite:///{tmp_path / 'rpc.db'}"
    (proof / "write.reject").write_text("-32602")
    refused = call(
        "write", retry={"attempts": 2, "on": ["tool_error"], "backoff": {"initial": 0}}, on_error={}
    )
    got, state, trace = await run_one(url, refused, proof_source())
    assert got["status_summary"] == "outcome failed", got
    assert (state["kind"], state["code"], state["attempt"]) == ("tool_error", "tool_rejected", 2)
    assert [(e.attempt, e.status, e.failure) for e in trace] == [
        (1, "error", "tool_error"),
        (2, "routed", "tool_error"),
    ]
    assert lines(proof / "write.calls") == []

    (proof / "write.reject").write_text("-32603")
    internal = call(
        "write",
        retry={"attempts": 2, "on": ["outcome_unknown"], "backoff": {"initial": 0}},
        on_error={},
    )
    got, _, trace = await run_one(url, internal, proof_source())
    assert got["run_status"] == "failed" and got["error"]["type"] == "ToolCallRejectedError", got
    assert [(e.attempt, e.status, e.failure) for e in trace] == [(1, "error", "outcome_unknown")]
    assert lines(proof / "write.calls") == ["x"]

    (proof / "read.reject").write_text("-32603")
    read = call(
        "read",
        retry={"attempts": 2, "on": ["outcome_unknown"], "backoff": {"initial": 0}},
        on_error={},
    )
    got, state, trace = await run_one(url, read, proof_source())
    assert got["status_summary"] == "outcome failed", got
    assert (state["kind"], state["code"], state["attempt"]) == (
        "outcome_unknown",
        "tool_rejected",
        2,
    )
    assert [(e.attempt, e.status) for e in trace] == [(1, "error"), (2, "routed")]
    assert len(lines(proof / "read.calls")) == 2


async def test_a_listed_tool_error_of_the_read_only_tool_is_retried(
    tmp_path: Path, proof: Path
) -> None:
    """``tool_error`` listed in ``retry.on`` is retried for any tool: the read-only one
    here (the tool that is not idempotent: tests/deploy/test_failures.py)."""
    (proof / "read.error-upto").write_text("1")
    document = call("read", retry={"attempts": 2, "on": ["tool_error"], "backoff": {"initial": 0}})
    got, state, trace = await run_one(f"sqlite:///{tmp_path / 'r.db'}", document, proof_source())
    assert got["status_summary"] == "outcome done", got
    assert state["answer"] == "2"
    assert [(e.attempt, e.status, e.failure) for e in trace] == [
        (1, "error", "tool_error"),
        (2, "ok", ""),
    ]


# -- what is no call failure: never retried or routed ---------------------------------------

EVERY_KIND = ["tool_error", "invalid_result", "timeout", "unavailable", "outcome_unknown"]


@pytest.mark.parametrize("case", ["arguments", "unknown_tool", "too_large"])
async def test_what_is_no_call_failure_is_never_retried_or_routed(
    tmp_path: Path, proof: Path, case: str
) -> None:
    """A node retrying and routing every kind the table allows: arguments that break
    the tool's input schema (nothing sent), a tool the server does not list (nothing
    sent), a result over 256 KiB (one call): each fails the run with its own error,
    one trace entry, no retry, no route."""
    policy: dict[str, Any] = {
        "retry": {"attempts": 3, "on": ["tool_error", "unavailable"], "backoff": {"initial": 0}},
        "on_error": {"kinds": EVERY_KIND},
    }
    if case == "arguments":
        document = one_call("write", {"text": 5}, dependency="proof", **policy)
        expected, calls = "ToolArgumentsError", 0
    elif case == "unknown_tool":
        document = one_call("erase", dependency="proof", **policy)
        expected, calls = "ToolNotFoundError", 0
    else:
        (proof / "write.answer-bytes").write_text(str(300 * 1024))
        document = call("write", **policy)
        expected, calls = "ToolResultTooLargeError", 1
    got, _, trace = await run_one(f"sqlite:///{tmp_path / 'n.db'}", document, proof_source())
    assert got["run_status"] == "failed", got
    assert got["error"]["type"] == expected, got["error"]
    assert [(e.status, e.failure) for e in trace] == [("error", "")], trace
    assert len(lines(proof / "write.calls")) == calls
