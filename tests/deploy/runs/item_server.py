"""A test MCP server over stdio (the SDK's low-level `Server`) for the foreach tests:
``python -m tests.deploy.runs.item_server``, working in the directory ``ITEM_DIR``.

* ``append_item {text}`` (no annotations: not read-only, not idempotent) first creates
  ``ITEM_DIR/started-<text>``, waits while ``ITEM_DIR/hold-<text>`` exists, then appends
  ``text`` to ``ITEM_DIR/lines`` (one line per call: the file counts the calls) and
  answers ``{"line": <the new line count>}``; a ``text`` starting with ``bad`` is
  answered with an error result (and appended all the same: the call happened).
* ``shout {text}`` (read-only) answers ``{"text": <text upper-cased>}``, or an error
  result for a ``text`` starting with ``bad``.
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

_TEXT = {
    "type": "object",
    "properties": {"text": {"type": "string"}},
    "required": ["text"],
    "additionalProperties": False,
}


def main() -> None:
    folder = Path(os.environ["ITEM_DIR"])
    tools = [
        types.Tool(name="append_item", description="Append an item.", input_schema=_TEXT),
        types.Tool(
            name="shout",
            description="Upper-case a text.",
            input_schema=_TEXT,
            annotations=types.ToolAnnotations(read_only_hint=True),
        ),
    ]

    async def list_tools(
        ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(tools=tools)

    async def call_tool(
        ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        text = str((params.arguments or {}).get("text", ""))
        if params.name == "append_item":
            (folder / f"started-{text}").touch()
            while (folder / f"hold-{text}").exists():  # noqa: ASYNC110 - a test removes it
                await anyio.sleep(0.02)
            with (folder / "lines").open("a") as out:
                out.write(text + "\n")
            answer: dict[str, Any] = {"line": len((folder / "lines").read_text().splitlines())}
        else:
            answer = {"text": text.upper()}
        if text.startswith("bad"):
            return types.CallToolResult(
                content=[types.TextContent(type="text", text=f"refused {text}")], is_error=True
            )
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=str(answer))],
            structured_content=answer,
        )

    server: Server[Any] = Server(
        "items", version="1.0", on_list_tools=list_tools, on_call_tool=call_tool
    )

    async def serve() -> None:
        async with stdio_server() as (read_stream, write_stream):
            await server.run(read_stream, write_stream, server.create_initialization_options())

    anyio.run(serve)


if __name__ == "__main__":
    main()
