"""A definition that sleeps, one that asks with a deadline, and a catalog for processes.

``FLOWLEDGER_TIMER_MARKS`` (a file path) makes the vertex after the sleep append a line
per execution, so a test counts side effects across processes.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from flowledger import flow
from flowledger.clock import Clock, system_clock
from flowledger.workflows.authoring.definition import TypedDefinition
from flowledger.workflows.authoring.metadata import Metadata, VertexMetadata
from flowledger.workflows.runtime.catalog import Catalog

INPUT_SCHEMA = {
    "type": "object",
    "additionalProperties": False,
    "properties": {"seconds": {"type": "number"}, "until": {"type": "string"}},
}
ANSWER_SCHEMA = {
    "type": "object",
    "additionalProperties": False,
    "required": ["approved"],
    "properties": {"approved": {"type": "boolean"}},
}


@dataclass
class Nap:
    seconds: float = 10.0
    until: str = ""
    woke: int = 0


@dataclass
class Ask:
    approved: bool | None = None
    seconds: float = 60.0


def sleeper(clock: Clock = system_clock) -> TypedDefinition[Nap]:
    graph: flow.Graph[Nap] = flow.Graph("sleeper", state=Nap)

    @graph.vertex("nap")
    def nap(state: Nap) -> dict[str, Any]:
        if state.until:
            flow.sleep_until(datetime.fromisoformat(state.until))
        else:
            flow.sleep(state.seconds)
        return {}

    @graph.vertex("after")
    def after(state: Nap) -> dict[str, Any]:
        marks = os.environ.get("FLOWLEDGER_TIMER_MARKS")
        if marks:
            with open(marks, "a", encoding="utf-8") as file:
                file.write(f"{flow.run_info().graph_run_id}\n")
        return {"woke": state.woke + 1}

    graph.add_edge("nap", "after")
    runner = graph.compile(entry="nap", finish="after", clock=clock)
    metadata = Metadata(
        "sleeper",
        "v1",
        description="sleeps, then counts",
        input_schema=INPUT_SCHEMA,
        vertices=[VertexMetadata("take a nap", "nap"), VertexMetadata("wake up", "after")],
    )
    return TypedDefinition(metadata, runner)


def asker(clock: Clock = system_clock) -> TypedDefinition[Ask]:
    graph: flow.Graph[Ask] = flow.Graph("asker", state=Ask)

    @graph.vertex("ask")
    def ask(state: Ask) -> dict[str, Any]:
        answer = flow.interrupt(
            {"question": "approve?"}, timeout=state.seconds, on_timeout={"approved": False}
        )
        return {"approved": bool(answer["approved"])}

    runner = graph.compile(entry="ask", finish="ask", clock=clock)
    metadata = Metadata(
        "asker",
        "v1",
        description="asks for approval, refuses after a deadline",
        input_schema={
            "type": "object",
            "additionalProperties": False,
            "properties": {"seconds": {"type": "number"}},
        },
        resume_schema=ANSWER_SCHEMA,
        vertices=[VertexMetadata("ask for approval", "ask")],
    )
    return TypedDefinition(metadata, runner, summarizer=lambda s: f"approved={s.approved}")


def catalog(clock: Clock = system_clock) -> Catalog:
    built = Catalog()
    built.register(sleeper(clock))
    built.register(asker(clock))
    return built


app = catalog()
"""The catalog a CLI process loads (``--app tests.workflows.timers._app:app``)."""
