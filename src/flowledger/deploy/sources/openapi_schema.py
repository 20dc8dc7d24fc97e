"""Schemas of an OpenAPI document as standalone JSON Schemas (draft 2020-12).

A tool's input and output schemas must stand alone (they are fingerprinted, pinned and
validated without the document), so every ``$ref`` is rewritten: a reference to
``#/components/schemas/NAME`` becomes ``#/$defs/NAME`` with the component copied (and
converted) into the schema's ``$defs``, which keeps recursive schemas finite; any other
local reference is inlined. A reference outside the document is refused
(`UnsupportedSchema`): the tool's contract would depend on a file or URL nobody pinned.

OpenAPI 3.0 schemas are an extended subset of JSON Schema; they are converted:
``nullable: true`` adds ``"null"`` to ``type`` (and ``null`` to an ``enum``), a boolean
``exclusiveMinimum``/``exclusiveMaximum`` becomes the numeric form, ``example`` becomes
``examples`` (an annotation, outside the contract fingerprint), ``xml`` and
``externalDocs`` are dropped. 3.1 schemas are JSON Schema already and are copied, their
references rewritten the same way.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any, Final

__all__ = ["COMPONENT_PREFIX", "SchemaConverter", "UnsupportedSchema", "resolve"]

COMPONENT_PREFIX: Final = "#/components/schemas/"
MAX_DEPTH: Final = 64
MAX_HOPS: Final = 16
_ONE: Final = frozenset(
    {
        "additionalProperties",
        "items",
        "not",
        "if",
        "then",
        "else",
        "contains",
        "propertyNames",
        "unevaluatedProperties",
        "unevaluatedItems",
        "additionalItems",
        "contentSchema",
    }
)
_LIST: Final = frozenset({"allOf", "anyOf", "oneOf", "prefixItems"})
_MAP: Final = frozenset({"properties", "patternProperties", "dependentSchemas", "$defs"})
_DROPPED_30: Final = frozenset({"xml", "externalDocs", "nullable"})


class UnsupportedSchema(ValueError):
    """A schema (or an object it refers to) that cannot become a standalone schema."""


def _unescape(token: str) -> str:
    return token.replace("~1", "/").replace("~0", "~")


def resolve(document: Mapping[str, Any], value: Any) -> Any:
    """``value`` with its local ``$ref`` chain followed (`UnsupportedSchema` for a
    reference outside the document, a dangling one or a loop)."""
    for _ in range(MAX_HOPS):
        if not isinstance(value, Mapping) or "$ref" not in value:
            return value
        ref = value["$ref"]
        if not isinstance(ref, str) or not ref.startswith("#/"):
            raise UnsupportedSchema(f"reference {ref!r} is outside the document")
        found: Any = document
        for token in ref[2:].split("/"):
            if not isinstance(found, Mapping) or _unescape(token) not in found:
                raise UnsupportedSchema(f"reference {ref!r} points at nothing")
            found = found[_unescape(token)]
        value = found
    raise UnsupportedSchema("a chain of references is too long or loops")


class SchemaConverter:
    """Converts the schemas of one document (``openapi`` version ``3.0`` or ``3.1``);
    `standalone` gives a schema with the components it uses under ``$defs``."""

    def __init__(self, document: Mapping[str, Any]) -> None:
        self._document = document
        self._legacy = str(document.get("openapi", "")).startswith("3.0")

    def standalone(self, schema: Any) -> dict[str, Any]:
        """``schema`` as a standalone JSON Schema object."""
        needed: list[str] = []
        converted = self._convert(schema, needed, 0)
        defs: dict[str, Any] = {}
        index = 0
        while index < len(needed):
            name = needed[index]
            index += 1
            if name in defs:
                continue
            components = self._document.get("components") or {}
            schemas = components.get("schemas") or {}
            if name not in schemas:
                raise UnsupportedSchema(f"component schema {name!r} does not exist")
            defs[name] = self._convert(schemas[name], needed, 0)
        top: dict[str, Any] = (
            converted if isinstance(converted, dict) else {} if converted else {"not": {}}
        )
        ref = top.get("$ref")
        if isinstance(ref, str) and len(top) == 1 and ref.startswith("#/$defs/"):
            # the schema is one component: show it, so its type is visible at the top
            shown = defs[_unescape(ref[len("#/$defs/") :])]
            if isinstance(shown, dict):
                top = copy.deepcopy(shown)
        if defs:
            top["$defs"] = {**defs, **top.get("$defs", {})}
        return top

    def _convert(self, node: Any, needed: list[str], depth: int) -> Any:
        if depth > MAX_DEPTH:
            raise UnsupportedSchema(f"a schema is nested deeper than {MAX_DEPTH} levels")
        if isinstance(node, bool):
            return node
        if not isinstance(node, Mapping):
            raise UnsupportedSchema("a schema is not an object")
        ref = node.get("$ref")
        if isinstance(ref, str):
            if ref.startswith(COMPONENT_PREFIX) and "/" not in ref[len(COMPONENT_PREFIX) :]:
                name = _unescape(ref[len(COMPONENT_PREFIX) :])
                needed.append(name)
                target: dict[str, Any] = {"$ref": "#/$defs/" + ref[len(COMPONENT_PREFIX) :]}
            else:
                target = self._convert(resolve(self._document, node), needed, depth + 1)
            if self._legacy or len(node) == 1:
                return target  # 3.0: a reference's siblings are ignored
            rest = self._convert({k: v for k, v in node.items() if k != "$ref"}, needed, depth)
            return {"allOf": [target, rest]}
        out: dict[str, Any] = {}
        for key, value in node.items():
            if self._legacy and key in _DROPPED_30:
                continue
            if key in _ONE and not isinstance(value, bool | list):
                out[key] = self._convert(value, needed, depth + 1)
            elif (key in _ONE and isinstance(value, list)) or (
                key in _LIST and isinstance(value, list)
            ):  # draft-4 style tuple items
                out[key] = [self._convert(v, needed, depth + 1) for v in value]
            elif key in _MAP and isinstance(value, Mapping):
                out[key] = {k: self._convert(v, needed, depth + 1) for k, v in value.items()}
            elif key == "example" and "examples" not in node:
                out["examples"] = [copy.deepcopy(value)]
            elif key == "example":
                continue
            else:
                out[key] = copy.deepcopy(value)
        if self._legacy:
            for bound, plain in (("exclusiveMinimum", "minimum"), ("exclusiveMaximum", "maximum")):
                if out.get(bound) is True and plain in out:
                    out[bound] = out.pop(plain)
                elif isinstance(out.get(bound), bool):
                    del out[bound]
            if node.get("nullable") is True:
                kind = out.get("type")
                if isinstance(kind, str):
                    out["type"] = [kind, "null"]
                if isinstance(out.get("enum"), list) and None not in out["enum"]:
                    out["enum"] = [*out["enum"], None]
        return out
