"""Conformance: graph building and compile (flow-spec §2.2-§2.7; checklist §8.12-21,
§8.102-106, §8.226-227).

Our API differs from the Go reference in shape (names instead of UUIDs, keyword options
instead of option functions). Where DESIGN.md "Decisions" changes behaviour, the test
says so: duplicate static edges are rejected at build (Q4), the graph is frozen at compile
(Q6), compile reports offenders in insertion order (Q7), versions are strings.
"""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from flowledger import flow
from flowledger.flow import (
    AmbiguousRoutingError,
    BuildError,
    DuplicateEdgeError,
    DuplicateRouteError,
    DuplicateVertexError,
    GraphBuildError,
    MissingEntryError,
    UnknownVertexError,
    UnreachableVertexError,
)
from flowledger.storage import open_store


def noop(state: Any) -> None:
    return None


def pick_first(state: Any) -> str:
    return "b"


def graph_of(*vertices: str, graph_id: str = "g", **options: Any) -> flow.Graph[Any]:
    graph: flow.Graph[Any] = flow.Graph(graph_id)
    for vertex in vertices:
        graph.add_vertex(vertex, noop, **options)
    return graph


# -- §8.12 valid graphs ----------------------------------------------------------------------


def test_linear_chain_compiles_and_records_roles() -> None:
    """§8.12: a linear chain compiles; the runner records entry, finish and graph id."""
    graph = graph_of("a", "b", "c", graph_id="chain")
    graph.add_edge("a", "b")
    graph.add_edge("b", "c")
    runner = graph.compile(entry="a", finish="c")
    assert runner.graph.entry == "a"
    assert runner.graph.finish == "c"
    assert runner.graph_id == "chain"
    assert runner.graph.successors("a") == ("b",)
    assert runner.graph.successors("c") == ()


def test_single_vertex_entry_is_finish() -> None:
    """§8.12: a single vertex with entry == finish and no edges compiles."""
    runner = graph_of("only").compile(entry="only", finish="only")
    assert (runner.graph.entry, runner.graph.finish) == ("only", "only")
    assert set(runner.graph.vertices) == {"only"}


def test_back_edge_cycle_compiles() -> None:
    """§8.12: cycles are legal (a -> b -> a, b -> c)."""
    graph = graph_of("a", "b", "c")
    graph.add_edge("a", "b")
    graph.add_edge("b", "a")
    graph.add_edge("b", "c")
    runner = graph.compile(entry="a", finish="c")
    assert runner.graph.successors("b") == ("a", "c")


def test_conditional_edge_reaches_all_targets() -> None:
    """§8.12: vertices reachable only as conditional targets count as reachable."""
    graph = graph_of("a", "b", "c")
    graph.add_route("a", targets=["b", "c"], pick=lambda s: "c")
    runner = graph.compile(entry="a", finish="c")
    assert runner.graph.routes["a"].targets == ("b", "c")


def test_error_route_handler_counts_toward_reachability() -> None:
    """§8.12: a vertex reachable only as an error-route handler is reachable."""
    graph: flow.Graph[Any] = flow.Graph("g")
    graph.add_vertex("a", noop, on_error=flow.ErrorRoute("h"))
    graph.add_vertex("h", noop)
    graph.add_vertex("fin", noop)
    graph.add_edge("a", "fin")
    runner = graph.compile(entry="a", finish="fin")
    route = runner.graph.vertices["a"].on_error
    assert route is not None and route.handler == "h"


def test_finish_with_out_edges_is_legal() -> None:
    """§8.12 / §2.7: finish may have out-edges (checked: not rejected)."""
    graph = graph_of("a", "fin", "sink")
    graph.add_edge("a", "fin")
    graph.add_edge("fin", "sink")
    assert graph.compile(entry="a", finish="fin").graph.successors("fin") == ("sink",)


# -- §8.13 missing entry / finish -----------------------------------------------------------


@pytest.mark.parametrize(
    ("entry", "finish", "vertex", "role"),
    [("x", "a", "x", "entry"), ("a", "y", "y", "finish"), ("x", "y", "x", "entry")],
)
def test_missing_entry_or_finish(entry: str, finish: str, vertex: str, role: str) -> None:
    """§8.13: missing entry -> role entry; missing finish -> role finish; both -> entry."""
    with pytest.raises(MissingEntryError) as caught:
        graph_of("a").compile(entry=entry, finish=finish)
    assert caught.value.vertex == vertex
    assert caught.value.role == role
    assert str(caught.value) == f"flow: missing {role} vertex {vertex}"


# -- §8.14 unknown vertices -----------------------------------------------------------------


def _static_to_unknown(graph: flow.Graph[Any]) -> None:
    graph.add_edge("a", "ghost")


def _static_from_unknown(graph: flow.Graph[Any]) -> None:
    graph.add_edge("ghost", "a")


def _route_target_unknown(graph: flow.Graph[Any]) -> None:
    graph.add_route("a", targets=["fin", "ghost"], pick=lambda s: "fin")


def _route_from_unknown(graph: flow.Graph[Any]) -> None:
    graph.add_edge("a", "fin")
    graph.add_route("ghost", targets=["fin"], pick=lambda s: "fin")


def _handler_unknown(graph: flow.Graph[Any]) -> None:
    graph.add_edge("a", "fin")
    graph.add_vertex("b", noop, on_error=flow.ErrorRoute("ghost"))
    graph.add_edge("a", "b")


@pytest.mark.parametrize(
    "wire",
    [
        _static_to_unknown,
        _static_from_unknown,
        _route_target_unknown,
        _route_from_unknown,
        _handler_unknown,
    ],
)
def test_unknown_vertex_is_named(wire: Any) -> None:
    """§8.14: edges, routes and error routes naming a missing vertex -> UnknownVertexError."""
    graph = graph_of("a", "fin")
    wire(graph)
    with pytest.raises(UnknownVertexError) as caught:
        graph.compile(entry="a", finish="fin")
    assert caught.value.vertex == "ghost"
    assert "ghost" in str(caught.value)


def test_edges_to_vertices_added_later_are_fine() -> None:
    """§8.103: an edge may name a vertex added after it; existence is checked at compile."""
    graph: flow.Graph[Any] = flow.Graph("g")
    graph.add_edge("a", "b")
    graph.add_vertex("a", noop)
    graph.add_vertex("b", noop)
    assert graph.compile(entry="a", finish="b").graph.successors("a") == ("b",)


# -- §8.15 ambiguity, §8.16 reachability ------------------------------------------------------


def test_static_and_conditional_on_one_vertex_is_ambiguous() -> None:
    """§8.15 / §8.105: static + conditional on one source builds, then fails compile."""
    graph = graph_of("a", "b", "c")
    graph.add_edge("a", "b")
    graph.add_route("a", targets=["c"], pick=lambda s: "c")  # accepted at build time
    with pytest.raises(AmbiguousRoutingError) as caught:
        graph.compile(entry="a", finish="c")
    assert caught.value.vertex == "a"
    assert str(caught.value).startswith("flow: ambiguous routing for vertex a")


def test_orphan_vertex_is_unreachable() -> None:
    """§8.16: a vertex no path from entry reaches -> UnreachableVertexError naming it."""
    graph = graph_of("a", "fin", "orphan")
    graph.add_edge("a", "fin")
    with pytest.raises(UnreachableVertexError) as caught:
        graph.compile(entry="a", finish="fin")
    assert caught.value.vertex == "orphan"


def test_finish_unreachable_when_entry_has_no_edges() -> None:
    """§8.16: finish not reachable from an entry without edges -> UnreachableVertexError."""
    with pytest.raises(UnreachableVertexError) as caught:
        graph_of("a", "fin").compile(entry="a", finish="fin")
    assert caught.value.vertex == "fin"


def test_edge_into_entry_does_not_make_source_reachable() -> None:
    """§8.16: reachability follows edge direction (x -> a does not reach x from a)."""
    graph = graph_of("a", "x")
    graph.add_edge("x", "a")
    with pytest.raises(UnreachableVertexError) as caught:
        graph.compile(entry="a", finish="a")
    assert caught.value.vertex == "x"


def test_validation_order_first_rule_wins() -> None:
    """§2.7: missing entry beats unknown, unknown beats ambiguous, ambiguous beats unreachable."""
    graph = graph_of("a", "b", "orphan")
    graph.add_edge("a", "b")
    graph.add_route("a", targets=["b"], pick=pick_first)
    with pytest.raises(AmbiguousRoutingError):
        graph.compile(entry="a", finish="b")
    graph.add_edge("b", "ghost")
    with pytest.raises(UnknownVertexError):
        graph.compile(entry="a", finish="b")
    with pytest.raises(MissingEntryError):
        graph.compile(entry="nope", finish="b")


# -- decision Q7: deterministic, insertion-order error selection ---------------------------


@pytest.mark.parametrize("order", [("p", "q"), ("q", "p")])
def test_unreachable_reported_in_insertion_order(order: tuple[str, str]) -> None:
    """Decision Q7 (ours): with several orphans, the first one added is reported."""
    graph = graph_of("a", *order)
    with pytest.raises(UnreachableVertexError) as caught:
        graph.compile(entry="a", finish="a")
    assert caught.value.vertex == order[0]


@pytest.mark.parametrize("order", [("p", "q"), ("q", "p")])
def test_unknown_reported_in_insertion_order(order: tuple[str, str]) -> None:
    """Decision Q7 (ours): with several unknown sources, the first edge added is reported."""
    graph = graph_of("a")
    for ghost in order:
        graph.add_edge(ghost, "a")
    with pytest.raises(UnknownVertexError) as caught:
        graph.compile(entry="a", finish="a")
    assert caught.value.vertex == order[0]


@pytest.mark.parametrize("order", [("p", "q"), ("q", "p")])
def test_ambiguous_reported_in_insertion_order(order: tuple[str, str]) -> None:
    """Decision Q7 (ours): with several ambiguous sources, the first added is reported."""
    graph = graph_of("a", "p", "q", "z")
    graph.add_route("a", targets=["p", "q"], pick=lambda s: "p")
    for source in order:
        graph.add_edge(source, "z")
    for source in order:
        graph.add_route(source, targets=["z"], pick=lambda s: "z")
    with pytest.raises(AmbiguousRoutingError) as caught:
        graph.compile(entry="a", finish="z")
    assert caught.value.vertex == order[0]


# -- §8.17-21 compile options: store and version ---------------------------------------------


def test_compile_applies_store_and_version() -> None:
    """§8.17 / §8.19: store= is used exactly; version= becomes the version suffix."""
    store = flow.MemoryCheckpointStore()
    runner = graph_of("a").compile(entry="a", finish="a", store=store, version="7")
    assert runner.store is store
    assert runner.graph_version.endswith(":7")


def test_default_store_is_private_memory_store() -> None:
    """§8.18 / §8.20 / §8.21: no store or store=None gives a fresh in-memory store each time."""
    graph = graph_of("a")
    first = graph.compile(entry="a", finish="a")
    second = graph.compile(entry="a", finish="a", store=None)
    assert isinstance(first.store, flow.MemoryCheckpointStore)
    assert isinstance(second.store, flow.MemoryCheckpointStore)
    assert first.store is not second.store


async def test_default_stores_do_not_share_runs() -> None:
    """§8.21: a run written through one default store is unknown to another compile's."""
    graph = graph_of("a")
    first = graph.compile(entry="a", finish="a")
    second = graph.compile(entry="a", finish="a")
    result = await first.run({})
    assert result.run.status is flow.RunStatus.COMPLETED
    with pytest.raises(flow.CheckpointNotFoundError):
        await second.latest(result.run.graph_run_id)


@pytest.mark.parametrize("version", ["0", "1", "v2", "2024.06.01", "1.2-beta_3", "9" * 64])
def test_valid_versions(version: str) -> None:
    """Decision (ours): versions are strings matching ^[a-z0-9][a-z0-9_.-]{0,63}$."""
    runner = graph_of("a").compile(entry="a", finish="a", version=version)
    assert runner.graph_version.split(":")[1] == version


@pytest.mark.parametrize("version", ["", "V1", "-1", ".1", "a:b", "a b", "9" * 65, 1, None])
def test_invalid_versions_are_build_errors(version: Any) -> None:
    """Decision (ours): a version outside the grammar (or not a str) -> BuildError."""
    with pytest.raises(BuildError) as caught:
        graph_of("a").compile(entry="a", finish="a", version=version)
    assert caught.value.op == "compile"


# -- decision Q6: frozen at compile ---------------------------------------------------------


def test_builder_changes_after_compile_do_not_reach_the_runner() -> None:
    """Decision Q6 (ours): the runner snapshots the graph; later builder edits don't leak."""
    graph = graph_of("a", "b")
    graph.add_edge("a", "b")
    runner = graph.compile(entry="a", finish="b")
    version = runner.graph_version
    graph.add_vertex("c", noop)
    graph.add_edge("a", "c")
    graph.add_route("b", targets=["c"], pick=lambda s: "c")
    graph.add_vertex("h", noop)
    assert set(runner.graph.vertices) == {"a", "b"}
    assert runner.graph.successors("a") == ("b",)
    assert "b" not in runner.graph.routes
    assert runner.graph_version == version
    graph.add_edge("c", "h")
    assert graph.compile(entry="a", finish="b").graph_version != version


async def test_frozen_runner_still_runs_the_old_topology() -> None:
    """Decision Q6 (ours): a run of the compiled runner ignores an edge added afterwards."""
    graph: flow.Graph[dict[str, Any]] = flow.Graph("g")
    graph.add_vertex("a", lambda s: {"seen": [*s.get("seen", []), "a"]})
    graph.add_vertex("b", lambda s: {"seen": [*s["seen"], "b"]})
    graph.add_edge("a", "b")
    runner = graph.compile(entry="a", finish="b")
    graph.add_vertex("c", lambda s: {"seen": [*s["seen"], "c"]})
    graph.add_edge("b", "c")
    result = await runner.run({})
    assert result.state == {"seen": ["a", "b"]}


# -- §8.102 new graph -----------------------------------------------------------------------


@dataclass
class Doc:
    text: str = ""


def test_new_graph_records_id_and_state_type() -> None:
    """§8.102: the graph id and the state type are stored; default version is "0"."""
    graph: flow.Graph[Doc] = flow.Graph("review.v1", state=Doc)
    assert graph.graph_id == "review.v1"
    assert graph.state_type is Doc
    graph.add_vertex("a", noop)
    runner = graph.compile(entry="a", finish="a")
    assert runner.graph_version.endswith(":0")
    assert runner.graph.codec.state_type is Doc


@pytest.mark.parametrize("graph_id", ["", "Review", "-x", "a b", "x" * 65, None, 3])
def test_bad_graph_id_is_build_error(graph_id: Any) -> None:
    """§8.102 / ids: a graph id outside ^[a-z0-9][a-z0-9_.-]{0,63}$ -> BuildError."""
    with pytest.raises(BuildError):
        flow.Graph(graph_id)


# -- §8.103 add_edge ------------------------------------------------------------------------


def test_add_edge_keeps_order_fan_out_and_self_edges() -> None:
    """§8.103: successors keep declaration order; fan-out and self-edges are allowed."""
    graph = graph_of("a", "c", "b", "fin")
    graph.add_edge("a", "c")
    graph.add_edge("a", "b")
    graph.add_edge("a", "a")
    graph.add_edge("b", "fin")
    graph.add_edge("c", "fin")
    runner = graph.compile(entry="a", finish="fin")
    assert runner.graph.successors("a") == ("c", "b", "a")


@pytest.mark.parametrize(("source", "target"), [("", "a"), ("a", ""), ("A", "a"), ("a", 1)])
def test_add_edge_rejects_bad_ids(source: Any, target: Any) -> None:
    """§8.103: a bad source or target id -> BuildError (op add_edge), nothing recorded."""
    graph = graph_of("a")
    with pytest.raises(BuildError) as caught:
        graph.add_edge(source, target)
    assert caught.value.op == "add_edge"
    assert graph.compile(entry="a", finish="a").graph.edges == {}


def test_duplicate_static_edge_is_rejected() -> None:
    """Decision Q4 (ours): the same static edge twice -> DuplicateEdgeError; one edge kept."""
    graph = graph_of("a", "b")
    graph.add_edge("a", "b")
    with pytest.raises(DuplicateEdgeError) as caught:
        graph.add_edge("a", "b")
    assert (caught.value.source, caught.value.target) == ("a", "b")
    assert isinstance(caught.value, GraphBuildError)
    assert graph.compile(entry="a", finish="b").graph.successors("a") == ("b",)


# -- §8.104-106 add_route -------------------------------------------------------------------


def test_add_route_records_targets_and_pick() -> None:
    """§8.104: targets (a list, or a single name) and pick are recorded."""
    graph = graph_of("a", "b", "c")
    graph.add_route("a", targets=["b", "c"], pick=pick_first)
    graph.add_route("b", targets="c", pick=pick_first)
    runner = graph.compile(entry="a", finish="c")
    assert runner.graph.routes["a"].targets == ("b", "c")
    assert runner.graph.routes["a"].pick is pick_first
    assert runner.graph.routes["b"].targets == ("c",)


def test_second_route_on_one_source_is_rejected() -> None:
    """§8.104: a second route from the same source -> DuplicateRouteError, exact message."""
    graph = graph_of("a", "b", "c")
    graph.add_route("a", targets=["b"], pick=pick_first)
    with pytest.raises(DuplicateRouteError) as caught:
        graph.add_route("a", targets=["c"], pick=pick_first)
    assert caught.value.source == "a"
    assert str(caught.value) == "flow: duplicate conditional route for vertex a"
    graph.add_edge("b", "c")
    assert graph.compile(entry="a", finish="c").graph.routes["a"].targets == ("b",)


@pytest.mark.parametrize(
    ("source", "targets", "pick"),
    [
        ("a", ["b"], None),
        ("a", ["b"], "not callable"),
        ("a", [], pick_first),
        ("", ["b"], pick_first),
        ("a", ["b", "B"], pick_first),
        ("a", ["b", "b"], pick_first),
    ],
)
def test_add_route_rejects_bad_arguments(source: str, targets: list[str], pick: Any) -> None:
    """§8.104: no pick, no targets, bad ids or a repeated target -> BuildError; nothing kept."""
    graph = graph_of("a", "b")
    with pytest.raises(BuildError) as caught:
        graph.add_route(source, targets=targets, pick=pick)
    assert caught.value.op == "add_route"
    graph.add_route("a", targets=["b"], pick=pick_first)  # the source is still free


def test_route_targets_are_copied() -> None:
    """§8.106: mutating the caller's target list after add_route changes nothing."""
    graph = graph_of("a", "b", "c")
    targets = ["b", "c"]
    graph.add_route("a", targets=targets, pick=pick_first)
    targets.append("ghost")
    targets[0] = "zzz"
    runner = graph.compile(entry="a", finish="c")
    assert runner.graph.routes["a"].targets == ("b", "c")


# -- §8.226-227 add_vertex and vertex options -------------------------------------------------


def test_vertex_options_default_to_none() -> None:
    """§8.226: without options a vertex has no retry, timeout, error route, selector, reducer."""
    vertex = graph_of("a").compile(entry="a", finish="a").graph.vertices["a"]
    assert (vertex.retry, vertex.timeout, vertex.on_error) == (None, None, None)
    assert (vertex.select, vertex.reduce) == (None, None)
    assert vertex.task is noop


def test_vertex_options_are_recorded() -> None:
    """§8.226: retry, timeout, on_error, select and reduce are stored on the vertex."""
    retry = flow.Retry(4, backoff=0.5)
    route = flow.ErrorRoute("h", record=lambda s, e: None)

    def select(state: Any) -> Any:
        return state

    def reduce(state: Any, out: Any) -> None:
        return None

    graph: flow.Graph[Any] = flow.Graph("g")
    graph.add_vertex(
        "a", noop, select=select, reduce=reduce, retry=retry, timeout=2, on_error=route
    )
    graph.add_vertex("h", noop)
    graph.add_edge("a", "h")
    vertex = graph.compile(entry="a", finish="h").graph.vertices["a"]
    assert vertex.retry is retry
    assert vertex.timeout == 2.0 and isinstance(vertex.timeout, float)
    assert vertex.on_error is route
    assert vertex.select is select and vertex.reduce is reduce


def test_decorator_registers_and_returns_the_function() -> None:
    """§8.227: @graph.vertex(id) adds the vertex with its options and returns fn unchanged."""
    graph: flow.Graph[Any] = flow.Graph("g")

    @graph.vertex("a", retry=flow.Retry(2), timeout=1.5)
    def a(state: Any) -> dict[str, Any]:
        return {"x": 1}

    assert a({}) == {"x": 1}
    vertex = graph.compile(entry="a", finish="a").graph.vertices["a"]
    assert vertex.task is a
    assert vertex.retry == flow.Retry(2)
    assert vertex.timeout == 1.5


def test_duplicate_vertex_is_rejected() -> None:
    """§8.227: adding an id twice -> DuplicateVertexError naming it; the first one stays."""
    graph = graph_of("a")

    def other(state: Any) -> None:
        return None

    with pytest.raises(DuplicateVertexError) as caught:
        graph.add_vertex("a", other)
    assert caught.value.vertex == "a"
    assert str(caught.value) == "flow: duplicate vertex a"
    assert graph.compile(entry="a", finish="a").graph.vertices["a"].task is noop


@pytest.mark.parametrize(
    ("vertex", "task", "options"),
    [
        ("", noop, {}),
        ("A", noop, {}),
        ("1a", noop, {}),
        ("a", None, {}),
        ("a", "not callable", {}),
        ("a", noop, {"select": 5}),
        ("a", noop, {"reduce": "x"}),
        ("a", noop, {"retry": 3}),
        ("a", noop, {"timeout": 0}),
        ("a", noop, {"timeout": -1.0}),
        ("a", noop, {"timeout": True}),
        ("a", noop, {"timeout": "5"}),
        ("a", noop, {"on_error": "h"}),
        ("a", noop, {"on_error": flow.ErrorRoute("Bad-Handler")}),
    ],
)
def test_add_vertex_rejects_bad_arguments(vertex: Any, task: Any, options: Any) -> None:
    """§8.227: bad id, missing or non-callable parts, bad options -> BuildError; nothing kept."""
    graph: flow.Graph[Any] = flow.Graph("g")
    with pytest.raises(BuildError) as caught:
        graph.add_vertex(vertex, task, **options)
    assert caught.value.op == "add_vertex"
    graph.add_vertex("a", noop)  # "a" was not half-registered
    assert set(graph.compile(entry="a", finish="a").graph.vertices) == {"a"}


def test_nan_timeout_is_rejected() -> None:
    """§8.226: a NaN timeout is not a positive number -> BuildError."""
    with pytest.raises(BuildError):
        flow.Graph("g").add_vertex("a", noop, timeout=math.nan)


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"attempts": 0}, ValueError),
        ({"attempts": -1}, ValueError),
        ({"attempts": True}, TypeError),
        ({"attempts": 2.0}, TypeError),
        ({"attempts": 2, "backoff": -0.1}, ValueError),
    ],
)
def test_retry_policy_validation(kwargs: dict[str, Any], error: type[Exception]) -> None:
    """§8.226: Retry rejects attempts < 1, non-int attempts and a negative backoff."""
    with pytest.raises(error):
        flow.Retry(**kwargs)


def test_retry_rejects_nan_backoff() -> None:
    """§8.226: a NaN backoff is not a delay -> ValueError."""
    with pytest.raises(ValueError):
        flow.Retry(2, backoff=math.nan)


# -- state types ----------------------------------------------------------------------------


def test_typing_typeddict_state_compiles_or_is_refused_clearly() -> None:
    """§8.102 / DESIGN: a typing.TypedDict state works where pydantic supports it (3.12+);
    on 3.11 the graph refuses it at once with a BuildError (use typing_extensions)."""
    from typing import TypedDict

    class Plain(TypedDict):
        n: int

    if sys.version_info < (3, 12):
        with pytest.raises(BuildError, match="typing_extensions"):
            flow.Graph("g", state=Plain)
        return
    graph: flow.Graph[Plain] = flow.Graph("g", state=Plain)
    graph.add_vertex("a", noop)
    runner = graph.compile(entry="a", finish="a")
    assert runner.graph.codec.clone({"n": 1}) == {"n": 1}


# -- compile(store=...): what open_store returns, or a typed refusal ------------------------


@dataclass
class _Count:
    n: int = 0


async def _bump(state: _Count) -> dict[str, int]:
    return {"n": state.n + 1}


def _counting_graph() -> flow.Graph[_Count]:
    graph = flow.Graph("counting", state=_Count)
    graph.add_vertex("bump", _bump)
    return graph


async def test_compile_accepts_the_store_open_store_returns(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/compile.db"
    async with open_store(url) as store:
        runner = _counting_graph().compile(entry="bump", finish="bump", store=store)
        result = await runner.run(_Count())
        run_id = result.run.graph_run_id
    assert result.state == _Count(1)
    async with open_store(url) as store:  # the checkpoints are in the database's ledger
        again = _counting_graph().compile(entry="bump", finish="bump", store=store)
        assert (await again.get(run_id)).state == _Count(1)


async def test_compile_refuses_an_unopened_store(tmp_path: Path) -> None:
    opener = open_store(f"sqlite:///{tmp_path}/never.db")
    with pytest.raises(BuildError, match="unopened open_store"):
        _counting_graph().compile(entry="bump", finish="bump", store=opener)  # type: ignore[arg-type]
    assert not (tmp_path / "never.db").exists()


@pytest.mark.parametrize("store", [object(), "sqlite:///x.db", {}])
def test_compile_refuses_anything_else_as_a_store(store: object) -> None:
    with pytest.raises(BuildError, match=r"store must be a flowledger\.storage\.Store") as info:
        _counting_graph().compile(entry="bump", finish="bump", store=store)  # type: ignore[arg-type]
    assert type(store).__name__ in str(info.value)


def test_a_graph_loops_through_a_route_or_an_error_route_and_not_otherwise() -> None:
    """`CompiledGraph.loops`: what progress displays ask before counting vertices."""
    straight = graph_of("a", "b", "fin")
    straight.add_edge("a", "b")
    straight.add_edge("b", "fin")
    assert not straight.compile(entry="a", finish="fin").graph.loops()

    routed = graph_of("a", "b", "fin")
    routed.add_edge("a", "b")
    routed.add_route("b", targets=["a", "fin"], pick=lambda s: "fin")
    assert routed.compile(entry="a", finish="fin").graph.loops()

    handled: flow.Graph[Any] = flow.Graph("g")
    handled.add_vertex("a", noop)
    handled.add_vertex("h", noop, on_error=flow.ErrorRoute("a"))
    handled.add_vertex("fin", noop)
    handled.add_edge("a", "h")
    handled.add_edge("h", "fin")
    assert handled.compile(entry="a", finish="fin").graph.loops()
