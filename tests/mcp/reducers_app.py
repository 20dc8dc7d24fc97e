"""A fan-in catalog for the field-reducer front-door tests
(``--app tests.mcp.reducers_app:catalog``; the CLI tests copy this file next to their
database and use ``--app reducers_app:catalog``).

Both definitions run ``split`` -> {``alpha``, ``beta``, ``gamma``} -> ``join``, each
branch adding one note about the topic:

* ``branches_plain`` v1: ``notes`` has no reducer and each branch returns
  ``{"notes": [*state.notes, note]}`` - the lost update: the run reports a
  `flow.ConflictingUpdateError` instead;
* ``branches_reduced`` v1: ``notes`` is ``Annotated[list[str], flow.append]`` and each
  branch returns ``{"notes": [note]}``: every branch's note is kept, in vertex-id order.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any

from pydantic import BaseModel

from flowledger import flow
from flowledger.workflows import Catalog, Metadata, TypedDefinition, VertexMetadata

BRANCHES = ("alpha", "beta", "gamma")


class PlainNotes(BaseModel):
    topic: str
    notes: list[str] = []
    joined: str = ""


class ReducedNotes(BaseModel):
    topic: str
    notes: Annotated[list[str], flow.append] = []
    joined: str = ""


def _note(branch: str, topic: str) -> str:
    return f"{branch} on {topic}"


def _plain_branch(branch: str) -> Callable[[PlainNotes], dict[str, Any]]:
    def task(state: PlainNotes) -> dict[str, Any]:
        return {"notes": [*state.notes, _note(branch, state.topic)]}

    return task


def _reduced_branch(branch: str) -> Callable[[ReducedNotes], dict[str, Any]]:
    def task(state: ReducedNotes) -> dict[str, Any]:
        return {"notes": [_note(branch, state.topic)]}

    return task


def _join(state: PlainNotes | ReducedNotes) -> dict[str, Any]:
    return {"joined": "; ".join(state.notes)}


def _definition(name: str, state: type[Any], branch: Callable[[str], Any]) -> TypedDefinition[Any]:
    graph: flow.Graph[Any] = flow.Graph(name, state=state)
    graph.add_vertex("split", lambda s: None)
    graph.add_vertex("join", _join)
    for vertex in BRANCHES:
        graph.add_vertex(vertex, branch(vertex))
        graph.add_edge("split", vertex)
        graph.add_edge(vertex, "join")
    runner = graph.compile(entry="split", finish="join", version="1")
    metadata = Metadata(
        name,
        "v1",
        description="Three branches add a note each; join lists them.",
        input_schema={
            "type": "object",
            "additionalProperties": False,
            "required": ["topic"],
            "properties": {"topic": {"type": "string"}},
        },
        vertices=[
            VertexMetadata("split", "split"),
            *(VertexMetadata(vertex, vertex) for vertex in BRANCHES),
            VertexMetadata("joined", "join"),
        ],
    )
    return TypedDefinition(metadata, runner, summarizer=lambda s: s.joined)


def catalog() -> Catalog:
    branches = Catalog()
    branches.register(_definition("branches_plain", PlainNotes, _plain_branch))
    branches.register(_definition("branches_reduced", ReducedNotes, _reduced_branch))
    return branches
