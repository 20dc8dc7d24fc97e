"""A test MCP server over stdio that counts the calls it receives, server-side:
``python -m tests.deploy.runs.counting_server``. ``tick {}`` (read-only) appends a line
(the server's process id and the call's wall time) to the file ``COUNT_FILE`` names,
so a test counts the calls that reached a server, whichever run or process made them."""

from __future__ import annotations

import os
import time
from typing import Any

import anyio
import mcp_types as types
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server


def main() -> None:
    async def list_tools(
        ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(
            tools=[
                types.Tool(
                    name="tick",
                    description="Count one call.",
                    input_schema={
                        "type": "object",
                        "properties": {},
                        "additionalProperties": False,
                    },
                    annotations=types.ToolAnnotations(read_only_hint=True),
                )
            ]
        )

    async def call_tool(
        ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        with open(os.environ["COUNT_FILE"], "a") as marks:  # noqa: ASYNC230 - one short line
            marks.write(f"{os.getpid()} {time.time():.6f}\n")
        return types.CallToolResult(content=[types.TextContent(type="text", text="ok")])

    server: Server[Any] = Server(
        "counting", version="1.0", on_list_tools=list_tools, on_call_tool=call_tool
    )

    async def serve() -> None:
        async with stdio_server() as (read_stream, write_stream):
            await server.run(read_stream, write_stream, server.create_initialization_options())

    anyio.run(serve)


if __name__ == "__main__":
    main()
