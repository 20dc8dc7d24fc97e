"""Whether a definition's graph has a loop, for progress displays.

A run of a graph with a loop (a route or edge back to a vertex already passed) visits
vertices more than once, so "completed vertices out of the total" stops at ``7/7`` long
before the run ends: displays then show steps and revisions instead of that fraction.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the engine is imported by the functions that look into a graph
    from .. import flow
    from ..workflows import Catalog

__all__ = ["definition_loops", "entries_loop", "graph_loops"]


def graph_loops(graph: flow.CompiledGraph) -> bool:
    """Whether edges, routes and error routes can lead back to a vertex already visited."""
    targets: dict[str, set[str]] = {name: set() for name in graph.vertices}
    for source, ends in graph.edges.items():
        targets[source].update(ends)
    for source, route in graph.routes.items():
        targets[source].update(route.targets)
    for name, vertex in graph.vertices.items():
        if vertex.on_error is not None:
            targets[name].add(vertex.on_error.handler)
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    for start in graph.vertices:
        if start in state:
            continue
        stack = [(start, iter(sorted(targets[start])))]
        state[start] = 1
        while stack:
            node, children = stack[-1]
            child = next(children, None)
            if child is None:
                state[node] = 2
                stack.pop()
            elif state.get(child) == 1:
                return True
            elif child not in state:
                state[child] = 1
                stack.append((child, iter(sorted(targets[child]))))
    return False


def definition_loops(catalog: Catalog, name: str, version: str) -> bool | None:
    """Whether the definition's graph has a loop; ``None`` if the catalog does not know
    the definition or it is not a graph the CLI can look into."""
    from .. import flow

    try:
        definition = catalog.resolve(name, version)
    except Exception:
        return None
    runner = getattr(definition, "runner", None)
    return graph_loops(runner.graph) if isinstance(runner, flow.Runner) else None


def entries_loop(entries: Iterable[Mapping[str, Any]]) -> bool:
    """Whether history entries show a vertex completing twice (a loop, seen in the data)."""
    seen: set[str] = set()
    for entry in entries:
        if entry.get("kind") == "vertex_completed" and entry.get("vertex_id"):
            vertex = str(entry["vertex_id"])
            if vertex in seen:
                return True
            seen.add(vertex)
    return False
