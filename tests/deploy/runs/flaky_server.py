"""A test MCP server over stdio (the SDK's low-level `Server`) whose calls fail on
demand: ``python -m tests.deploy.runs.flaky_server``, working in ``FLAKY_DIR``.

* ``append {text}`` (no annotations: not read-only, not idempotent) first appends
  ``text`` to ``FLAKY_DIR/calls`` (its effect, one line per call, counted across server
  processes), then, for call number ``n`` (the new line count):
  - ``hold-at`` holds ``K`` and ``n == K``: creates ``held-<n>`` and waits for ``release``;
  - ``exit-at`` holds ``X`` and ``n == X``: the process exits (the request reached it);
  - ``error-upto`` holds ``E`` and ``n <= E``: answers an error result (``isError``);
  - ``answer-bytes`` holds ``B``: answers ``B`` times ``x`` (a result of that size);
  else answers the line count.
* ``peek {}`` (read-only) answers the line count, with the same ``error-upto`` rule
  (its calls count in ``peeks``);
* ``shape {}`` (read-only) declares an output schema (``{n: integer}``) and answers
  structured content that breaks it (its calls count in ``shapes``).

At start it appends its pid to ``launches``; while ``refuse-launches`` holds ``R`` and
this is launch ``R`` or earlier, or ``refuse-from`` holds ``F`` and this is launch ``F``
or later, it exits before the handshake (the source is unavailable). ``secret-digest``
receives the SHA-256 of ``TOKEN`` when it is set (so a test can see a secret arrived).
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


def _number(folder: Path, name: str) -> int | None:
    path = folder / name
    return int(path.read_text()) if path.exists() else None


def _count(path: Path) -> int:
    return len(path.read_text().splitlines()) if path.exists() else 0


def main() -> None:
    folder = Path(os.environ["FLAKY_DIR"])
    with (folder / "launches").open("a") as out:
        out.write(f"{os.getpid()}\n")
    launch = _count(folder / "launches")
    refuse, refuse_from = _number(folder, "refuse-launches"), _number(folder, "refuse-from")
    if (refuse is not None and launch <= refuse) or (
        refuse_from is not None and launch >= refuse_from
    ):
        raise SystemExit(1)
    if os.environ.get("TOKEN"):
        digest = hashlib.sha256(os.environ["TOKEN"].encode()).hexdigest()
        (folder / "secret-digest").write_text(digest)
    tools = [
        types.Tool(
            name="append",
            description="Append a line to the calls file.",
            input_schema={
                "type": "object",
                "properties": {"text": {"type": "string"}},
                "required": ["text"],
                "additionalProperties": False,
            },
        ),
        types.Tool(
            name="peek",
            description="Count the calls.",
            input_schema={"type": "object", "properties": {}, "additionalProperties": False},
            annotations=types.ToolAnnotations(read_only_hint=True),
        ),
        types.Tool(
            name="shape",
            description="Answer a result that breaks the declared output schema.",
            input_schema={"type": "object", "properties": {}, "additionalProperties": False},
            output_schema={
                "type": "object",
                "properties": {"n": {"type": "integer"}},
                "required": ["n"],
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
        log = folder / {"append": "calls", "peek": "peeks"}.get(params.name, "shapes")
        with log.open("a") as out:
            out.write(str((params.arguments or {}).get("text", "peek")) + "\n")
        n = _count(log)
        if params.name == "append":
            if _number(folder, "hold-at") == n:
                (folder / f"held-{n}").touch()
                while not (folder / "release").exists():  # noqa: ASYNC110 - another process
                    await anyio.sleep(0.02)
            if _number(folder, "exit-at") == n:
                os._exit(3)
        if params.name == "shape":
            return types.CallToolResult(
                content=[types.TextContent(type="text", text="n is text")],
                structured_content={"n": "text"},
            )
        errors = _number(folder, "error-upto")
        if errors is not None and n <= errors:
            return types.CallToolResult(
                content=[types.TextContent(type="text", text=f"call {n} failed")], is_error=True
            )
        size = _number(folder, "answer-bytes") if params.name == "append" else None
        answer = "x" * size if size is not None else str(n)
        return types.CallToolResult(content=[types.TextContent(type="text", text=answer)])

    server: Server[Any] = Server(
        "flaky", version="1.0", on_list_tools=list_tools, on_call_tool=call_tool
    )

    async def serve() -> None:
        async with stdio_server() as (read_stream, write_stream):
            await server.run(read_stream, write_stream, server.create_initialization_options())

    anyio.run(serve)


if __name__ == "__main__":
    main()
