"""Strict argument decoding and ID parsing (workflows-spec §7.1 `decode_strict`,
`parse_id`), on the decoder alone and through the tools."""

from __future__ import annotations

import json
from collections import OrderedDict
from decimal import Decimal
from typing import Any

import pytest

from flowledger.tools import (
    MAX_ARGUMENT_BYTES,
    MAX_ARGUMENT_DEPTH,
    ArgumentField,
    ToolError,
    decode_arguments,
    parse_id,
)
from flowledger.workflows.authoring.schema import MAX_REPORTED_VIOLATIONS

from .conftest import Env, refused

FIELDS = (
    ArgumentField("run_id", "string", required=True),
    ArgumentField("after_revision", "integer", unsigned=True),
    ArgumentField("limit", "integer"),
    ArgumentField("resume", "object"),
)
PREFIX = "workflow tools: invalid arguments: "
RUN = "00000000-0000-0000-0000-0000000000aa"


def reason(arguments: Any, fields: tuple[ArgumentField, ...] = FIELDS) -> str:
    with pytest.raises(ToolError) as caught:
        decode_arguments(arguments, fields)
    message = str(caught.value)
    assert message.startswith(PREFIX), message
    return message[len(PREFIX) :]


def nested(depth: int) -> str:
    """A document with ``depth`` levels of nesting: the arguments object and resume."""
    inner = '{"k":' * (depth - 2) + "{}" + "}" * (depth - 2)
    return '{"run_id":"x","resume":' + inner + "}"


def test_accepts_text_bytes_mapping_and_none() -> None:
    """§7.1: JSON text, bytes and a mapping decode alike; None means {}."""
    text = '{"run_id":"r","after_revision":3,"resume":{"a":[1,2.5,null,true]}}'
    expected = {
        "run_id": "r",
        "after_revision": 3,
        "resume": {"a": [1, Decimal("2.5"), None, True]},
    }
    assert decode_arguments(text, FIELDS) == expected
    assert decode_arguments(text.encode(), FIELDS) == expected
    assert decode_arguments(bytearray(text.encode()), FIELDS) == expected
    assert decode_arguments(json.loads(text), FIELDS) == expected
    assert decode_arguments(OrderedDict(json.loads(text)), FIELDS) == expected
    assert decode_arguments(None, ()) == {}
    assert decode_arguments("  {}\n", ()) == {}


def test_unknown_field_is_refused_in_document_order() -> None:
    """§7.1: unknown fields are refused; every one is named, in document order."""
    assert reason('{"run_id":"r","zeta":1,"alpha":2}') == (
        "unknown field 'zeta'; unknown field 'alpha'"
    )
    assert reason({"run_id": "r", "alpha": 1}) == "unknown field 'alpha'"
    assert reason({"run_id": "r", "x" * 500: 1}).startswith("unknown field '" + "x" * 64 + "'...")


def test_trailing_and_multiple_values_are_refused() -> None:
    """§7.1: exactly one JSON value; trailing values and garbage are refused."""
    assert reason('{"run_id":"r"}{"run_id":"s"}') == "trailing JSON value"
    assert reason('{"run_id":"r"} 1') == "trailing JSON value"
    assert reason('{"run_id":"r"} x').startswith("trailing JSON value")
    assert reason("").startswith("empty JSON document")
    assert reason("   ").startswith("empty JSON document")
    assert reason('{"run_id":').startswith("unbalanced JSON")
    assert reason('{"run_id" "r"}').startswith("invalid JSON")
    assert reason(b"\xff{}").startswith("JSON document is not valid UTF-8")


@pytest.mark.parametrize(
    ("arguments", "kind"),
    [("[]", "an array"), ("1", "a number"), ('"x"', "a string"), ("null", "null")],
)
def test_document_must_be_an_object(arguments: str, kind: str) -> None:
    """§7.1: the arguments are one JSON object."""
    assert reason(arguments) == f"arguments must be a JSON object, not {kind}"


def test_non_mapping_python_values_are_refused() -> None:
    """§7.1: anything but text, bytes, a mapping or None is refused."""
    assert reason([("run_id", "r")]) == "arguments must be a JSON object, not list"
    assert reason(3) == "arguments must be a JSON object, not int"


def test_field_types() -> None:
    """§7.1: each field has its declared JSON type; null is not a value of any type;
    booleans and fractions are not integers; a negative unsigned fails decoding."""
    assert reason({"run_id": 5}) == "field 'run_id' must be a string, not a number"
    assert reason({"run_id": None}) == "field 'run_id' must be a string, not null"
    assert (
        reason({"run_id": "r", "limit": True}) == "field 'limit' must be an integer, not a boolean"
    )
    assert reason('{"run_id":"r","limit":2.0}') == "field 'limit' must be an integer, not a number"
    assert reason({"run_id": "r", "limit": "5"}) == "field 'limit' must be an integer, not a string"
    assert (
        reason({"run_id": "r", "resume": []})
        == "field 'resume' must be a JSON object, not an array"
    )
    assert reason({"run_id": "r", "after_revision": -1}) == (
        "field 'after_revision' must be an integer in 0..18446744073709551615"
    )
    assert reason({"run_id": "r", "after_revision": 1 << 64}).startswith(
        "field 'after_revision' must be an integer in 0.."
    )
    assert decode_arguments({"run_id": "r", "after_revision": (1 << 64) - 1}, FIELDS)
    assert decode_arguments({"run_id": "r", "limit": -7}, FIELDS)["limit"] == -7


def test_missing_required_field() -> None:
    """§7.1: a required field must be present (reported after unknown fields and types)."""
    assert reason({}) == "missing required field 'run_id'"
    assert reason({"run_id": "r", "limit": "x"}) == (
        "field 'limit' must be an integer, not a string"
    )
    assert reason({"run_id": "r", "limit": 1, "nope": 1}) == "unknown field 'nope'"


def test_every_violation_is_named_up_to_a_bound() -> None:
    """Usability: all that is wrong at once, unknown fields, then types, then missing
    fields; past the bound, how many more."""
    assert reason({"limit": "x", "nope": 1}) == (
        "unknown field 'nope'; field 'limit' must be an integer, not a string; "
        "missing required field 'run_id'"
    )
    many = {f"extra_{index:02d}": 1 for index in range(12)}
    text = reason(many)
    assert text.startswith("unknown field 'extra_00'; unknown field 'extra_01'; ")
    assert text.count("unknown field") == MAX_REPORTED_VIOLATIONS
    assert text.endswith(f"; and {12 + 1 - MAX_REPORTED_VIOLATIONS} more")


def test_size_limit_before_parsing() -> None:
    """§7.1 (ours): argument documents over 262144 bytes are refused before parsing."""
    filler = "a" * (MAX_ARGUMENT_BYTES - len('{"run_id":""}'))
    exact = '{"run_id":"' + filler + '"}'
    assert len(exact.encode()) == MAX_ARGUMENT_BYTES
    assert decode_arguments(exact, FIELDS)["run_id"] == filler
    over = '{"run_id":"' + filler + 'a"}'
    assert "262144" in reason(over)
    assert "262144" in reason(over.encode())
    # Not even well-formed: the size is still what is reported.
    assert "262144" in reason("[" * (MAX_ARGUMENT_BYTES + 1))
    assert "262144" in reason({"run_id": filler + "a"})
    assert "262144" in reason({"run_id": "r", "resume": {"k": ["x"] * MAX_ARGUMENT_BYTES}})


def test_depth_limit_before_parsing() -> None:
    """§7.1 (ours): nesting deeper than 32 is refused, in text and in mappings, even when
    the document is otherwise malformed."""
    assert decode_arguments(nested(MAX_ARGUMENT_DEPTH), FIELDS)["run_id"] == "x"
    assert reason(nested(MAX_ARGUMENT_DEPTH + 1)) == "JSON nesting is deeper than 32"
    assert reason("[" * 100000) == "JSON nesting is deeper than 32"
    deep: dict[str, Any] = {}
    node = deep
    for _ in range(MAX_ARGUMENT_DEPTH - 2):  # resume holds 31 levels: 32 in all
        node["k"] = {}
        node = node["k"]
    assert decode_arguments({"run_id": "x", "resume": deep}, FIELDS)["resume"] == deep
    node["k"] = {}
    assert reason({"run_id": "x", "resume": deep}) == "JSON nesting is deeper than 32"
    cyclic: dict[str, Any] = {"run_id": "x"}
    cyclic["resume"] = cyclic
    assert reason(cyclic) == "JSON nesting is deeper than 32"


def test_mapping_values_must_be_json() -> None:
    """§7.1: a mapping holds JSON values only (string keys, finite numbers, valid text)."""
    assert reason({"run_id": "r", "resume": {1: "x"}}) == "an object key is int, not a string"
    assert reason({"run_id": "r", "resume": {"x": float("nan")}}) == "a number is not finite"
    assert reason({"run_id": "r", "resume": {"x": {1, 2}}}) == "set is not a JSON value"
    assert reason({"run_id": "r", "resume": {"x": Decimal("1.5")}}) == "Decimal is not a JSON value"
    assert reason({"run_id": "\ud800"}).startswith("a string is not valid Unicode")
    assert reason({"run_id": "r", "resume": {"x": 10**5000}}) == "an integer has too many digits"


def test_text_values_must_be_json() -> None:
    """§7.1: NaN, lone surrogate escapes and duplicate keys are refused in text; a
    duplicate key is named by its JSON pointer, however deep."""
    assert "NaN" in reason('{"run_id":"r","limit":NaN}')
    assert reason('{"run_id":"\\ud800"}') == "a string holds a lone surrogate"
    assert reason('{"run_id":"r","resume":{"a/b~":{"k":1,"k":2}}}') == (
        "duplicate key 'k' at /resume/a~1b~0/k"
    )


def test_broken_mapping_is_a_tool_error() -> None:
    """§7.1: a mapping whose methods raise still gives a ToolError."""

    class Broken(dict[str, Any]):
        def items(self) -> Any:
            raise RuntimeError("boom")

    assert reason(Broken(run_id="r")) == "the arguments could not be read (RuntimeError)"


@pytest.mark.parametrize(
    "text",
    [
        "",
        "abc",
        "00000000-0000-0000-0000-000000000000",
        "00000000000000000000000000000001",
        "{00000000-0000-0000-0000-000000000001}",
        "urn:uuid:00000000-0000-0000-0000-000000000001",
        " 00000000-0000-0000-0000-000000000001",
        "00000000-0000-0000-0000-00000000000g",
        None,
        7,
    ],
)
def test_parse_id_refuses(text: Any) -> None:
    """§7.1 parse_id: a nonzero UUID or `<field> must be a nonzero UUID`."""
    with pytest.raises(ToolError) as caught:
        parse_id("run_id", text)
    assert str(caught.value) == "workflow tools: run_id must be a nonzero UUID"


def test_parse_id_canonicalises_case() -> None:
    """§7.1 parse_id: either case is accepted and returned lowercase."""
    assert parse_id("run_id", "6F9619FF-8B86-D011-B42D-00C04FC964FF") == (
        "6f9619ff-8b86-d011-b42d-00c04fc964ff"
    )


BAD_IDS = ["", "nope", "00000000-0000-0000-0000-000000000000", "1234"]


@pytest.mark.parametrize("bad", BAD_IDS)
@pytest.mark.parametrize(
    ("tool", "extra"),
    [
        ("workflow_run_get", {}),
        ("workflow_run_resume", {"resume": {"increment": 1}}),
        ("workflow_run_cancel", {}),
        ("workflow_run_history", {}),
    ],
)
async def test_tools_refuse_bad_run_ids(
    env: Env, tool: str, extra: dict[str, Any], bad: str
) -> None:
    """§7.4, §7.6-§7.8: run_id must be a nonzero UUID; nothing is called or written."""
    error = await refused(env.tools.call(tool, {"run_id": bad, **extra}))
    assert str(error) == "workflow tools: run_id must be a nonzero UUID"
    assert env.recorder.calls == []


async def test_text_and_mapping_arguments_agree(env: Env) -> None:
    """§7.1: the same call as JSON text, bytes or a mapping gives the same answer."""
    error_text = await refused(env.tools.call("workflow_run_get", json.dumps({"run_id": RUN})))
    error_bytes = await refused(
        env.tools.call("workflow_run_get", json.dumps({"run_id": RUN}).encode())
    )
    error_map = await refused(env.tools.call("workflow_run_get", {"run_id": RUN}))
    assert (
        str(error_text)
        == str(error_bytes)
        == str(error_map)
        == (f"workflow tools: get run: run {RUN} not found")
    )
    for arguments in (None, {}, "{}", b"{}"):
        assert (await env.call("workflow_run_list", arguments)) == {"runs": []}
