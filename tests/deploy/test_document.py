"""Reading authored documents: YAML as JSON data (core schema), JSON, duplicates refused
with their place, and every bound enforced before anything is built."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import yaml

from flowledger.deploy import ArtifactValidationError, read_document
from flowledger.deploy.artifacts import document
from flowledger.deploy.artifacts.limits import MAX_DOCUMENT_DEPTH, MAX_SOURCE_BYTES


@pytest.fixture(autouse=True, params=["libyaml", "pure-python"])
def yaml_parser(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Every test runs with both of PyYAML's parsers (they differ in details, such as
    how they report a plain scalar's style)."""
    if request.param == "pure-python":
        monkeypatch.setattr(document, "_LOADER", yaml.SafeLoader)
    elif not getattr(yaml, "__with_libyaml__", False):
        pytest.skip("PyYAML was built without libyaml")
    yield


def issues(source: str | bytes, format: str | None = None) -> list[tuple[str, str]]:
    with pytest.raises(ArtifactValidationError) as caught:
        read_document(source, format)  # type: ignore[arg-type]
    return [(issue.place, issue.code) for issue in caught.value.issues]


def test_yaml_is_read_with_the_core_schema() -> None:
    text = (
        "a: yes\nb: 2024-01-01\nc: 0x1f\nd: 1.5\ne: ~\nf: on\ng: !!str 5\nh: true\ni: -7\nj: '3'\n"
    )
    assert read_document(text) == {
        "a": "yes",
        "b": "2024-01-01",
        "c": 31,
        "d": 1.5,
        "e": None,
        "f": "on",
        "g": "5",
        "h": True,
        "i": -7,
        "j": "3",
    }


def test_json_is_detected_and_read() -> None:
    assert read_document('  {"a": [1, 2.5, null, true, "x"]}') == {"a": [1, 2.5, None, True, "x"]}
    assert read_document(b'{"a": {}}', "json") == {"a": {}}


def test_yaml_duplicate_keys_name_their_place_and_line() -> None:
    with pytest.raises(ArtifactValidationError) as caught:
        read_document("nodes:\n  a:\n    kind: end\n    kind: set\n")
    (issue,) = caught.value.issues
    assert issue.place == "nodes.a"
    assert issue.code == "duplicate_key"
    assert "'kind'" in issue.message and "line 4" in issue.message


def test_json_duplicate_keys_are_all_reported_with_their_places() -> None:
    found = issues('{"nodes": {"a": {"x": 1, "x": 2}}, "start": "a", "start": "b"}')
    assert found == [("nodes.a", "duplicate_key"), ("$", "duplicate_key")]


@pytest.mark.parametrize(
    ("text", "place", "code"),
    [
        ("a: &x 1\nb: *x\n", "a", "yaml_alias"),
        ("a:\n  <<: {b: 1}\n", "a", "yaml_alias"),
        ("a: !!binary aGVsbG8=\n", "a", "yaml_tag"),
        ("a: !custom 1\n", "a", "yaml_tag"),
        ("a: !!int abc\n", "a", "yaml_tag"),
        ("a: .inf\n", "a", "not_finite"),
        ("1: x\n", "$", "key_not_string"),
        ("? [a]\n: x\n", "$", "key_not_string"),
        ("a: 1\n---\nb: 2\n", "$", "many_documents"),
        ("a: [1, 2\n", "$", "syntax"),
        ("", "$", "empty"),
        ('{"a": 1,}', "$", "syntax"),
        ('{"a": NaN}', "$", "syntax"),
    ],
)
def test_refusals_name_their_place(text: str, place: str, code: str) -> None:
    assert (place, code) in issues(text)


def test_syntax_errors_give_line_and_column() -> None:
    with pytest.raises(ArtifactValidationError) as caught:
        read_document("a: 1\nb: [x\nc: 2\n")
    assert "line" in caught.value.issues[0].message
    with pytest.raises(ArtifactValidationError) as caught:
        read_document('{\n"a": }')
    assert "line 2" in caught.value.issues[0].message


def test_nesting_is_bounded_before_building() -> None:
    deep = "[" * (MAX_DOCUMENT_DEPTH + 1) + "]" * (MAX_DOCUMENT_DEPTH + 1)
    assert issues(deep, "json") == [("$", "too_deep")]
    assert "too_deep" in {code for _, code in issues("a: " + deep)}
    hostile = "[" * 100_000
    assert issues(hostile, "json") == [("$", "too_deep")]
    assert {code for _, code in issues(hostile, "yaml")} & {"too_deep", "syntax"}


def test_size_and_encoding_are_bounded() -> None:
    assert issues(b"a: " + b"x" * MAX_SOURCE_BYTES) == [("$", "too_large")]
    assert issues(b"a: \xff\xfe") == [("$", "not_utf8")]
    assert read_document("\ufeffa: 1") == {"a": 1}
