"""A test MCP server over stdio (the SDK's low-level `Server`) that records the ``_meta``
of every ``tools/call`` it receives: ``python -m tests.observability.meta_server``,
appending one JSON line ``{"tool", "meta"}`` per call to ``META_DIR/calls.jsonl``.

* ``note {text}`` (read-only) answers ``{"text": <text>}``: its result holds whatever it
  was sent, so a run's tool results carry the sentinel of the trace tests; a ``text``
  starting with ``bad`` is answered with an error result quoting it.
"""

from __future__ import annotations

import json
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
    calls = Path(os.environ["META_DIR"]) / "calls.jsonl"
    tools = [
        types.Tool(
            name="note",
            description="Answer the text it is sent.",
            input_schema=_TEXT,
            annotations=types.ToolAnnotations(read_only_hint=True),
        )
    ]

    async def list_tools(
        ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(tools=tools)

    async def call_tool(
        ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        meta = dict(params.meta or {})
        with calls.open("a") as out:
            out.write(json.dumps({"tool": params.name, "meta": meta}, default=str) + "\n")
        answer = {"text": str((params.arguments or {}).get("text", ""))}
        if answer["text"].startswith("bad"):
            return types.CallToolResult(
                content=[types.TextContent(type="text", text=f"refused {answer['text']}")],
                is_error=True,
            )
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=answer["text"])],
            structured_content=answer,
        )

    server: Server[Any] = Server(
        "meta", version="1.0", on_list_tools=list_tools, on_call_tool=call_tool
    )

    async def serve() -> None:
        async with stdio_server() as (read_stream, write_stream):
            await server.run(read_stream, write_stream, server.create_initialization_options())

    anyio.run(serve)


if __name__ == "__main__":
    main()
