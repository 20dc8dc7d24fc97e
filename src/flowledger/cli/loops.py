"""Whether a definition's graph has a loop, for progress displays.

A run of a graph with a loop (a route or edge back to a vertex already passed) visits
vertices more than once, so "completed vertices out of the total" stops at ``7/7`` long
before the run ends: displays then show steps and revisions instead of that fraction.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the engine is imported by the functions that look into a graph
    from ..workflows import Catalog

__all__ = ["definition_loops", "entries_loop"]


def definition_loops(catalog: Catalog, name: str, version: str) -> bool | None:
    """Whether the definition's graph has a loop; ``None`` if the catalog does not know
    the definition or it is not a graph the CLI can look into."""
    from .. import flow

    try:
        definition = catalog.resolve(name, version)
    except Exception:
        return None
    runner = getattr(definition, "runner", None)
    return runner.graph.loops() if isinstance(runner, flow.Runner) else None


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
