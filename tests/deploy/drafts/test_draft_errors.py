"""Every draft error reaches a model as a tool error starting with its code in brackets
(``draft_patch: [patch_invalid] ...``) and naming what was wrong, through the MCP server
in-process (the operator's stdio session and its full tool bundle, the ``mcp`` SDK client
on memory streams); nothing is written by a refused edit."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from mcp import Client

from flowledger.deploy.drafts.store import MAX_DRAFTS
from flowledger.deploy.registry.store import SourceRegistry
from flowledger.mcp import WorkflowMcpServer
from flowledger.mcp._session import load_app, open_served_session
from flowledger.storage import Store

from ...mcp.conftest import error_text, payload
from ..servers import time_command
from .test_drafts_mcp import CLOCK

Call = Callable[[str, dict[str, Any]], Awaitable[Any]]
Refused = Callable[[str, dict[str, Any]], Awaitable[str]]


@asynccontextmanager
async def served(db: str) -> AsyncIterator[tuple[Client, Store, str]]:
    """The operator's MCP server over ``db`` in this process: its client, store and
    session."""
    async with open_served_session(db, load_app(None)) as session:
        server = WorkflowMcpServer(session.tools, session_id=session.session_id)
        async with Client(server.server) as client:
            yield client, session.session.store, session.session_id


def callers(client: Client) -> tuple[Call, Refused]:
    async def call(name: str, arguments: dict[str, Any]) -> Any:
        return payload(await client.call_tool(name, arguments))

    async def refused(name: str, arguments: dict[str, Any]) -> str:
        return error_text(await client.call_tool(name, arguments))

    return call, refused


async def test_draft_errors_name_their_code_and_place(tmp_path: Path) -> None:
    async with served(f"sqlite:///{tmp_path / 'drafts.db'}") as (client, _store, _sid):
        call, refused = callers(client)
        await call("draft_create", {"name": "greeter"})
        before = await call("draft_get", {"draft": "greeter"})

        text = await refused("draft_get", {"draft": "nothing"})
        assert (
            text.startswith("workflow tools: draft_get: [draft_missing] ") and "'nothing'" in text
        )
        text = await refused("draft_create", {"name": "greeter"})
        assert (
            text.startswith("workflow tools: draft_create: [draft_exists] ") and "'greeter'" in text
        )

        async def patch(*operations: dict[str, Any]) -> str:
            arguments = {"draft": "greeter", "revision": 1, "operations": list(operations)}
            return await refused("draft_patch", arguments)

        text = await patch({"op": "add", "path": "/a", "value": 1}, {"op": "remove", "path": "/zz"})
        assert text.startswith(
            "workflow tools: draft_patch: [patch_failed] operation 1 (path '/zz')"
        )
        text = await patch({"op": "test", "path": "/start", "value": "elsewhere"})
        assert text.startswith(
            "workflow tools: draft_patch: [patch_test_failed] operation 0 (path '/start')"
        )
        text = await patch({"op": "add", "path": "/a", "value": 1}, {"op": "frobnicate"})
        assert text.startswith("workflow tools: draft_patch: [patch_invalid] operation 1: ")
        assert "'frobnicate' is not one of" in text
        text = await patch(
            {"op": "add", "path": "/big", "value": "x" * (300 << 10)},
            {"op": "copy", "from": "/big", "path": "/again"},
        )
        assert text.startswith("workflow tools: draft_patch: [draft_unstorable] ")
        assert "/again: over" in text and "nothing applied" in text

        text = await refused(
            "draft_connect", {"draft": "greeter", "revision": 1, "from": "done", "to": "nowhere"}
        )
        assert text.startswith("workflow tools: draft_connect: [edit_invalid] ")
        assert "'nowhere' is not in the draft" in text

        text = await refused("explain", {"code": "no_such_code"})
        assert (
            text.startswith("workflow tools: explain: [code_unknown] ") and "no_such_code" in text
        )

        assert await call("draft_get", {"draft": "greeter"}) == before  # nothing written


async def test_a_capability_needs_a_probe(tmp_path: Path) -> None:
    """A registered source that was never probed has no tools to draft from yet."""
    async with served(f"sqlite:///{tmp_path / 'drafts.db'}") as (client, store, _sid):
        _call, refused = callers(client)
        clock = {**CLOCK, "stdio": {**CLOCK["stdio"], "command": time_command()}}
        await SourceRegistry.over(store).add(clock)
        text = await refused(
            "draft_create",
            {"name": "clock_now", "from": {"source": "clock", "tool": "get_current_time"}},
        )
        assert text.startswith("workflow tools: draft_create: [probe_missing] ")
        assert "source 'clock' was never probed" in text
        assert "draft_missing" in await refused("draft_get", {"draft": "clock_now"})


async def test_a_damaged_draft_is_corrupt_not_missing(tmp_path: Path) -> None:
    async with served(f"sqlite:///{tmp_path / 'drafts.db'}") as (client, store, sid):
        call, refused = callers(client)
        await call("draft_create", {"name": "damaged"})
        key = f"sessions/{sid}/deploy/drafts/damaged"
        entry = await store.kv.get(key)
        record = json.loads(entry.value)
        record["revision"] = "one"
        await store.kv.put(key, json.dumps(record).encode(), expected=entry.revision)
        text = await refused("draft_get", {"draft": "damaged"})
        assert text.startswith("workflow tools: draft_get: [draft_corrupt] ") and key in text


async def test_a_session_holds_at_most_max_drafts(tmp_path: Path) -> None:
    async with served("memory://") as (client, _store, _sid):
        call, refused = callers(client)
        for index in range(MAX_DRAFTS):
            await call("draft_create", {"name": f"draft_{index}"})
        text = await refused("draft_create", {"name": "one_more"})
        assert (
            text.startswith("workflow tools: draft_create: [draft_limit] ")
            and f"{MAX_DRAFTS} drafts" in text
        )
        await call("draft_delete", {"draft": "draft_0"})
        assert (await call("draft_create", {"name": "one_more"}))["revision"] == 1
