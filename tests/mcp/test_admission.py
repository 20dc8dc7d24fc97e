"""MCP over stdio (the official SDK client): a start beyond a ``max_running`` limit is
answered as queued; ``workflow_run_get`` says where it stands; it starts once the slot
frees. No tool changes limits (an operator's setting: ``flowledger limits``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mcp import Client

from flowledger.storage import open_store
from flowledger.workflows.admission import Limits

from .conftest import REVIEW_INPUT, TOOL_NAMES, payload, stdio_params, wait_status


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
