"""Conformance: the graph version fingerprint (flow-spec §2.8; checklist §8.209-219).

``graph_version = sha256_hex(canonical text) + ":" + version``. Our versions are strings
(DESIGN.md decision), so the suffix is the compile ``version=`` string, default "0".
"""

from __future__ import annotations

import hashlib
from typing import Any

import pytest

from flowledger import flow


def noop(state: Any) -> None:
    return None


def other(state: Any) -> dict[str, Any]:
    return {"changed": True}


def canonical(v: list[str], e: list[str], c: list[str], x: list[str], entry: str, fin: str) -> str:
    """The documented canonical text: five tagged sections joined by a form feed."""
    sections = [("V", v), ("E", e), ("C", c), ("X", x), ("R", [entry, fin])]
    return "\f".join(f"{tag}\n" + "\n".join(entries) for tag, entries in sections)


def sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def build(
    *,
    vertices: tuple[str, ...] = ("a", "b", "c"),
    edges: tuple[tuple[str, str], ...] = (("a", "b"), ("b", "c")),
    routes: dict[str, list[str]] | None = None,
    handlers: dict[str, str] | None = None,
    entry: str = "a",
    finish: str = "c",
    version: str = "0",
    graph_id: str = "g",
    task: Any = noop,
) -> flow.Runner[Any]:
    graph: flow.Graph[Any] = flow.Graph(graph_id)
    for vertex in vertices:
        route = (handlers or {}).get(vertex)
        graph.add_vertex(vertex, task, on_error=flow.ErrorRoute(route) if route else None)
    for source, target in edges:
        graph.add_edge(source, target)
    for source, targets in (routes or {}).items():
        graph.add_route(source, targets=targets, pick=lambda s, t=targets: t[0])
    return graph.compile(entry=entry, finish=finish, version=version)


def prefix(runner: flow.Runner[Any]) -> str:
    return runner.graph_version.split(":")[0]


# -- §8.217 golden ----------------------------------------------------------------------


def test_golden_canonical_text() -> None:
    """§8.217: the spec's golden graph (a has an error route to b, a->b, b?{c,a}, a..c)."""
    runner = build(
        edges=(("a", "b"),),
        routes={"b": ["c", "a"]},
        handlers={"a": "b"},
    )
    text = "V\na\nb\nc\fE\na->b\fC\nb?a,c\fX\na!b\fR\na\nc"
    assert text == canonical(["a", "b", "c"], ["a->b"], ["b?a,c"], ["a!b"], "a", "c")
    assert runner.graph_version == f"{sha(text)}:0"


def test_golden_with_empty_sections() -> None:
    """§8.217: an empty section is just its tag and a newline (single-vertex graph)."""
    runner = build(vertices=("solo",), edges=(), entry="solo", finish="solo", version="3")
    text = "V\nsolo\fE\n\fC\n\fX\n\fR\nsolo\nsolo"
    assert runner.graph_version == f"{sha(text)}:3"


def test_golden_sorts_entries_as_strings() -> None:
    """§8.217: every list is sorted as strings; duplicates of a target string sort together."""
    runner = build(
        vertices=("z", "a10", "a9", "m"),
        edges=(("z", "m"), ("z", "a9"), ("a9", "m")),
        routes={"m": ["z", "a10"]},
        handlers={"z": "a10", "a9": "a10"},
        entry="z",
        finish="a10",
    )
    text = canonical(
        ["a10", "a9", "m", "z"],
        ["a9->m", "z->a9", "z->m"],
        ["m?a10,z"],
        ["a9!a10", "z!a10"],
        "z",
        "a10",
    )
    assert runner.graph_version == f"{sha(text)}:0"


# -- §8.209, §8.216 determinism and shape ------------------------------------------------------


def test_same_graph_same_version() -> None:
    """§8.209: compiling the same graph twice gives the same non-empty version, one colon."""
    first, second = build(), build()
    assert first.graph_version == second.graph_version
    assert first.graph_version.count(":") == 1
    assert len(prefix(first)) == 64 and int(prefix(first), 16) >= 0


def test_accessors() -> None:
    """§8.216: graph_id is the pinned id; graph_version is non-empty with one colon."""
    runner = build(graph_id="pinned.graph")
    assert runner.graph_id == "pinned.graph"
    assert runner.graph_version and runner.graph_version.count(":") == 1


def test_graph_id_is_not_hashed() -> None:
    """§2.8: the graph id is not part of the hash."""
    assert build(graph_id="one").graph_version == build(graph_id="two").graph_version


# -- §8.210-211, §8.215, §8.218-219 topology changes ---------------------------------------


@pytest.mark.parametrize(
    "changes",
    [
        pytest.param(
            {"vertices": ("a", "b", "c", "d"), "edges": (("a", "b"), ("b", "c"), ("a", "d"))},
            id="vertex-and-edge-added",
        ),
        pytest.param({"edges": (("a", "c"), ("a", "b"), ("b", "c"))}, id="edge-added"),
        pytest.param(
            {"vertices": ("a", "b", "c", "d"), "edges": (("a", "d"), ("d", "b"), ("b", "c"))},
            id="edge-rewired",
        ),
        pytest.param({"edges": (("b", "c"),), "routes": {"a": ["b"]}}, id="static-to-route"),
        pytest.param(
            {"edges": (("b", "c"),), "routes": {"a": ["b", "c"]}}, id="route-with-two-targets"
        ),
        pytest.param({"handlers": {"a": "c"}}, id="error-route-added"),
        pytest.param({"handlers": {"a": "b"}}, id="other-error-route-added"),
        pytest.param({"finish": "b"}, id="different-finish"),
    ],
)
def test_topology_changes_change_the_version(changes: dict[str, Any]) -> None:
    """§8.210 / §8.215: vertex, edge, route, error-route or finish changes change the hash."""
    base, changed = build(), build(**changes)
    assert prefix(base) != prefix(changed)
    assert changed.graph_version.endswith(":0")


def test_removing_an_error_route_changes_the_version() -> None:
    """§8.211: removing an error route changes the version."""
    assert build(handlers={"b": "c"}).graph_version != build().graph_version


def test_route_target_set_matters() -> None:
    """§8.210: a route gaining a target changes the version."""
    one = build(edges=(("b", "c"),), routes={"a": ["b"]})
    two = build(edges=(("b", "c"),), routes={"a": ["b", "c"]})
    assert one.graph_version != two.graph_version


def test_static_edge_differs_from_single_target_route() -> None:
    """§8.218: static a->b and conditional a?{b} differ."""
    static = build(vertices=("a", "b"), edges=(("a", "b"),), finish="b")
    route = build(vertices=("a", "b"), edges=(), routes={"a": ["b"]}, finish="b")
    assert static.graph_version != route.graph_version


def test_edge_direction_matters() -> None:
    """§8.219: a->b versus b->a (everything else equal) differ."""
    forward = build(vertices=("a", "b"), edges=(("a", "b"), ("b", "b")), finish="b")
    backward = build(vertices=("a", "b"), edges=(("b", "a"), ("a", "b")), finish="b")
    also = build(vertices=("a", "b"), edges=(("a", "b"), ("a", "a")), finish="b")
    assert len({forward.graph_version, backward.graph_version, also.graph_version}) == 3


def test_entry_and_finish_roles_matter() -> None:
    """§8.215: a different entry (same topology, same finish) or swapped roles differ."""
    cycle = (("a", "b"), ("b", "a"), ("a", "c"), ("b", "c"))
    from_a = build(edges=cycle, entry="a", finish="c")
    from_b = build(edges=cycle, entry="b", finish="c")
    assert from_a.graph_version != from_b.graph_version
    one = build(vertices=("a", "b"), edges=(("a", "b"), ("b", "a")), entry="a", finish="b")
    two = build(vertices=("a", "b"), edges=(("a", "b"), ("b", "a")), entry="b", finish="a")
    assert one.graph_version != two.graph_version


# -- §8.212-214 what does not change it ------------------------------------------------------


def test_closures_do_not_change_the_version() -> None:
    """§8.212: different tasks, selectors, reducers and picks with one topology: same."""
    graph: flow.Graph[Any] = flow.Graph("g")
    graph.add_vertex("a", other, select=lambda s: 1, reduce=lambda s, o: None)
    graph.add_vertex("b", other, on_error=flow.ErrorRoute("c", record=lambda s, e: None))
    graph.add_vertex("c", other)
    graph.add_edge("a", "b")
    graph.add_route("b", targets=["c"], pick=lambda s: "c")
    fancy = graph.compile(entry="a", finish="c")
    plain = build(edges=(("a", "b"),), routes={"b": ["c"]}, handlers={"b": "c"})
    assert fancy.graph_version == plain.graph_version


def test_user_version_only_changes_the_suffix() -> None:
    """§8.213: versions "0", "1", "2" are distinct, share the hash, end in their suffix."""
    runners = [build(version=v) for v in ("0", "1", "2")]
    assert len({r.graph_version for r in runners}) == 3
    assert len({prefix(r) for r in runners}) == 1
    assert [r.graph_version.split(":")[1] for r in runners] == ["0", "1", "2"]


def test_declaration_order_is_irrelevant() -> None:
    """§8.214: reversed vertex, edge and route-target declaration order: same version."""
    forward = build(
        vertices=("a", "b", "c", "d"),
        edges=(("a", "b"), ("a", "c"), ("b", "d")),
        routes={"c": ["d", "a"]},
        handlers={"a": "d", "b": "c"},
        finish="d",
    )
    backward = build(
        vertices=("d", "c", "b", "a"),
        edges=(("b", "d"), ("a", "c"), ("a", "b")),
        routes={"c": ["a", "d"]},
        handlers={"b": "c", "a": "d"},
        finish="d",
    )
    assert forward.graph_version == backward.graph_version
