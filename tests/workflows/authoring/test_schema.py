"""Bounded JSON decoding and strict schema compilation: workflows-spec §1.3, §1.4 and
checklist §12.13-15 (plus the decode halves of §12.10 and §12.12)."""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any

import pytest

from flowledger.workflows.authoring.schema import (
    MAX_DOCUMENT_BYTES,
    MAX_DOCUMENT_DEPTH,
    MAX_DOCUMENT_PROPERTIES,
    MAX_REPORTED_VIOLATIONS,
    MAX_SCHEMA_BYTES,
    MAX_SCHEMA_DEPTH,
    MAX_SCHEMA_PROPERTIES,
    BoundedJSONError,
    CompiledSchema,
    SchemaValidationError,
    Violation,
    compile_schema,
    decode_bounded,
    decode_document,
)
from flowledger.workflows.errors import InvalidSchemaError


def decode(raw: bytes | str, depth: int = 4, keys: int = 10, size: int = 1000) -> Any:
    return decode_bounded(raw, max_bytes=size, max_depth=depth, max_properties=keys)


def refused(raw: bytes | str, match: str, **limits: int) -> None:
    with pytest.raises(BoundedJSONError, match=match):
        decode(raw, **limits)


def closed(**keywords: Any) -> dict[str, Any]:
    return {"type": "object", "additionalProperties": False, **keywords}


def compile_(schema: Any, field: str = "input") -> CompiledSchema:
    return compile_schema(json.dumps(schema).encode(), field)


def rejected(schema: Any, match: str = "", field: str = "input") -> InvalidSchemaError:
    raw = schema if isinstance(schema, bytes) else json.dumps(schema).encode()
    with pytest.raises(InvalidSchemaError, match=match) as caught:
        compile_schema(raw, field)
    assert caught.value.field == field
    return caught.value


def nested(depth: int, leaf: str = "1") -> str:
    """``depth`` levels of brackets, alternating objects (outermost) and arrays."""
    text = leaf
    for level in range(depth):
        text = f'{{"k":{text}}}' if (depth - level) % 2 else f"[{text}]"
    return text


# -- decode_bounded ----------------------------------------------------------------------


def test_limits_are_the_specified_constants() -> None:
    """§1.3, §1.4 schema 64 KiB/32/1024, document 256 KiB/32/4096."""
    assert (MAX_SCHEMA_BYTES, MAX_SCHEMA_DEPTH, MAX_SCHEMA_PROPERTIES) == (65536, 32, 1024)
    assert (MAX_DOCUMENT_BYTES, MAX_DOCUMENT_DEPTH, MAX_DOCUMENT_PROPERTIES) == (
        262144,
        32,
        4096,
    )


@pytest.mark.parametrize("raw", [b"", "", b"   ", " \n\t\r"])
def test_empty_documents_are_refused(raw: bytes | str) -> None:
    """§1.4 empty input → 'empty JSON document' (whitespace alone is empty too)."""
    refused(raw, "empty JSON document")


def test_size_limit_counts_utf8_bytes() -> None:
    """§1.4 more than max_bytes is refused; text is measured in UTF-8 bytes."""
    assert decode(b'"' + b"x" * 8 + b'"', size=10) == "x" * 8
    refused(b'"' + b"x" * 9 + b'"', "11 bytes; the limit is 10", size=10)
    refused('"ééééé"', "12 bytes", size=10)  # 7 characters
    refused('"' + "x" * 20 + '"', "over 10 bytes", size=10)  # refused before encoding


def test_depth_limit_counts_objects_and_arrays() -> None:
    """§1.4 nesting depth (objects and arrays both count) must not exceed max_depth."""
    assert decode(nested(4), depth=4) == {"k": [{"k": [1]}]}
    refused(nested(5), "deeper than 4", depth=4)
    refused("[[[[[]]]]]", "deeper than 4", depth=4)


def test_key_limit_counts_every_object_key() -> None:
    """§1.4 the total number of object keys across the document is bounded."""
    doc = {"a": {"b": 1, "c": [{"d": 2}]}}  # four keys in all
    assert decode(json.dumps(doc), keys=4) == doc
    refused(json.dumps(doc), "more than 3 object keys", keys=3)


def test_structure_inside_strings_is_not_counted() -> None:
    """§1.4 the token scan skips strings, escaped quotes included."""
    text = r'{"a":"[[[[{{{{:::: \" ]]}}"}'
    assert decode(text, depth=1, keys=1) == {"a": '[[[[{{{{:::: " ]]}}'}


@pytest.mark.parametrize(
    ("raw", "match"),
    [
        ("}", "unexpected '}'"),
        ('{"count":[1}', "unexpected '}'"),
        ("]", "unexpected ']'"),
        ("[1]]", "unexpected ']'"),
        ("[", "unclosed"),
        ('{"a":{"b":1}', "unclosed"),
    ],
)
def test_malformed_containers_fail_cleanly(raw: str, match: str) -> None:
    """§12.12 (decode half) `}` and `{"count":[1}` and other unbalanced brackets raise
    BoundedJSONError, never a crash."""
    refused(raw, match)


@pytest.mark.parametrize("raw", ['{"a":1}{"b":2}', "1 2", '{"a":1} x', "[] []", '"a""b"', "null,"])
def test_exactly_one_value(raw: str) -> None:
    """§1.4 anything after the first value → 'trailing JSON value'."""
    refused(raw, "trailing JSON value")


def test_surrounding_whitespace_is_fine() -> None:
    """§1.4 trailing (and leading) JSON whitespace is fine."""
    assert decode(' \n{"a": [1, 2]}\r\n\t ') == {"a": [1, 2]}


def test_numbers_are_exact() -> None:
    """§1.4 numbers keep their exact value: integers as int, others as Decimal."""
    value = decode("[1, -0, 12345678901234567890123, 0.1, 1.5e3, 1E400, -2.50, 1e-400]")
    assert value == [
        1,
        0,
        12345678901234567890123,
        Decimal("0.1"),
        Decimal("1500"),
        Decimal("1E400"),
        Decimal("-2.50"),
        Decimal("1e-400"),
    ]
    assert [type(v) for v in value[:3]] == [int, int, int]
    assert all(type(v) is Decimal for v in value[3:])


@pytest.mark.parametrize("raw", ["NaN", "[Infinity]", '{"a":-Infinity}'])
def test_non_numbers_are_refused(raw: str) -> None:
    """§1.4 NaN and Infinity are not JSON."""
    refused(raw, "not a JSON number")


def test_duplicate_keys_are_refused() -> None:
    """§1.4 (our choice, documented in schema.py) a duplicate key is refused rather than
    the last one winning, at any depth."""
    refused('{"a":1,"a":2}', "^duplicate key 'a' at /a$")
    refused('{"x":[{"b":1,"b":1}]}', "^duplicate key 'b' at /x/0/b$")


def test_invalid_utf8_and_lone_surrogates_are_refused() -> None:
    """§1.4 documents are UTF-8; a lone surrogate escape has no UTF-8 form."""
    refused(b'"\xff"', "not valid UTF-8")
    refused(r'{"a":"\ud800"}', "lone surrogate")
    refused(r'{"\udc00":1}', "lone surrogate")
    refused('"\ud800"', "lone surrogate")  # text that cannot be encoded at all
    assert decode(r'"\ud83d\ude00"') == "😀"  # a pair is one code point
    assert decode(r'"\\ud800"') == "\\ud800"  # an escaped backslash, not an escape


@pytest.mark.parametrize("raw", ["{'a':1}", '{"a":}', "[1,]", "tru", '"\x01"', "-"])
def test_malformed_json_is_refused(raw: str) -> None:
    """§1.4 anything that is not strict JSON is refused with a clear error."""
    refused(raw, "invalid JSON")


def test_non_text_input_is_refused() -> None:
    """§1.4 the input is bytes or text."""
    with pytest.raises(BoundedJSONError, match="expected bytes or str"):
        decode(123)  # type: ignore[arg-type]


# -- decode_document ---------------------------------------------------------------------


@pytest.mark.parametrize("raw", ["[]", "1", '"x"', "null", "true", "1.5"])
def test_a_document_must_be_an_object(raw: str) -> None:
    """§1.4 an input or resume document must be a JSON object."""
    with pytest.raises(BoundedJSONError, match="must be a JSON object"):
        decode_document(raw)


def test_document_limits() -> None:
    """§12.10 (decode half) document limits: 256 KiB (leading whitespace counts), depth 32,
    4096 keys; the limits themselves are accepted."""
    body = b'{"count":1}'
    assert decode_document(b" " * (MAX_DOCUMENT_BYTES - len(body)) + body) == {"count": 1}
    with pytest.raises(BoundedJSONError, match="the limit is 262144"):
        decode_document(b" " * (MAX_DOCUMENT_BYTES - len(body) + 1) + body)
    assert decode_document(nested(32))["k"]
    with pytest.raises(BoundedJSONError, match="deeper than 32"):
        decode_document(nested(33))
    keys = {f"k{i}": i for i in range(4096)}
    assert decode_document(json.dumps(keys)) == keys
    with pytest.raises(BoundedJSONError, match="more than 4096"):
        decode_document(json.dumps({**keys, "one_more": 1}))


# -- compile_schema: the structural rules ------------------------------------------------


def test_a_closed_schema_compiles() -> None:
    """§1.3 the minimal accepted schema."""
    compiled = compile_(closed(properties={"count": {"type": "integer"}}))
    compiled.validate({"count": 1})
    assert compiled.field == "input"


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "array"},
        {"type": ["object"], "additionalProperties": False},
        {"additionalProperties": False},
        {"type": "Object", "additionalProperties": False},
        [closed()],
        "object",
    ],
)
def test_root_must_be_type_object(schema: Any) -> None:
    """§1.3 step 2 the root is a JSON object whose type is exactly the string 'object'."""
    rejected(schema, "root")


@pytest.mark.parametrize("value", [None, True, 0, "false", {}, "missing"])
def test_root_must_be_closed(value: Any) -> None:
    """§1.3 step 3 the root has additionalProperties literally false (0 is not false)."""
    schema: dict[str, Any] = {"type": "object"}
    if value != "missing":
        schema["additionalProperties"] = value
    rejected(schema, '"additionalProperties": false')


OPEN = {"type": "object"}
CLOSED = {"type": "object", "additionalProperties": False}


def placements(sub: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """``sub`` placed under every subschema keyword of §1.3 step 4, as a root schema."""
    return [
        ("properties", closed(properties={"x": sub})),
        ("patternProperties", closed(patternProperties={"^x": sub})),
        ("dependentSchemas", closed(dependentSchemas={"x": sub})),
        ("$defs", closed(**{"$defs": {"x": sub}})),
        ("definitions", closed(definitions={"x": sub})),
        ("items", closed(properties={"a": {"type": "array", "items": sub}})),
        ("prefixItems", closed(properties={"a": {"type": "array", "prefixItems": [sub]}})),
        ("contains", closed(properties={"a": {"type": "array", "contains": sub}})),
        ("unevaluatedItems", closed(properties={"a": {"unevaluatedItems": sub}})),
        ("allOf", closed(allOf=[sub])),
        ("anyOf", closed(anyOf=[{"type": "null"}, sub])),
        ("oneOf", closed(oneOf=[sub])),
        ("not", closed(properties={"a": {"not": sub}})),
        ("if", closed(properties={"a": {"if": sub}})),
        ("then", closed(properties={"a": {"if": True, "then": sub}})),
        ("else", closed(properties={"a": {"if": True, "else": sub}})),
        ("propertyNames", closed(propertyNames=sub)),
        ("contentSchema", closed(properties={"a": {"contentSchema": sub}})),
        ("unevaluatedProperties", closed(unevaluatedProperties=sub)),
    ]


@pytest.mark.parametrize(("keyword", "schema"), placements(OPEN))
def test_open_nested_objects_are_rejected_under_every_keyword(
    keyword: str, schema: dict[str, Any]
) -> None:
    """§1.3 step 4 / §12.13 an open nested object is rejected wherever a subschema can be."""
    error = rejected(schema, "additionalProperties")
    assert keyword in str(error)  # the JSON pointer names where


@pytest.mark.parametrize(("keyword", "schema"), placements(CLOSED))
def test_closed_nested_objects_are_accepted_under_every_keyword(
    keyword: str, schema: dict[str, Any]
) -> None:
    """§1.3 step 4 the same placements with a closed object compile."""
    compile_(schema)


def test_open_object_inside_an_open_object_is_found_deep() -> None:
    """§1.3 step 4 the rule recurses through many levels."""
    schema = closed(properties={"a": {**CLOSED, "properties": {"b": {"items": [{**OPEN}]}}}})
    rejected(schema, "additionalProperties")


def test_checklist_13_nested_objects_must_be_closed() -> None:
    """§12.13 rejected: an open object as (a) a property, (b) array items, (c) a $defs
    entry referenced via #/$defs/..., (d) an implicit object (properties, no type)."""
    rejected(closed(properties={"child": {"type": "object"}}), "#/properties/child")
    rejected(
        closed(properties={"list": {"type": "array", "items": {"type": "object"}}}),
        "#/properties/list/items",
    )
    rejected(
        closed(
            properties={"child": {"$ref": "#/$defs/child"}},
            **{"$defs": {"child": {"type": "object"}}},
        ),
        "#/\\$defs/child",
    )
    rejected(
        closed(properties={"child": {"properties": {"x": {"type": "string"}}}}),
        "#/properties/child",
    )


@pytest.mark.parametrize(
    "implicit",
    [
        {"type": ["object", "null"]},
        {"properties": {}},
        {"patternProperties": {}},
        {"additionalProperties": True},
        {"additionalProperties": {"type": "string"}},
        {"required": ["x"]},
        {"dependentRequired": {"x": ["y"]}},
        {"dependentSchemas": {}},
        {"minProperties": 1},
        {"maxProperties": 3},
        {"unevaluatedProperties": False},
    ],
)
def test_object_keywords_make_an_object_schema(implicit: dict[str, Any]) -> None:
    """§1.3 step 4 a node is an object schema if type holds 'object' or it has any
    object-only keyword; then it must be closed."""
    rejected(closed(properties={"x": implicit}), "#/properties/x")
    compile_(closed(properties={"x": {**implicit, "additionalProperties": False}}))


def test_checklist_14_closed_nested_objects_compile() -> None:
    """§12.14 nested objects reached via $ref to $defs and via items, all closed, compile
    and validate."""
    schema = closed(
        properties={
            "child": {"$ref": "#/$defs/child"},
            "list": {"type": "array", "items": {**CLOSED, "properties": {"n": {}}}},
        },
        **{"$defs": {"child": {**CLOSED, "properties": {"name": {"type": "string"}}}}},
    )
    compiled = compile_(schema)
    compiled.validate({"child": {"name": "x"}, "list": [{"n": 1}]})
    with pytest.raises(SchemaValidationError, match=r"\$\.child"):
        compiled.validate({"child": {"name": "x", "extra": 1}})


@pytest.mark.parametrize("keyword", ["const", "enum", "default", "examples"])
def test_checklist_15_keyword_data_is_not_a_subschema(keyword: str) -> None:
    """§12.15 value keywords hold data: {"const":{"type":"object"}} inside a property (and
    the same under enum, default, examples) is accepted."""
    data: Any = {"type": "object"}
    if keyword in ("enum", "examples"):
        data = [data]
    compiled = compile_(closed(properties={"shape": {keyword: data}}))
    if keyword == "const":
        compiled.validate({"shape": {"type": "object"}})
        with pytest.raises(SchemaValidationError):
            compiled.validate({"shape": {"type": "array"}})


@pytest.mark.parametrize(
    "schema",
    [
        {**CLOSED, "$id": "urn:x"},
        closed(properties={"a": {"$id": "https://example.com/a", "type": "string"}}),
        closed(properties={"$id": {"type": "string"}}),  # even as a property name
        closed(properties={"a": {"const": {"$id": "x"}}}),  # even in keyword data
        closed(properties={"a": {"enum": [[{"$id": "x"}]]}}),
    ],
)
def test_id_is_rejected_anywhere(schema: dict[str, Any]) -> None:
    """§1.3 step 5 any key spelled $id anywhere is rejected."""
    rejected(schema, r"\$id is not allowed")


@pytest.mark.parametrize(
    ("keyword", "value"),
    [
        ("$ref", "https://example.com/schema.json"),
        ("$ref", "other.json#/a"),
        ("$ref", ""),
        ("$ref", 5),
        ("$dynamicRef", "https://example.com/x#meta"),
        ("$recursiveRef", "https://example.com/x"),
    ],
)
def test_references_must_be_local(keyword: str, value: Any) -> None:
    """§1.3 step 5 $ref, $dynamicRef and $recursiveRef are strings starting with '#',
    wherever they appear (keyword data included)."""
    rejected(closed(properties={"a": {keyword: value}}), "local reference")
    rejected(closed(properties={"a": {"const": {keyword: value}}}), "local reference")


def test_checklist_11_a_property_named_id_is_fine() -> None:
    """§12.11 / §1.3 step 5 a property literally named 'id' is not $id."""
    compiled = compile_(closed(properties={"id": {"type": "string"}, "count": {}}))
    compiled.validate({"count": 1})
    compiled.validate({"id": "x"})


def test_references_must_resolve_inside_the_document() -> None:
    """§1.3 step 6 a dangling local reference is a compile error, not a validation crash."""
    rejected(closed(properties={"a": {"$ref": "#/$defs/missing"}}), "does not resolve")
    rejected(closed(properties={"a": {"$ref": "#nowhere"}}), "does not resolve")
    compiled = compile_(
        closed(
            properties={"a": {"$ref": "#num"}, "b": {"$dynamicRef": "#text"}, "c": {"$ref": "#"}},
            **{
                "$defs": {
                    "n": {"$anchor": "num", "type": "integer"},
                    "t": {"$dynamicAnchor": "text", "type": "string"},
                }
            },
        )
    )
    compiled.validate({"a": 1, "b": "x", "c": {"a": 2}})
    with pytest.raises(SchemaValidationError, match=r"^\$\.c\.a: "):
        compiled.validate({"c": {"a": "two"}})


def test_a_local_reference_in_keyword_data_need_not_resolve() -> None:
    """§1.3 step 5 a '#...' string under const is data; it is never looked up."""
    compile_(closed(properties={"a": {"const": {"$ref": "#/nowhere"}}}))


@pytest.mark.parametrize(
    "schema",
    [
        closed(allOf=[{"$ref": "#"}]),
        closed(
            properties={"x": {"$ref": "#/$defs/a"}},
            **{"$defs": {"a": {"$ref": "#/$defs/a"}}},
        ),
        closed(
            **{
                "$defs": {
                    "a": {"anyOf": [{"$ref": "#/$defs/b"}]},
                    "b": {"not": {"$ref": "#/$defs/a"}},
                }
            }
        ),
    ],
)
def test_reference_cycles_without_progress_are_rejected(schema: dict[str, Any]) -> None:
    """§1.3 step 6 (Python build) a reference cycle that re-applies a schema to the same
    value would recurse forever at validation; compilation refuses it."""
    rejected(schema, "reference cycle")


def test_recursion_through_properties_is_fine() -> None:
    """§1.3 step 6 a recursive schema that descends into the value terminates: allowed."""
    tree = closed(properties={"value": {"type": "integer"}, "children": {"type": "array"}})
    tree["properties"]["children"]["items"] = {"$ref": "#"}
    compiled = compile_(tree)
    compiled.validate({"value": 1, "children": [{"value": 2, "children": [{"value": 3}]}]})
    with pytest.raises(SchemaValidationError, match=r"\$\.children\[0\]\.children\[0\]\.value"):
        compiled.validate({"children": [{"children": [{"value": "3"}]}]})


@pytest.mark.parametrize(
    ("schema", "match"),
    [
        (closed(minProperties="x"), "minProperties"),
        (closed(properties={"a": {"type": "strung"}}), "strung"),
        (closed(properties={"a": {"type": "string", "pattern": "(["}}), "regex"),
        (closed(required="a"), "required"),
        (closed(properties={"a": {"multipleOf": 0}}), "multipleOf"),
    ],
)
def test_invalid_draft_2020_12_is_rejected(schema: dict[str, Any], match: str) -> None:
    """§1.3 step 6 compiler errors (metaschema violations) → InvalidSchemaError."""
    rejected(schema, match)


def test_schema_dialect() -> None:
    """§1.3 step 6 the schema is Draft 2020-12: a $schema naming it is fine, another
    dialect is refused (it would need other semantics, or a retrieval)."""
    compile_({**CLOSED, "$schema": "https://json-schema.org/draft/2020-12/schema"})
    rejected({**CLOSED, "$schema": "http://json-schema.org/draft-07/schema#"}, "2020-12")


def test_schema_decode_limits() -> None:
    """§1.3 step 1 bounded decode with the schema limits: 64 KiB, depth 32, 1024 keys;
    failures are InvalidSchemaError with the field."""
    rejected(b"", "empty JSON document")
    rejected(b"{" + b" " * MAX_SCHEMA_BYTES + b"}", "the limit is 65536")
    rejected(b'{"type":"object","additionalProperties":false} {}', "trailing JSON value")
    props: dict[str, Any] = {
        f"p{i}": {} for i in range(1021)
    }  # 1021 + type, additionalProperties, properties
    compile_(closed(properties=props))
    rejected(closed(properties={**props, "one_more": {}}), "more than 1024")
    deep: dict[str, Any] = {}
    for _ in range(31):  # "not" nests objects only: the root and 31 levels make 32
        deep = {"not": deep}
    compile_(closed(**deep))
    rejected(closed(**{"not": deep}), "deeper than 32", field="resume")


def test_checklist_7d_allof_nesting_33_is_rejected() -> None:
    """§12.7(d) a schema nesting allOf 33 levels deep is refused by the depth bound."""
    deep: dict[str, Any] = {}
    for _ in range(33):
        deep = {"allOf": [deep]}
    rejected(closed(allOf=[deep]), "deeper than 32")


# -- CompiledSchema.validate --------------------------------------------------------------


COUNTER = closed(
    required=["count"],
    properties={
        "count": {"type": "integer", "minimum": 0},
        "ratio": {"type": "number", "exclusiveMaximum": 1},
        "tags": {"type": "array", "items": {"type": "string"}},
    },
)


def check(schema: dict[str, Any], raw: str) -> None:
    compile_(schema).validate(decode_document(raw))


def test_validation_names_the_json_path() -> None:
    """§1.4 a failing document raises SchemaValidationError naming the JSON path."""
    with pytest.raises(SchemaValidationError, match=r"^\$\.count: ") as caught:
        check(COUNTER, '{"count": "1"}')
    assert caught.value.path == "$.count"
    with pytest.raises(SchemaValidationError, match=r"^\$\.tags\[1\]: expected a string, got a"):
        check(COUNTER, '{"count": 1, "tags": ["a", 2]}')
    with pytest.raises(
        SchemaValidationError, match=r"^\$\.extra: additional property not allowed$"
    ):
        check(COUNTER, '{"count": 1, "extra": 2}')
    with pytest.raises(SchemaValidationError, match=r"^\$\.count: required property missing$"):
        check(COUNTER, "{}")
    assert isinstance(SchemaValidationError([Violation("$", "x")]), ValueError)


def test_validation_names_every_violation() -> None:
    """Usability: every violation, with its JSON path and a reason to act on, shallowest
    first; past the bound, how many more; document strings are never quoted."""
    with pytest.raises(SchemaValidationError) as caught:
        check(COUNTER, '{"count": -1, "ratio": 1.5, "tags": ["a", 2], "extra": "secret"}')
    assert str(caught.value) == (
        "$.count: -1 is less than the minimum 0; $.extra: additional property not allowed; "
        "$.ratio: 1.5 is not less than 1; $.tags[1]: expected a string, got a number"
    )
    assert [v.path for v in caught.value.violations] == [
        "$.count",
        "$.extra",
        "$.ratio",
        "$.tags[1]",
    ]
    assert caught.value.total == 4
    with pytest.raises(SchemaValidationError) as caught:
        check(COUNTER, json.dumps({f"k{index:02d}": "secret" for index in range(20)}))
    error = caught.value
    assert error.total == 21 and len(error.violations) == MAX_REPORTED_VIOLATIONS
    assert str(error).startswith("$.count: required property missing; $.k00: additional")
    assert str(error).endswith(f"; and {21 - MAX_REPORTED_VIOLATIONS} more")
    assert "secret" not in str(error)
    bounded = closed(
        properties={
            "name": {"type": "string", "minLength": 2, "maxLength": 3, "pattern": "^[a-z]+$"},
            "mode": {"enum": ["fast", "slow"]},
            "items": {"type": "array", "maxItems": 1, "uniqueItems": True},
        }
    )
    with pytest.raises(SchemaValidationError) as caught:
        check(bounded, '{"name": "ABCD", "mode": "other", "items": [1, 1]}')
    assert str(caught.value) == (
        "$.items: holds duplicate items; $.items: more than 1 items; "
        '$.mode: must be one of ["fast", "slow"]; $.name: does not match the pattern "^[a-z]+$"; '
        "$.name: longer than 3 characters"
    )


def test_validation_picks_one_error_deterministically() -> None:
    """§1.4 with several errors the same one is reported every time."""
    compiled = compile_(COUNTER)
    document = decode_document('{"count": -1, "ratio": 2, "tags": [1], "zzz": 0}')
    messages = set()
    for _ in range(5):
        with pytest.raises(SchemaValidationError) as caught:
            compiled.validate(document)
        messages.add(str(caught.value))
    assert len(messages) == 1


def test_validation_works_on_exact_decimals() -> None:
    """§1.4 numbers decoded as Decimal validate as JSON numbers: 2.0 is an integer, 1.5
    is not; bounds compare exactly."""
    check(COUNTER, '{"count": 2.0}')
    check(COUNTER, '{"count": 1e2}')
    with pytest.raises(SchemaValidationError, match=r"^\$\.count: expected an integer, got a"):
        check(COUNTER, '{"count": 1.5}')
    check(COUNTER, '{"count": 0, "ratio": 0.99999999999999999999}')  # a float would be 1.0
    with pytest.raises(SchemaValidationError, match=r"\$\.ratio"):
        check(COUNTER, '{"count": 0, "ratio": 1.0}')
    with pytest.raises(SchemaValidationError, match=r"\$\.count"):
        check(COUNTER, '{"count": -0.5}')
    with pytest.raises(SchemaValidationError, match=r"\$\.count"):
        check(COUNTER, '{"count": true}')  # a boolean is not a number


def test_multiple_of_is_exact() -> None:
    """§1.4 multipleOf on exact decimals: 0.3 is a multiple of 0.1 (binary floats say
    otherwise); numbers too large to check exactly are refused, not a crash."""
    schema = closed(properties={"amount": {"type": "number", "multipleOf": 0.1}})
    check(schema, '{"amount": 0.3}')
    check(schema, '{"amount": 7}')
    check(schema, '{"amount": 1e40}')
    with pytest.raises(SchemaValidationError, match=r"not a multiple of 0\.1"):
        check(schema, '{"amount": 0.35}')
    with pytest.raises(SchemaValidationError, match="too large to check"):
        check(schema, '{"amount": 1e99999}')


def test_long_values_are_bounded_in_messages() -> None:
    """§1.4 messages quote values; they stay bounded (512 bytes)."""
    with pytest.raises(SchemaValidationError) as caught:
        check(COUNTER, json.dumps({"count": "x" * 100_000}))
    assert len(str(caught.value).encode()) <= 512 + len("$.count: ")


def test_enum_and_const_compare_numbers_by_value() -> None:
    """§1.4 exact numbers compare by value in enum/const (1.0 equals 1, true is not 1)."""
    schema = closed(properties={"n": {"enum": [1, 2.5]}})
    check(schema, '{"n": 1.0}')
    check(schema, '{"n": 2.50}')
    with pytest.raises(SchemaValidationError):
        check(schema, '{"n": true}')
