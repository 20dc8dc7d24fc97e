"""The failure proofs' MCP server over stdio (the SDK's low-level `Server`):
``python -m tests.deploy.runs.proof_server``, working in ``PROOF_DIR``.

Every tool appends one line to ``PROOF_DIR/<tool>.calls`` when it is called (its
effect, counted across server processes), then, for call number ``n`` of that tool
(the new line count), obeys the files of ``PROOF_DIR`` named after it:

* ``<tool>.hold-at`` holds ``K`` and ``n == K``: creates ``<tool>.held-<n>`` and waits
  for ``release`` (a test kills someone meanwhile);
* ``<tool>.exit-at`` holds ``X`` and ``n == X``: the process exits (the request
  reached it: the caller's outcome is unknown);
* ``<tool>.error-upto`` holds ``E`` and ``n <= E``: answers an error result;
* ``<tool>.answer-bytes`` holds ``B``: answers ``B`` times ``x``.

``<tool>.reject`` holding a JSON-RPC error code makes every call answer that error
instead: a code that refuses a request before it runs (invalid params, ...) before the
line is appended (nothing ran), any other (an internal error) after it.

Tools, with explicit annotations:

* ``write {text}``: not read-only, not idempotent, destructive; answers ``n``;
* ``write_shape {text}``: like ``write``, with an output schema (``{n: integer}``) its
  structured answer breaks (the call took effect, the result is invalid);
* ``read {text?}``: read-only; answers ``n``.

At start the process appends its pid to ``launches`` (so a test can kill it).
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
from mcp.shared.exceptions import MCPError

__all__ = ["main"]

_TEXT_INPUT = {
    "type": "object",
    "properties": {"text": {"type": "string"}},
    "required": ["text"],
    "additionalProperties": False,
}
_REFUSED_BEFORE_RUNNING = frozenset({-32700, -32600, -32601, -32602})
_WRITES = types.ToolAnnotations(read_only_hint=False, idempotent_hint=False, destructive_hint=True)


def _number(folder: Path, name: str) -> int | None:
    path = folder / name
    return int(path.read_text()) if path.exists() else None


def _count(path: Path) -> int:
    return len(path.read_text().splitlines()) if path.exists() else 0


def main() -> None:
    folder = Path(os.environ["PROOF_DIR"])
    with (folder / "launches").open("a") as out:
        out.write(f"{os.getpid()}\n")
    tools = [
        types.Tool(
            name="write",
            description="Append a line (not idempotent).",
            input_schema=_TEXT_INPUT,
            annotations=_WRITES,
        ),
        types.Tool(
            name="write_shape",
            description="Append a line and answer a result breaking the output schema.",
            input_schema=_TEXT_INPUT,
            output_schema={
                "type": "object",
                "properties": {"n": {"type": "integer"}},
                "required": ["n"],
            },
            annotations=_WRITES,
        ),
        types.Tool(
            name="read",
            description="Count the reads (``text`` names the read in the calls file).",
            input_schema={
                "type": "object",
                "properties": {"text": {"type": "string"}},
                "additionalProperties": False,
            },
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
        tool = params.name
        reject = _number(folder, f"{tool}.reject")
        if reject is not None and reject in _REFUSED_BEFORE_RUNNING:
            raise MCPError(reject, f"{tool} refuses the request")
        log = folder / f"{tool}.calls"
        with log.open("a") as out:
            out.write(str((params.arguments or {}).get("text", tool)) + "\n")
        n = _count(log)
        if reject is not None:
            raise MCPError(reject, f"{tool} failed inside")
        if _number(folder, f"{tool}.hold-at") == n:
            (folder / f"{tool}.held-{n}").touch()
            while not (folder / "release").exists():  # noqa: ASYNC110 - another process
                await anyio.sleep(0.02)
        if _number(folder, f"{tool}.exit-at") == n:
            os._exit(3)
        errors = _number(folder, f"{tool}.error-upto")
        if errors is not None and n <= errors:
            return types.CallToolResult(
                content=[types.TextContent(type="text", text=f"call {n} failed")], is_error=True
            )
        if tool == "write_shape":
            return types.CallToolResult(
                content=[types.TextContent(type="text", text="n is text")],
                structured_content={"n": "text"},
            )
        size = _number(folder, f"{tool}.answer-bytes")
        answer = "x" * size if size is not None else str(n)
        return types.CallToolResult(content=[types.TextContent(type="text", text=answer)])

    server: Server[Any] = Server(
        "proof", version="1.0", on_list_tools=list_tools, on_call_tool=call_tool
    )

    async def serve() -> None:
        async with stdio_server() as (read_stream, write_stream):
            await server.run(read_stream, write_stream, server.create_initialization_options())

    anyio.run(serve)


if __name__ == "__main__":
    main()
