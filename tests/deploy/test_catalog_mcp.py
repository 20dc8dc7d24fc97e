"""The capability catalog over the HTTP MCP server, through the SDK client, with two
bearer tokens (one session each): tenant A finds, inspects and tries the tools of the
sources it may see and reads its audit; tenant B sees none of A's sources, capabilities
or audit. A read-only server answers from the registry's last probes and hides
capability_call."""

from __future__ import annotations

import json
from pathlib import Path

from flowledger.deploy.registry.store import SourceRegistry
from flowledger.mcp import session_for_token
from flowledger.storage import open_store

from ..mcp.conftest import error_text, http_client, http_server, payload
from .catalog_sources import clock, everything, paging
from .test_catalog import code_of

TOKEN_A = "token-a-catalog-0123456789"
TOKEN_B = "token-b-catalog-0123456789"
SESSION_A = session_for_token(TOKEN_A)
SESSION_B = session_for_token(TOKEN_B)
SENTINEL = "mcp-argument-sentinel-41c9"


async def registered(path: Path) -> str:
    """A database with clock and paging (every session) and everything (A only)."""
    url = f"sqlite:///{path}"
    async with open_store(url) as store:
        registry = SourceRegistry.over(store)
        await registry.add(clock())
        await registry.add(paging())
        await registry.add(everything(sessions=[SESSION_A]))
    return url


async def test_tenants_find_inspect_and_try_only_their_own_capabilities(tmp_path: Path) -> None:
    url = await registered(tmp_path / "catalog.db")
    tokens = {TOKEN_A: SESSION_A, TOKEN_B: SESSION_B}
    async with (
        http_server(url, tokens=tokens) as served,
        http_client(served, TOKEN_A) as a,
        http_client(served, TOKEN_B) as b,
    ):
        listed = {t.name: t for t in (await a.list_tools()).tools}
        for name in ("capability_list", "capability_inspect", "capability_audit"):
            assert listed[name].annotations and listed[name].annotations.read_only_hint, name
        call_tool = listed["capability_call"]
        assert call_tool.annotations and not call_tool.annotations.read_only_hint

        found = payload(await a.call_tool("capability_list", {"query": "echoes timezones"}))
        assert {s["source"] for s in found["sources"]} == {"clock", "everything", "paging"}
        assert {r["source"] for r in found["results"]} == {"clock", "everything"}
        assert found["results"][0]["tool"] == "echo"
        numbered = payload(await b.call_tool("capability_list", {"query": "number"}))
        assert {s["source"] for s in numbered["sources"]} == {"clock", "paging"}
        assert {r["source"] for r in numbered["results"]} == {"paging"}

        shown = payload(
            await a.call_tool("capability_inspect", {"source": "everything", "tool": "get-sum"})
        )
        assert shown["example"] == {"arguments": {"a": 0, "b": 0}, "valid": True}
        done = payload(
            await a.call_tool(
                "capability_call",
                {"source": "everything", "tool": "echo", "arguments": {"message": SENTINEL}},
            )
        )
        assert done["outcome"] == "ok" and SENTINEL in json.dumps(done["content"])
        refused = error_text(
            await a.call_tool(
                "capability_call",
                {"source": "everything", "tool": "toggle-subscriber-updates", "arguments": {}},
            )
        )
        assert code_of(refused) == "call_refused"
        summed = payload(
            await b.call_tool(
                "capability_call",
                {"source": "paging", "tool": "tool-4", "arguments": {}},
            )
        )
        assert summed["content"] == [{"type": "text", "text": "tool-4"}]

        for tool, arguments in [
            ("capability_list", {"source": "everything"}),
            ("capability_inspect", {"source": "everything", "tool": "echo"}),
            ("capability_call", {"source": "everything", "tool": "echo", "arguments": {}}),
        ]:
            text = error_text(await b.call_tool(tool, arguments))
            assert code_of(text) == "source_missing", (tool, text)
        everything_tools = payload(await b.call_tool("capability_list", {"limit": 100}))
        assert all(r["source"] != "everything" for r in everything_tools["results"])

        audit_a = payload(await a.call_tool("capability_audit", {}))["entries"]
        assert [(e["tool"], e["outcome"]) for e in audit_a] == [
            ("echo", "started"),
            ("echo", "ok"),
            ("toggle-subscriber-updates", "refused"),
        ]
        assert {e["session"] for e in audit_a} == {SESSION_A}
        assert {e["transport"] for e in audit_a} == {"mcp"}
        assert SENTINEL not in json.dumps(audit_a)
        audit_b = payload(await b.call_tool("capability_audit", {}))["entries"]
        assert [(e["source"], e["tool"], e["outcome"]) for e in audit_b] == [
            ("paging", "tool-4", "started"),
            ("paging", "tool-4", "ok"),
            ("everything", "echo", "unavailable"),
        ]
        assert {e["session"] for e in audit_b} == {SESSION_B}

    async with open_store(url) as store:  # what the log holds: no argument bytes at all
        records = await store.ledger.read(f"deploy/audit/{SESSION_A}", limit=100)
        assert len(records) == 3
        assert all(SENTINEL.encode() not in record.payload for record in records)


async def test_a_read_only_server_lists_from_the_cache_and_hides_capability_call(
    tmp_path: Path,
) -> None:
    url = await registered(tmp_path / "catalog.db")
    async with open_store(url) as store:
        await SourceRegistry.over(store).probe("clock", {})  # the operator's probe
    async with (
        http_server(url, tokens={TOKEN_A: SESSION_A}, read_only=True) as served,
        http_client(served, TOKEN_A) as a,
    ):
        names = [t.name for t in (await a.list_tools()).tools]
        assert "capability_list" in names and "capability_call" not in names
        found = payload(await a.call_tool("capability_list", {"query": "time", "refresh": True}))
        statuses = {s["source"]: s["status"] for s in found["sources"]}
        assert statuses == {"clock": "fresh", "everything": "unlisted", "paging": "unlisted"}
        assert {r["tool"] for r in found["results"]} == {"get_current_time", "convert_time"}
        assert "starts and contacts no source" in found["note"]
        hidden = error_text(
            await a.call_tool(
                "capability_call",
                {"source": "clock", "tool": "get_current_time", "arguments": {"timezone": "UTC"}},
            )
        )
        assert "read-only" in hidden
        assert payload(await a.call_tool("capability_audit", {})) == {
            "entries": [],
            "next_cursor": None,
        }
