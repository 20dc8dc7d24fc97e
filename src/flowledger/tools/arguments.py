"""Strict decoding of tool arguments and ID parsing (workflows-spec §7.1).

Arguments arrive as JSON text (``str`` or bytes), as an already decoded mapping, or as
``None`` (meaning ``{}``). All three take the same road: a mapping is first checked for
JSON types and written as JSON text, and the text is decoded by
`flowledger.workflows.authoring.schema.decode_bounded`, so the limits (at most 262144 bytes and
32 levels of nesting, checked *before* parsing) and the number rules (integers as
``int``, every other number as an exact `decimal.Decimal`) are identical whatever the
transport. Then the document must be exactly one JSON object whose fields are all
declared by the tool, each of the declared JSON type; required fields must be present.
"""

from __future__ import annotations

import json
import math
import re
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal

from flowledger.workflows.authoring.schema import (
    MAX_REPORTED_VIOLATIONS,
    BoundedJSONError,
    decode_bounded,
)
from flowledger.workflows.records.inputs import MAX_INPUT_PROPERTIES

from .errors import ToolError, invalid_arguments, quote

__all__ = [
    "MAX_ARGUMENT_BYTES",
    "MAX_ARGUMENT_DEPTH",
    "MAX_ARGUMENT_PROPERTIES",
    "MAX_UNSIGNED",
    "ArgumentField",
    "canonical_uuid",
    "decode_arguments",
    "decode_document",
    "new_uuid",
    "parse_id",
]

MAX_ARGUMENT_BYTES: Final = 262144
MAX_ARGUMENT_DEPTH: Final = 32
#: Object keys in a whole argument document: an input's own limit plus the tool's fields.
MAX_ARGUMENT_PROPERTIES: Final = MAX_INPUT_PROPERTIES + 16
MAX_UNSIGNED: Final = (1 << 64) - 1

_UUID: Final = re.compile(
    r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"
)
_ZERO: Final = "00000000-0000-0000-0000-000000000000"

Kind = Literal["string", "integer", "object", "boolean"]
_JSON_KIND: Final[Mapping[str, str]] = {
    "boolean": "a boolean",
    "string": "a string",
    "integer": "an integer",
    "object": "a JSON object",
}


@dataclass(frozen=True, slots=True)
class ArgumentField:
    """One declared argument: its name, JSON type, whether it is required, and (for
    integers) whether it is unsigned, so a negative value already fails decoding."""

    name: str
    kind: Kind
    required: bool = False
    unsigned: bool = False


# -- IDs -----------------------------------------------------------------------------------------


def canonical_uuid(text: object) -> str | None:
    """``text`` as a canonical lowercase UUID if it is a hyphenated UUID other than the
    all-zero one (either case), else ``None``."""
    if not isinstance(text, str) or _UUID.fullmatch(text) is None:
        return None
    value = text.lower()
    return None if value == _ZERO else value


def parse_id(field: str, text: object) -> str:
    """The canonical form of the ID in ``text``; `ToolError` ``workflow tools: <field> must
    be a nonzero UUID`` otherwise."""
    value = canonical_uuid(text)
    if value is None:
        raise ToolError(f"{field} must be a nonzero UUID")
    return value


# -- documents -----------------------------------------------------------------------------------


class _Refused(Exception):
    pass


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, dict):
        return "an object"
    return "a number"


def _mapping_text(arguments: Mapping[Any, Any]) -> bytes:
    """A mapping as compact JSON text, refusing anything JSON cannot say exactly. Depth,
    key count and size are bounded while walking, so no hostile mapping (deep, cyclic or
    huge) costs more than the limits allow."""
    budget = [MAX_ARGUMENT_BYTES, MAX_ARGUMENT_PROPERTIES]

    def spend(index: int, amount: int, what: str) -> None:
        budget[index] -= amount
        if budget[index] < 0:
            raise _Refused(what)

    def text(value: str) -> str:
        plain = str.__str__(value)
        try:
            size = len(plain.encode("utf-8"))
        except UnicodeEncodeError:
            raise _Refused("a string is not valid Unicode (lone surrogate)") from None
        spend(0, size, f"the document is over {MAX_ARGUMENT_BYTES} bytes")
        return plain

    def walk(value: Any, depth: int) -> Any:
        if value is None or isinstance(value, bool):
            return value
        if isinstance(value, int):
            return int(value)
        if isinstance(value, float):
            if not math.isfinite(value):
                raise _Refused("a number is not finite")
            return float(value)
        if isinstance(value, str):
            return text(value)
        if isinstance(value, Mapping | list | tuple):
            if depth >= MAX_ARGUMENT_DEPTH:
                raise _Refused(f"JSON nesting is deeper than {MAX_ARGUMENT_DEPTH}")
            if isinstance(value, Mapping):
                spend(1, len(value), f"more than {MAX_ARGUMENT_PROPERTIES} object keys")
                out: dict[str, Any] = {}
                for key, item in value.items():
                    if not isinstance(key, str):
                        raise _Refused(f"an object key is {type(key).__name__}, not a string")
                    out[text(key)] = walk(item, depth + 1)
                return out
            spend(0, len(value), f"the document is over {MAX_ARGUMENT_BYTES} bytes")
            return [walk(item, depth + 1) for item in value]
        raise _Refused(f"{type(value).__name__} is not a JSON value")

    plain = walk(arguments, 0)
    try:
        encoded = json.dumps(plain, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    except ValueError:  # an integer beyond Python's digit limit for str()
        raise _Refused("an integer has too many digits") from None
    return encoded.encode("utf-8")


def decode_document(arguments: Mapping[str, Any] | str | bytes | None) -> dict[str, Any]:
    """Exactly one bounded JSON object from ``arguments`` (``None`` is ``{}``); anything
    else is `ToolError` ``workflow tools: invalid arguments: ...``."""
    if arguments is None:
        return {}
    try:
        if isinstance(arguments, str | bytes | bytearray | memoryview):
            raw: str | bytes = arguments if isinstance(arguments, str) else bytes(arguments)
        elif isinstance(arguments, Mapping):
            raw = _mapping_text(arguments)
        else:
            raise _Refused(f"arguments must be a JSON object, not {type(arguments).__name__}")
        document = decode_bounded(
            raw,
            max_bytes=MAX_ARGUMENT_BYTES,
            max_depth=MAX_ARGUMENT_DEPTH,
            max_properties=MAX_ARGUMENT_PROPERTIES,
        )
    except _Refused as exc:
        raise invalid_arguments(str(exc)) from None
    except BoundedJSONError as exc:
        raise invalid_arguments(str(exc), cause=exc) from None
    except RecursionError:  # pragma: no cover - depth is bounded before any recursion
        raise invalid_arguments(f"JSON nesting is deeper than {MAX_ARGUMENT_DEPTH}") from None
    except ToolError:
        raise
    except Exception as exc:  # a mapping whose methods raise
        raise invalid_arguments(
            f"the arguments could not be read ({type(exc).__name__})", cause=exc
        ) from None
    if not isinstance(document, dict):
        raise invalid_arguments(f"arguments must be a JSON object, not {_kind(document)}")
    return document


def decode_arguments(
    arguments: Mapping[str, Any] | str | bytes | None, fields: Sequence[ArgumentField]
) -> dict[str, Any]:
    """Decode ``arguments`` strictly against ``fields`` and report every violation at
    once, joined by ``"; "``: each undeclared field (in document order) as ``unknown
    field '<name>'``; then each present field of the wrong JSON type, in declaration
    order (``null`` is not a value of any type); then each missing required field.
    At most `MAX_REPORTED_VIOLATIONS` are listed, then ``and N more``. Returns the
    decoded document."""
    document = decode_document(arguments)
    declared = {field.name: field for field in fields}
    problems = [f"unknown field {quote(key)}" for key in document if key not in declared]
    for field in fields:
        if field.name not in document:
            continue
        value = document[field.name]
        if field.kind == "string":
            ok = isinstance(value, str)
        elif field.kind == "object":
            ok = isinstance(value, dict)
        elif field.kind == "boolean":
            ok = isinstance(value, bool)
        else:
            ok = isinstance(value, int) and not isinstance(value, bool)
        if not ok:
            problems.append(
                f"field {field.name!r} must be {_JSON_KIND[field.kind]}, not {_kind(value)}"
            )
        elif field.unsigned and not 0 <= value <= MAX_UNSIGNED:
            problems.append(f"field {field.name!r} must be an integer in 0..{MAX_UNSIGNED}")
    problems += [
        f"missing required field {field.name!r}"
        for field in fields
        if field.required and field.name not in document
    ]
    if problems:
        listed = problems[:MAX_REPORTED_VIOLATIONS]
        more = len(problems) - len(listed)
        raise invalid_arguments("; ".join(listed) + (f"; and {more} more" if more else ""))
    return document


def new_uuid() -> str:
    """The default ID source: a random UUIDv4 in canonical form."""
    return str(uuid.uuid4())
