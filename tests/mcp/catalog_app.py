"""A small application catalog for the MCP tests (``--app tests.mcp.catalog_app:catalog``).

``relay`` v1: ``receive`` -> ``check`` -> ``gate`` (pauses for an answer) -> ``deliver``,
each step quick. Its state holds the caller's ``secret`` and the answer's ``note``, so
tests can check that neither ever leaves the server in a notification.
"""

from __future__ import annotations

import asyncio
from typing import Any

from pydantic import BaseModel

from flowledger import flow
from flowledger.workflows import Catalog, Metadata, TypedDefinition, VertexMetadata

STEP_SECONDS = 0.02


class Relay(BaseModel):
    secret: str
    checked: bool = False
    note: str = ""
    delivered: bool = False


async def receive(state: Relay) -> dict[str, Any]:
    await asyncio.sleep(STEP_SECONDS)
    return {}


async def check(state: Relay) -> dict[str, Any]:
    await asyncio.sleep(STEP_SECONDS)
    return {"checked": True}


async def gate(state: Relay) -> dict[str, Any]:
    answer = flow.interrupt({"question": "deliver?", "secret": state.secret})
    return {"note": str(answer.get("note", ""))}


async def deliver(state: Relay) -> dict[str, Any]:
    await asyncio.sleep(STEP_SECONDS)
    return {"delivered": True}


def relay_definition() -> TypedDefinition[Relay]:
    graph: flow.Graph[Relay] = flow.Graph("relay", state=Relay)
    graph.add_vertex("receive", receive)
    graph.add_vertex("check", check)
    graph.add_vertex("gate", gate)
    graph.add_vertex("deliver", deliver)
    graph.add_edge("receive", "check")
    graph.add_edge("check", "gate")
    graph.add_edge("gate", "deliver")
    runner = graph.compile(entry="receive", finish="deliver", version="1")
    metadata = Metadata(
        "relay",
        "v1",
        description="Receive, check, wait at a gate, deliver.",
        input_schema={
            "type": "object",
            "additionalProperties": False,
            "required": ["secret"],
            "properties": {"secret": {"type": "string"}},
        },
        resume_schema={
            "type": "object",
            "additionalProperties": False,
            "properties": {"note": {"type": "string"}},
        },
        vertices=[
            VertexMetadata("received", "receive"),
            VertexMetadata("checked", "check"),
            VertexMetadata("gate passed", "gate"),
            VertexMetadata("delivered", "deliver"),
        ],
    )
    return TypedDefinition(metadata, runner)


def catalog() -> Catalog:
    relay = Catalog()
    relay.register(relay_definition())
    return relay
