"""Metadata validation and text bounding: workflows-spec §1.1, §1.2, §1.6, §6.3 and
checklist §12.4, §12.5, §12.6, §12.51 (the `bound_text` part)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from flowledger.workflows.authoring.metadata import (
    MAX_DESCRIPTION_BYTES,
    MAX_LABEL_BYTES,
    MAX_SUMMARY_BYTES,
    Metadata,
    VertexMetadata,
    bound_summary,
    bound_text,
)
from flowledger.workflows.errors import InvalidSchemaError

SCHEMA: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "properties": {"count": {"type": "integer"}},
}


def meta(name: str = "counter", version: str = "v1", **kwargs: Any) -> Metadata:
    kwargs.setdefault("input_schema", SCHEMA)
    return Metadata(name, version, **kwargs)


def refused(field: str, **kwargs: Any) -> InvalidSchemaError:
    with pytest.raises(InvalidSchemaError) as caught:
        meta(**kwargs)
    assert caught.value.field == field
    return caught.value


# -- names and versions ------------------------------------------------------------------


@pytest.mark.parametrize("name", ["ab", "Upper_case", "starts-dash", "a" * 65])
def test_checklist_names_are_refused(name: str) -> None:
    """§12.6 names ab, Upper_case, starts-dash and 65xa are refused (invalid-schema kind)."""
    error = refused("name", name=name)
    assert "invalid workflow schema (name)" in str(error)


@pytest.mark.parametrize(
    "name", ["", "1abc", "_abc", "abc-d", "abc d", "abc\n", "ábc", "abc/d", "a.bc"]
)
def test_other_bad_names_are_refused(name: str) -> None:
    """§1.2 a name fully matches ^[a-z][a-z0-9_]{2,63}$ (a trailing newline included)."""
    refused("name", name=name)


@pytest.mark.parametrize("name", ["abc", "a12", "a_b", "counter_flow", "a" * 64])
def test_good_names_are_accepted(name: str) -> None:
    """§1.2 three to 64 characters starting with a lowercase letter."""
    assert meta(name=name).name == name


def test_non_string_name_and_version_are_refused() -> None:
    """§1.2 names and versions are strings."""
    refused("name", name=123)
    refused("version", version=1)


@pytest.mark.parametrize(
    "version", ["v1", "1", "1.0.0", "2024-01-02", "v1_beta.2", "0", "a" * 64, "1-"]
)
def test_good_versions_are_accepted(version: str) -> None:
    """§11.1 (our divergence) versions match ^[a-z0-9][a-z0-9_.-]{0,63}$."""
    assert meta(version=version).version == version


@pytest.mark.parametrize(
    "version",
    [
        "",
        "V1",  # the reference accepts this, then fails at run creation
        "1.0 beta",  # likewise
        " v1",
        "v1 ",
        "v1\n",
        "v1\t",
        "v\x001",
        "-v1",
        ".v1",
        "_v1",
        "v1/x",
        "v1+build",
        "v1:x",
        "é1",
        "a" * 65,
    ],
)
def test_bad_versions_are_refused(version: str) -> None:
    """§11.1 (our divergence: stricter than the reference's trim/NUL/CR/LF/TAB rule) any
    version outside ^[a-z0-9][a-z0-9_.-]{0,63}$ is refused at metadata time."""
    refused("version", version=version)


# -- description -------------------------------------------------------------------------


def test_description_bounds_are_bytes() -> None:
    """§1.2 description ≤ 1024 UTF-8 bytes (empty allowed); multi-byte text counts bytes."""
    assert meta(description="").description == ""
    assert meta(description="d" * MAX_DESCRIPTION_BYTES).description == "d" * 1024
    assert meta(description="é" * 512).description == "é" * 512  # exactly 1024 bytes
    refused("description", description="d" * 1025)
    refused("description", description="é" * 513)  # 513 characters, 1026 bytes


def test_description_must_be_valid_unicode_text() -> None:
    """§1.2 description is valid UTF-8: a lone surrogate has no UTF-8 form."""
    refused("description", description="bad \ud800")
    refused("description", description=b"bytes")


# -- vertices ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "label",
    ["", "x" * (MAX_LABEL_BYTES + 1), "€" * 22, "a\x00b", "a\rb", "a\nb", "lone \udc00"],
)
def test_bad_vertex_labels_are_refused(label: str) -> None:
    """§1.2 labels: non-empty, ≤ 64 bytes (22x€ is 66 bytes), valid UTF-8, no NUL/CR/LF."""
    refused("vertex label", vertices=[VertexMetadata("fine"), VertexMetadata(label)])


def test_good_vertex_labels_are_accepted() -> None:
    """§1.2 a 64-byte label, multi-byte text within 64 bytes, and tabs are fine."""
    labels = ["x" * 64, "€" * 21, "with\ttab", "Review draft"]
    metadata = meta(vertices=[VertexMetadata(label) for label in labels])
    assert [v.label for v in metadata.vertices] == labels


def test_vertex_ids_must_be_unique_when_set() -> None:
    """§1.2 set vertex ids are unique; unset ones may repeat."""
    refused("vertex ID", vertices=[VertexMetadata("A", "draft"), VertexMetadata("B", "draft")])
    metadata = meta(vertices=[VertexMetadata("A"), VertexMetadata("B"), VertexMetadata("C", "c")])
    assert [v.id for v in metadata.vertices] == [None, None, "c"]


@pytest.mark.parametrize("vertex_id", ["", "Draft", "1draft", "draft-x", "d" * 65, 7])
def test_vertex_ids_must_be_flow_vertex_names(vertex_id: Any) -> None:
    """§1.1 (Python build) a vertex id is a flow vertex name ^[a-z][a-z0-9_]{0,63}$."""
    refused("vertex ID", vertices=[VertexMetadata("Label", vertex_id)])


def test_vertices_must_be_vertex_metadata() -> None:
    """§1.2 the vertex list holds VertexMetadata items."""
    refused("vertices", vertices=["label"])
    refused("vertices", vertices="label")
    refused("vertex label", vertices=[VertexMetadata(None)])  # type: ignore[arg-type]


# -- schemas -----------------------------------------------------------------------------


def test_mapping_schemas_are_stored_as_canonical_json() -> None:
    """§1.2 (Python build) a mapping schema is kept as RFC 8785 canonical JSON bytes."""
    metadata = meta(input_schema={"type": "object", "additionalProperties": False, "a": 1.0})
    assert metadata.input_schema_bytes == b'{"a":1,"additionalProperties":false,"type":"object"}'


def test_text_and_byte_schemas_are_kept_exactly() -> None:
    """§1.2 schemas are raw JSON bytes: text and bytes are kept as given, not re-encoded."""
    text = '{ "type" : "object" ,"additionalProperties":false }'
    assert meta(input_schema=text).input_schema_bytes == text.encode()
    assert meta(input_schema=text.encode()).input_schema_bytes == text.encode()
    assert meta(input_schema=b"").input_schema_bytes == b""  # fails only at registration


def test_empty_resume_schema_means_none() -> None:
    """§1.2 an empty resume schema is no resume schema (omitted from JSON)."""
    for empty in (None, b"", ""):
        metadata = meta(resume_schema=empty)
        assert metadata.resume_schema_bytes is None
        assert metadata.resume_schema is None
        assert "resume_schema" not in metadata.to_json()


def test_unusable_schema_arguments_are_refused() -> None:
    """§1.2 a schema is a mapping of JSON data, text or bytes; the field names which."""
    refused("input", input_schema={"bad": object()})
    refused("input", input_schema={"bad": float("nan")})
    refused("input", input_schema=42)
    refused("input", input_schema="\ud800")
    refused("resume", resume_schema=["not", "a", "mapping"])


def test_metadata_copies_its_inputs() -> None:
    """§12.4 mutating the original schema bytes or vertex list afterwards does not change
    the stored metadata."""
    raw = bytearray(json.dumps(SCHEMA).encode())
    schema_dict = {"type": "object", "additionalProperties": False}
    vertices = [VertexMetadata("Draft", "draft")]
    metadata = Metadata(
        "counter",
        "v1",
        input_schema=raw,  # type: ignore[arg-type]
        resume_schema=schema_dict,
        vertices=vertices,
    )
    raw[:] = b"garbage"
    schema_dict["type"] = "array"
    vertices.append(VertexMetadata("Extra"))
    assert metadata.input_schema == SCHEMA
    assert metadata.resume_schema == {"type": "object", "additionalProperties": False}
    assert metadata.vertices == (VertexMetadata("Draft", "draft"),)


def test_metadata_accessors_return_fresh_values() -> None:
    """§12.4 mutating values returned by accessors does not change the stored metadata."""
    metadata = meta(resume_schema=SCHEMA, vertices=[VertexMetadata("Draft")])
    first = metadata.input_schema
    first["type"] = "array"
    first["properties"]["count"] = {}
    resume = metadata.resume_schema
    assert resume is not None
    resume.clear()
    document = metadata.to_json()
    document["vertices"].append({"label": "x"})
    document["input_schema"]["type"] = "string"
    assert metadata.input_schema == SCHEMA
    assert metadata.resume_schema == SCHEMA
    assert metadata.to_json()["vertices"] == [{"label": "Draft"}]
    assert isinstance(metadata.vertices, tuple)
    with pytest.raises(AttributeError):
        metadata.name = "other"  # type: ignore[misc]
    with pytest.raises(AttributeError):
        metadata.vertices[0].label = "other"  # type: ignore[misc]


def test_to_json_shape() -> None:
    """§1.1, §1.2 discovery JSON: name, version, description, input_schema, resume_schema,
    vertices (a list, id only when set)."""
    metadata = meta(
        description="Counts.",
        resume_schema=SCHEMA,
        vertices=[VertexMetadata("Increment", "increment"), VertexMetadata("Done")],
    )
    document = metadata.to_json()
    assert document == {
        "name": "counter",
        "version": "v1",
        "description": "Counts.",
        "input_schema": SCHEMA,
        "resume_schema": SCHEMA,
        "vertices": [{"id": "increment", "label": "Increment"}, {"label": "Done"}],
    }
    json.dumps(document)  # plain JSON data
    assert meta().to_json()["vertices"] == []


def test_input_schema_that_is_not_json_reports_the_field() -> None:
    """§1.2 metadata does not parse schemas; reading an unparsable one names the field."""
    metadata = meta(input_schema=b"{not json")
    with pytest.raises(InvalidSchemaError) as caught:
        _ = metadata.input_schema
    assert caught.value.field == "input"


def test_equality_is_by_value() -> None:
    """Metadata compares (and hashes) by value."""
    a = meta(vertices=[VertexMetadata("A", "a")])
    b = meta(vertices=(VertexMetadata("A", "a"),))
    assert a == b and hash(a) == hash(b)
    assert a != meta(vertices=[VertexMetadata("A", "b")])
    assert a != meta(version="v2", vertices=[VertexMetadata("A", "a")])
    assert meta(input_schema=b"{}") != meta(input_schema=b"{ }")
    assert a != "counter"


# -- bound_summary / bound_text ----------------------------------------------------------


def test_bound_summary_keeps_short_text() -> None:
    """§1.6 text of at most 1024 bytes is returned unchanged (whitespace included)."""
    assert bound_summary("") == ""
    assert bound_summary("  ok\n") == "  ok\n"
    exact = "x" * MAX_SUMMARY_BYTES
    assert bound_summary(exact) == exact


def test_bound_summary_cuts_long_text_at_1024_bytes() -> None:
    """§12.5 a 5001-byte summary becomes exactly 1024 bytes."""
    assert len(bound_summary("x" * 5001).encode()) == 1024


def test_bound_summary_cuts_at_a_code_point_boundary() -> None:
    """§1.6 the cut drops a partial trailing code point: 400x€ (1200 bytes) → 341x€."""
    assert bound_summary("€" * 400) == "€" * 341
    assert bound_summary("a" + "😀" * 300) == "a" + "😀" * 255  # 1 + 255x4 = 1021 bytes


def test_bound_summary_makes_lone_surrogates_storable() -> None:
    """(Python build) a lone surrogate becomes '?' so the summary always encodes."""
    assert bound_summary("a\ud800b") == "a?b"


def test_bound_text_removes_controls_and_trims() -> None:
    """§6.3 Cc characters are deleted, Unicode whitespace trimmed at both ends."""
    assert bound_text("\u00a0 a\x00b\x1fc\x7f\x85d\u009f \u3000", 100) == "abcd"
    assert bound_text("\tlabel\n", 100) == "label"
    assert bound_text("inner  space", 100) == "inner  space"


def test_bound_text_bounds_bytes_at_code_points() -> None:
    """§12.51 CJK labels to ≤ 128 bytes and emoji messages to ≤ 512 bytes: valid UTF-8,
    actually truncated, cut at a code-point boundary."""
    label = bound_text("漢字" * 100, 128)
    assert len(label.encode()) <= 128 and label == ("漢字" * 100)[: len(label)]
    assert len(label) == 42  # 126 bytes: a 43rd character would need 129
    message = bound_text("😀" * 200, 512)
    assert message == "😀" * 128


def test_bound_text_trims_again_after_the_cut() -> None:
    """§6.3 whitespace exposed by the cut is trimmed."""
    assert bound_text("abc   def", 5) == "abc"


def test_bound_text_refuses_nonpositive_limits_and_invalid_text() -> None:
    """§6.3 limit ≤ 0 or invalid UTF-8 (a lone surrogate) gives ''."""
    assert bound_text("abc", 0) == ""
    assert bound_text("abc", -1) == ""
    assert bound_text("abc\udfff", 10) == ""
    assert bound_text("abc", 3) == "abc"


def test_vertex_metadata_is_frozen_and_renders_json() -> None:
    """§1.1 JSON form {"id", "label"} with id omitted when unset; values are immutable."""
    assert VertexMetadata("Draft").to_json() == {"label": "Draft"}
    assert VertexMetadata("Draft", "draft").to_json() == {"id": "draft", "label": "Draft"}
    with pytest.raises(AttributeError):
        VertexMetadata("Draft").label = "x"  # type: ignore[misc]
