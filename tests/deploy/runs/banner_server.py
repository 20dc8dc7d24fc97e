"""A test MCP server over stdio that talks on stderr, as many real servers do: a
two-line banner when it starts and a log line for every call
(``python tests/deploy/runs/banner_server.py``). Its tools (read-only): ``greet {name}``
answers ``hello NAME``; ``refuse {reason}`` answers an error result saying ``REASON``."""

from __future__ import annotations

import sys
from typing import Any, Final

import anyio
import mcp_types as types
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server

BANNER: Final = ("Banner Server 1.0 starting", "listening on stdio")
CALLED: Final = "a tool was called"


def main() -> None:
    for line in BANNER:
        print(line, file=sys.stderr, flush=True)

    async def list_tools(
        ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        schema = {
            "type": "object",
            "properties": {"name": {"type": "string"}},
            "required": ["name"],
            "additionalProperties": False,
        }
        refusal = {
            "type": "object",
            "properties": {"reason": {"type": "string"}},
            "required": ["reason"],
            "additionalProperties": False,
        }
        read_only = types.ToolAnnotations(read_only_hint=True)
        return types.ListToolsResult(
            tools=[
                types.Tool(
                    name="greet",
                    description="Say hello.",
                    input_schema=schema,
                    annotations=read_only,
                ),
                types.Tool(
                    name="refuse",
                    description="Answer an error result.",
                    input_schema=refusal,
                    annotations=read_only,
                ),
            ]
        )

    async def call_tool(
        ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        print(CALLED, file=sys.stderr, flush=True)
        if params.name == "refuse":
            reason = str((params.arguments or {}).get("reason", ""))
            return types.CallToolResult(
                content=[types.TextContent(type="text", text=reason)], is_error=True
            )
        name = str((params.arguments or {}).get("name", ""))
        return types.CallToolResult(content=[types.TextContent(type="text", text=f"hello {name}")])

    server: Server[Any] = Server(
        "banner", version="1.0", on_list_tools=list_tools, on_call_tool=call_tool
    )

    async def serve() -> None:
        async with stdio_server() as (read_stream, write_stream):
            await server.run(read_stream, write_stream, server.create_initialization_options())

    anyio.run(serve)


if __name__ == "__main__":
    main()
