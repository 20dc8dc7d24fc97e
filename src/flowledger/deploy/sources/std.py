"""The built-in standard library of transforms (a ``builtin`` source, docs/sources.md).

Pure functions of their arguments: no clock, no files, no network, no randomness; each
is read-only and idempotent. They do what JMESPath expressions cannot (rename members,
group, template a string, dates, JSON Schema), and nothing more. Every failure (a
member missing where one is required, values that cannot be compared, a date that does
not parse) raises ``ValueError`` with what and where, which a tool node sees as the
tool's error.

Equality is JSON equality: ``1`` equals ``1.0``, ``true`` does not equal ``1``.
"""

from __future__ import annotations

import json
import re
from datetime import datetime
from typing import Final, Literal

import jsonschema  # type: ignore[import-untyped, unused-ignore]
import jsonschema.validators  # type: ignore[import-untyped, unused-ignore]
from pydantic import JsonValue
from typing_extensions import TypedDict

__all__ = [
    "filter_items",
    "format_date",
    "group_items",
    "parse_date",
    "pick",
    "rename",
    "sort_items",
    "template",
    "validate_json",
]

Item = dict[str, JsonValue]
Operator = Literal["eq", "ne", "lt", "le", "gt", "ge", "in", "contains", "exists", "missing"]
MAX_ERRORS: Final = 20
_PLACEHOLDER: Final = re.compile(r"\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}")


def _equal(a: JsonValue, b: JsonValue) -> bool:
    """JSON equality (Python's ``==`` says ``True == 1``)."""
    if isinstance(a, bool) or isinstance(b, bool) or a is None or b is None:
        return type(a) is type(b) and a == b
    if isinstance(a, int | float) and isinstance(b, int | float):
        return a == b
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_equal(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_equal(a[k], b[k]) for k in a)
    return type(a) is type(b) and a == b


def _number(value: JsonValue) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _comparable(a: JsonValue, b: JsonValue) -> bool:
    return (_number(a) and _number(b)) or (isinstance(a, str) and isinstance(b, str))


def pick(value: Item, fields: list[str]) -> Item:
    """The members of object ``value`` named in ``fields``, in the order of ``fields``;
    a name ``value`` does not have is left out."""
    return {name: value[name] for name in fields if name in value}


def rename(value: Item, names: dict[str, str]) -> Item:
    """``value`` with each member named by a key of ``names`` renamed to that key's
    value, in place in the member order; other members unchanged. Two members that
    would end under one name are an error."""
    renamed: Item = {}
    for key, member in value.items():
        target = names.get(key, key)
        if target in renamed:
            raise ValueError(f"two members would be named {target!r}")
        renamed[target] = member
    return renamed


def _matches(item: Item, field: str, op: Operator, value: JsonValue) -> bool:
    if op == "exists":
        return field in item
    if op == "missing":
        return field not in item
    if field not in item:
        return False
    member = item[field]
    if op == "eq":
        return _equal(member, value)
    if op == "ne":
        return not _equal(member, value)
    if op == "in":
        if not isinstance(value, list):
            raise ValueError("op 'in' needs value to be a list")
        return any(_equal(member, candidate) for candidate in value)
    if op == "contains":
        if isinstance(member, str) and isinstance(value, str):
            return value in member
        return isinstance(member, list) and any(_equal(element, value) for element in member)
    if not _comparable(member, value):
        return False
    assert isinstance(member, int | float | str) and isinstance(value, int | float | str)
    if op == "lt":
        return member < value  # type: ignore[operator]
    if op == "le":
        return member <= value  # type: ignore[operator]
    if op == "gt":
        return member > value  # type: ignore[operator]
    return member >= value  # type: ignore[operator]


def filter_items(
    items: list[Item], field: str, op: Operator, value: JsonValue = None
) -> list[Item]:
    """The objects of ``items`` whose member ``field`` satisfies ``op`` with ``value``,
    in their order. ``eq``/``ne``: JSON (in)equality; ``lt``/``le``/``gt``/``ge``:
    numbers with numbers and strings with strings (by code point), any other pair does
    not match; ``in``: the member equals an element of list ``value``; ``contains``: the
    member is a string containing string ``value`` or a list with an element equal to
    it; ``exists``/``missing``: whether the member is there (``value`` unused). An item
    without the member matches only ``missing``."""
    return [item for item in items if _matches(item, field, op, value)]


def sort_items(items: list[Item], by: str, descending: bool = False) -> list[Item]:
    """``items`` ordered by member ``by`` (stable: equal keys keep their order). The
    values must all be numbers or all be strings; items without the member, or with
    ``null``, come last in their order, whichever the direction."""
    keyed = [item for item in items if item.get(by) is not None]
    rest = [item for item in items if item.get(by) is None]
    kinds = {"number" if _number(item[by]) else type(item[by]).__name__ for item in keyed}
    if kinds - {"number", "str"} or len(kinds) > 1:
        raise ValueError(f"member {by!r} must be all numbers or all strings to sort by it")
    ordered = sorted(keyed, key=lambda item: item[by], reverse=descending)  # type: ignore[arg-type, return-value]
    return ordered + rest


class Group(TypedDict):
    key: JsonValue
    items: list[Item]


def group_items(items: list[Item], by: str) -> list[Group]:
    """``items`` grouped by the value of member ``by`` (JSON equality; a missing member
    groups as ``null``), groups in the order their first item appears, items in their
    order."""
    groups: list[Group] = []
    for item in items:
        key = item.get(by)
        for group in groups:
            if _equal(group["key"], key):
                group["items"].append(item)
                break
        else:
            groups.append({"key": key, "items": [item]})
    return groups


def template(text: str, values: dict[str, JsonValue]) -> str:
    """``text`` with each ``{{name}}`` replaced by member ``name`` of ``values``: a
    string as it is, any other value as compact JSON. A name ``values`` lacks is an
    error; anything else in ``text`` is kept as it is."""

    def replace(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in values:
            raise ValueError(f"template names {{{{{name}}}}}, which values does not have")
        value = values[name]
        if isinstance(value, str):
            return value
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"))

    return _PLACEHOLDER.sub(replace, text)


def parse_date(text: str, format: str | None = None) -> str:
    """``text`` read as a date and time, as ISO 8601 (``2026-12-04T17:00:00+00:00``;
    a time zone only if ``text`` has one). Without ``format``, ``text`` must be ISO 8601;
    with it, ``format`` is a ``strptime`` pattern (``%d.%m.%Y``)."""
    try:
        moment = datetime.fromisoformat(text) if format is None else datetime.strptime(text, format)
    except ValueError as exc:
        how = "ISO 8601" if format is None else f"format {format!r}"
        raise ValueError(f"{text[:64]!r} is not a date in {how}: {exc}") from None
    return moment.isoformat()


def format_date(value: str, format: str) -> str:
    """ISO 8601 date and time ``value`` written with ``strftime`` pattern ``format``."""
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        raise ValueError(f"{value[:64]!r} is not an ISO 8601 date") from None
    return moment.strftime(format)


class SchemaError(TypedDict):
    path: str
    message: str


class Validation(TypedDict):
    valid: bool
    errors: list[SchemaError]


def validate_json(value: JsonValue, schema: dict[str, JsonValue]) -> Validation:
    """Whether ``value`` is valid for JSON Schema ``schema`` (its ``$schema`` dialect,
    2020-12 by default; formats are not asserted), and the first 20 errors by place
    (JSON path and message). A schema that is itself invalid is an error."""
    try:
        cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
        cls.check_schema(schema)
    except jsonschema.exceptions.SchemaError as exc:
        raise ValueError(f"the schema is invalid: {exc.message}") from None
    found = sorted(
        cls(schema).iter_errors(value), key=lambda e: (list(map(str, e.absolute_path)), e.message)
    )
    return {
        "valid": not found,
        "errors": [{"path": e.json_path, "message": e.message} for e in found[:MAX_ERRORS]],
    }
