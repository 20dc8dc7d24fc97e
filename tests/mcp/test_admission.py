"""MCP over stdio (the official SDK client): a start beyond a ``max_running`` limit is
answered as queued; ``workflow_run_get`` says where it stands; it starts once the slot
frees. No tool changes limits (an operator's setting: ``flowledger limits``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mcp import Client

from flowledger.mcp import session_for_token
from flowledger.storage import open_store
from flowledger.workflows.admission import Limits

from .conftest import (
    REVIEW_INPUT,
    TOOL_NAMES,
    error_text,
    http_client,
    http_server,
    payload,
    stdio_params,
    wait_status,
)

TOKEN_A = "token-a-admission-0123456789"
TOKEN_B = "token-b-admission-0123456789"


async def start(client: Client) -> dict[str, Any]:
    arguments = {
        "definition_name": "document_review",
        "definition_version": "v1",
        "input": REVIEW_INPUT,
    }
    return dict(payload(await client.call_tool("workflow_run_start", arguments)))


async def test_a_queued_start_is_answered_as_queued(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path}/m.db"
    async with open_store(db) as store:
        await Limits(store.kv).set("definition", "document_review", 1)
    async with Client(stdio_params(db)) as client:
        listed = [tool.name for tool in (await client.list_tools()).tools]
        assert listed == TOOL_NAMES  # no new tool
        first = await start(client)
        await wait_status(client, first["run_id"], "interrupted")  # keeps its slot
        second = await start(client)
        assert second["run_status"] == "pending"
        assert second["queued"] == {"scope": "definition/document_review", "position": 1}
        got = payload(await client.call_tool("workflow_run_get", {"run_id": second["run_id"]}))
        assert got["run_status"] == "pending"
        assert got["queued"] == {"scope": "definition/document_review", "position": 1}
        cancel = {"run_id": first["run_id"], "reason": "make room"}
        payload(await client.call_tool("workflow_run_cancel", cancel))
        started = await wait_status(client, second["run_id"], "interrupted")
        assert "queued" not in started


async def test_tenants_share_a_definition_queue_but_not_each_others_runs(tmp_path: Path) -> None:
    """Over HTTP, one session per token: B's start queues behind A's (the definition's
    limit is shared), B sees only its own position, and B can neither read nor cancel
    A's queued run."""
    db = f"sqlite:///{tmp_path}/h.db"
    async with open_store(db) as store:
        await Limits(store.kv).set("definition", "document_review", 1)
    tokens = {TOKEN_A: session_for_token(TOKEN_A), TOKEN_B: session_for_token(TOKEN_B)}
    async with (
        http_server(db, tokens=tokens) as url,
        http_client(url, TOKEN_A) as a,
        http_client(url, TOKEN_B) as b,
    ):
        holder = await start(a)
        await wait_status(a, holder["run_id"], "interrupted")
        queued_a = await start(a)
        queued_b = await start(b)
        assert queued_a["queued"]["position"] == 1
        assert queued_b["queued"] == {"scope": "definition/document_review", "position": 2}
        theirs = {"run_id": queued_a["run_id"]}
        assert "not found" in error_text(await b.call_tool("workflow_run_get", theirs))
        cancel = {"run_id": queued_a["run_id"], "reason": "mine now"}
        assert "not found" in error_text(await b.call_tool("workflow_run_cancel", cancel))
        listed = payload(await b.call_tool("workflow_run_list", {}))
        assert [run["run_id"] for run in listed["runs"]] == [queued_b["run_id"]]
        still = payload(await a.call_tool("workflow_run_get", theirs))
        assert still["run_status"] == "pending" and still["queued"]["position"] == 1
