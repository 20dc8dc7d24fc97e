"""Focused edits: what a model gets right more often than raw JSON Pointers. Each reads
the draft's current document and answers the RFC 6902 patch that makes the edit; the
store applies that patch like any other (`DraftStore.patch`), and the tool answers it.

* `add_tool_operations`: a ``tool`` node calling a capability. Its arguments are
  pre-mapped: each property of the tool's input schema named like a state field reads
  ``${ state.<field> }``, else like an input property ``${ input.<property> }``; the
  others are left out (and listed as ``unmapped``). The dependency is declared (or the
  tool added to it). It is inserted after ``after`` (which then continues to it), or at
  the start; it continues where ``after`` (or the start) did, unless ``next`` says.
* `connect_operations`: ``from`` continues to ``to``: its ``next`` (tool, set,
  interrupt, workflow); a switch gets a case (``when``) or its ``default``; a parallel
  gets a branch.
* `set_output_operations`: an ``end`` node's ``output`` (and optionally its ``outcome``,
  and the workflow's ``output_schema``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from flowledger.flow.ids import VERTEX_ID

from ..sources.tool_info import ToolInfo
from .errors import EditInvalidError
from .skeleton import input_reference

__all__ = [
    "CONTINUING",
    "ToolStep",
    "add_tool_operations",
    "connect_operations",
    "set_output_operations",
]

#: The kinds of node that continue at one ``next``.
CONTINUING: Final = frozenset({"tool", "set", "interrupt", "wait", "workflow", "foreach"})


def _escape(segment: str) -> str:
    return segment.replace("~", "~0").replace("/", "~1")


def _nodes(edit: str, document: Any) -> dict[str, Any]:
    if not isinstance(document, dict) or not isinstance(document.get("nodes"), dict):
        raise EditInvalidError(edit, "the document has no `nodes` object to edit (patch it first)")
    nodes: dict[str, Any] = document["nodes"]
    return nodes


def _node(edit: str, nodes: Mapping[str, Any], node: str, role: str) -> dict[str, Any]:
    found = nodes.get(node)
    if not isinstance(found, dict):
        known = ", ".join(sorted(nodes)[:20]) or "none"
        raise EditInvalidError(edit, f"{role} node {node!r} is not in the draft (nodes: {known})")
    return found


def _check_id(edit: str, what: str, value: str) -> None:
    if not isinstance(value, str) or not VERTEX_ID.fullmatch(value):
        raise EditInvalidError(edit, f"{what} {str(value)[:80]!r} must match ^{VERTEX_ID.pattern}$")


@dataclass(frozen=True, slots=True)
class ToolStep:
    """The patch of `add_tool_operations`, and the required arguments it could not map."""

    operations: list[dict[str, Any]]
    unmapped: list[str]


def _properties(schema: Any) -> Mapping[str, Any]:
    if isinstance(schema, Mapping) and isinstance(schema.get("properties"), Mapping):
        found: Mapping[str, Any] = schema["properties"]
        return found
    return {}


def add_tool_operations(
    document: Any,
    *,
    node: str,
    dependency: str,
    tool: ToolInfo,
    after: str | None = None,
    next: str | None = None,
    assign: Mapping[str, Any] | None = None,
) -> ToolStep:
    edit = "draft_add_tool"
    nodes = _nodes(edit, document)
    _check_id(edit, "node", node)
    _check_id(edit, "dependency", dependency)
    if node in nodes:
        raise EditInvalidError(edit, f"node {node!r} already exists: choose another id")
    operations: list[dict[str, Any]] = []
    if after is None:
        continuing = document.get("start") if next is None else next
        operations.append({"op": "add", "path": "/start", "value": node})
    else:
        before = _node(edit, nodes, after, "after")
        if before.get("kind") not in CONTINUING:
            raise EditInvalidError(
                edit,
                f"node {after!r} is a {before.get('kind')!r} node, which has no single `next`: "
                "add the step without `after`, then route to it with draft_connect",
            )
        continuing = before.get("next") if next is None else next
        operations.append({"op": "add", "path": f"/nodes/{_escape(after)}/next", "value": node})
    if not isinstance(continuing, str) or continuing not in nodes:
        raise EditInvalidError(
            edit, f"the step would continue to {continuing!r}, which is no node: give `next`"
        )
    state = document.get("state") if isinstance(document.get("state"), dict) else {}
    inputs = _properties(document.get("input_schema"))
    arguments: dict[str, Any] = {}
    for field in _properties(tool.input_schema):
        reference = None
        if field in state:
            reference = input_reference("state", field)
        elif field in inputs:
            reference = input_reference("input", field)
        if reference is not None:
            arguments[field] = reference
    required = tool.input_schema.get("required", [])
    unmapped = [
        name
        for name in (required if isinstance(required, list) else [])
        if isinstance(name, str) and name not in arguments
    ]
    body: dict[str, Any] = {
        "kind": "tool",
        "dependency": dependency,
        "tool": tool.name,
        "arguments": arguments,
        "next": continuing,
    }
    if assign:
        body["assign"] = dict(assign)
    operations.append({"op": "add", "path": f"/nodes/{_escape(node)}", "value": body})
    dependencies = document.get("dependencies")
    if not isinstance(dependencies, dict):
        operations.append(
            {"op": "add", "path": "/dependencies", "value": {dependency: {"tools": [tool.name]}}}
        )
    elif not isinstance(dependencies.get(dependency), dict) or not isinstance(
        dependencies[dependency].get("tools"), list
    ):
        operations.append(
            {"op": "add", "path": f"/dependencies/{dependency}", "value": {"tools": [tool.name]}}
        )
    elif tool.name not in dependencies[dependency]["tools"]:
        operations.append(
            {"op": "add", "path": f"/dependencies/{dependency}/tools/-", "value": tool.name}
        )
    return ToolStep(operations, unmapped)


def connect_operations(
    document: Any, *, source: str, target: str, when: str | None = None
) -> list[dict[str, Any]]:
    edit = "draft_connect"
    nodes = _nodes(edit, document)
    origin = _node(edit, nodes, source, "from")
    _node(edit, nodes, target, "to")
    kind = origin.get("kind")
    base = f"/nodes/{_escape(source)}"
    if kind == "switch":
        if when is None:
            return [{"op": "add", "path": f"{base}/default", "value": target}]
        if not isinstance(origin.get("cases"), list):
            return [
                {"op": "add", "path": f"{base}/cases", "value": [{"when": when, "next": target}]}
            ]
        return [{"op": "add", "path": f"{base}/cases/-", "value": {"when": when, "next": target}}]
    if when is not None:
        raise EditInvalidError(edit, f"`when` routes a switch; {source!r} is a {kind!r} node")
    if kind in CONTINUING:
        return [{"op": "add", "path": f"{base}/next", "value": target}]
    if kind == "parallel":
        branches = origin.get("branches")
        if not isinstance(branches, list):
            return [{"op": "add", "path": f"{base}/branches", "value": [target]}]
        if target in branches:
            raise EditInvalidError(edit, f"{target!r} is already a branch of {source!r}")
        return [{"op": "add", "path": f"{base}/branches/-", "value": target}]
    raise EditInvalidError(edit, f"a {kind!r} node continues nowhere: connect from another node")


def set_output_operations(
    document: Any,
    *,
    output: Any,
    node: str | None = None,
    outcome: str | None = None,
    output_schema: Any = None,
) -> list[dict[str, Any]]:
    edit = "draft_set_output"
    nodes = _nodes(edit, document)
    ends = sorted(
        key
        for key, value in nodes.items()
        if isinstance(value, dict) and value.get("kind") == "end"
    )
    if node is None:
        if len(ends) != 1:
            raise EditInvalidError(
                edit,
                f"the draft has {len(ends)} end nodes ({', '.join(ends[:20]) or 'none'}): "
                "name one with `node`",
            )
        node = ends[0]
    elif node not in ends:
        _node(edit, nodes, node, "end")
        raise EditInvalidError(
            edit, f"node {node!r} is not an `end` node (ends: {', '.join(ends[:20]) or 'none'})"
        )
    base = f"/nodes/{_escape(node)}"
    operations: list[dict[str, Any]] = [{"op": "add", "path": f"{base}/output", "value": output}]
    if outcome is not None:
        _check_id(edit, "outcome", outcome)
        operations.append({"op": "add", "path": f"{base}/outcome", "value": outcome})
    if output_schema is not None:
        operations.append({"op": "add", "path": "/output_schema", "value": output_schema})
    return operations
