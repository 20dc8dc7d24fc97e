"""A catalog for the stranding tests (``--app tests.mcp.gated_app:catalog``).

``gated`` v1: ``hold`` -> ``mark`` -> ``ask`` (pauses for an answer). ``hold`` writes the
executing process's id to ``<folder>/pid`` and waits until ``<folder>/open`` exists, so
a test knows which server executes the run and holds a step in flight for as long as it
needs, without timing assumptions.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from flowledger import flow
from flowledger.workflows import Catalog, Metadata, TypedDefinition, VertexMetadata

GATE_POLL = 0.01


class Gated(BaseModel):
    folder: str
    held: bool = False
    marked: bool = False
    note: str = ""


async def hold(state: Gated) -> dict[str, Any]:
    folder = Path(state.folder)
    (folder / "pid").write_text(str(os.getpid()), encoding="ascii")
    while True:  # another process (the test) creates the file
        if (folder / "open").exists():
            return {"held": True}
        await asyncio.sleep(GATE_POLL)


async def mark(state: Gated) -> dict[str, Any]:
    return {"marked": True}


async def ask(state: Gated) -> dict[str, Any]:
    answer = flow.interrupt({"question": "done?"})
    return {"note": str(answer.get("note", ""))}


def gated_definition() -> TypedDefinition[Gated]:
    graph: flow.Graph[Gated] = flow.Graph("gated", state=Gated)
    graph.add_vertex("hold", hold)
    graph.add_vertex("mark", mark)
    graph.add_vertex("ask", ask)
    graph.add_edge("hold", "mark")
    graph.add_edge("mark", "ask")
    runner = graph.compile(entry="hold", finish="ask", version="1")
    metadata = Metadata(
        "gated",
        "v1",
        description="Hold until a file exists, mark, ask.",
        input_schema={
            "type": "object",
            "additionalProperties": False,
            "required": ["folder"],
            "properties": {"folder": {"type": "string"}},
        },
        resume_schema={
            "type": "object",
            "additionalProperties": False,
            "properties": {"note": {"type": "string"}},
        },
        vertices=[
            VertexMetadata("held", "hold"),
            VertexMetadata("marked", "mark"),
            VertexMetadata("asked", "ask"),
        ],
    )
    return TypedDefinition(metadata, runner)


def catalog() -> Catalog:
    gated = Catalog()
    gated.register(gated_definition())
    return gated
