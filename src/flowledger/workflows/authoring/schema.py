"""Bounded JSON decoding and strict JSON-Schema compilation (workflows-spec §1.3, §1.4).

`decode_bounded` parses untrusted JSON under explicit limits: size, nesting depth and the
total number of object keys are checked by a token scan *before* parsing, so hostile
documents cost linear time and never crash the parser. Numbers stay exact: integers are
``int``, every other number is a `decimal.Decimal` with the exact text's value.
Duplicate object keys are refused (the reference lets the last one win; refusing removes
any doubt about which value a schema validated).

`compile_schema` turns a workflow schema into a `CompiledSchema` under the strict rules
of §1.3: the root is an object schema, every object schema is closed
(``additionalProperties: false``), nothing can reach outside the document (no ``$id``,
only ``#...`` references, and a reference registry that refuses every retrieval), and
the result is a Draft 2020-12 validator.
"""

from __future__ import annotations

import decimal
import json
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, Final

import jsonschema  # type: ignore[import-untyped, unused-ignore]
import jsonschema.exceptions  # type: ignore[import-untyped, unused-ignore]
import jsonschema.validators  # type: ignore[import-untyped, unused-ignore]
import referencing
import referencing.exceptions
from referencing.jsonschema import DRAFT202012

from ...jsontext import DuplicateKeyError, decode_json
from ..errors import InvalidSchemaError
from .metadata import bound_text

__all__ = [
    "MAX_DOCUMENT_BYTES",
    "MAX_DOCUMENT_DEPTH",
    "MAX_DOCUMENT_PROPERTIES",
    "MAX_REPORTED_VIOLATIONS",
    "MAX_SCHEMA_BYTES",
    "MAX_SCHEMA_DEPTH",
    "MAX_SCHEMA_PROPERTIES",
    "BoundedJSONError",
    "CompiledSchema",
    "SchemaValidationError",
    "Violation",
    "compile_schema",
    "decode_bounded",
    "decode_document",
    "describe_violations",
    "violations_of",
]

MAX_SCHEMA_BYTES: Final = 65536
MAX_SCHEMA_DEPTH: Final = 32
MAX_SCHEMA_PROPERTIES: Final = 1024
MAX_DOCUMENT_BYTES: Final = 262144
MAX_DOCUMENT_DEPTH: Final = 32
MAX_DOCUMENT_PROPERTIES: Final = 4096

SCHEMA_URI_PREFIX: Final = "urn:flowledger:workflows:"
_DRAFT_2020_12: Final = frozenset(
    {
        "https://json-schema.org/draft/2020-12/schema",
        "https://json-schema.org/draft/2020-12/schema#",
    }
)
_MAX_MESSAGE_BYTES: Final = 512

# One token per match: a whole string (skipped; it may hold brackets), a bracket, or a
# colon (one per object member, so colons count keys).
_TOKEN: Final = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"|[\[\]{}:]', re.DOTALL)
_CLOSER: Final = {ord("]"): ord("["), ord("}"): ord("{")}
_JSON_SPACE: Final = " \t\n\r"
# A \uD800-\uDFFF escape is the only way decoded JSON text can hold a lone surrogate.
_SURROGATE_ESCAPE: Final = re.compile(r"\\u[dD][89a-fA-F]")


class BoundedJSONError(ValueError):
    """A JSON document was refused: malformed, over a limit, or not exactly one value."""


def _reject_constant(name: str) -> Any:
    raise BoundedJSONError(f"{name} is not a JSON number")


def _scan(data: bytes, max_depth: int, max_properties: int) -> None:
    """Check brackets, depth and key count without parsing."""
    stack: list[int] = []
    keys = 0
    for match in _TOKEN.finditer(data):
        token = data[match.start()]
        if token == ord('"'):
            continue
        if token == ord(":"):
            keys += 1
            if keys > max_properties:
                raise BoundedJSONError(f"more than {max_properties} object keys")
        elif token in _CLOSER:
            if not stack or stack[-1] != _CLOSER[token]:
                raise BoundedJSONError(
                    f"unbalanced JSON: unexpected {chr(token)!r} at byte {match.start()}"
                )
            stack.pop()
        else:
            stack.append(token)
            if len(stack) > max_depth:
                raise BoundedJSONError(f"JSON nesting is deeper than {max_depth}")
    if stack:
        raise BoundedJSONError(f"unbalanced JSON: {len(stack)} unclosed bracket(s)")


def _check_strings(value: Any) -> None:
    """Refuse lone surrogates (strings that have no UTF-8 form), in keys and values."""
    pending = [value]
    while pending:
        item = pending.pop()
        if isinstance(item, str):
            try:
                item.encode("utf-8")
            except UnicodeEncodeError:
                raise BoundedJSONError("a string holds a lone surrogate") from None
        elif isinstance(item, dict):
            pending.extend(item)
            pending.extend(item.values())
        elif isinstance(item, list):
            pending.extend(item)


def decode_bounded(raw: bytes | str, *, max_bytes: int, max_depth: int, max_properties: int) -> Any:
    """Parse exactly one JSON value from ``raw`` (UTF-8 bytes, or text).

    Refuses, with `BoundedJSONError`: an empty document ("empty JSON document"); more
    than ``max_bytes`` UTF-8 bytes; invalid UTF-8; nesting (objects and arrays) deeper
    than ``max_depth``; more than ``max_properties`` object keys in the whole document;
    unbalanced or mismatched brackets; malformed JSON; ``NaN``/``Infinity``; duplicate
    object keys (the message names the key's JSON pointer); lone surrogate escapes; and
    anything but whitespace after the value ("trailing JSON value").
    Integers decode to ``int``, other numbers to `Decimal`."""
    if isinstance(raw, str):
        if len(raw) > max_bytes:  # every character is at least one byte: skip encoding
            raise BoundedJSONError(f"JSON document is over {max_bytes} bytes")
        try:
            data = raw.encode("utf-8")
        except UnicodeEncodeError:
            raise BoundedJSONError("JSON text holds a lone surrogate") from None
    elif isinstance(raw, bytes | bytearray | memoryview):
        data = bytes(raw)
    else:
        raise BoundedJSONError(f"expected bytes or str, not {type(raw).__name__}")
    if not data:
        raise BoundedJSONError("empty JSON document")
    if len(data) > max_bytes:
        raise BoundedJSONError(f"JSON document is {len(data)} bytes; the limit is {max_bytes}")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise BoundedJSONError(f"JSON document is not valid UTF-8 (byte {exc.start})") from None
    _scan(data, max_depth, max_properties)
    if not text.strip(_JSON_SPACE):
        raise BoundedJSONError("empty JSON document")
    try:
        value = decode_json(text, parse_float=Decimal, parse_constant=_reject_constant)
    except BoundedJSONError:  # from the hooks: NaN, Infinity
        raise
    except DuplicateKeyError as exc:
        raise BoundedJSONError(str(exc)) from exc
    except json.JSONDecodeError as exc:
        if exc.msg == "Extra data":
            raise BoundedJSONError("trailing JSON value") from None
        raise BoundedJSONError(f"invalid JSON: {exc}") from None
    except ValueError as exc:  # e.g. an integer beyond Python's digit limit
        raise BoundedJSONError(f"invalid JSON: {exc}") from None
    if _SURROGATE_ESCAPE.search(text):
        _check_strings(value)
    return value


def decode_document(raw: bytes | str) -> dict[str, Any]:
    """An input or resume document: `decode_bounded` with the document limits (256 KiB,
    depth 32, 4096 keys), and the value must be a JSON object."""
    value = decode_bounded(
        raw,
        max_bytes=MAX_DOCUMENT_BYTES,
        max_depth=MAX_DOCUMENT_DEPTH,
        max_properties=MAX_DOCUMENT_PROPERTIES,
    )
    if not isinstance(value, dict):
        raise BoundedJSONError(f"a workflow document must be a JSON object, not {_kind(value)}")
    return value


def _kind(value: Any) -> str:
    if isinstance(value, list):
        return "an array"
    if isinstance(value, str):
        return "a string"
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    return "a number"


# -- validation -------------------------------------------------------------------------


MAX_REPORTED_VIOLATIONS: Final = 8


@dataclass(frozen=True, slots=True)
class Violation:
    """One way a document fails its schema: where (a JSON path, ``$`` is the root, e.g.
    ``$.items[2].name``) and why, in words a person or a model can act on. The reason
    names schema values (bounds, allowed values) and numbers of the document, never its
    strings; the path names the document's keys."""

    path: str
    reason: str

    def __str__(self) -> str:
        return f"{self.path}: {self.reason}"


class SchemaValidationError(ValueError):
    """A document does not match its schema. ``violations`` lists what is wrong, at most
    `MAX_REPORTED_VIOLATIONS` of them (in a deterministic order: shallower paths first),
    and ``total`` counts all of them. The message is the listed violations joined by
    ``"; "``, then ``"; and N more"``; it starts with the JSON path of the first one
    (also ``path``)."""

    def __init__(self, violations: Sequence[Violation], total: int | None = None) -> None:
        if not violations:
            raise ValueError("a SchemaValidationError needs at least one violation")
        shown = tuple(violations[:MAX_REPORTED_VIOLATIONS])
        self.violations = shown
        self.total = max(len(violations), total or 0)
        self.path = shown[0].path
        super().__init__(describe_violations(shown, self.total))


def describe_violations(
    violations: Sequence[Violation], total: int, path: Callable[[str], str] = str
) -> str:
    """``violations`` as one line: each as ``path: reason`` (``path`` may rewrite the
    paths, e.g. to bound them), joined by ``"; "``, then ``"; and N more"`` when
    ``total`` counts more than are listed."""
    text = "; ".join(f"{path(item.path)}: {item.reason}" for item in violations)
    if total > len(violations):
        text += f"; and {total - len(violations)} more"
    return text


def _is_integer(checker: Any, instance: Any) -> bool:
    # JSON Schema counts any integer-valued number (``2.0``) as an integer.
    if isinstance(instance, Decimal):
        return instance.is_finite() and instance == instance.to_integral_value()
    return isinstance(instance, int) and not isinstance(instance, bool)


def _multiple_of(validator: Any, divisor: Any, instance: Any, schema: Any) -> Iterator[Any]:
    # Exact decimal arithmetic (``0.3`` is a multiple of ``0.1``). A quotient too large to
    # compute exactly is a refusal rather than a guess or an unbounded computation.
    if not validator.is_type(instance, "number"):
        return
    try:
        with decimal.localcontext() as context:
            context.prec = 1000
            context.traps[decimal.Inexact] = True
            failed = Decimal(instance) % Decimal(divisor) != 0
    except (ArithmeticError, TypeError, ValueError):
        yield jsonschema.exceptions.ValidationError(
            f"{instance} is too large to check against multipleOf {divisor}"
        )
        return
    if failed:
        yield jsonschema.exceptions.ValidationError(f"{instance} is not a multiple of {divisor}")


_Validator: Final[Any] = jsonschema.validators.extend(
    jsonschema.Draft202012Validator,
    validators={"multipleOf": _multiple_of},
    type_checker=jsonschema.Draft202012Validator.TYPE_CHECKER.redefine("integer", _is_integer),
)


class CompiledSchema:
    """A compiled, closed Draft 2020-12 schema. Validation accepts the values
    `decode_bounded` produces (``Decimal`` numbers included) and is safe to share
    between threads."""

    __slots__ = ("_field", "_validator")

    def __init__(self, field: str, validator: Any) -> None:
        self._field = field
        self._validator = validator

    @property
    def field(self) -> str:
        return self._field

    def validate(self, document: Any) -> None:
        """Return if ``document`` matches, else raise `SchemaValidationError` listing every
        violation (see `violations_of`), shallowest first, then by path and reason."""
        try:
            errors = list(self._validator.iter_errors(document))
        except referencing.exceptions.Unresolvable as exc:  # compile resolved every $ref
            raise SchemaValidationError(
                [Violation("$", f"unresolvable reference: {exc}")]
            ) from None
        except RecursionError:  # compile refuses reference cycles; this is a last guard
            raise SchemaValidationError([Violation("$", "schema recursion is too deep")]) from None
        if errors:
            found = sorted(
                {item for error in errors for item in violations_of(error)},
                key=lambda item: (
                    item.path.count(".") + item.path.count("["),
                    item.path,
                    item.reason,
                ),
            )
            raise SchemaValidationError(found, len(found))


_MAX_SCHEMA_VALUE_CHARS: Final = 120
_TYPE_NAMES: Final = {
    "object": "an object",
    "array": "an array",
    "string": "a string",
    "integer": "an integer",
    "number": "a number",
    "boolean": "a boolean",
    "null": "null",
}


def violations_of(error: Any) -> list[Violation]:
    """The violations one `jsonschema` error stands for. ``required`` and
    ``additionalProperties`` give one violation per property, at the property's own path
    (``$.approved: required property missing``, ``$.extra: additional property not
    allowed``); every other keyword one, at the value's path."""
    where = error.json_path
    keyword = error.validator
    expected = error.validator_value
    instance = error.instance
    if keyword == "required" and isinstance(instance, dict) and isinstance(expected, list):
        missing = [name for name in expected if isinstance(name, str) and name not in instance]
        return [Violation(_child(where, name), "required property missing") for name in missing]
    if keyword == "additionalProperties" and isinstance(instance, dict):
        extra = _additional(error.schema, instance)
        if extra:
            return [
                Violation(_child(where, name), "additional property not allowed") for name in extra
            ]
    if keyword == "dependentRequired" and isinstance(instance, dict) and isinstance(expected, dict):
        found = []
        for present, needed in expected.items():
            if present in instance and isinstance(needed, list):
                found += [
                    Violation(
                        _child(where, name),
                        f"required property missing (when {present!r} is present)",
                    )
                    for name in needed
                    if isinstance(name, str) and name not in instance
                ]
        if found:
            return found
    return [Violation(where, _reason(keyword, expected, instance, error.message))]


def _child(path: str, name: str) -> str:
    return f"{path}.{name}"


def _additional(schema: Any, instance: dict[str, Any]) -> list[str]:
    if not isinstance(schema, dict):
        return []
    declared = schema.get("properties")
    declared = declared if isinstance(declared, dict) else {}
    patterns = schema.get("patternProperties")
    patterns = list(patterns) if isinstance(patterns, dict) else []
    return [
        name
        for name in instance
        if name not in declared and not any(re.search(pattern, name) for pattern in patterns)
    ]


def _reason(keyword: Any, expected: Any, instance: Any, message: str) -> str:
    """Why a value fails ``keyword``: the schema's values are quoted (bounded), of the
    document only numbers and kinds, never its strings."""
    number = _number(instance)
    if keyword == "type":
        kinds = expected if isinstance(expected, list) else [expected]
        wanted = " or ".join(_TYPE_NAMES.get(str(kind), str(kind)) for kind in kinds)
        got = "an object" if isinstance(instance, dict) else _kind(instance)
        return f"expected {wanted}, got {got}"
    if number is not None:
        bound = _schema_value(expected)
        if keyword == "minimum":
            return f"{number} is less than the minimum {bound}"
        if keyword == "maximum":
            return f"{number} is greater than the maximum {bound}"
        if keyword == "exclusiveMinimum":
            return f"{number} is not greater than {bound}"
        if keyword == "exclusiveMaximum":
            return f"{number} is not less than {bound}"
        if keyword == "multipleOf":
            return _message(message)  # ours (`_multiple_of`): numbers only
    sizes = {
        "minLength": "shorter than {} characters",
        "maxLength": "longer than {} characters",
        "minItems": "fewer than {} items",
        "maxItems": "more than {} items",
        "minProperties": "fewer than {} properties",
        "maxProperties": "more than {} properties",
        "minContains": "fewer than {} matching items",
        "maxContains": "more than {} matching items",
    }
    if keyword in sizes:
        return sizes[keyword].format(_schema_value(expected))
    fixed = {
        "pattern": f"does not match the pattern {_schema_value(expected)}",
        "enum": f"must be one of {_schema_value(expected)}",
        "const": f"must be {_schema_value(expected)}",
        "format": f"is not a valid {_schema_value(expected)}",
        "uniqueItems": "holds duplicate items",
        "contains": "holds no item that matches the schema",
        "anyOf": "matches none of the allowed alternatives",
        "oneOf": "matches none, or more than one, of the alternatives",
        "not": "matches a schema it must not match",
        "propertyNames": "has a property name the schema does not allow",
        "unevaluatedProperties": "has properties the schema does not allow",
        "unevaluatedItems": "has items the schema does not allow",
        "additionalProperties": "has properties the schema does not allow",
        "items": "has items the schema does not allow",
        "prefixItems": "has items the schema does not allow",
        None: "no value is allowed here",
    }
    return fixed.get(keyword, f"does not satisfy {keyword!s}")


def _json_numbers(value: Any) -> Any:
    if isinstance(value, Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    if isinstance(value, list):
        return [_json_numbers(item) for item in value]
    if isinstance(value, dict):
        return {key: _json_numbers(item) for key, item in value.items()}
    return value


def _number(value: Any) -> str | None:
    if isinstance(value, bool) or not isinstance(value, int | float | Decimal):
        return None
    return bound_text(str(value), 64)


def _schema_value(value: Any) -> str:
    """A value from the schema as JSON writes it (its numbers are exact decimals)."""
    try:
        text = json.dumps(_json_numbers(value), ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        text = str(value)
    if len(text) > _MAX_SCHEMA_VALUE_CHARS:
        text = text[: _MAX_SCHEMA_VALUE_CHARS - 3] + "..."
    return text


_DECIMAL_REPR: Final = re.compile(r"Decimal\('([^']*)'\)")


def _message(text: str) -> str:
    """A validator message as people read it: numbers as JSON writes them, and bounded
    (messages quote the offending value, which may be large)."""
    return bound_text(_DECIMAL_REPR.sub(r"\1", text), _MAX_MESSAGE_BYTES)


def compile_schema(raw: bytes, field: str) -> CompiledSchema:
    """Compile a workflow schema, or raise `InvalidSchemaError` (``field``) saying why.

    1. `decode_bounded` with the schema limits (64 KiB, depth 32, 1024 keys).
    2. The root is a JSON object whose ``type`` is exactly ``"object"``.
    3. The root has ``additionalProperties: false``.
    4. Every object schema (``type`` ``"object"`` or a list holding it, or any keyword
       that only applies to objects) is closed, recursively through every subschema
       keyword; value keywords (``const``, ``enum``, ``default``, ``examples``) are data.
    5. No ``$id`` key anywhere; every ``$ref``, ``$dynamicRef`` and ``$recursiveRef`` is
       a string starting with ``#``; a root ``$schema``, if any, names Draft 2020-12.
    6. The schema is valid Draft 2020-12, and every ``$ref``/``$dynamicRef`` resolves
       inside the document (checked now, so validation never meets a dangling one)."""
    try:
        schema = decode_bounded(
            raw,
            max_bytes=MAX_SCHEMA_BYTES,
            max_depth=MAX_SCHEMA_DEPTH,
            max_properties=MAX_SCHEMA_PROPERTIES,
        )
    except BoundedJSONError as exc:
        raise InvalidSchemaError(field, exc) from exc
    if not isinstance(schema, dict):
        raise InvalidSchemaError(field, "schema root must be a JSON object")
    if schema.get("type") != "object" or not isinstance(schema.get("type"), str):
        raise InvalidSchemaError(field, 'schema root must have "type": "object"')
    if schema.get("additionalProperties") is not False:
        raise InvalidSchemaError(field, 'schema root must have "additionalProperties": false')
    refs: list[str] = []
    closed_error = _open_object(schema, "#", refs)
    if closed_error:
        raise InvalidSchemaError(field, closed_error)
    reference_error = _external_reference(schema, "#")
    if reference_error:
        raise InvalidSchemaError(field, reference_error)
    if "$schema" in schema and schema["$schema"] not in _DRAFT_2020_12:
        raise InvalidSchemaError(field, f"$schema {schema['$schema']!r} is not Draft 2020-12")
    try:
        _Validator.check_schema(schema)
    except jsonschema.exceptions.SchemaError as exc:
        raise InvalidSchemaError(field, f"{exc.json_path}: {_message(exc.message)}") from None
    resource = DRAFT202012.create_resource(schema)
    uri = SCHEMA_URI_PREFIX + field
    # A registry's default retrieval refuses every URI it does not hold; this one holds
    # only the schema itself (jsonschema adds the bundled metaschemas, all local).
    registry: referencing.Registry[Any] = referencing.Registry().with_resource(uri, resource)
    resolver = registry.resolver(base_uri=uri)
    targets: dict[str, Any] = {}
    for ref in refs:
        try:
            targets[ref] = resolver.lookup(uri + ref).contents
        except referencing.exceptions.Unresolvable as exc:
            raise InvalidSchemaError(field, f"reference {ref!r} does not resolve") from exc
    if _has_reference_cycle(schema, targets):
        raise InvalidSchemaError(
            field, "a reference cycle applies a schema to the same value without end"
        )
    validator = _Validator(schema, registry=registry)
    return CompiledSchema(field, validator)


# -- the structural rules ---------------------------------------------------------------

_OBJECT_KEYWORDS: Final = frozenset(
    {
        "properties",
        "patternProperties",
        "additionalProperties",
        "required",
        "dependentRequired",
        "dependentSchemas",
        "minProperties",
        "maxProperties",
        "unevaluatedProperties",
    }
)
_SINGLE: Final = (
    "additionalProperties",
    "additionalItems",
    "contains",
    "contentSchema",
    "else",
    "if",
    "items",
    "not",
    "propertyNames",
    "then",
    "unevaluatedItems",
    "unevaluatedProperties",
)
_ARRAY: Final = ("allOf", "anyOf", "oneOf", "prefixItems")
_MAP: Final = ("$defs", "definitions", "dependentSchemas", "patternProperties", "properties")
_REF_KEYS: Final = ("$ref", "$dynamicRef", "$recursiveRef")


def _is_object_schema(node: dict[str, Any]) -> bool:
    kind = node.get("type")
    if kind == "object" and isinstance(kind, str):
        return True
    if isinstance(kind, list) and "object" in kind:
        return True
    return not _OBJECT_KEYWORDS.isdisjoint(node)


def _subschemas(node: dict[str, Any], where: str) -> Iterator[tuple[Any, str]]:
    for key in _SINGLE:
        if key in node:
            value = node[key]
            if isinstance(value, list):  # pre-2020 tuple form; the metaschema decides later
                for index, item in enumerate(value):
                    yield item, f"{where}/{key}/{index}"
            else:
                yield value, f"{where}/{key}"
    for key in _ARRAY:
        value = node.get(key)
        if isinstance(value, list):
            for index, item in enumerate(value):
                yield item, f"{where}/{key}/{index}"
    for key in _MAP:
        value = node.get(key)
        if isinstance(value, dict):
            for name, item in value.items():
                yield item, f"{where}/{key}/{_pointer_escape(name)}"


def _pointer_escape(name: str) -> str:
    return name.replace("~", "~0").replace("/", "~1")


def _open_object(node: Any, where: str, refs: list[str]) -> str:
    """The first object schema under ``node`` (a JSON pointer) that is not closed, or
    ``""``. Boolean and malformed subschemas are left to the metaschema. Collects the
    references of every subschema into ``refs`` (keyword data is not a subschema)."""
    pending = [(node, where)]
    while pending:
        current, path = pending.pop()
        if not isinstance(current, dict):
            continue
        if _is_object_schema(current) and current.get("additionalProperties") is not False:
            return f'object schema at {path} must have "additionalProperties": false'
        for key in ("$ref", "$dynamicRef"):
            if isinstance(current.get(key), str):
                refs.append(current[key])
        # Reversed so the first offending subschema in document order is reported.
        pending.extend(reversed(list(_subschemas(current, path))))
    return ""


_IN_PLACE_SINGLE: Final = ("not", "if", "then", "else")
_IN_PLACE_ARRAY: Final = ("allOf", "anyOf", "oneOf")


def _has_reference_cycle(schema: dict[str, Any], targets: dict[str, Any]) -> bool:
    """Whether following references and in-place applicators (which apply a subschema to
    the same value, unlike ``properties`` or ``items``) can return to a schema already
    being applied: validation would then recurse until the interpreter gives up."""

    def in_place(node: dict[str, Any]) -> Iterator[Any]:
        for key in ("$ref", "$dynamicRef"):
            ref = node.get(key)
            if isinstance(ref, str) and ref in targets:  # else: keyword data, not a schema
                yield targets[ref]
        for key in _IN_PLACE_SINGLE:
            if key in node:
                yield node[key]
        for key in _IN_PLACE_ARRAY:
            if isinstance(node.get(key), list):
                yield from node[key]
        if isinstance(node.get("dependentSchemas"), dict):
            yield from node["dependentSchemas"].values()

    done: set[int] = set()
    for start in _all_subschemas(schema):
        if id(start) in done:
            continue
        active = {id(start)}
        stack = [(start, iter(list(in_place(start))))]
        while stack:
            node, children = stack[-1]
            child = next(children, None)
            if child is None:
                stack.pop()
                active.discard(id(node))
                done.add(id(node))
                continue
            if not isinstance(child, dict) or id(child) in done:
                continue
            if id(child) in active:
                return True
            active.add(id(child))
            stack.append((child, iter(list(in_place(child)))))
    return False


def _all_subschemas(schema: dict[str, Any]) -> Iterator[dict[str, Any]]:
    pending: list[Any] = [schema]
    while pending:
        current = pending.pop()
        if isinstance(current, dict):
            yield current
            pending.extend(item for item, _ in _subschemas(current, ""))


def _external_reference(node: Any, where: str) -> str:
    """Walk every object and array (keyword data too): the first ``$id`` or non-local
    reference, or ``""``."""
    pending = [(node, where)]
    while pending:
        current, path = pending.pop()
        if isinstance(current, dict):
            if "$id" in current:
                return f"$id is not allowed (at {path})"
            for key in _REF_KEYS:
                if key in current:
                    ref = current[key]
                    if not isinstance(ref, str) or not ref.startswith("#"):
                        return f"{key} at {path} must be a local reference starting with '#'"
            children = [(v, f"{path}/{_pointer_escape(k)}") for k, v in current.items()]
            pending.extend(reversed(children))
        elif isinstance(current, list):
            pending.extend(reversed([(v, f"{path}/{i}") for i, v in enumerate(current)]))
    return ""
