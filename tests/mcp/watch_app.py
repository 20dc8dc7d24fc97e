"""A catalog for the resource subscription tests (``tests.mcp.watch_app:catalog``).

``watched`` v1: ``first`` -> ``ask`` (pauses for an answer) -> ``second``. ``first`` waits
until ``<folder>/first`` exists and ``second`` until ``<folder>/second`` does, so a test
decides when each transition happens (start, pause, resume, completion) without timing
assumptions.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from flowledger import flow
from flowledger.workflows import Catalog, Metadata, TypedDefinition, VertexMetadata

GATE_POLL = 0.01


class Watched(BaseModel):
    folder: str
    note: str = ""
    done: bool = False


async def _gate(folder: str, name: str) -> None:
    while True:  # another process (the test) creates the file
        if (Path(folder) / name).exists():
            return
        await asyncio.sleep(GATE_POLL)


async def first(state: Watched) -> dict[str, Any]:
    await _gate(state.folder, "first")
    return {}


async def ask(state: Watched) -> dict[str, Any]:
    answer = flow.interrupt({"question": "go on?"})
    return {"note": str(answer.get("note", ""))}


async def second(state: Watched) -> dict[str, Any]:
    await _gate(state.folder, "second")
    return {"done": True}


def watched_definition() -> TypedDefinition[Watched]:
    graph: flow.Graph[Watched] = flow.Graph("watched", state=Watched)
    graph.add_vertex("first", first)
    graph.add_vertex("ask", ask)
    graph.add_vertex("second", second)
    graph.add_edge("first", "ask")
    graph.add_edge("ask", "second")
    runner = graph.compile(entry="first", finish="second", version="1")
    metadata = Metadata(
        "watched",
        "v1",
        description="Wait for a file, ask, wait for another file.",
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
            VertexMetadata("first passed", "first"),
            VertexMetadata("asked", "ask"),
            VertexMetadata("second passed", "second"),
        ],
    )
    return TypedDefinition(metadata, runner)


def catalog() -> Catalog:
    watched = Catalog()
    watched.register(watched_definition())
    return watched
