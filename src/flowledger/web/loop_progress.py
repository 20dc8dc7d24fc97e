"""Progress for a graph with a loop (a route or edge back to a vertex already passed).

The activity journal counts vertex completions, so a run that goes round a loop reaches
"7/7" long before it ends: the research agent, paused for approval after one revision,
has completed plan, both searches, draft, critique, draft and critique again. For such a
graph the run page counts the vertices its picture shows done instead (each once), and
the runs list, which reads no picture states, shows no fraction (the CLI shows steps
there for the same reason, `cli/loops.py`).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping

from ..flow.graph import has_loop
from .graph import GraphShape

__all__ = ["loops", "vertices_done"]


def loops(shape: GraphShape) -> bool:
    """Whether the shape's edges and routes lead back to a vertex already passed."""
    return has_loop((name for name, _label in shape.vertices), shape.successors)


def vertices_done(
    shape: GraphShape, states: Mapping[str, str], inherited: Collection[str]
) -> tuple[int, int]:
    """(vertices shown done, vertices) over a run's own steps (a fork's inherited
    vertices are neither counted nor in the total)."""
    own = [name for name, _label in shape.vertices if name not in inherited]
    return sum(1 for name in own if states.get(name) == "done"), max(1, len(own))
