"""The failure rules over the MCP HTTP front door (`HttpMcpServer`, the SDK client, two
bearer tokens): the operator registers ``proof_server.py`` for session A only. Tenant A
deploys a call of ``write`` (annotated not idempotent) that answers an error: routed
by ``on_error``, the run's answer carries the error's kind, code and attempt; not
routed, the run's answer carries the error's type and code. Tenant B sees none of it:
not A's deployments, runs or traces, not the source, and it cannot make a call."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from flowledger.deploy.registry.store import SourceRegistry
from flowledger.mcp import session_for_token
from flowledger.storage import open_store

from ..mcp.conftest import error_text, http_client, http_server, payload
from .runs.failures_app import one_call
from .servers import REPO
from .test_catalog import code_of

TOKEN_A = "token-a-failproof-0123456789"
TOKEN_B = "token-b-failproof-0123456789"
SESSION_A = session_for_token(TOKEN_A)
SESSION_B = session_for_token(TOKEN_B)


def lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


def artifact(name: str, *, routed: bool) -> dict[str, Any]:
    """One call of ``write``; routed, the ``failed`` end outputs the failure."""
    document = one_call(
        "write",
        name=name,
        dependency="proof",
        on_error={"kinds": ["tool_error"]} if routed else None,
    )
    if routed:
        document["output_schema"]["properties"].update(
            {"kind": {"type": "string"}, "code": {"type": "string"}, "attempt": {"type": "integer"}}
        )
        document["nodes"]["failed"]["output"] = {
            "answer": None,
            "kind": "${ state.kind }",
            "code": "${ state.code }",
            "attempt": "${ state.attempt }",
        }
    return document


def deployment(name: str, artifact_name: str) -> dict[str, Any]:
    return {
        "format": "flowledger.deployment/v1",
        "name": name,
        "artifact": {"name": artifact_name, "version": "1"},
        "sources": {"proof": {"source": "proof", "allow_tools": ["write"]}},
    }


async def test_a_tenant_sees_its_failed_calls_and_nothing_of_another_session(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / "proof"
    folder.mkdir()
    (folder / "write.error-upto").write_text("10")
    url = f"sqlite:///{tmp_path / 'tenants.db'}"
    async with open_store(url) as store:
        await SourceRegistry.over(store).add(
            {
                "format": "flowledger.source/v1",
                "name": "proof",
                "stdio": {
                    "command": sys.executable,
                    "args": ["-m", "tests.deploy.runs.proof_server"],
                    "env": {"PROOF_DIR": str(folder)},
                    "cwd": str(REPO),
                },
                "sessions": [SESSION_A],
            }
        )
    tokens = {TOKEN_A: SESSION_A, TOKEN_B: SESSION_B}
    async with (
        http_server(url, tokens=tokens) as served,
        http_client(served, TOKEN_A) as a,
        http_client(served, TOKEN_B) as b,
    ):
        for name, routed in (("routed_write", True), ("failing_write", False)):
            payload(await a.call_tool("artifact_save", {"document": artifact(name, routed=routed)}))
            dep = name.replace("_write", "_dep")
            payload(await a.call_tool("deployment_save", {"document": deployment(dep, name)}))
        routed_run = payload(
            await a.call_tool(
                "run_deployment", {"deployment": "routed_dep", "input": {"text": "a"}}
            )
        )
        assert (routed_run["status"], routed_run["outcome"]) == ("completed", "failed"), routed_run
        assert routed_run["output"] == {
            "answer": None,
            "kind": "tool_error",
            "code": "tool_error",
            "attempt": 1,
        }
        failing_run = payload(
            await a.call_tool(
                "run_deployment", {"deployment": "failing_dep", "input": {"text": "b"}}
            )
        )
        assert failing_run["status"] == "failed", failing_run
        assert failing_run["error"]["type"] == "ToolErrorResult", failing_run
        trace = payload(
            await a.call_tool("read_run_trace", {"run_id": routed_run["run_id"], "limit": 10})
        )
        [entry] = [e for e in trace["entries"] if e["node"] == "call"]
        assert (entry["status"], entry["error"]["kind"]) == ("routed", "tool_error")
        assert lines(folder / "write.calls") == ["a", "b"]

        # tenant B: nothing of A's deployments, runs, traces or source; no call made
        assert payload(await b.call_tool("deployment_list", {}))["deployments"] == []
        assert payload(await b.call_tool("workflow_run_list", {}))["runs"] == []
        for run in (routed_run, failing_run):
            for tool, arguments in (
                ("workflow_run_get", {"run_id": run["run_id"]}),
                ("inspect_run", {"run_id": run["run_id"]}),
                ("read_run_trace", {"run_id": run["run_id"]}),
            ):
                hidden = error_text(await b.call_tool(tool, arguments))
                assert "not found" in hidden, (tool, hidden)
                assert "tool_error" not in hidden and "call 1 failed" not in hidden
        stranger = payload(
            await b.call_tool(
                "run_deployment", {"deployment": "routed_dep", "input": {"text": "c"}}
            )
        )
        assert stranger["status"] == "unrunnable", stranger
        assert [d["code"] for d in stranger["diagnostics"]] == ["deployment_missing"]
        payload(await b.call_tool("artifact_save", {"document": artifact("b_write", routed=True)}))
        # saving names the source; running it reaches nothing B was not granted
        payload(await b.call_tool("deployment_save", {"document": deployment("b_dep", "b_write")}))
        refused = payload(
            await b.call_tool("run_deployment", {"deployment": "b_dep", "input": {"text": "e"}})
        )
        assert refused["status"] == "unrunnable", refused
        assert [d["code"] for d in refused["diagnostics"]] == ["source_missing"], refused
        called = await b.call_tool(
            "capability_call", {"source": "proof", "tool": "write", "arguments": {"text": "d"}}
        )
        assert code_of(error_text(called)) == "source_missing"
    assert lines(folder / "write.calls") == ["a", "b"]
