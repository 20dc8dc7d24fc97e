"""What the Drafts pages show: the session's drafts (`DraftService`), read-only.

A draft may be invalid (that is what drafts are for), so its picture is drawn from the
document as it is, not from a compiled definition: every node that is a JSON object
becomes a vertex, and every ``next``, ``branches`` entry (edges) and switch ``cases`` /
``default`` (routes) naming another node becomes an arrow; references to nothing are left
out (a diagnostic names them). A vertex some diagnostic points into is ``failed``; a box
shows at most `MAX_LABEL_CHARS` characters of its label.
Documents with more than `MAX_DRAWN_NODES` nodes are not drawn.

A diagnostic's next actions are shown as the concrete tool calls a model would make:
the tool's name and its arguments as JSON. Nothing here writes, starts a process or opens
a connection.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from ..deploy.artifacts.limits import MAX_NODES
from ..deploy.drafts.errors import DraftNotFoundError
from ..deploy.drafts.record import Draft
from ..deploy.drafts.service import DraftService
from ..workflows.authoring.metadata import NAME_PATTERN
from .graph import GraphShape, Picture, layout

__all__ = [
    "MAX_DRAWN_NODES",
    "MAX_LABEL_CHARS",
    "DraftDetail",
    "DraftRow",
    "NextAction",
    "Shown",
    "draft_detail",
    "draft_rows",
    "draft_shape",
]

MAX_DRAWN_NODES: Final = MAX_NODES  # a valid artifact has at most this many
MAX_LABEL_CHARS: Final = 64  # a valid artifact's labels are at most 64 bytes


@dataclass(frozen=True)
class DraftRow:
    name: str
    revision: int
    valid: bool
    issues: int
    origin: str
    updated_at: str


@dataclass(frozen=True)
class NextAction:
    """One next action: ``tool`` called with ``arguments`` (compact JSON text)."""

    tool: str
    arguments: str

    @property
    def call(self) -> str:
        return f"{self.tool} {self.arguments}"


@dataclass(frozen=True)
class Shown:
    """One diagnostic as the page shows it."""

    place: str
    pointer: str
    code: str
    message: str
    hint: str
    next_actions: tuple[NextAction, ...]


@dataclass(frozen=True)
class DraftDetail:
    row: DraftRow
    digest: str | None
    truncated: bool
    bindings: tuple[tuple[str, str], ...]
    origin: dict[str, Any]
    created_at: str
    diagnostics: tuple[Shown, ...]
    picture: Picture | None
    undrawn: str  # why there is no picture ("" when there is one)
    failed: frozenset[str]  # vertices a diagnostic points into
    document: Any


def _origin(origin: Mapping[str, Any]) -> str:
    kind = str(origin.get("kind", ""))
    if kind == "capability":
        return f"capability {origin.get('source')}/{origin.get('tool')}"
    if kind == "artifact":
        return f"artifact {origin.get('artifact')}, version {origin.get('version')}"
    return kind or "unknown"


def _row(draft: Draft) -> DraftRow:
    return DraftRow(
        draft.name,
        draft.revision,
        draft.valid,
        len(draft.diagnostics),
        _origin(draft.origin),
        draft.updated_at,
    )


async def draft_rows(service: DraftService) -> list[DraftRow]:
    """The session's drafts, by name."""
    return [_row(draft) for draft in await service.store.list(service.deploy.session.session_id)]


def _action(item: Any) -> NextAction | None:
    if not isinstance(item, Mapping) or not isinstance(item.get("tool"), str):
        return None
    arguments = item.get("arguments", {})
    return NextAction(item["tool"], json.dumps(arguments, ensure_ascii=False, sort_keys=True))


def _shown(item: Mapping[str, Any]) -> Shown:
    actions = item.get("next_actions")
    found = [_action(a) for a in actions] if isinstance(actions, list) else []
    return Shown(
        str(item.get("place", "")),
        str(item.get("pointer", "")),
        str(item.get("code", "")),
        str(item.get("message", "")),
        str(item.get("hint", "")),
        tuple(action for action in found if action is not None),
    )


def _clip(label: str) -> str:
    # an invalid draft's label (or node id) may be any length: a box stays readable
    return label if len(label) <= MAX_LABEL_CHARS else label[: MAX_LABEL_CHARS - 1] + "…"


def draft_shape(document: Any) -> GraphShape | None:
    """The picture's shape of ``document`` as it is (see the module); None when it has no
    node to draw or more than `MAX_DRAWN_NODES`."""
    nodes = document.get("nodes") if isinstance(document, Mapping) else None
    if not isinstance(nodes, Mapping) or not 0 < len(nodes) <= MAX_DRAWN_NODES:
        return None
    drawn = {
        str(node_id): node
        for node_id, node in nodes.items()
        if isinstance(node, Mapping) and isinstance(node_id, str)
    }
    if not drawn:
        return None
    vertices = tuple(
        (
            node_id,
            _clip(label if isinstance(label := node.get("label"), str) and label else node_id),
        )
        for node_id, node in drawn.items()
    )
    edges: list[tuple[str, str]] = []
    routes: list[tuple[str, str]] = []
    for node_id, node in drawn.items():
        if isinstance(node.get("next"), str):
            edges.append((node_id, node["next"]))
        branches = node.get("branches")
        for branch in branches if isinstance(branches, list) else []:
            if isinstance(branch, str):
                edges.append((node_id, branch))
        cases = node.get("cases")
        for case in cases if isinstance(cases, list) else []:
            if isinstance(case, Mapping) and isinstance(case.get("next"), str):
                routes.append((node_id, case["next"]))
        if isinstance(node.get("default"), str):
            routes.append((node_id, node["default"]))
    start = document.get("start") if isinstance(document, Mapping) else None
    entry = start if isinstance(start, str) and start in drawn else vertices[0][0]
    finish = next(
        (node_id for node_id, node in drawn.items() if node.get("kind") == "end"),
        "",
    )
    return GraphShape(
        vertices,
        tuple(pair for pair in edges if pair[1] in drawn),
        tuple(pair for pair in routes if pair[1] in drawn),
        entry,
        finish,
    )


@functools.lru_cache(maxsize=64)
def _placed(shape: GraphShape) -> Picture:
    # a draft changes with every edit, but the page is read again and again between edits
    return layout(shape)


def _failed(diagnostics: tuple[Shown, ...], shape: GraphShape | None) -> frozenset[str]:
    if shape is None:
        return frozenset()
    ids = {node_id for node_id, _ in shape.vertices}
    marked = set()
    for shown in diagnostics:
        parts = shown.pointer.split("/")
        if len(parts) >= 3 and parts[1] == "nodes":
            node_id = parts[2].replace("~1", "/").replace("~0", "~")
            if node_id in ids:
                marked.add(node_id)
    return frozenset(marked)


async def draft_detail(service: DraftService, name: str) -> DraftDetail:
    """One draft of the session; `DraftNotFoundError` for an unknown name and for one
    that is not a draft name at all."""
    if not NAME_PATTERN.fullmatch(name):
        raise DraftNotFoundError(name)
    draft = await service.store.get(service.deploy.session.session_id, name)
    diagnostics = tuple(_shown(item) for item in draft.diagnostics)
    shape = draft_shape(draft.document)
    undrawn = ""
    if shape is None:
        undrawn = "The draft has no nodes to draw yet."
        nodes = draft.document.get("nodes") if isinstance(draft.document, Mapping) else None
        if isinstance(nodes, Mapping) and len(nodes) > MAX_DRAWN_NODES:
            undrawn = (
                f"The draft has {len(nodes)} nodes: more than {MAX_DRAWN_NODES} are not drawn."
            )
    return DraftDetail(
        _row(draft),
        draft.digest,
        draft.truncated,
        tuple(sorted(draft.bindings.items())),
        dict(draft.origin),
        draft.created_at,
        diagnostics,
        None if shape is None else _placed(shape),
        undrawn,
        _failed(diagnostics, shape),
        draft.document,
    )
