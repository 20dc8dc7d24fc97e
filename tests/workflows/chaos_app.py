"""The application the chaos test's workers serve (``--app tests.workflows.chaos_app:catalog``).

Two definitions:

* ``chaos_chain`` v1: ``a`` -> (``b``, ``c`` in parallel) -> ``d`` -> ``e``; each adds 1
  (``count`` is summed by a field reducer, so the parallel ``b`` and ``c`` both count);
* ``chaos_approval`` v1: ``a`` -> ``ask`` (pauses for ``{"approved": bool}``) -> ``b``.

Every task execution appends one JSON line to ``$FLOWLEDGER_CHAOS_LOG/tasks-<pid>.jsonl``
when it starts - its idempotency key, vertex run id, process and wall-clock time - with
one ``write`` on an ``O_APPEND`` descriptor, so a line written before a SIGKILL survives
it. Tasks sleep ``$FLOWLEDGER_CHAOS_SLEEP`` seconds (``lo,hi``; default 0.05-0.25) so that
kills land in the middle of work.
"""

from __future__ import annotations

import asyncio
import json
import operator
import os
import random
import time
from dataclasses import dataclass
from typing import Annotated, Any

from flowledger import flow
from flowledger.workflows import Catalog, Metadata, TypedDefinition, VertexMetadata

LOG_ENV = "FLOWLEDGER_CHAOS_LOG"
SLEEP_ENV = "FLOWLEDGER_CHAOS_SLEEP"

INPUT_SCHEMA = {
    "type": "object",
    "additionalProperties": False,
    "required": ["label"],
    "properties": {"label": {"type": "string", "maxLength": 100}},
}
RESUME_SCHEMA = {
    "type": "object",
    "additionalProperties": False,
    "required": ["approved"],
    "properties": {"approved": {"type": "boolean"}},
}


@dataclass
class ChaosState:
    label: str = ""
    count: Annotated[int, operator.add] = 0
    approved: bool | None = None


_fd: int | None = None


def _log_start() -> None:
    global _fd
    directory = os.environ.get(LOG_ENV)
    if not directory:
        return
    if _fd is None:
        path = os.path.join(directory, f"tasks-{os.getpid()}.jsonl")
        _fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    info = flow.run_info()
    line = {
        "key": info.idempotency_key,
        "graph_run_id": info.graph_run_id,
        "step": info.step,
        "vertex": info.vertex,
        "vertex_run_id": info.vertex_run_id,
        "pid": os.getpid(),
        "t": time.time(),
    }
    os.write(_fd, (json.dumps(line) + "\n").encode())


async def _pause() -> None:
    low, _, high = os.environ.get(SLEEP_ENV, "0.05,0.25").partition(",")
    await asyncio.sleep(random.uniform(float(low), float(high or low)))


async def _add_one(state: ChaosState) -> dict[str, Any]:
    _log_start()
    await _pause()
    return {"count": 1}


async def _ask(state: ChaosState) -> dict[str, Any]:
    _log_start()
    answer = flow.interrupt({"question": f"approve {state.label}?"})
    return {"approved": bool(answer["approved"]), "count": 1}


def chain_definition() -> TypedDefinition[ChaosState]:
    graph: flow.Graph[ChaosState] = flow.Graph("chaos_chain", state=ChaosState)
    for vertex in ("a", "b", "c", "d", "e"):
        graph.add_vertex(vertex, _add_one)
    graph.add_edge("a", "b")
    graph.add_edge("a", "c")
    graph.add_edge("b", "d")
    graph.add_edge("c", "d")
    graph.add_edge("d", "e")
    runner = graph.compile(entry="a", finish="e", version="1")
    metadata = Metadata(
        "chaos_chain",
        "v1",
        description="five steps, two in parallel",
        input_schema=INPUT_SCHEMA,
        vertices=[VertexMetadata(f"step {v}", v) for v in ("a", "b", "c", "d", "e")],
    )
    return TypedDefinition(metadata, runner, summarizer=lambda s: f"count={s.count}")


def approval_definition() -> TypedDefinition[ChaosState]:
    graph: flow.Graph[ChaosState] = flow.Graph("chaos_approval", state=ChaosState)
    graph.add_vertex("a", _add_one)
    graph.add_vertex("ask", _ask)
    graph.add_vertex("b", _add_one)
    graph.add_edge("a", "ask")
    graph.add_edge("ask", "b")
    runner = graph.compile(entry="a", finish="b", version="1")
    metadata = Metadata(
        "chaos_approval",
        "v1",
        description="pauses for an approval",
        input_schema=INPUT_SCHEMA,
        resume_schema=RESUME_SCHEMA,
        vertices=[VertexMetadata(f"step {v}", v) for v in ("a", "ask", "b")],
    )
    return TypedDefinition(metadata, runner, summarizer=lambda s: f"count={s.count}")


def catalog() -> Catalog:
    app = Catalog()
    app.register(chain_definition())
    app.register(approval_definition())
    return app
