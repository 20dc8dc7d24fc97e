"""A test MCP server over stdio (the SDK's low-level `Server`) with two tools that wait:
``python -m tests.deploy.runs.slow_server``, working in the directory ``SLOW_DIR``.

* ``append_line {text}`` (no annotations: not read-only, not idempotent) appends ``text``
  to ``SLOW_DIR/lines`` and answers the new line count;
* ``count_lines {}`` (read-only) answers the line count.

Each call first creates ``SLOW_DIR/started-<n>`` (``n`` counts calls of this process) and
then waits until ``SLOW_DIR/release`` exists, so a test can stop a run's owner while a
call is under way.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server


def main() -> None:
    folder = Path(os.environ["SLOW_DIR"])
    calls = 0
    tools = [
        types.Tool(
            name="append_line",
            description="Append a line to the ledger file.",
            input_schema={
                "type": "object",
                "properties": {"text": {"type": "string"}},
                "required": ["text"],
                "additionalProperties": False,
            },
        ),
        types.Tool(
            name="count_lines",
            description="Count the lines of the ledger file.",
            input_schema={"type": "object", "properties": {}, "additionalProperties": False},
            annotations=types.ToolAnnotations(read_only_hint=True),
        ),
    ]

    async def list_tools(
        ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(tools=tools)

    def lines() -> list[str]:
        path = folder / "lines"
        return path.read_text().splitlines() if path.exists() else []

    async def call_tool(
        ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        nonlocal calls
        calls += 1
        (folder / f"started-{os.getpid()}-{calls}").touch()
        while not (folder / "release").exists():  # noqa: ASYNC110 - another process makes it
            await anyio.sleep(0.02)
        if params.name == "append_line":
            text = str((params.arguments or {}).get("text", ""))
            with (folder / "lines").open("a") as out:
                out.write(text + "\n")
        answer = str(len(lines()))
        return types.CallToolResult(content=[types.TextContent(type="text", text=answer)])

    server: Server[Any] = Server(
        "slow", version="1.0", on_list_tools=list_tools, on_call_tool=call_tool
    )

    async def serve() -> None:
        async with stdio_server() as (read_stream, write_stream):
            await server.run(read_stream, write_stream, server.create_initialization_options())

    anyio.run(serve)


if __name__ == "__main__":
    main()
