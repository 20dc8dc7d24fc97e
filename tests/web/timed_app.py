"""The time and bulk tests' catalog (``--app tests.web.timed_app:catalog``): the dashboard
tests' catalog (`web_app`) plus ``retrying`` v1: ``shaky`` fails twice per title seen by
this process, each time retried at once by its retry policy (3 attempts, no backoff),
then ``settle`` ends the run. A separate module, so `web_app` stays as other tests use it.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from flowledger import flow
from flowledger.workflows import Catalog, Metadata, TypedDefinition, VertexMetadata

from . import web_app

_failures: dict[str, int] = {}


class Retrying(BaseModel):
    title: str


async def shaky(state: Retrying) -> dict[str, Any]:
    seen = _failures.get(state.title, 0)
    if seen < 2:
        _failures[state.title] = seen + 1
        raise ConnectionError("the source did not answer")
    return {}


async def settle(state: Retrying) -> dict[str, Any]:
    return {}


def retrying_definition() -> TypedDefinition[Retrying]:
    graph: flow.Graph[Retrying] = flow.Graph("retrying", state=Retrying)
    graph.add_vertex("shaky", shaky, retry=flow.Retry(3, backoff=0))
    graph.add_vertex("settle", settle)
    graph.add_edge("shaky", "settle")
    runner = graph.compile(entry="shaky", finish="settle", version="1")
    metadata = Metadata(
        "retrying",
        "v1",
        description="A step that succeeds on its third attempt, then an end.",
        input_schema={
            "type": "object",
            "additionalProperties": False,
            "required": ["title"],
            "properties": {"title": {"type": "string", "minLength": 1, "maxLength": 80}},
        },
        vertices=[VertexMetadata("Shaky step", "shaky"), VertexMetadata("Settle", "settle")],
    )
    return TypedDefinition(metadata, runner)


def catalog() -> Catalog:
    result = web_app.catalog()
    result.register(retrying_definition())
    return result
