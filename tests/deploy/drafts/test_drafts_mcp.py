"""The draft loop through the MCP server (stdio, the operator's, through the ``mcp`` SDK
client): create from nothing, patch to an invalid state (diagnostics answered and
stored), a stale revision refused with nothing changed, fix, publish (the artifact is
saved); from a capability of the registered, probed mcp-server-time: add a tool step,
publish with deploy, and run_deployment runs it. ``explain`` answers every code."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mcp import Client

from flowledger.deploy.registry.store import SourceRegistry
from flowledger.storage import open_store

from ...mcp.conftest import error_text, payload, stdio_params
from ..servers import time_command

CLOCK = {
    "format": "flowledger.source/v1",
    "name": "clock",
    "description": "The time, anywhere.",
    "stdio": {"command": "", "args": ["--local-timezone", "Etc/UTC"]},
}


async def registered_clock(db: str) -> None:
    """The operator registers mcp-server-time as ``clock`` and probes it."""
    async with open_store(db) as store:
        registry = SourceRegistry.over(store)
        await registry.add({**CLOCK, "stdio": {**CLOCK["stdio"], "command": time_command()}})
        probe = await registry.probe("clock", {}, seconds=60)
        assert probe.ok, probe.error


def codes(answer: dict[str, Any]) -> list[str]:
    return [item["code"] for item in answer["diagnostics"]]


async def test_the_draft_loop_through_the_mcp_server(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'drafts.db'}"
    await registered_clock(db)
    async with Client(stdio_params(db)) as client:

        async def call(name: str, arguments: dict[str, Any]) -> Any:
            return payload(await client.call_tool(name, arguments))

        names = {tool.name for tool in (await client.list_tools()).tools}
        assert {"draft_create", "draft_patch", "draft_publish", "explain"} <= names

        created = await call("draft_create", {"name": "hello"})
        assert (created["revision"], created["valid"]) == (1, True)
        broken = await call(
            "draft_patch",
            {
                "draft": "hello",
                "revision": 1,
                "operations": [{"op": "replace", "path": "/start", "value": "missing"}],
            },
        )
        assert (broken["revision"], broken["valid"]) == (2, False)
        assert "unknown_node" in codes(broken)
        assert broken["diagnostics"][0]["pointer"] == "/start"
        stored = await call("draft_get", {"draft": "hello"})
        assert stored["diagnostics"] == broken["diagnostics"]

        stale = await client.call_tool(
            "draft_patch",
            {
                "draft": "hello",
                "revision": 1,
                "operations": [{"op": "replace", "path": "/start", "value": "done"}],
            },
        )
        assert "draft_patch: [revision_conflict] " in error_text(stale)
        assert await call("draft_get", {"draft": "hello"}) == stored
        explained = await call("explain", {"code": "revision_conflict"})
        assert explained["cause"] and explained["fix"] and explained["example"]

        refused = await client.call_tool(
            "draft_publish", {"draft": "hello", "revision": 2, "version": "1.0.0"}
        )
        assert "[draft_invalid]" in error_text(refused)
        fixed = await call(
            "draft_patch",
            {
                "draft": "hello",
                "revision": 2,
                "operations": [{"op": "replace", "path": "/start", "value": "done"}],
            },
        )
        assert (fixed["revision"], fixed["valid"]) == (3, True)
        published = await call(
            "draft_publish", {"draft": "hello", "revision": 3, "version": "1.0.0"}
        )
        shown = await call("artifact_show", {"name": "hello", "version": "1.0.0"})
        assert shown["digest"] == published["artifact"]["digest"]

        # from a capability: the registered clock's get_current_time
        clock = await call(
            "draft_create",
            {"name": "clock_now", "from": {"source": "clock", "tool": "get_current_time"}},
        )
        assert clock["valid"], clock["diagnostics"]
        assert clock["bindings"] == {"clock": "clock"}
        assert clock["document"]["input_schema"]["required"] == ["timezone"]
        assert clock["document"]["nodes"]["get_current_time"]["arguments"] == {
            "timezone": "${ input.timezone }"
        }
        # a second step, its argument pre-mapped from a same-named state field
        with_state = await call(
            "draft_patch",
            {
                "draft": "clock_now",
                "revision": 1,
                "operations": [
                    {"op": "add", "path": "/state/timezone", "value": {"initial": "Asia/Tokyo"}},
                    {"op": "add", "path": "/state/tokyo", "value": {}},
                ],
            },
        )
        added = await call(
            "draft_add_tool",
            {
                "draft": "clock_now",
                "revision": with_state["revision"],
                "source": "clock",
                "tool": "get_current_time",
                "node": "tokyo_time",
                "after": "get_current_time",
                "assign": {"tokyo": "${ result.text }"},
            },
        )
        assert added["applied"][0] == {
            "op": "add",
            "path": "/nodes/get_current_time/next",
            "value": "tokyo_time",
        }
        step = added["document"]["nodes"]["tokyo_time"]
        assert step["arguments"] == {"timezone": "${ state.timezone }"}
        assert step["next"] == "done" and added["unmapped"] == []
        assert added["valid"], added["diagnostics"]
        output = await call(
            "draft_set_output",
            {
                "draft": "clock_now",
                "revision": added["revision"],
                "output": {"text": "${ join(' / ', [state.text, state.tokyo]) }"},
            },
        )
        assert output["valid"], output["diagnostics"]
        checked = await call("draft_validate", {"draft": "clock_now"})
        assert checked["deployable"] and checked["bindings"] == []
        deployed = await call(
            "draft_publish",
            {"draft": "clock_now", "revision": output["revision"], "version": "1", "deploy": True},
        )
        assert deployed["deployment"]["name"] == "clock_now"
        assert deployed["deployment"]["checked_against"]["clock"]["source"] == "clock"
        document = (await call("deployment_show", {"name": "clock_now"}))["document"]
        assert document["sources"] == {
            "clock": {"source": "clock", "allow_tools": ["get_current_time"]}
        }
        run = await call(
            "run_deployment",
            {"deployment": "clock_now", "input": {"timezone": "Europe/Paris"}, "wait_seconds": 60},
        )
        assert run["status"] == "completed", run
        assert "Europe/Paris" in run["output"]["text"] and "Asia/Tokyo" in run["output"]["text"]

        unknown_tool = await client.call_tool(
            "draft_create", {"name": "nope_draft", "from": {"source": "clock", "tool": "nope"}}
        )
        assert "[capability_missing]" in error_text(unknown_tool)
        unknown_source = await client.call_tool(
            "draft_create", {"name": "nope_draft", "from": {"source": "ghost", "tool": "x"}}
        )
        assert "[source_missing]" in error_text(unknown_source)
        listed = await call("draft_list", {})
        assert [d["draft"] for d in listed["drafts"]] == ["clock_now", "hello"]
