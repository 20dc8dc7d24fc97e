"""A definition's graph as an SVG picture: vertices with labels, edges, routes, entry and
finish, each vertex carrying its state in a run (``data-state``, coloured by the CSS).

The layout is grandalf's layered (Sugiyama) layout: vertices in layers along the flow,
crossings reduced, back edges (loops through routes) drawn through dummy vertices. It is
pure Python, so the dashboard needs no system package; Graphviz would draw somewhat
nicer curves but brings a C library and a binding to install. Edges are straight
polylines through grandalf's points, ending on the boundary of the target box; two
opposite edges between the same vertices (a draft and its critique) would lie on one line
and read as one double-headed arrow, so each moves a little to its own right.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from grandalf.graphs import Edge, Graph, Vertex
from grandalf.layouts import SugiyamaLayout
from grandalf.routing import EdgeViewer, route_with_lines
from markupsafe import Markup, escape

from ..deploy.runs.compile import FINISH
from ..workflows import Definition

__all__ = ["MARKS", "GraphShape", "Picture", "graph_shape", "layout", "render_svg"]

_CHAR_WIDTH: Final = 7.4  # px per label character at the picture's 13px font
_BOX_HEIGHT: Final = 34.0
_MIN_WIDTH: Final = 84.0
_PADDING: Final = 24.0
_MARGIN: Final = 16.0
_LOOP: Final = 30.0  # how far a vertex's loop to itself reaches beyond its right side
_APART: Final = 5.0  # how far each of two opposite edges moves to its right, off their shared line


@dataclass(frozen=True)
class GraphShape:
    """What a picture shows: vertex ids and labels (declaration order), static edges,
    route targets, entry and finish."""

    vertices: tuple[tuple[str, str], ...]
    edges: tuple[tuple[str, str], ...]
    routes: tuple[tuple[str, str], ...]
    entry: str
    finish: str  # "" when the finish is hidden (a deployed graph's synthetic one)

    def successors(self, vertex: str) -> list[str]:
        return [b for a, b in (*self.edges, *self.routes) if a == vertex]


def graph_shape(definition: Definition) -> GraphShape | None:
    """The shape of ``definition``'s flow graph, or None when it has no flow runner."""
    runner = getattr(definition, "runner", None)
    graph: Any = getattr(runner, "graph", None)
    if graph is None:
        return None
    labels = {item.id: item.label for item in definition.metadata().vertices if item.id}
    # a deployed graph's synthetic finish vertex is plumbing, not a step anyone wrote
    hidden = {FINISH} if graph.finish == FINISH else set()
    vertices = tuple(
        (name, labels.get(name, name)) for name in graph.vertices if name not in hidden
    )
    edges = tuple(
        (a, b) for a, targets in graph.edges.items() for b in targets if {a, b}.isdisjoint(hidden)
    )
    routes = tuple(
        (a, b)
        for a, route in graph.routes.items()
        for b in route.targets
        if {a, b}.isdisjoint(hidden)
    )
    finish = "" if hidden else str(graph.finish)
    return GraphShape(vertices, edges, routes, str(graph.entry), finish)


class _View:
    """What grandalf reads (w, h) and writes (xy: the centre) for one vertex."""

    def __init__(self, w: float, h: float) -> None:
        self.w = w
        self.h = h
        self.xy: tuple[float, float] = (0.0, 0.0)


@dataclass(frozen=True)
class PlacedVertex:
    id: str
    label: str
    x: float  # centre
    y: float
    w: float
    h: float


@dataclass(frozen=True)
class PlacedEdge:
    source: str
    target: str
    points: tuple[tuple[float, float], ...]
    route: bool


@dataclass(frozen=True)
class Picture:
    shape: GraphShape
    vertices: tuple[PlacedVertex, ...]
    edges: tuple[PlacedEdge, ...]
    width: float
    height: float


def layout(shape: GraphShape) -> Picture:
    """Place ``shape`` with grandalf (top to bottom, entry first)."""
    nodes: dict[str, Vertex] = {}
    for name, label in shape.vertices:
        node = Vertex(name)
        node.view = _View(max(_MIN_WIDTH, len(label) * _CHAR_WIDTH + _PADDING), _BOX_HEIGHT)
        nodes[name] = node
    wires: list[tuple[Edge, bool]] = []
    seen: set[tuple[str, str]] = set()
    for pairs, route in ((shape.edges, False), (shape.routes, True)):
        for a, b in pairs:
            if (a, b) in seen or a == b:
                continue
            seen.add((a, b))
            edge = Edge(nodes[a], nodes[b])
            edge.view = EdgeViewer()
            wires.append((edge, route))
    graph = Graph(list(nodes.values()), [edge for edge, _ in wires])
    for core in graph.C:
        sugiyama = SugiyamaLayout(core)
        sugiyama.xspace = 28
        sugiyama.yspace = 36
        sugiyama.route_edge = route_with_lines
        roots = [nodes[shape.entry]] if nodes[shape.entry] in core.sV else None
        sugiyama.init_all(roots=roots)
        sugiyama.draw()
    placed = [
        PlacedVertex(
            name,
            label,
            float(nodes[name].view.xy[0]),
            float(nodes[name].view.xy[1]),
            nodes[name].view.w,
            nodes[name].view.h,
        )
        for name, label in shape.vertices
    ]
    lines = [
        PlacedEdge(
            str(edge.v[0].data),
            str(edge.v[1].data),
            tuple((float(x), float(y)) for x, y in edge.view._pts),
            route,
        )
        for edge, route in wires
    ]
    # Components are laid out independently around the origin: put them side by side.
    offsets = _component_offsets(graph, nodes)
    placed = [PlacedVertex(v.id, v.label, v.x + offsets[v.id], v.y, v.w, v.h) for v in placed]
    lines = [
        PlacedEdge(
            e.source, e.target, tuple((x + offsets[e.source], y) for x, y in e.points), e.route
        )
        for e in lines
    ]
    xs = [v.x - v.w / 2 for v in placed] + [p[0] for e in lines for p in e.points]
    ys = [v.y - v.h / 2 for v in placed] + [p[1] for e in lines for p in e.points]
    left, top = min(xs, default=0.0) - _MARGIN, min(ys, default=0.0) - _MARGIN
    right = max([v.x + v.w / 2 for v in placed] + [p[0] for e in lines for p in e.points]) + _MARGIN
    bottom = (
        max([v.y + v.h / 2 for v in placed] + [p[1] for e in lines for p in e.points]) + _MARGIN
    )
    if any(a == b for a, b in (*shape.edges, *shape.routes)):
        right += _LOOP  # room for the loops drawn beside their vertex
    placed = [PlacedVertex(v.id, v.label, v.x - left, v.y - top, v.w, v.h) for v in placed]
    lines = [
        PlacedEdge(e.source, e.target, tuple((x - left, y - top) for x, y in e.points), e.route)
        for e in lines
    ]
    return Picture(shape, tuple(placed), tuple(lines), right - left, bottom - top)


def _component_offsets(graph: Graph, nodes: Mapping[str, Vertex]) -> dict[str, float]:
    offsets: dict[str, float] = {}
    cursor = 0.0
    for core in graph.C:
        members = [v for v in core.sV]
        left = min(v.view.xy[0] - v.view.w / 2 for v in members)
        right = max(v.view.xy[0] + v.view.w / 2 for v in members)
        for v in members:
            offsets[str(v.data)] = cursor - left
        cursor += right - left + 40
    return {name: offsets.get(name, 0.0) for name in nodes}


def _end_on_box(
    start: tuple[float, float], end: tuple[float, float], box: PlacedVertex
) -> tuple[float, float]:
    """Where the segment from ``start`` towards the centre ``end`` of ``box`` enters it."""
    dx, dy = end[0] - start[0], end[1] - start[1]
    if dx == 0 and dy == 0:
        return end
    scales = []
    if dx:
        scales.append((box.w / 2) / abs(dx))
    if dy:
        scales.append((box.h / 2) / abs(dy))
    t = min(scales)
    return (end[0] - dx * t, end[1] - dy * t)


def _to_the_right(points: list[tuple[float, float]], shift: float) -> list[tuple[float, float]]:
    """``points`` moved ``shift`` px to the right of their overall direction of travel, so
    the reverse edge, moved to its own right, runs beside it rather than on it."""
    (x0, y0), (x1, y1) = points[0], points[-1]
    length = math.hypot(x1 - x0, y1 - y0)
    if not length:
        return points
    # right of travel in SVG's y-down coordinates: the direction turned a quarter clockwise
    dx, dy = -(y1 - y0) / length * shift, (x1 - x0) / length * shift
    return [(x + dx, y + dy) for x, y in points]


def _fmt(value: float) -> str:
    return f"{value:.1f}".rstrip("0").rstrip(".")


MARKS: Final = {
    "running": "▶",
    "done": "✓",
    "paused": "‖",
    "failed": "✗",
    "cancelled": "■",
    "not_reached": "",
}
"""Each vertex state's sign in the picture and its legend (static/app.js has the same)."""


def render_svg(picture: Picture, states: Mapping[str, str], *, title: str) -> Markup:
    """The picture as inline SVG; ``states`` maps vertex ids to their state in a run
    (absent: ``not_reached``)."""
    boxes = {v.id: v for v in picture.vertices}
    pairs = {(edge.source, edge.target) for edge in picture.edges}
    out: list[str] = [
        f'<svg class="graph" xmlns="http://www.w3.org/2000/svg" role="img" '
        f'viewBox="0 0 {_fmt(picture.width)} {_fmt(picture.height)}" '
        f'width="{_fmt(picture.width)}" height="{_fmt(picture.height)}" '
        f'aria-label="{escape(title)}">',
        '<defs><marker id="arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" '
        'markerHeight="7" orient="auto-start-reverse"><path d="M0,0L10,5L0,10z" '
        'class="arrowhead"/></marker></defs>',
    ]
    for edge in picture.edges:
        source, target = boxes[edge.source], boxes[edge.target]
        points = [(source.x, source.y), *edge.points[1:-1], (target.x, target.y)]
        if len(edge.points) >= 2:
            points = list(edge.points)
        points[-1] = _end_on_box(points[-2], (target.x, target.y), target)
        if (edge.target, edge.source) in pairs:
            points = _to_the_right(points, _APART)
        path = " ".join(f"{_fmt(x)},{_fmt(y)}" for x, y in points)
        kind = "route" if edge.route else "edge"
        out.append(
            f'<polyline class="{kind}" data-source="{escape(edge.source)}" '
            f'data-target="{escape(edge.target)}" points="{path}" marker-end="url(#arrow)"/>'
        )
    loops = {
        (a, route)
        for pairs, route in ((picture.shape.edges, False), (picture.shape.routes, True))
        for a, b in pairs
        if a == b
    }
    for name, route in sorted(loops):
        box = boxes[name]
        edge_x, top, bottom = box.x + box.w / 2, box.y - box.h / 4, box.y + box.h / 4
        kind = "route" if route else "edge"
        out.append(
            f'<path class="{kind}" data-source="{escape(name)}" data-target="{escape(name)}" '
            f'd="M{_fmt(edge_x)},{_fmt(top)} C{_fmt(edge_x + _LOOP)},{_fmt(top - 10)} '
            f'{_fmt(edge_x + _LOOP)},{_fmt(bottom + 10)} {_fmt(edge_x)},{_fmt(bottom)}" '
            'marker-end="url(#arrow)"/>'
        )
    for vertex in picture.vertices:
        state = states.get(vertex.id, "not_reached")
        roles = [
            role
            for role, name in (("entry", picture.shape.entry), ("finish", picture.shape.finish))
            if name == vertex.id
        ]
        role_attr = f' data-role="{" ".join(roles)}"' if roles else ""
        x, y = vertex.x - vertex.w / 2, vertex.y - vertex.h / 2
        out.append(
            f'<g class="vertex" data-vertex="{escape(vertex.id)}" data-state="{escape(state)}"'
            f"{role_attr}>"
            f"<title>{escape(vertex.id)}: {escape(state.replace('_', ' '))}</title>"
            f'<rect x="{_fmt(x)}" y="{_fmt(y)}" width="{_fmt(vertex.w)}" '
            f'height="{_fmt(vertex.h)}" rx="7"/>'
            f'<text x="{_fmt(vertex.x)}" y="{_fmt(vertex.y)}" dominant-baseline="central" '
            f'text-anchor="middle">{escape(vertex.label)}</text>'
            # the state as a sign too, not by colour alone (the page script keeps it live)
            f'<text class="mark" x="{_fmt(x + vertex.w - 4)}" y="{_fmt(y + 2)}" '
            f'text-anchor="end" dominant-baseline="hanging">{MARKS.get(state, "")}</text></g>'
        )
    out.append("</svg>")
    return Markup("".join(out))
