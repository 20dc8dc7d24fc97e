"""The usability issue through the MCP SDK client: errors a model can act on."""

from __future__ import annotations

from pathlib import Path

from mcp import Client

from .conftest import APP, error_text, stdio_params


async def test_schema_errors_name_every_violation(tmp_path: Path) -> None:
    """Usability 1: a tool error lists each violation of the input and of the arguments."""
    db = f"sqlite:///{tmp_path}/m.db"
    async with Client(stdio_params(db, "--app", APP)) as client:
        refused = await client.call_tool(
            "workflow_run_start",
            {
                "definition_name": "relay",
                "definition_version": "v1",
                "input": {"secret": 7, "extra": "private words"},
            },
        )
        assert error_text(refused) == (
            "workflow tools: invalid input: $.extra: additional property not allowed; "
            "$.secret: expected a string, got a number"
        )
        arguments = await client.call_tool("workflow_run_list", {"limit": "ten", "page": 2})
        assert error_text(arguments) == (
            "workflow tools: invalid arguments: unknown field 'page'; "
            "field 'limit' must be an integer, not a string"
        )
