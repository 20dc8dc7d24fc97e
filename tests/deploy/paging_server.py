"""A small MCP server over stdio (the SDK's low-level `Server`) whose tool listing comes
in pages of three: ``python -m tests.deploy.paging_server [TOOLS] [--loop] [--legacy]``.

It lists ``TOOLS`` tools (default 7) named ``tool-0``, ``tool-1``, ...; ``tool-i``
answers with its own name, or, called with ``{"reject": CODE}``, with a JSON-RPC error
of that code. With ``--loop`` the last page points back at the first one
(a listing that never ends). ``{"shrink": true}`` removes the last tool and sends
``notifications/tools/list_changed``; with ``--legacy`` the server speaks only the
handshake-era protocol, where such notifications reach the client."""

from __future__ import annotations

import sys
from typing import Any

import anyio
import mcp_types as types
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.server.runner import serve_loop
from mcp.server.stdio import stdio_server
from mcp.shared.exceptions import MCPError

PAGE = 3


def main() -> None:
    count = int(sys.argv[1]) if len(sys.argv) > 1 and sys.argv[1].isdigit() else 7
    loop = "--loop" in sys.argv
    legacy = "--legacy" in sys.argv
    tools = [
        types.Tool(
            name=f"tool-{i}",
            description=f"Tool number {i}",
            input_schema={"type": "object", "properties": {}},
            annotations=types.ToolAnnotations(read_only_hint=i % 2 == 0),
        )
        for i in range(count)
    ]

    async def list_tools(
        ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        start = int(params.cursor) if params is not None and params.cursor else 0
        end = start + PAGE
        following = str(end) if end < len(tools) else ("0" if loop else None)
        return types.ListToolsResult(tools=tools[start:end], next_cursor=following)

    async def call_tool(
        ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        arguments = params.arguments or {}
        if arguments.get("shrink"):  # the last tool goes, and the client is told
            tools.pop()
            await ctx.session.send_tool_list_changed()
        code = arguments.get("reject")
        if isinstance(code, int):
            raise MCPError(code, f"{params.name} rejects the call as asked")
        return types.CallToolResult(content=[types.TextContent(type="text", text=params.name)])

    server: Server[Any] = Server(
        "paging", version="1.0", on_list_tools=list_tools, on_call_tool=call_tool
    )

    async def serve() -> None:
        async with stdio_server() as (read_stream, write_stream):
            options = server.create_initialization_options()
            if not legacy:
                await server.run(read_stream, write_stream, options)
                return
            async with server.lifespan(server) as state:
                await serve_loop(
                    server, read_stream, write_stream, lifespan_state=state, init_options=options
                )

    anyio.run(serve)


if __name__ == "__main__":
    main()
