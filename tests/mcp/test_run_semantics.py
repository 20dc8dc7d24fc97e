"""Run semantics as a model meets them: the stdio MCP server (a child process) driven by the
SDK client. What a paused run waits for, its resume schema, errored pauses retried without
a payload, and a changed graph that blocks a resume."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

from mcp import Client
from mcp.client.stdio import StdioServerParameters

from .conftest import REPO, error_text, payload, wait_status

APP = "tests.workflows.semantics_app:catalog"
ASK_RESUME = {
    "type": "object",
    "additionalProperties": False,
    "required": ["approved"],
    "properties": {"approved": {"type": "boolean"}},
}


def server(db: str, flag: Path, *, graph: str = "") -> StdioServerParameters:
    env = {**os.environ, "SEMANTICS_FLAG": str(flag)}
    env.pop("SEMANTICS_GRAPH", None)
    if graph:
        env["SEMANTICS_GRAPH"] = graph
    return StdioServerParameters(
        command=sys.executable,
        args=["-m", "flowledger.mcp", "--db", db, "--app", APP],
        cwd=str(REPO),
        env=env,
    )


async def start(client: Client, name: str, document: dict[str, Any]) -> str:
    started = payload(
        await client.call_tool(
            "workflow_run_start",
            {"definition_name": name, "definition_version": "v1", "input": document},
        )
    )
    return str(started["run_id"])


async def test_a_model_sees_the_question_and_the_schema_to_answer(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path}/m.db"
    async with Client(server(db, tmp_path / "flag")) as client:
        listed = payload(await client.call_tool("workflow_definition_list", {}))
        ask = next(d for d in listed["definitions"] if d["name"] == "ask")
        assert ask["resume_schema"] == ASK_RESUME and ask["on_error"] == "pause"
        strict = next(d for d in listed["definitions"] if d["name"] == "strict")
        assert strict["on_error"] == "fail" and "resume_schema" not in strict

        run_id = await start(client, "ask", {"text": "hello"})
        paused = await wait_status(client, run_id, "interrupted")
        assert paused["resume_readiness"] == {"status": "ready"}
        pending = paused["pending"]
        assert pending["kind"] == "request"
        assert pending["info"] == {"question": "publish 'hello'?", "words": 5}
        assert pending["resume_schema"] == ASK_RESUME
        assert pending["vertex_label"] == "Approve the text"

        missing = await client.call_tool("workflow_run_resume", {"run_id": run_id})
        assert missing.is_error and "waits for a payload" in error_text(missing)
        done = payload(
            await client.call_tool(
                "workflow_run_resume", {"run_id": run_id, "resume": {"approved": True}}
            )
        )
        assert done["run_status"] == "completed"


async def test_an_errored_pause_over_mcp(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path}/m.db"
    flag = tmp_path / "flag"
    async with Client(server(db, flag)) as client:
        run_id = await start(client, "flaky", {"source": "db-7"})
        paused = await wait_status(client, run_id, "interrupted")
        assert paused["pending"]["kind"] == "error"
        assert paused["pending"]["error"] == {
            "type": "ConnectionError",
            "message": "upstream db-7 unavailable",
        }
        sent = await client.call_tool("workflow_run_resume", {"run_id": run_id, "resume": {}})
        assert sent.is_error and "takes no payload" in error_text(sent)

        failing = await start(client, "strict", {"source": "db-9"})
        failed = await wait_status(client, failing, "failed")
        assert failed["error"]["type"] == "ConnectionError"

        flag.touch()
        retried = payload(await client.call_tool("workflow_run_resume", {"run_id": run_id}))
        assert retried["run_status"] == "completed"


async def test_a_changed_graph_blocks_the_resume_over_mcp(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path}/m.db"
    flag = tmp_path / "flag"
    async with Client(server(db, flag)) as client:
        run_id = await start(client, "ask", {"text": "hello"})
        await wait_status(client, run_id, "interrupted")
    async with Client(server(db, flag, graph="changed")) as client:
        before = payload(await client.call_tool("workflow_run_get", {"run_id": run_id}))
        assert before["resume_readiness"]["status"] == "blocked"
        [changed] = before["resume_readiness"]["diagnostics"]
        assert (changed["code"], changed["place"]) == ("graph_changed", "")
        assert changed["next_actions"] == [  # the bridge's diagnostics are guided too
            {"tool": "workflow_run_get", "arguments": {"run_id": run_id}},
            {"tool": "workflow_definition_list", "arguments": {}},
            {"tool": "explain", "arguments": {"code": "graph_changed"}},
        ]
        explained = payload(await client.call_tool("explain", {"code": "graph_changed"}))
        assert explained["code"] == "graph_changed"
        refused = await client.call_tool(
            "workflow_run_resume", {"run_id": run_id, "resume": {"approved": True}}
        )
        assert refused.is_error and "graph_changed" in error_text(refused)
        after = payload(await client.call_tool("workflow_run_get", {"run_id": run_id}))
        assert after == before
    async with Client(server(db, flag)) as client:
        done = payload(
            await client.call_tool(
                "workflow_run_resume", {"run_id": run_id, "resume": {"approved": True}}
            )
        )
        assert done["run_status"] == "completed"
