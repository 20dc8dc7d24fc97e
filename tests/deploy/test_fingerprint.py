"""Tool fingerprints: the schema-aware removal of annotations, canonical JSON, and the
contract / full distinction (property tests over generated schemas)."""

from __future__ import annotations

import hashlib
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from flowledger.deploy import (
    FingerprintError,
    ToolInfo,
    contract_fingerprint,
    full_fingerprint,
    strip_annotations,
)
from flowledger.deploy.sources.fingerprint import (
    ANNOTATION_KEYWORDS,
    MAX_SCHEMA_DEPTH,
    canonical_json,
    contract_document,
    short,
)

ONE_SCHEMA = ["additionalProperties", "not", "if", "then", "else", "contains", "propertyNames"]
SCHEMA_ARRAYS = ["allOf", "anyOf", "oneOf", "prefixItems"]
SCHEMA_MAPS = ["properties", "patternProperties", "$defs", "definitions", "dependentSchemas"]

# Names that collide with annotation keywords on purpose: as property names, map keys,
# required entries or data they must survive.
names = st.sampled_from(["title", "description", "examples", "type", "name", "a", "b_1"])
data: st.SearchStrategy[Any] = st.recursive(
    st.none() | st.booleans() | st.integers(-1000, 1000) | st.text(max_size=4),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(names, inner, max_size=3),
    max_leaves=6,
)


@st.composite
def schema_pairs(draw: st.DrawFn, depth: int = 0) -> tuple[Any, Any]:
    """A schema without annotation keywords, and the same schema with annotation
    keywords added at schema positions (the structure is built here, independently of
    the walk under test)."""
    if depth > 0 and draw(st.integers(0, 5)) == 0:
        boolean = draw(st.booleans())
        return boolean, boolean
    bare: dict[str, Any] = {}
    if draw(st.booleans()):
        bare["type"] = draw(st.sampled_from(["object", "string", "array", "number"]))
    for keyword, values in (
        ("default", data),
        ("const", data),
        ("enum", st.lists(data, max_size=3)),
        ("required", st.lists(names, max_size=3, unique=True)),
        ("x-vendor", data),  # unknown keywords are data
    ):
        if draw(st.integers(0, 3)) == 0:
            bare[keyword] = draw(values)
    annotated = dict(bare)
    if depth < 3:
        keywords = ONE_SCHEMA + SCHEMA_ARRAYS + SCHEMA_MAPS + ["items", "dependencies"]
        for keyword in draw(st.lists(st.sampled_from(keywords), max_size=3, unique=True)):
            child = schema_pairs(depth + 1)
            if keyword in ONE_SCHEMA:
                bare[keyword], annotated[keyword] = draw(child)
            elif keyword in SCHEMA_ARRAYS or (keyword == "items" and draw(st.booleans())):
                pairs = draw(st.lists(child, max_size=3))
                bare[keyword] = [b for b, _ in pairs]
                annotated[keyword] = [a for _, a in pairs]
            elif keyword == "items":
                bare[keyword], annotated[keyword] = draw(child)
            elif keyword == "dependencies":
                keys = draw(st.lists(names, max_size=3, unique=True))
                bare[keyword], annotated[keyword] = {}, {}
                for key in keys:
                    if draw(st.booleans()):  # an array of property names: data
                        listed = draw(st.lists(names, max_size=2))
                        bare[keyword][key] = annotated[keyword][key] = listed
                    else:
                        bare[keyword][key], annotated[keyword][key] = draw(child)
            else:
                keys = draw(st.lists(names, max_size=3, unique=True))
                pairs = [draw(child) for _ in keys]
                bare[keyword] = {k: b for k, (b, _) in zip(keys, pairs, strict=True)}
                annotated[keyword] = {k: a for k, (_, a) in zip(keys, pairs, strict=True)}
    for keyword in draw(st.lists(st.sampled_from(sorted(ANNOTATION_KEYWORDS)), unique=True)):
        annotated[keyword] = draw(data)
    # the server's key order is not part of anything
    order = draw(st.permutations(list(annotated)))
    return bare, {key: annotated[key] for key in order}


def entry(input_schema: Any, output_schema: Any = None, **more: Any) -> dict[str, Any]:
    listed: dict[str, Any] = {"name": "tool", "inputSchema": input_schema}
    if output_schema is not None:
        listed["outputSchema"] = output_schema
    listed.update(more)
    return listed


@settings(max_examples=100, deadline=None)
@given(schema_pairs(), schema_pairs())
def test_annotations_never_change_the_contract_fingerprint(
    input_pair: tuple[Any, Any], output_pair: tuple[Any, Any]
) -> None:
    (bare_in, annotated_in), (bare_out, annotated_out) = input_pair, output_pair
    assert strip_annotations(annotated_in) == bare_in
    assert strip_annotations(bare_in) == bare_in  # nothing else is removed
    plain = entry(bare_in, bare_out)
    described = entry(annotated_in, annotated_out, description="words", title="Words")
    assert contract_fingerprint(described) == contract_fingerprint(plain)
    assert full_fingerprint(described) != full_fingerprint(plain)


@settings(max_examples=100, deadline=None)
@given(schema_pairs(), st.sampled_from(["minProperties", "maxLength", "format"]))
def test_any_other_change_changes_the_contract_fingerprint(
    pair: tuple[Any, Any], keyword: str
) -> None:
    _, annotated = pair
    if not isinstance(annotated, dict) or keyword in annotated:
        return
    changed = {**annotated, keyword: 7}
    assert contract_fingerprint(entry(changed)) != contract_fingerprint(entry(annotated))
    renamed = {**entry(annotated), "name": "other"}
    assert contract_fingerprint(renamed) != contract_fingerprint(entry(annotated))


def test_a_property_named_title_stays() -> None:
    schema = {
        "type": "object",
        "title": "Arguments",
        "description": "what the tool takes",
        "properties": {
            "title": {"type": "string", "title": "Title", "description": "the title"},
            "description": {"type": "string", "examples": ["x"]},
        },
        "required": ["title"],
        "default": {"title": "kept", "description": "kept too"},
        "examples": [{"title": "gone"}],
    }
    assert strip_annotations(schema) == {
        "type": "object",
        "properties": {"title": {"type": "string"}, "description": {"type": "string"}},
        "required": ["title"],
        "default": {"title": "kept", "description": "kept too"},
    }


def test_every_schema_position_is_walked() -> None:
    note = {"type": "string", "description": "d", "title": "t", "examples": ["e"]}
    plain = {"type": "string"}
    schema = {
        "items": [note, note],
        "additionalItems": note,
        "prefixItems": [note],
        "anyOf": [note],
        "allOf": [note],
        "oneOf": [note],
        "not": note,
        "if": note,
        "then": note,
        "else": note,
        "contains": note,
        "propertyNames": note,
        "additionalProperties": note,
        "unevaluatedItems": note,
        "unevaluatedProperties": note,
        "contentSchema": note,
        "patternProperties": {"^x": note},
        "$defs": {"title": note},
        "definitions": {"n": note},
        "dependentSchemas": {"a": note},
        "dependencies": {"a": note, "b": ["title", "c"]},
    }
    stripped = strip_annotations(schema)
    assert json.dumps(stripped).count('"description"') == 0
    assert stripped["items"] == [plain, plain]
    assert stripped["$defs"] == {"title": plain}
    assert stripped["dependencies"] == {"a": plain, "b": ["title", "c"]}
    assert strip_annotations({"items": note}) == {"items": plain}
    assert strip_annotations(True) is True


def test_unknown_keywords_are_data() -> None:
    schema = {"x-ui": {"title": "kept"}, "const": {"description": "kept"}}
    assert strip_annotations(schema) == schema


def test_fingerprints_are_sha256_of_canonical_json() -> None:
    listed = {"name": "t", "inputSchema": {"type": "object", "title": "T"}, "description": "x"}
    document = contract_document(listed)
    assert (
        canonical_json(document)
        == b'{"inputSchema":{"type":"object"},"name":"t","outputSchema":null}'
    )
    assert (
        contract_fingerprint(listed)
        == "sha256:" + hashlib.sha256(canonical_json(document)).hexdigest()
    )
    expected_full = hashlib.sha256(canonical_json(listed)).hexdigest()
    assert full_fingerprint(listed) == "sha256:" + expected_full
    assert short(full_fingerprint(listed)) == expected_full[:12]
    reordered = dict(reversed(list(listed.items())))
    assert full_fingerprint(reordered) == full_fingerprint(listed)


def test_what_has_no_canonical_form_is_a_fingerprint_error() -> None:
    with pytest.raises(FingerprintError, match="canonical JSON"):
        full_fingerprint({"name": "t", "inputSchema": {"maximum": float("nan")}})
    with pytest.raises(FingerprintError, match="canonical JSON"):
        contract_fingerprint({"name": "t", "inputSchema": {"maximum": 2**60}})
    deep: dict[str, Any] = {"type": "string"}
    for _ in range(MAX_SCHEMA_DEPTH + 1):
        deep = {"not": deep}
    with pytest.raises(FingerprintError, match="deeper than"):
        contract_fingerprint({"name": "t", "inputSchema": deep})


def test_tool_info_reads_hints_from_annotations() -> None:
    base = {"name": "t", "inputSchema": {"type": "object"}}
    plain = ToolInfo.from_entry(base)
    assert (plain.read_only, plain.idempotent, plain.repeatable) == (False, False, False)
    assert plain.output_schema is None and plain.annotations == {}
    hinted = ToolInfo.from_entry({**base, "annotations": {"idempotentHint": True}})
    assert (hinted.read_only, hinted.idempotent, hinted.repeatable) == (False, True, True)
    assert hinted.contract_fingerprint == plain.contract_fingerprint
    assert hinted.full_fingerprint != plain.full_fingerprint
    shown = hinted.to_json()
    assert shown["idempotent"] is True and shown["contract_fingerprint"].startswith("sha256:")
    assert json.loads(json.dumps(shown)) == shown
