"""The MCP server over a tool bundle, in-process: tools/list mirrors the bundle exactly,
every failure of a call is a tool error result, never a protocol error or a crash."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest
from mcp import Client

from flowledger.mcp import WorkflowMcpServer, build_server
from flowledger.tools import ToolError, ToolInfo, WorkflowTools

from .conftest import error_text, payload

SCHEMA = {"type": "object", "properties": {"x": {"type": "string"}}, "additionalProperties": False}


class FakeTools:
    """A bundle whose tools misbehave in every way a transport must survive."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, Any]] = []

    def infos(self) -> list[ToolInfo]:
        return [
            ToolInfo("echo", "Echo the arguments.", dict(SCHEMA), mutating=False),
            ToolInfo("refuse", "Always a ToolError.", dict(SCHEMA), mutating=True),
            ToolInfo("explode", "Always a bug.", dict(SCHEMA), mutating=False),
            ToolInfo("unencodable", "Returns no JSON.", dict(SCHEMA), mutating=False),
        ]

    async def call(
        self, name: str, arguments: Mapping[str, Any] | str | bytes | None
    ) -> dict[str, Any]:
        self.calls.append((name, arguments))
        if name == "refuse":
            raise ToolError("workflow tools: invalid arguments: nope")
        if name == "explode":
            raise RuntimeError("secret internals /var/db/sessions/1234")
        if name == "unencodable":
            return {"value": float("nan")}
        assert arguments is None or isinstance(arguments, Mapping)
        return {"echo": dict(arguments or {}), "text": "naïve"}


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_failures_are_tool_errors(mode: str) -> None:
    tools = FakeTools()
    async with Client(build_server(tools), mode=mode) as client:
        assert [t.name for t in (await client.list_tools()).tools] == [
            "echo",
            "refuse",
            "explode",
            "unencodable",
        ]
        assert payload(await client.call_tool("echo", {"x": "1"})) == {
            "echo": {"x": "1"},
            "text": "naïve",
        }
        assert error_text(await client.call_tool("refuse", {})) == (
            "workflow tools: invalid arguments: nope"
        )
        exploded = error_text(await client.call_tool("explode", {}))
        assert exploded == "workflow tools: explode failed: internal error"
        assert "internal error" in error_text(await client.call_tool("unencodable", {}))
        assert "unknown tool" in error_text(await client.call_tool("nope", {}))
        # still serving
        assert payload(await client.call_tool("echo", None)) == {"echo": {}, "text": "naïve"}
    assert ("echo", None) in tools.calls


async def test_read_only_server_refuses_without_calling_the_bundle() -> None:
    tools = FakeTools()
    async with Client(WorkflowMcpServer(tools, read_only=True).server) as client:
        names = [t.name for t in (await client.list_tools()).tools]
        assert names == ["echo", "explode", "unencodable"]
        assert "read-only" in error_text(await client.call_tool("refuse", {"x": "1"}))
    assert tools.calls == []


async def test_tools_list_mirrors_the_bundle_exactly(tmp_path: Any) -> None:
    from flowledger.examples import catalog
    from flowledger.storage import open_store
    from flowledger.workflows.runtime.session import WorkflowSession

    async with open_store(f"sqlite:///{tmp_path}/s.db") as store:
        session = WorkflowSession.build(store, "5f1d7c1e-0f7a-4b8e-9d55-3b8f6d2c9a10", catalog())
        bundle = WorkflowTools(
            session.session_id,
            catalog=session.catalog,
            registry=session.registry,
            inputs=session.inputs,
            supervisor=session.supervisor,
        )
        async with Client(build_server(bundle)) as client:
            listed = (await client.list_tools()).tools
        expected = bundle.infos()
        assert [t.name for t in listed] == [i.name for i in expected]
        for tool, info in zip(listed, expected, strict=True):
            assert tool.description == info.description
            assert tool.input_schema == info.schema
            assert tool.annotations is not None
            assert tool.annotations.read_only_hint is (not info.mutating)
