"""Example argument objects made from input schemas (flowledger/deploy/registry/
examples.py): what each keyword gives, that the result validates where the generator can
solve the schema, that it says so where it cannot, and that no schema makes it loop,
fetch or blow up."""

from __future__ import annotations

from typing import Any

import jsonschema
from hypothesis import given, settings
from hypothesis import strategies as st

from flowledger.deploy.registry.examples import MAX_DEPTH, example_arguments


def example(schema: dict[str, Any]) -> Any:
    made = example_arguments(schema)
    assert made.valid is True, (schema, made.value)
    return made.value


def test_required_properties_and_optional_ones_that_say_their_value() -> None:
    schema = {
        "type": "object",
        "properties": {
            "city": {"type": "string"},
            "units": {"type": "string", "enum": ["metric", "imperial"]},
            "days": {"type": "integer", "default": 3},
            "verbose": {"type": "boolean"},
        },
        "required": ["city"],
    }
    assert example(schema) == {"city": "string", "units": "metric", "days": 3}


def test_formats_bounds_and_types() -> None:
    schema = {
        "type": "object",
        "properties": {
            "when": {"type": "string", "format": "date-time"},
            "mail": {"type": "string", "format": "email"},
            "id": {"type": "string", "format": "uuid"},
            "code": {"type": "string", "minLength": 10, "maxLength": 12},
            "short": {"type": "string", "maxLength": 3},
            "count": {"type": "integer", "minimum": 5, "maximum": 9},
            "above": {"type": "number", "exclusiveMinimum": 1},
            "negative": {"type": "integer", "maximum": -4},
            "step": {"type": "integer", "minimum": 1, "multipleOf": 5},
            "ratio": {"type": ["null", "number"]},
            "flag": {"type": "boolean"},
            "nothing": {"type": "null"},
        },
        "required": [
            "when", "mail", "id", "code", "short", "count", "above", "negative", "step",
            "ratio", "flag", "nothing",
        ],
    }  # fmt: skip
    made = example(schema)
    assert made["when"] == "2026-01-01T12:00:00Z"
    assert made["mail"] == "user@example.com"
    assert len(made["code"]) == 10 and len(made["short"]) == 3
    assert made["count"] == 5 and made["above"] > 1 and made["negative"] == -4
    assert made["step"] == 5 and made["ratio"] == 0 and made["flag"] is False
    assert made["nothing"] is None


def test_arrays_nested_objects_and_prefix_items() -> None:
    schema = {
        "type": "object",
        "properties": {
            "tags": {"type": "array", "items": {"type": "string"}, "minItems": 2},
            "none": {"type": "array", "maxItems": 0, "default": []},
            "point": {"type": "array", "prefixItems": [{"type": "number"}, {"type": "number"}]},
            "owner": {
                "type": "object",
                "properties": {"name": {"type": "string"}},
                "required": ["name"],
            },
        },
        "required": ["tags", "point", "owner"],
    }
    made = example(schema)
    assert made["tags"] == ["string", "string"]
    assert made["point"] == [0, 0] and made["owner"] == {"name": "string"}


def test_examples_const_refs_and_combinators() -> None:
    schema = {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$defs": {"unit": {"type": "string", "enum": ["c", "f"]}},
        "type": "object",
        "properties": {
            "q": {"type": "string", "examples": ["weather in Oslo"]},
            "v": {"const": 2},
            "unit": {"$ref": "#/$defs/unit"},
            "either": {"anyOf": [{"type": "null"}, {"type": "integer", "minimum": 7}]},
            "both": {
                "allOf": [
                    {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]},
                    {"properties": {"b": {"type": "integer"}}, "required": ["b"]},
                ]
            },
        },
        "required": ["q", "v", "unit", "either", "both"],
    }
    assert example(schema) == {
        "q": "weather in Oslo",
        "v": 2,
        "unit": "c",
        "either": 7,
        "both": {"a": "string", "b": 0},
    }


def test_a_pattern_it_cannot_solve_is_reported_invalid() -> None:
    schema = {
        "type": "object",
        "properties": {"time": {"type": "string", "pattern": "^[0-2][0-9]:[0-5][0-9]$"}},
        "required": ["time"],
    }
    made = example_arguments(schema)
    assert made.value == {"time": "string"} and made.valid is False


def test_an_unusable_schema_is_neither_valid_nor_invalid() -> None:
    made = example_arguments({"type": "object", "properties": {"x": {"type": 12}}})
    assert made.valid is None and made.value == {}


def test_a_remote_ref_is_never_fetched() -> None:
    schema = {
        "type": "object",
        "properties": {"x": {"$ref": "https://example.invalid/schema.json"}},
        "required": ["x"],
    }
    made = example_arguments(schema)  # no network: the generator ignores it, validation fails
    assert made.value == {"x": None}
    assert made.valid is None


def test_recursive_schemas_stop_at_the_depth_bound() -> None:
    schema = {
        "$defs": {
            "node": {
                "type": "object",
                "properties": {"child": {"$ref": "#/$defs/node"}},
                "required": ["child"],
            }
        },
        "$ref": "#/$defs/node",
    }
    made = example_arguments(schema).value
    depth = 0
    while isinstance(made, dict) and "child" in made:
        made, depth = made["child"], depth + 1
    assert depth <= MAX_DEPTH + 1


def test_tool_arguments_are_always_an_object() -> None:
    assert example_arguments({"type": "string"}).value == {}
    assert example_arguments({}).value == {}


json_schemas = st.recursive(
    st.sampled_from(
        [
            {"type": "string"},
            {"type": "integer", "minimum": 3},
            {"type": "number", "maximum": -1},
            {"type": "boolean"},
            {"type": "null"},
            {"enum": ["a", 1]},
            {"type": "string", "format": "date"},
        ]
    ),
    lambda inner: st.one_of(
        st.builds(lambda s: {"type": "array", "items": s}, inner),
        st.builds(
            lambda props: {
                "type": "object",
                "properties": props,
                "required": sorted(props),
            },
            st.dictionaries(st.from_regex(r"[a-z]{1,6}", fullmatch=True), inner, max_size=4),
        ),
        st.builds(lambda a, b: {"anyOf": [a, b]}, inner, inner),
    ),
    max_leaves=12,
)


@settings(max_examples=200)
@given(st.dictionaries(st.from_regex(r"[a-z]{1,6}", fullmatch=True), json_schemas, max_size=5))
def test_examples_of_solvable_schemas_validate(properties: dict[str, Any]) -> None:
    schema = {"type": "object", "properties": properties, "required": sorted(properties)}
    made = example_arguments(schema)
    jsonschema.validate(made.value, schema)
    assert made.valid is True
