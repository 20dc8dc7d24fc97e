"""Spans of the flow engine used directly (no workflow supervisor): each `Runner.run` and
`Runner.resume` is a ``flowledger.segment`` of its own, with its steps and vertices;
commit spans only when asked for; and nothing at all while tracing is off."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from flowledger import flow
from flowledger.observability import tracing
from flowledger.storage import open_store

from ._spans import children, from_sdk, in_memory, said

SENTINEL = "zq-flow-sentinel-22c1"


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[flow.LedgerCheckpointStore]:
    async with open_store(f"sqlite:///{tmp_path / 'flow.db'}") as storage:
        yield flow.LedgerCheckpointStore(storage.ledger)


def graph(store: flow.LedgerCheckpointStore) -> flow.Runner[dict[str, Any]]:
    """a, then b and c in one step, then d, which asks for a word and keeps it."""
    built: flow.Graph[dict[str, Any]] = flow.Graph("spans")

    async def a(state: dict[str, Any]) -> dict[str, Any]:
        return {"seen": state["secret"]}

    async def b(state: dict[str, Any]) -> dict[str, Any]:
        return {"b": state["secret"] * 2}

    def c(state: dict[str, Any]) -> dict[str, Any]:  # a thread task
        return {"c": state["secret"].upper()}

    async def d(state: dict[str, Any]) -> dict[str, Any]:
        return {"word": flow.interrupt({"ask": state["secret"]})}

    for name, task in (("a", a), ("b", b), ("c", c), ("d", d)):
        built.add_vertex(name, task)
    built.add_edge("a", "b")
    built.add_edge("a", "c")
    built.add_edge("b", "d")
    built.add_edge("c", "d")
    return built.compile(entry="a", finish="d", store=store)


async def test_run_and_resume_are_segments_of_steps_and_vertices(
    store: flow.LedgerCheckpointStore,
) -> None:
    runner = graph(store)
    with in_memory() as exporter:
        paused = await runner.run({"secret": SENTINEL})
        assert paused.interrupts is not None
        done = await runner.resume(paused.run.graph_run_id, f"word {SENTINEL}")
    assert done.run.status is flow.RunStatus.COMPLETED
    spans = [from_sdk(s) for s in exporter.get_finished_spans()]
    segments = [s for s in spans if s.name == "flowledger.segment"]
    assert [(s.parent_id, s.attributes["flowledger.segment.kind"]) for s in segments] == [
        (None, "start"),
        (None, "resume"),
    ]
    for segment in segments:
        assert segment.attributes["flowledger.graph_run.id"] == paused.run.graph_run_id
        assert segment.attributes["flowledger.graph.id"] == "spans"
    started, resumed = segments
    steps = children(spans, started, "flowledger.step")
    assert [
        sorted(v.attributes["flowledger.vertex"] for v in children(spans, step)) for step in steps
    ] == [["a"], ["b", "c"], ["d"]]
    assert [s.attributes["flowledger.outcome"] for s in steps] == ["routed", "routed", "paused"]
    (step,) = children(spans, resumed, "flowledger.step")
    (vertex,) = children(spans, step, "flowledger.vertex")
    assert (vertex.attributes["flowledger.vertex"], step.attributes["flowledger.step"]) == ("d", 2)
    assert (step.attributes["flowledger.outcome"], vertex.attributes["flowledger.outcome"]) == (
        "completed",
        "done",
    )
    assert not [s for s in spans if s.name == "flowledger.commit"]  # off by default
    for span in spans:
        assert SENTINEL not in said(span), span


async def test_commit_spans_when_asked_for(store: flow.LedgerCheckpointStore) -> None:
    runner = graph(store)
    with in_memory(commits=True) as exporter:
        paused = await runner.run({"secret": "x"})
    spans = [from_sdk(s) for s in exporter.get_finished_spans()]
    commits = [s for s in spans if s.name == "flowledger.commit"]
    by_id = {s.span_id: s for s in spans}
    # the seed commit belongs to the segment, every later one to the step that made it
    parents = [by_id[c.parent_id].name for c in commits if c.parent_id is not None]
    assert parents[0] == "flowledger.segment"
    assert set(parents[1:]) == {"flowledger.step"}
    checkpoints = sum(int(c.attributes["flowledger.commit.checkpoints"]) for c in commits)
    assert checkpoints == paused.run.revision + 1  # revisions 0..n, each committed once


async def test_nothing_is_recorded_while_tracing_is_off(
    store: flow.LedgerCheckpointStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Off (the default, and again after `disable`), the engine never reaches for a span."""
    reached: list[str] = []

    def refuse(name: str) -> Any:
        def called(*args: Any, **kwargs: Any) -> Any:
            reached.append(name)
            raise AssertionError(f"tracing.{name} called while tracing is off")

        return called

    with in_memory():
        pass  # on, then off again
    for name in ("span", "segment", "run_root"):
        monkeypatch.setattr(tracing, name, refuse(name))
    runner = graph(store)
    paused = await runner.run({"secret": "x"})
    assert paused.interrupts is not None
    done = await runner.resume(paused.run.graph_run_id, "w")
    assert done.run.status is flow.RunStatus.COMPLETED
    assert reached == []
