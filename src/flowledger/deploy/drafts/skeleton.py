"""The documents a draft starts from: a minimal valid skeleton, or a one-node workflow
calling a capability (a tool of a registered source, from its last probe).

A capability's input schema becomes the workflow's input, closed (``"additionalProperties":
false`` added to every object schema that says nothing about it: an artifact's schemas are
closed), and every property of it is passed to the tool as ``${ input.<property> }``. The
tool's text result is the workflow's output ``text``. A ``$schema`` naming another draft
than 2020-12 is left out (many servers write draft-07; an artifact's schemas are read as
2020-12, which reads the keywords such input schemas use, ``type``, ``properties``,
``required``, ``enum``, alike).
"""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping
from typing import Any, Final

from ..artifacts.model import ARTIFACT_FORMAT
from ..sources.tool_info import ToolInfo

__all__ = [
    "DRAFT_VERSION",
    "capability_document",
    "closed_schema",
    "identifier",
    "input_reference",
    "skeleton",
]

DRAFT_VERSION: Final = "0.1.0"  # publishing names the version the artifact is saved as
_PLAIN: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_OBJECT_MAPS: Final = ("properties", "patternProperties", "$defs", "definitions")
_SUBSCHEMAS: Final = ("items", "additionalItems", "contains", "not", "if", "then", "else")
_SCHEMA_LISTS: Final = ("allOf", "anyOf", "oneOf", "prefixItems")


def skeleton(name: str) -> dict[str, Any]:
    """The smallest valid artifact named ``name``: no input, one ``end`` node."""
    return {
        "format": ARTIFACT_FORMAT,
        "name": name,
        "version": DRAFT_VERSION,
        "input_schema": {"type": "object", "additionalProperties": False, "properties": {}},
        "output_schema": {"type": "object", "additionalProperties": False, "properties": {}},
        "start": "done",
        "nodes": {"done": {"kind": "end", "outcome": "done"}},
    }


def identifier(text: str, taken: frozenset[str] = frozenset()) -> str:
    """A node, field or dependency id (``^[a-z][a-z0-9_]{0,63}$``) made from ``text``,
    not in ``taken`` (``_2``, ``_3``, ... appended when it is)."""
    base = re.sub(r"[^a-z0-9_]", "_", text.lower()).strip("_") or "step"
    if not base[0].isalpha():
        base = f"t_{base}"
    base = base[:60]
    found, number = base, 2
    while found in taken:
        found = f"{base}_{number}"
        number += 1
    return found


def input_reference(scope: str, field: str) -> str | None:
    """``${ scope.field }`` (quoted when ``field`` is not a plain identifier); ``None``
    for a field no expression can name safely."""
    if _PLAIN.fullmatch(field):
        return f"${{ {scope}.{field} }}"
    if '"' in field or "\\" in field or "}" in field or not field.isprintable():
        return None
    return f'${{ {scope}."{field}" }}'


def closed_schema(schema: Any) -> Any:
    """A copy of ``schema`` with ``"additionalProperties": false`` on every object
    schema that does not say otherwise."""
    schema = copy.deepcopy(schema)
    _close(schema)
    return schema


def _close(schema: Any) -> None:
    if not isinstance(schema, dict):
        return
    kinds = schema.get("type")
    is_object = kinds == "object" or (isinstance(kinds, list) and "object" in kinds)
    if (is_object or "properties" in schema) and "additionalProperties" not in schema:
        schema["additionalProperties"] = False
    for key in _OBJECT_MAPS:
        members = schema.get(key)
        if isinstance(members, dict):
            for member in members.values():
                _close(member)
    for key in _SUBSCHEMAS:
        _close(schema.get(key))
    for key in _SCHEMA_LISTS:
        members = schema.get(key)
        if isinstance(members, list):
            for member in members:
                _close(member)
    if isinstance(schema.get("additionalProperties"), dict):
        _close(schema["additionalProperties"])


_DRAFT_2020_12: Final = "https://json-schema.org/draft/2020-12/schema"


def capability_document(name: str, dependency: str, tool: ToolInfo) -> dict[str, Any]:
    """A workflow ``name`` that calls ``tool`` of ``dependency`` with its own input and
    answers the tool's text (see the module)."""
    input_schema = closed_schema(tool.input_schema)
    if not isinstance(input_schema, dict) or input_schema.get("type") != "object":
        input_schema = {"type": "object", "additionalProperties": False, "properties": {}}
    if input_schema.get("$schema", "").rstrip("#") != _DRAFT_2020_12:
        input_schema.pop("$schema", None)
    properties = input_schema.get("properties")
    arguments: dict[str, Any] = {}
    if isinstance(properties, Mapping):
        for field in properties:
            reference = input_reference("input", field)
            if reference is not None:
                arguments[field] = reference
    node = identifier(tool.name, frozenset({"done"}))
    return {
        "format": ARTIFACT_FORMAT,
        "name": name,
        "version": DRAFT_VERSION,
        "description": (tool.title or tool.name)[:200],
        "input_schema": input_schema,
        "output_schema": {
            "type": "object",
            "additionalProperties": False,
            "required": ["text"],
            "properties": {"text": {"type": ["string", "null"]}},
        },
        "dependencies": {dependency: {"tools": [tool.name]}},
        "state": {"text": {}},
        "start": node,
        "nodes": {
            node: {
                "kind": "tool",
                "dependency": dependency,
                "tool": tool.name,
                "arguments": arguments,
                "assign": {"text": "${ result.text }"},
                "next": "done",
            },
            "done": {"kind": "end", "outcome": "done", "output": {"text": "${ state.text }"}},
        },
    }
