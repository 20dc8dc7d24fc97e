"""The dashboard tests' catalog (``--app tests.web.web_app:catalog``): the built-in
``document_review`` plus

* ``flaky`` v1: ``fetch`` fails the first time each title is seen by this process (an
  errored pause; retrying it succeeds), then ``store``;
* ``kinds`` v1: one quick step, an input schema with a field of every kind the forms
  generate (integer, number, enum, boolean, array as JSON), and a route back to itself;
* ``waiter`` v1: ``wait`` is in flight until the file its input names exists, then
  ``after``;
* ``looper`` v1: ``spin`` routes back to itself once; its second round is in flight
  until the file its input names exists, then ``end``;
* ``gates`` v1: ``one`` is in flight until ``<path>.1`` exists, ``two`` until
  ``<path>.2`` exists, then ``three``: a running run that moves when a test says;
* ``tally`` v1: ``call`` appends a line to the file its input names (a tool that is not
  idempotent: the test counts its calls), then ``end``.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from flowledger import flow
from flowledger.examples.review import review_definition
from flowledger.workflows import Catalog, Metadata, TypedDefinition, VertexMetadata

_seen: set[str] = set()


class Flaky(BaseModel):
    title: str
    stored: bool = False


async def fetch(state: Flaky) -> dict[str, Any]:
    if state.title not in _seen:
        _seen.add(state.title)
        raise ConnectionError("the source did not answer")
    return {}


async def store(state: Flaky) -> dict[str, Any]:
    return {"stored": True}


def flaky_definition() -> TypedDefinition[Flaky]:
    graph: flow.Graph[Flaky] = flow.Graph("flaky", state=Flaky)
    graph.add_vertex("fetch", fetch)
    graph.add_vertex("store", store)
    graph.add_edge("fetch", "store")
    runner = graph.compile(entry="fetch", finish="store", version="1")
    metadata = Metadata(
        "flaky",
        "v1",
        description="Fetch (fails once per title), then store.",
        input_schema={
            "type": "object",
            "additionalProperties": False,
            "required": ["title"],
            "properties": {"title": {"type": "string", "minLength": 1, "maxLength": 80}},
        },
        vertices=[VertexMetadata("fetch", "fetch"), VertexMetadata("store", "store")],
    )
    return TypedDefinition(metadata, runner)


class Kinds(BaseModel):
    count: int
    ratio: float = 0.5
    color: str = "red"
    flag: bool = False
    tags: list[str] = Field(default_factory=list)
    rounds: int = 0


async def work(state: Kinds) -> dict[str, Any]:
    return {"rounds": state.rounds + 1}


async def done(state: Kinds) -> dict[str, Any]:
    return {}


def kinds_definition() -> TypedDefinition[Kinds]:
    graph: flow.Graph[Kinds] = flow.Graph("kinds", state=Kinds)
    graph.add_vertex("work", work)
    graph.add_vertex("done", done)
    graph.add_route(
        "work", targets=["work", "done"], pick=lambda s: "done" if s.rounds >= 2 else "work"
    )
    runner = graph.compile(entry="work", finish="done", version="1")
    metadata = Metadata(
        "kinds",
        "v1",
        description="Every kind of form field.",
        input_schema={
            "type": "object",
            "additionalProperties": False,
            "required": ["count"],
            "properties": {
                "count": {"type": "integer", "minimum": 1, "maximum": 10},
                "ratio": {"type": "number"},
                "color": {"enum": ["red", "green"], "default": "red"},
                "flag": {"type": "boolean"},
                "tags": {"type": "array", "items": {"type": "string"}},
            },
        },
        vertices=[VertexMetadata("working", "work"), VertexMetadata("done", "done")],
    )
    return TypedDefinition(metadata, runner)


class Waiter(BaseModel):
    path: str
    after: bool = False


async def wait(state: Waiter) -> dict[str, Any]:
    """Waits until the file ``path`` exists: a step that is in flight until a test says."""
    flag = Path(state.path)
    while not await asyncio.to_thread(flag.exists):  # noqa: ASYNC110 - another process sets it
        await asyncio.sleep(0.02)
    return {}


async def after(state: Waiter) -> dict[str, Any]:
    return {"after": True}


def waiter_definition() -> TypedDefinition[Waiter]:
    graph: flow.Graph[Waiter] = flow.Graph("waiter", state=Waiter)
    graph.add_vertex("wait", wait)
    graph.add_vertex("after", after)
    graph.add_edge("wait", "after")
    runner = graph.compile(entry="wait", finish="after", version="1")
    metadata = Metadata(
        "waiter",
        "v1",
        description="Wait for a file, then one more step.",
        input_schema={
            "type": "object",
            "additionalProperties": False,
            "required": ["path"],
            "properties": {"path": {"type": "string", "minLength": 1, "maxLength": 4096}},
        },
        vertices=[VertexMetadata("wait", "wait"), VertexMetadata("after", "after")],
    )
    return TypedDefinition(metadata, runner)


class Looper(BaseModel):
    path: str
    rounds: int = 0


async def spin(state: Looper) -> dict[str, Any]:
    """The first round returns at once; the second waits for the file ``path``."""
    if state.rounds >= 1:
        flag = Path(state.path)
        while not await asyncio.to_thread(flag.exists):  # noqa: ASYNC110 - a test sets it
            await asyncio.sleep(0.02)
    return {"rounds": state.rounds + 1}


async def end(state: Looper) -> dict[str, Any]:
    return {}


def looper_definition() -> TypedDefinition[Looper]:
    graph: flow.Graph[Looper] = flow.Graph("looper", state=Looper)
    graph.add_vertex("spin", spin)
    graph.add_vertex("end", end)
    graph.add_route(
        "spin", targets=["spin", "end"], pick=lambda s: "end" if s.rounds >= 2 else "spin"
    )
    runner = graph.compile(entry="spin", finish="end", version="1")
    metadata = Metadata(
        "looper",
        "v1",
        description="A vertex re-entered once; its second round waits for a file.",
        input_schema={
            "type": "object",
            "additionalProperties": False,
            "required": ["path"],
            "properties": {"path": {"type": "string", "minLength": 1, "maxLength": 4096}},
        },
        vertices=[VertexMetadata("spin", "spin"), VertexMetadata("end", "end")],
    )
    return TypedDefinition(metadata, runner)


class Gates(BaseModel):
    path: str
    passed: int = 0


async def _gate(state: Gates, number: int) -> dict[str, Any]:
    flag = Path(f"{state.path}.{number}")
    while not await asyncio.to_thread(flag.exists):  # noqa: ASYNC110 - a test sets it
        await asyncio.sleep(0.02)
    return {"passed": number}


async def one(state: Gates) -> dict[str, Any]:
    return await _gate(state, 1)


async def two(state: Gates) -> dict[str, Any]:
    return await _gate(state, 2)


async def three(state: Gates) -> dict[str, Any]:
    return {"passed": 3}


def gates_definition() -> TypedDefinition[Gates]:
    graph: flow.Graph[Gates] = flow.Graph("gates", state=Gates)
    graph.add_vertex("one", one)
    graph.add_vertex("two", two)
    graph.add_vertex("three", three)
    graph.add_edge("one", "two")
    graph.add_edge("two", "three")
    runner = graph.compile(entry="one", finish="three", version="1")
    metadata = Metadata(
        "gates",
        "v1",
        description="Two steps that each wait for a file, then a third.",
        input_schema={
            "type": "object",
            "additionalProperties": False,
            "required": ["path"],
            "properties": {"path": {"type": "string", "minLength": 1, "maxLength": 4096}},
        },
        vertices=[
            VertexMetadata("one", "one"),
            VertexMetadata("two", "two"),
            VertexMetadata("three", "three"),
        ],
    )
    return TypedDefinition(metadata, runner)


class Tally(BaseModel):
    path: str
    note: str = ""


async def call(state: Tally) -> dict[str, Any]:
    def append() -> None:
        with Path(state.path).open("a") as out:
            out.write(f"called {state.note}\n")

    await asyncio.to_thread(append)
    return {}


async def finish(state: Tally) -> dict[str, Any]:
    return {}


def tally_definition() -> TypedDefinition[Tally]:
    graph: flow.Graph[Tally] = flow.Graph("tally", state=Tally)
    graph.add_vertex("call", call)
    graph.add_vertex("end", finish)
    graph.add_edge("call", "end")
    runner = graph.compile(entry="call", finish="end", version="1")
    metadata = Metadata(
        "tally",
        "v1",
        description="Call a tool that counts its calls, then end.",
        input_schema={
            "type": "object",
            "additionalProperties": False,
            "required": ["path"],
            "properties": {"path": {"type": "string", "minLength": 1, "maxLength": 4096}},
        },
        vertices=[VertexMetadata("Call the tool", "call"), VertexMetadata("End", "end")],
    )
    return TypedDefinition(metadata, runner)


class Shout(BaseModel):
    text: str
    shouted: str = ""


_shouted: set[str] = set()


async def shout(state: Shout) -> dict[str, Any]:
    """Fails the first time for each text, quoting it (the traceback holds it)."""
    if state.text not in _shouted:
        _shouted.add(state.text)
        raise ValueError(f"cannot shout {state.text}")
    return {"shouted": state.text.upper()}


def shout_definition() -> TypedDefinition[Shout]:
    graph: flow.Graph[Shout] = flow.Graph("shout", state=Shout)
    graph.add_vertex("shout", shout)
    runner = graph.compile(entry="shout", finish="shout", version="1")
    metadata = Metadata(
        "shout",
        "v1",
        description="Shout the text (fails once per text, quoting it).",
        input_schema={
            "type": "object",
            "additionalProperties": False,
            "required": ["text"],
            "properties": {"text": {"type": "string", "minLength": 1, "maxLength": 200}},
        },
        vertices=[VertexMetadata("Shout it", "shout")],
    )
    return TypedDefinition(metadata, runner)


class Revise(BaseModel):
    topic: str
    drafts: int = 0
    approved: bool = False


async def write(state: Revise) -> dict[str, Any]:
    return {"drafts": state.drafts + 1}


async def review(state: Revise) -> dict[str, Any]:
    return {}


async def approve(state: Revise) -> dict[str, Any]:
    answer = flow.interrupt({"question": f"Publish draft {state.drafts}?"})
    return {"approved": bool(answer.get("approved"))}


async def publish(state: Revise) -> dict[str, Any]:
    return {}


def revise_definition() -> TypedDefinition[Revise]:
    """The research agent's loop in small: write, review, write again (the review's route
    sends the first draft back), then an approval before publishing."""
    graph: flow.Graph[Revise] = flow.Graph("revise", state=Revise)
    for name, step in (("write", write), ("review", review), ("approve", approve)):
        graph.add_vertex(name, step)
    graph.add_vertex("publish", publish)
    graph.add_edge("write", "review")
    graph.add_route(
        "review",
        targets=["write", "approve"],
        pick=lambda s: "approve" if s.drafts >= 2 else "write",
    )
    graph.add_edge("approve", "publish")
    runner = graph.compile(entry="write", finish="publish", version="1")
    metadata = Metadata(
        "revise",
        "v1",
        description="Write, review and write again, then ask before publishing.",
        input_schema={
            "type": "object",
            "additionalProperties": False,
            "required": ["topic"],
            "properties": {"topic": {"type": "string", "minLength": 1, "maxLength": 80}},
        },
        resume_schema={
            "type": "object",
            "additionalProperties": False,
            "required": ["approved"],
            "properties": {"approved": {"type": "boolean"}},
        },
        vertices=[
            VertexMetadata("Write", "write"),
            VertexMetadata("Review", "review"),
            VertexMetadata("Approve", "approve"),
            VertexMetadata("Publish", "publish"),
        ],
    )
    return TypedDefinition(metadata, runner)


def catalog() -> Catalog:
    result = Catalog()
    result.register(review_definition())
    result.register(flaky_definition())
    result.register(kinds_definition())
    result.register(waiter_definition())
    result.register(looper_definition())
    result.register(gates_definition())
    result.register(tally_definition())
    result.register(shout_definition())
    result.register(revise_definition())
    return result
