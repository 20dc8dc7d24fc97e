"""A catalog for the run-semantics tests, used in-process and as ``--app semantics_app:catalog``
(the CLI and MCP tests copy this file next to their database).

* ``ask`` v1: ``draft`` -> ``approve`` (asks "publish?") -> ``publish``. With
  ``SEMANTICS_GRAPH=changed`` in the environment, the same definition version has an extra
  ``audit`` vertex between ``approve`` and ``publish``: a user who edited the graph but kept
  the version. ``ask`` v2 always has the audit vertex (the documented migration path).
  With ``SEMANTICS_HOLD`` set, ``draft`` waits until that file exists.
* ``flaky`` v1: ``fetch`` raises ``ConnectionError`` until the file named by
  ``SEMANTICS_FLAG`` exists, then ``store`` finishes; a task error pauses the run.
* ``strict`` v1: the same graph with ``on_error="fail"``.
"""

from __future__ import annotations

import asyncio
import os
from typing import Any

from pydantic import BaseModel

from flowledger import flow
from flowledger.workflows import Catalog, Metadata, TypedDefinition, VertexMetadata

ASK_INPUT = {
    "type": "object",
    "additionalProperties": False,
    "required": ["text"],
    "properties": {"text": {"type": "string"}},
}
ASK_RESUME = {
    "type": "object",
    "additionalProperties": False,
    "required": ["approved"],
    "properties": {"approved": {"type": "boolean"}},
}
FLAKY_INPUT = {
    "type": "object",
    "additionalProperties": False,
    "required": ["source"],
    "properties": {"source": {"type": "string"}},
}


class Ask(BaseModel):
    text: str
    drafted: bool = False
    approved: bool = False
    audited: bool = False
    published: bool = False


class Fetch(BaseModel):
    source: str
    fetched: bool = False
    stored: bool = False


async def draft(state: Ask) -> dict[str, Any]:
    hold = os.environ.get("SEMANTICS_HOLD", "")
    # Polls a file another process may create: lets a test stop an owner mid-step.
    while hold and not await asyncio.to_thread(os.path.exists, hold):  # noqa: ASYNC110
        await asyncio.sleep(0.01)
    return {"drafted": True}


async def approve(state: Ask) -> dict[str, Any]:
    answer = flow.interrupt({"question": f"publish {state.text!r}?", "words": len(state.text)})
    return {"approved": bool(answer["approved"])}


async def audit(state: Ask) -> dict[str, Any]:
    return {"audited": True}


async def publish(state: Ask) -> dict[str, Any]:
    return {"published": state.approved}


def ask_definition(version: str, *, changed: bool) -> TypedDefinition[Ask]:
    graph: flow.Graph[Ask] = flow.Graph("ask", state=Ask)
    graph.add_vertex("draft", draft)
    graph.add_vertex("approve", approve)
    graph.add_vertex("publish", publish)
    graph.add_edge("draft", "approve")
    labels = [VertexMetadata("Draft", "draft"), VertexMetadata("Approve the text", "approve")]
    if changed:
        graph.add_vertex("audit", audit)
        graph.add_edge("approve", "audit")
        graph.add_edge("audit", "publish")
        labels.append(VertexMetadata("Audit", "audit"))
    else:
        graph.add_edge("approve", "publish")
    labels.append(VertexMetadata("Publish", "publish"))
    runner = graph.compile(entry="draft", finish="publish", version="1")
    metadata = Metadata(
        "ask",
        version,
        description="Draft, ask for approval, publish.",
        input_schema=ASK_INPUT,
        resume_schema=ASK_RESUME,
        vertices=labels,
    )
    return TypedDefinition(metadata, runner)


async def fetch(state: Fetch) -> dict[str, Any]:
    flag = os.environ.get("SEMANTICS_FLAG", "")
    if not flag or not await asyncio.to_thread(os.path.exists, flag):
        raise ConnectionError(f"upstream {state.source} unavailable")
    return {"fetched": True}


async def store(state: Fetch) -> dict[str, Any]:
    return {"stored": True}


def fetch_definition(name: str, *, on_error: Any) -> TypedDefinition[Fetch]:
    graph: flow.Graph[Fetch] = flow.Graph(name, state=Fetch)
    graph.add_vertex("fetch", fetch)
    graph.add_vertex("store", store)
    graph.add_edge("fetch", "store")
    runner = graph.compile(entry="fetch", finish="store", version="1")
    metadata = Metadata(
        name,
        "v1",
        description="Fetch from a source that may be down.",
        input_schema=FLAKY_INPUT,
        vertices=[VertexMetadata("Fetch the source", "fetch"), VertexMetadata("Store", "store")],
    )
    return TypedDefinition(metadata, runner, on_error=on_error)


def catalog() -> Catalog:
    changed = os.environ.get("SEMANTICS_GRAPH") == "changed"
    definitions = Catalog()
    definitions.register(ask_definition("v1", changed=changed))
    definitions.register(ask_definition("v2", changed=True))
    definitions.register(fetch_definition("flaky", on_error="pause"))
    definitions.register(fetch_definition("strict", on_error="fail"))
    return definitions
