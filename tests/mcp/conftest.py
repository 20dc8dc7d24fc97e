"""Helpers for the MCP server tests: launching the stdio server, running the HTTP server
in-process, reading tool results."""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx2
import mcp_types as types
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

from flowledger.deploy.deployments.tools import DEPLOY_TOOL_NAMES
from flowledger.deploy.drafts.tools import DRAFT_TOOL_NAMES
from flowledger.deploy.registry.tools import CAPABILITY_TOOL_NAMES
from flowledger.mcp import HttpMcpServer
from flowledger.tools.schedules import SCHEDULE_TOOL_NAMES

DEPLOY_READ_ONLY_NAMES = [
    "inspect_run",
    "validate_run",
    "read_run_trace",
    "artifact_validate",
    "artifact_list",
    "artifact_show",
    "deployment_list",
    "deployment_show",
    "deployment_check",
]

REPO = Path(__file__).resolve().parents[2]
APP = "tests.mcp.catalog_app:catalog"
TOOL_NAMES = [
    "workflow_definition_list",
    "workflow_run_start",
    "workflow_run_get",
    "workflow_run_list",
    "workflow_run_resume",
    "workflow_run_cancel",
    "workflow_run_history",
    *DEPLOY_TOOL_NAMES,  # the deploy layer's tools (flowledger/mcp/deploy_tools.py)
    *DRAFT_TOOL_NAMES,  # flowledger/deploy/drafts/tools.py
    "workflow_run_fork",  # flowledger/tools/fork.py
    "workflow_run_prune",  # flowledger/mcp/prune_tool.py
    *SCHEDULE_TOOL_NAMES,  # flowledger/tools/schedules.py
    *CAPABILITY_TOOL_NAMES,  # flowledger/deploy/registry/tools.py
]
READ_ONLY_NAMES = [
    "workflow_definition_list",
    "workflow_run_get",
    "workflow_run_list",
    "workflow_run_history",
    *DEPLOY_READ_ONLY_NAMES,
    "draft_get",
    "draft_list",
    "draft_validate",
    "explain",
    "schedule_list",
    "schedule_get",
    "capability_list",
    "capability_inspect",
    "capability_audit",
]
REVIEW_INPUT = {"title": "Quarterly note", "document": "Sales grew 12% in Q3. Costs fell."}


def stdio_params(db: str, *options: str) -> StdioServerParameters:
    """``python -m flowledger.mcp --db <db> <options>``, from the repository root (so
    ``--app tests.mcp...`` imports)."""
    return StdioServerParameters(
        command=sys.executable,
        args=["-m", "flowledger.mcp", "--db", db, *options],
        cwd=str(REPO),
    )


def payload(result: types.CallToolResult) -> Any:
    """The JSON of a successful tool result (exactly one text block)."""
    assert not result.is_error, result.content
    assert len(result.content) == 1
    block = result.content[0]
    assert isinstance(block, types.TextContent)
    return json.loads(block.text)


def error_text(result: types.CallToolResult) -> str:
    """The message of a tool error result (exactly one text block)."""
    assert result.is_error, result.content
    assert len(result.content) == 1
    block = result.content[0]
    assert isinstance(block, types.TextContent)
    assert block.text
    return block.text


async def wait_status(client: Client, run_id: str, status: str, within: float = 60.0) -> Any:
    """Poll workflow_run_get until the run has ``status``."""
    async with asyncio.timeout(within):
        while True:
            run = payload(await client.call_tool("workflow_run_get", {"run_id": run_id}))
            if run["run_status"] == status:
                return run
            await asyncio.sleep(0.05)


@asynccontextmanager
async def http_server(
    db: str,
    *,
    tokens: dict[str, str] | None = None,
    read_only: bool = False,
    app: str | None = None,
    **options: Any,
) -> AsyncIterator[str]:
    """An `HttpMcpServer` on 127.0.0.1 and an ephemeral port; yields its URL. ``options``
    go to `HttpMcpServer` (``no_execute``, ``allow_inline_sources``)."""
    server = HttpMcpServer(
        db,
        app=app,
        host="127.0.0.1",
        port=0,
        tokens=tokens or {},
        read_only=read_only,
        **options,
    )
    ready: asyncio.Future[str] = asyncio.get_running_loop().create_future()
    task = asyncio.create_task(server.run(ready=ready.set_result))
    waiting: list[asyncio.Future[Any]] = [ready, task]
    await asyncio.wait(waiting, return_when=asyncio.FIRST_COMPLETED)
    if not ready.done():
        task.result()  # raises what stopped it
        raise AssertionError("the server stopped before listening")
    try:
        yield ready.result()
    finally:
        server.stop()
        await asyncio.wait_for(task, 20)


@asynccontextmanager
async def http_client(url: str, token: str | None, **options: Any) -> AsyncIterator[Client]:
    """An SDK client on ``url`` sending ``Authorization: Bearer <token>``."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30.0)) as http,
        Client(streamable_http_client(url, http_client=http), **options) as client,
    ):
        yield client


BAD_IDS = [
    ("{}", "an object"),
    ('{"n":1}', "an object"),
    ("[]", "an array"),
    ("[1]", "an array"),
    ("1.5", "a number written with a fraction or an exponent"),
    ("2.0", "a number written with a fraction or an exponent"),
    ("1e2", "a number written with a fraction or an exponent"),
    ("true", "a boolean"),
    ("false", "a boolean"),
    ("null", "null"),
]


def bad_id_answer(kind: str) -> dict[str, Any]:
    """What a request whose id is ``kind`` gets: JSON-RPC 2.0's invalid request."""
    message = f"Invalid Request: the id must be a string or an integer, not {kind}"
    return {"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": message}}
