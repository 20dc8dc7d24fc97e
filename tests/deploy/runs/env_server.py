"""A test MCP server over stdio that tells what its environment holds, without ever
answering a secret: ``python -m tests.deploy.runs.env_server``.

* ``whoami {}`` (read-only) answers the value of ``LABEL`` (an ordinary setting, so a
  test can tell two bindings apart);
* ``secret_digest {}`` (read-only) answers the SHA-256 hex digest of ``SECRET_TOKEN``
  (or ``unset``), so a test can prove the secret reached the server while the secret
  itself never appears in a tool result, and so in no stored byte.

``SHAPE_FILE`` (optional) names a file whose content changes ``whoami``'s input schema
as the server lists it: ``optional`` adds an optional property ``mode``, ``required``
makes it required, anything else (or no file) keeps the schema empty.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server


def _whoami_schema() -> dict[str, Any]:
    shape_file = os.environ.get("SHAPE_FILE", "")
    shape = Path(shape_file).read_text().strip() if shape_file and Path(shape_file).exists() else ""
    schema: dict[str, Any] = {"type": "object", "properties": {}, "additionalProperties": False}
    if shape in ("optional", "required"):
        schema["properties"] = {"mode": {"type": "string"}}
    if shape == "required":
        schema["required"] = ["mode"]
    return schema


def main() -> None:
    read_only = types.ToolAnnotations(read_only_hint=True)

    async def list_tools(
        ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(
            tools=[
                types.Tool(
                    name="whoami",
                    description="Answer LABEL.",
                    input_schema=_whoami_schema(),
                    annotations=read_only,
                ),
                types.Tool(
                    name="secret_digest",
                    description="Answer the SHA-256 of SECRET_TOKEN.",
                    input_schema={
                        "type": "object",
                        "properties": {},
                        "additionalProperties": False,
                    },
                    annotations=read_only,
                ),
            ]
        )

    async def call_tool(
        ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        if params.name == "whoami":
            answer = os.environ.get("LABEL", "")
        else:
            secret = os.environ.get("SECRET_TOKEN")
            answer = "unset" if secret is None else hashlib.sha256(secret.encode()).hexdigest()
        return types.CallToolResult(content=[types.TextContent(type="text", text=answer)])

    server: Server[Any] = Server(
        "env", version="1.0", on_list_tools=list_tools, on_call_tool=call_tool
    )

    async def serve() -> None:
        async with stdio_server() as (read_stream, write_stream):
            await server.run(read_stream, write_stream, server.create_initialization_options())

    anyio.run(serve)


if __name__ == "__main__":
    main()
