"""The catalog the time fault tests' workers load (``--app tests.cli._time_faults_app:app``).

* ``napper``: sleeps ``seconds`` on a durable timer, then ``after`` marks the wake;
* ``asker``: asks for approval with a deadline of ``seconds`` (``on_timeout``:
  ``{"approved": false}``), then marks the answer it got;
* ``ticker``: a schedule's target; marks that it ran.

Every mark is one line appended to ``FLOWLEDGER_FAULT_MARKS``:
``<what> <run id> <step> <pid> <value>``. A vertex may run again after its owner died
before its checkpoint was durable (then with the same step); a second wake, a second
answer or a second firing would run it at another step, or with another value.

Importing this module in a process whose environment names ``FLOWLEDGER_KILL_AT`` arms
that process's self-SIGKILL (`tests.cli._kill_points`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from flowledger import flow
from flowledger.workflows.authoring.definition import TypedDefinition
from flowledger.workflows.authoring.metadata import Metadata, VertexMetadata
from flowledger.workflows.runtime.catalog import Catalog

from ._kill_points import arm

MARKS = "FLOWLEDGER_FAULT_MARKS"

SECONDS_SCHEMA = {
    "type": "object",
    "additionalProperties": False,
    "properties": {"seconds": {"type": "number"}},
}


def mark(what: str, value: object = "-") -> None:
    path = os.environ.get(MARKS)
    if not path:
        return
    info = flow.run_info()
    line = f"{what} {info.graph_run_id} {info.step} {os.getpid()} {value}\n"
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line.encode())  # one write of one short line: never interleaved
    finally:
        os.close(fd)


@dataclass
class Nap:
    seconds: float = 1.0
    woke: bool = False


@dataclass
class Ask:
    seconds: float = 1.0
    approved: bool | None = None


@dataclass
class Tick:
    ticked: bool = False


def napper() -> TypedDefinition[Nap]:
    graph: flow.Graph[Nap] = flow.Graph("napper", state=Nap)

    @graph.vertex("nap")
    def nap(state: Nap) -> dict[str, Any]:
        flow.sleep(state.seconds)
        return {}

    @graph.vertex("after")
    def after(state: Nap) -> dict[str, Any]:
        mark("wake")
        return {"woke": True}

    graph.add_edge("nap", "after")
    metadata = Metadata(
        "napper",
        "v1",
        description="sleeps on a durable timer, then marks the wake",
        input_schema=SECONDS_SCHEMA,
        vertices=[VertexMetadata("nap", "nap"), VertexMetadata("wake up", "after")],
    )
    return TypedDefinition(metadata, graph.compile(entry="nap", finish="after"))


def asker() -> TypedDefinition[Ask]:
    graph: flow.Graph[Ask] = flow.Graph("asker", state=Ask)

    @graph.vertex("ask")
    def ask(state: Ask) -> dict[str, Any]:
        answer = flow.interrupt(
            {"question": "approve?"}, timeout=state.seconds, on_timeout={"approved": False}
        )
        mark("answer", answer["approved"])
        return {"approved": bool(answer["approved"])}

    metadata = Metadata(
        "asker",
        "v1",
        description="asks for approval; refuses once the deadline passed",
        input_schema=SECONDS_SCHEMA,
        resume_schema={
            "type": "object",
            "additionalProperties": False,
            "required": ["approved"],
            "properties": {"approved": {"type": "boolean"}},
        },
        vertices=[VertexMetadata("ask for approval", "ask")],
    )
    return TypedDefinition(
        metadata,
        graph.compile(entry="ask", finish="ask"),
        summarizer=lambda s: f"approved={s.approved}",
    )


def ticker() -> TypedDefinition[Tick]:
    graph: flow.Graph[Tick] = flow.Graph("ticker", state=Tick)

    @graph.vertex("tick")
    def tick(state: Tick) -> dict[str, Any]:
        mark("tick")
        return {"ticked": True}

    metadata = Metadata(
        "ticker",
        "v1",
        description="a schedule's target: marks that it ran",
        input_schema={"type": "object", "additionalProperties": False},
        vertices=[VertexMetadata("tick", "tick")],
    )
    return TypedDefinition(metadata, graph.compile(entry="tick", finish="tick"))


def catalog() -> Catalog:
    built = Catalog()
    for definition in (napper(), asker(), ticker()):
        built.register(definition)
    return built


arm()
app = catalog()
