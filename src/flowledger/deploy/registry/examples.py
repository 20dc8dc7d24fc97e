"""`example_arguments`: an example argument object for a tool, made from its input schema.

What ``capability_inspect`` shows a model so that its first ``capability_call`` is well
formed. Deterministic, and bounded whatever the schema (a server's schema is data from
outside): depth, array lengths and string lengths are capped, and ``$ref`` is followed
only inside the schema (``#/...``), never fetched.

Per schema, the first that applies: ``examples`` (its first), ``const``, ``default``,
``enum`` (its first), the first branch of ``anyOf`` / ``oneOf`` that is not ``null``,
the merged branches of ``allOf``; otherwise by ``type`` (the first non-null one):
an object gets its required properties and those optional ones that say their value
(``default``, ``const``, ``enum``, ``examples``); an array one item (none if
``maxItems`` is 0), or its ``prefixItems``; a string a value of its ``format`` (date,
e-mail, URI, UUID, ...) or ``"string"``, stretched or cut to its length bounds; a
number its ``minimum`` (or just above an exclusive one), else 0 within ``maximum``;
booleans ``false``. The result is then validated against the schema: ``valid`` says
whether it passed (a ``pattern`` or a combination of keywords the generator does not
solve can make it fail; ``None`` when the schema itself cannot be used).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

import jsonschema  # type: ignore[import-untyped, unused-ignore]
import jsonschema.validators  # type: ignore[import-untyped, unused-ignore]

__all__ = ["MAX_DEPTH", "Example", "example_arguments"]

MAX_DEPTH: Final = 8
_MAX_STRING: Final = 64
_MAX_ITEMS: Final = 3
_FORMATS: Final = {
    "date-time": "2026-01-01T12:00:00Z",
    "date": "2026-01-01",
    "time": "12:00:00Z",
    "duration": "PT1H",
    "email": "user@example.com",
    "idn-email": "user@example.com",
    "hostname": "example.com",
    "idn-hostname": "example.com",
    "ipv4": "192.0.2.1",
    "ipv6": "2001:db8::1",
    "uri": "https://example.com/",
    "uri-reference": "https://example.com/",
    "iri": "https://example.com/",
    "iri-reference": "https://example.com/",
    "url": "https://example.com/",
    "uuid": "00000000-0000-4000-8000-000000000000",
    "json-pointer": "/example",
    "regex": ".*",
}
_SAYS_ITS_VALUE: Final = ("default", "const", "enum", "examples")


class Example:
    """An example value and whether it validates against the schema it was made from."""

    def __init__(self, value: Any, valid: bool | None) -> None:
        self.value = value
        self.valid = valid

    def to_json(self) -> dict[str, Any]:
        return {"arguments": self.value, "valid": self.valid}


def example_arguments(schema: Mapping[str, Any]) -> Example:
    """An example of ``schema`` (a tool's input schema), and whether it validates."""
    root = dict(schema)
    value = _Maker(root).make(root, 0)
    if not isinstance(value, dict):
        value = {}  # tool arguments are an object, whatever the schema says
    return Example(value, _valid(root, value))


def _valid(schema: dict[str, Any], value: Any) -> bool | None:
    try:
        cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
        cls.check_schema(schema)
        return bool(cls(schema).is_valid(value))
    except Exception:  # an unusable schema (bad keyword values, an unresolvable $ref)
        return None


class _Maker:
    def __init__(self, root: dict[str, Any]) -> None:
        self._root = root

    def _resolve(self, schema: Mapping[str, Any], depth: int) -> Mapping[str, Any]:
        """Follow local ``$ref`` pointers (a bounded number of hops)."""
        hops = 0
        while isinstance(schema.get("$ref"), str) and hops < MAX_DEPTH:
            target = self._pointer(schema["$ref"])
            if target is None:
                return {key: value for key, value in schema.items() if key != "$ref"}
            schema = {**target, **{k: v for k, v in schema.items() if k != "$ref"}}
            hops += 1
        return schema

    def _pointer(self, ref: str) -> Mapping[str, Any] | None:
        if not ref.startswith("#"):
            return None  # never fetched
        node: Any = self._root
        for part in ref[1:].split("/")[1:] if ref != "#" else []:
            part = part.replace("~1", "/").replace("~0", "~")
            if isinstance(node, Mapping) and part in node:
                node = node[part]
            elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
                node = node[int(part)]
            else:
                return None
        return node if isinstance(node, Mapping) else None

    def make(self, schema: Any, depth: int) -> Any:
        if not isinstance(schema, Mapping) or depth > MAX_DEPTH:
            return None if schema is False else {}
        schema = self._resolve(schema, depth)
        examples = schema.get("examples")
        if isinstance(examples, list) and examples:
            return examples[0]
        for keyword in ("const", "default"):
            if keyword in schema:
                return schema[keyword]
        enum = schema.get("enum")
        if isinstance(enum, list) and enum:
            return enum[0]
        for keyword in ("anyOf", "oneOf"):
            branches = schema.get(keyword)
            if isinstance(branches, list) and branches:
                chosen = next(
                    (b for b in branches if not _is_null(self._branch(b, depth))), branches[0]
                )
                return self.make(chosen, depth + 1)
        branches = schema.get("allOf")
        if isinstance(branches, list) and branches:
            merged = _merge(
                [{k: v for k, v in schema.items() if k != "allOf"}]
                + [dict(self._branch(b, depth)) for b in branches]
            )
            return self.make(merged, depth + 1)
        kind = _type(schema)
        if kind == "object":
            return self._object(schema, depth)
        if kind == "array":
            return self._array(schema, depth)
        if kind == "string":
            return _string(schema)
        if kind in ("integer", "number"):
            return _number(schema, kind == "integer")
        if kind == "boolean":
            return False
        if kind == "null":
            return None
        return {} if depth == 0 else None

    def _branch(self, branch: Any, depth: int) -> Mapping[str, Any]:
        return self._resolve(branch, depth) if isinstance(branch, Mapping) else {}

    def _object(self, schema: Mapping[str, Any], depth: int) -> dict[str, Any]:
        properties = schema.get("properties")
        properties = properties if isinstance(properties, Mapping) else {}
        required = schema.get("required")
        required = [r for r in required if isinstance(r, str)] if isinstance(required, list) else []
        made: dict[str, Any] = {}
        for name, sub in properties.items():
            resolved = self._branch(sub, depth)
            if name in required or any(k in resolved for k in _SAYS_ITS_VALUE):
                made[name] = self.make(sub, depth + 1)
        for name in required:
            if name not in made:  # required but not described: any value
                made[name] = "string"
        return made

    def _array(self, schema: Mapping[str, Any], depth: int) -> list[Any]:
        prefix = schema.get("prefixItems")
        if isinstance(prefix, list) and prefix:
            return [self.make(item, depth + 1) for item in prefix[:_MAX_ITEMS]]
        low = _int(schema.get("minItems"), 1)
        high = _int(schema.get("maxItems"), _MAX_ITEMS)
        count = max(0, min(max(low, 1), high, _MAX_ITEMS))
        items = schema.get("items")
        return [self.make(items if isinstance(items, Mapping) else {}, depth + 1)] * count


def _is_null(schema: Mapping[str, Any]) -> bool:
    return schema.get("type") == "null" or schema.get("const", ...) is None


def _type(schema: Mapping[str, Any]) -> str | None:
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), kind[0] if kind else None)
    if isinstance(kind, str):
        return kind
    if "properties" in schema or "required" in schema:
        return "object"
    if "items" in schema or "prefixItems" in schema:
        return "array"
    return None


def _merge(parts: list[dict[str, Any]]) -> dict[str, Any]:
    """``allOf`` branches as one schema: properties and required lists combined, other
    keywords from the last branch that has them."""
    merged: dict[str, Any] = {}
    properties: dict[str, Any] = {}
    required: list[str] = []
    for part in parts:
        for key, value in part.items():
            if key == "properties" and isinstance(value, Mapping):
                properties.update(value)
            elif key == "required" and isinstance(value, list):
                required += [r for r in value if isinstance(r, str) and r not in required]
            else:
                merged[key] = value
    if properties:
        merged["properties"] = properties
    if required:
        merged["required"] = required
    return merged


def _int(value: Any, default: int) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else default


def _string(schema: Mapping[str, Any]) -> str:
    fmt = schema.get("format")
    text = _FORMATS.get(fmt, "string") if isinstance(fmt, str) else "string"
    low = min(_int(schema.get("minLength"), 0), _MAX_STRING)
    high = _int(schema.get("maxLength"), _MAX_STRING)
    if len(text) < low:
        text += "x" * (low - len(text))
    return text[: max(high, 0)]


def _number(schema: Mapping[str, Any], integer: bool) -> int | float:
    def bound(key: str) -> float | None:
        value = schema.get(key)
        if isinstance(value, int | float) and not isinstance(value, bool):
            return float(value)
        return None

    low, high = bound("minimum"), bound("maximum")
    above, below = bound("exclusiveMinimum"), bound("exclusiveMaximum")
    step = 1.0 if integer else 0.5
    if low is not None:
        value = low
    elif above is not None:
        value = above + step
    elif high is not None and high < 0:
        value = high
    elif below is not None and below <= 0:
        value = below - step
    else:
        value = 0.0
    multiple = bound("multipleOf")
    if multiple is not None and multiple > 0 and value % multiple:
        value += multiple - value % multiple
    if integer:
        whole = int(value) if value == int(value) else int(value) + 1
        return whole
    return int(value) if value == int(value) else value
