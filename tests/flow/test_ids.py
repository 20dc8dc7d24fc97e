"""Conformance: identifiers (flow-spec §1.1; checklist §8.122-130 as they apply to us).

Ours differ in shape (DESIGN.md): vertex ids are names ``^[a-z][a-z0-9_]{0,63}$``, graph
ids (and versions) are names ``^[a-z0-9][a-z0-9_.-]{0,63}$``; only run ids are UUIDs,
minted as random v4 in canonical lowercase form and validated strictly.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from flowledger import flow
from flowledger.flow import BuildError
from flowledger.flow.context import RunInfo
from flowledger.flow.ids import (
    is_run_id,
    new_run_id,
    validate_graph_id,
    validate_run_id,
    validate_vertex_id,
)

GOOD_RUN = "0b7e3a52-5a7e-4b5c-9f10-6c2d3e4f5a6b"

BAD_RUN_IDS: list[Any] = [
    "",
    "0b7e3a52",
    "0b7e3a525a7e4b5c9f106c2d3e4f5a6b",  # 32 hex digits, no hyphens
    "0b7e3a52-5a7e-4b5c-9f10-6c2d3e4f5a6g",  # non-hex digit
    "0b7e3a5-25a7e-4b5c-9f10-6c2d3e4f5a6b",  # hyphen at the wrong offset
    "0B7E3A52-5A7E-4B5C-9F10-6C2D3E4F5A6B",  # not canonical lowercase
    "{0b7e3a52-5a7e-4b5c-9f10-6c2d3e4f5a6b}",
    "urn:uuid:0b7e3a52-5a7e-4b5c-9f10-6c2d3e4f5a6b",
    GOOD_RUN + "\n",
    " " + GOOD_RUN,
    GOOD_RUN + "0",
    "0b7e3a52-5a7e-4b5c-9f10-6c2d3e4f5a6",
    None,
    12,
    GOOD_RUN.encode(),
    uuid.UUID(GOOD_RUN),
]


# -- run ids --------------------------------------------------------------------------------


def test_new_run_ids_are_canonical_random_v4_and_distinct() -> None:
    """§8.128: minted run ids are canonical lowercase random (v4) UUIDs, all distinct."""
    minted = [new_run_id() for _ in range(2000)]
    assert len(set(minted)) == len(minted)
    for text in minted[:200]:
        parsed = uuid.UUID(text)
        assert str(parsed) == text
        assert parsed.version == 4 and parsed.variant == uuid.RFC_4122
        assert is_run_id(text)
        assert validate_run_id(text) is text
    assert all(is_run_id(text) for text in minted)


def test_canonical_run_id_is_accepted() -> None:
    """§8.123: a canonical lowercase UUID string validates to itself (the nil UUID too)."""
    assert validate_run_id(GOOD_RUN) == GOOD_RUN
    nil = "00000000-0000-0000-0000-000000000000"
    assert validate_run_id(nil) == nil


@pytest.mark.parametrize("text", BAD_RUN_IDS, ids=repr)
def test_malformed_run_ids_are_rejected(text: Any) -> None:
    """§8.125: malformed run ids (short, unhyphenated, upper case, ...) -> ValueError."""
    assert not is_run_id(text)
    with pytest.raises(ValueError) as caught:
        validate_run_id(text)
    assert repr(text) in str(caught.value)


@pytest.mark.parametrize("text", BAD_RUN_IDS[:8], ids=repr)
async def test_run_refuses_a_malformed_run_id(text: str) -> None:
    """§8.125 / §8.171: run(run_id=bad) is refused before anything is written."""
    graph: flow.Graph[Any] = flow.Graph("g")
    calls: list[str] = []
    graph.add_vertex("a", lambda s: calls.append("a"))
    store = flow.MemoryCheckpointStore()
    runner = graph.compile(entry="a", finish="a", store=store)
    with pytest.raises(ValueError):
        await runner.run({}, run_id=text)
    assert calls == []
    assert store._runs == {}


async def test_run_uses_a_given_canonical_run_id() -> None:
    """§8.171: a fresh canonical run id is used exactly as given."""
    graph: flow.Graph[Any] = flow.Graph("g")
    graph.add_vertex("a", lambda s: None)
    runner = graph.compile(entry="a", finish="a")
    result = await runner.run({}, run_id=GOOD_RUN)
    assert result.run.graph_run_id == GOOD_RUN
    assert (await runner.latest(GOOD_RUN)).run.graph_run_id == GOOD_RUN


# -- vertex ids -----------------------------------------------------------------------------

GOOD_VERTICES = ["a", "z", "draft", "a_1", "x9", "a_", "a" * 64, "send_to_sales"]
BAD_VERTICES: list[Any] = [
    "",
    "A",
    "Draft",
    "1a",
    "_a",
    "a-b",
    "a.b",
    "a b",
    "a" * 65,
    "é",
    "a\n",
    " a",
    "a/b",
    None,
    1,
    b"a",
]


@pytest.mark.parametrize("vertex", GOOD_VERTICES)
def test_vertex_id_grammar_accepts(vertex: str) -> None:
    """§2.3 (ours): vertex ids match ^[a-z][a-z0-9_]{0,63}$."""
    assert validate_vertex_id(vertex) == vertex
    graph: flow.Graph[Any] = flow.Graph("g")
    graph.add_vertex(vertex, lambda s: None)
    assert graph.compile(entry=vertex, finish=vertex).graph.entry == vertex


@pytest.mark.parametrize("vertex", BAD_VERTICES, ids=repr)
def test_vertex_id_grammar_rejects(vertex: Any) -> None:
    """§2.3 (ours): a vertex id outside the grammar -> BuildError naming it, in every call."""
    with pytest.raises(BuildError) as caught:
        validate_vertex_id(vertex)
    assert repr(vertex) in str(caught.value)
    graph: flow.Graph[Any] = flow.Graph("g")
    with pytest.raises(BuildError):
        graph.add_vertex(vertex, lambda s: None)
    with pytest.raises(BuildError):
        graph.add_edge("a", vertex)
    with pytest.raises(BuildError):
        graph.add_edge(vertex, "a")
    with pytest.raises(BuildError):
        graph.add_route(vertex, targets=["a"], pick=lambda s: "a")
    with pytest.raises(BuildError):
        graph.add_route("a", targets=[vertex], pick=lambda s: "a")
    with pytest.raises(BuildError):
        graph.add_vertex("a", lambda s: None, on_error=flow.ErrorRoute(vertex))


# -- graph ids ------------------------------------------------------------------------------

GOOD_GRAPHS = ["a", "1", "0abc", "review", "a.b-c_d", "v1.2.3", "x" * 64]
BAD_GRAPHS: list[Any] = ["", "A", ".a", "-a", "_a", "a b", "a/b", "a:b", "x" * 65, "a\n", None]


@pytest.mark.parametrize("graph_id", GOOD_GRAPHS)
def test_graph_id_grammar_accepts(graph_id: str) -> None:
    """§2.2 (ours): graph ids match ^[a-z0-9][a-z0-9_.-]{0,63}$ and are kept verbatim."""
    assert validate_graph_id(graph_id) == graph_id
    assert flow.Graph(graph_id).graph_id == graph_id


@pytest.mark.parametrize("graph_id", BAD_GRAPHS, ids=repr)
def test_graph_id_grammar_rejects(graph_id: Any) -> None:
    """§2.2 (ours): a graph id outside the grammar -> BuildError naming it."""
    with pytest.raises(BuildError) as caught:
        flow.Graph(graph_id)
    assert repr(graph_id) in str(caught.value)


# -- idempotency key ------------------------------------------------------------------------


def test_idempotency_key_format_and_sensitivity() -> None:
    """§8.193: graph=<g>/run=<r>/step=<n>/vertex=<v>; the vertex run id is excluded."""
    info = RunInfo("review", GOOD_RUN, "draft", new_run_id(), 5)
    assert info.idempotency_key == f"graph=review/run={GOOD_RUN}/step=5/vertex=draft"
    again = RunInfo("review", GOOD_RUN, "draft", new_run_id(), 5)
    assert again.idempotency_key == info.idempotency_key
    variants = [
        RunInfo("other", GOOD_RUN, "draft", info.vertex_run_id, 5),
        RunInfo("review", new_run_id(), "draft", info.vertex_run_id, 5),
        RunInfo("review", GOOD_RUN, "draft", info.vertex_run_id, 6),
        RunInfo("review", GOOD_RUN, "approve", info.vertex_run_id, 5),
    ]
    keys = {v.idempotency_key for v in variants}
    assert len(keys) == 4 and info.idempotency_key not in keys
