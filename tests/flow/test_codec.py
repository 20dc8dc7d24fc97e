"""Conformance: the JSON codec and state cloning (flow-spec §1.8; checklist §8.8-11).

Ours: one JSON codec. `dumps` writes compact key-sorted JSON and refuses NaN/infinity;
`loads` is strict (size and depth bounds before parsing, no duplicate keys, no NaN
literals, no trailing data); `StateCodec` binds a state type (plain dict, dataclass,
TypedDict, pydantic model) and reports a bad value by its path ("state.inner.x"). Go's
"marshal"/"unmarshal" ops are our "encode"/"decode".
"""

from __future__ import annotations

import json
import math
import warnings
from dataclasses import dataclass, field
from typing import Any

import pydantic
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typing_extensions import TypedDict

from flowledger.flow import CodecError, StateCodec
from flowledger.flow.codec import MAX_DEPTH, MAX_DOCUMENT_BYTES, dumps, loads, to_json_value

# -- state types ----------------------------------------------------------------------------


@dataclass
class Leaf:
    x: Any = None
    tags: list[str] = field(default_factory=list)


@dataclass
class DState:
    inner: Leaf = field(default_factory=Leaf)
    counts: dict[str, int] = field(default_factory=dict)
    items: list[int] = field(default_factory=list)
    name: str = ""
    n: int = 0


class TLeaf(TypedDict):
    x: Any
    tags: list[str]


class TState(TypedDict):
    inner: TLeaf
    counts: dict[str, int]
    items: list[int]
    name: str
    n: int


class PLeaf(pydantic.BaseModel):
    x: Any = None
    tags: list[str] = []


class PState(pydantic.BaseModel):
    inner: PLeaf = PLeaf()
    counts: dict[str, int] = {}
    items: list[int] = []
    name: str = ""
    n: int = 0


def make(kind: str, x: Any = 1, *, tags: list[str] | None = None, **top: Any) -> Any:
    """A state of ``kind`` with ``inner.x = x`` and the given top-level fields."""
    values: dict[str, Any] = {"counts": {}, "items": [], "name": "", "n": 0, **top}
    leaf = {"x": x, "tags": list(tags or [])}
    if kind == "dict":
        return {"inner": leaf, **values}
    if kind == "dataclass":
        return DState(Leaf(**leaf), **values)
    if kind == "typeddict":
        return TState(inner=TLeaf(**leaf), **values)  # type: ignore[typeddict-item]
    return PState(inner=PLeaf(**leaf), **values)


TYPES: dict[str, Any] = {"dict": None, "dataclass": DState, "typeddict": TState, "pydantic": PState}
KINDS = list(TYPES)


def codec(kind: str) -> StateCodec[Any]:
    return StateCodec(TYPES[kind])


def inner(state: Any) -> Any:
    return state["inner"] if isinstance(state, dict) else state.inner


def leaf(state: Any, key: str) -> Any:
    node = inner(state)
    return node[key] if isinstance(node, dict) else getattr(node, key)


def top(state: Any, key: str) -> Any:
    return state[key] if isinstance(state, dict) else getattr(state, key)


# -- §8.8-9 clone ---------------------------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
def test_clone_is_equal_and_independent(kind: str) -> None:
    """§8.8: a clone is equal and shares nothing (mutations never leak either way)."""
    state = make(kind, {"deep": [1, 2]}, tags=["t"], counts={"a": 1}, items=[1, 2], name="s")
    c = codec(kind)
    clone = c.clone(state)
    assert clone == state
    assert clone is not state
    assert type(clone) is type(state)
    top(clone, "counts")["b"] = 2
    top(clone, "items").append(3)
    leaf(clone, "tags").append("u")
    leaf(clone, "x")["deep"].append(3)
    assert top(state, "counts") == {"a": 1}
    assert top(state, "items") == [1, 2]
    assert leaf(state, "tags") == ["t"]
    assert leaf(state, "x") == {"deep": [1, 2]}
    top(state, "items").clear()
    leaf(state, "x")["deep"].clear()
    assert top(clone, "items") == [1, 2, 3]
    assert leaf(clone, "x") == {"deep": [1, 2, 3]}


@pytest.mark.parametrize("kind", KINDS)
def test_clone_single_element_empty_and_large(kind: str) -> None:
    """§8.9: single-element, empty (non-None) and 1000-entry collections clone equal."""
    c = codec(kind)
    for state in (
        make(kind, [0], tags=["only"], counts={"k": 1}, items=[7]),
        make(kind, {}, tags=[], counts={}, items=[]),
        make(kind, None, counts={f"k{i}": i for i in range(1000)}, items=list(range(1000))),
    ):
        clone = c.clone(state)
        assert clone == state
        assert top(clone, "counts") is not top(state, "counts")


@pytest.mark.parametrize("kind", ["dataclass", "pydantic"])
def test_clone_of_default_state(kind: str) -> None:
    """§8.9: the zero (default-constructed) state clones equal."""
    state = DState() if kind == "dataclass" else PState()
    assert codec(kind).clone(state) == state


@pytest.mark.parametrize("kind", KINDS)
def test_dump_is_plain_json_object(kind: str) -> None:
    """§1.8: dump gives a plain JSON object; load gives fresh objects every call."""
    c = codec(kind)
    doc = c.dump(make(kind, {"k": [1.5, None, True]}, counts={"a": 1}))
    assert json.loads(json.dumps(doc)) == doc
    assert doc["inner"] == {"x": {"k": [1.5, None, True]}, "tags": []}
    first, second = c.load(doc), c.load(doc)
    assert first == second and first is not second
    top(first, "counts")["z"] = 9
    assert doc["counts"] == {"a": 1}
    assert top(second, "counts") == {"a": 1}


# -- §8.10-11 codec failures ----------------------------------------------------------------


class Opaque:
    """Something JSON cannot represent."""


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize(
    ("bad", "suffix"),
    [(Opaque(), ""), ({"ok": 1, "bad": Opaque()}, ".bad"), ([1, Opaque()], "[1]")],
    ids=["object", "in-map", "in-list"],
)
def test_non_serialisable_state_names_the_path(kind: str, bad: Any, suffix: str) -> None:
    """§8.10-11: a non-serialisable value -> CodecError "encode" at state.inner.x..."""
    with pytest.raises(CodecError) as caught:
        codec(kind).dump(make(kind, bad))
    error = caught.value
    assert error.op == "encode"
    assert error.path == f"state.inner.x{suffix}"
    assert str(error) == f"flow: codec encode at {error.path}: {error.detail}"
    assert "Opaque" in error.detail
    with pytest.raises(CodecError):
        codec(kind).clone(make(kind, bad))


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf], ids=str)
def test_non_finite_float_in_dict_state_is_refused(value: float) -> None:
    """§8.10: NaN and infinities in a plain-dict state are refused with their path."""
    with pytest.raises(CodecError) as caught:
        StateCodec(None).dump({"inner": {"x": [0, value]}})
    assert caught.value.path == "state.inner.x[1]"


def test_non_string_key_in_dict_state_is_refused() -> None:
    """§8.10: an object key that is not a string is refused at its path."""
    with pytest.raises(CodecError) as caught:
        StateCodec(None).dump({"inner": {1: "x"}})
    assert caught.value.path == "state.inner"


@dataclass
class Floats:
    x: float = 0.0


def test_non_finite_typed_float_is_refused() -> None:
    """§8.10: NaN in a float field of a typed state is refused at its path."""
    with pytest.raises(CodecError) as caught:
        StateCodec(Floats).dump(Floats(math.nan))
    assert caught.value.path == "state.x"


@pytest.mark.parametrize("kind", ["dataclass", "pydantic"])
def test_non_finite_float_in_typed_any_field_is_refused(kind: str) -> None:
    """§8.10: NaN inside an Any field of a dataclass / model is refused, never nulled."""
    with pytest.raises(CodecError) as caught:
        codec(kind).dump(make(kind, [1.0, math.nan]))
    assert caught.value.path == "state.inner.x[1]"


def test_lone_surrogate_is_refused_with_its_path() -> None:
    """§8.10 / §8.89: a string UTF-8 cannot encode fails encode early, naming its path."""
    with pytest.raises(CodecError) as caught:
        StateCodec(None).dump({"s": "ok", "t": "\ud800"})
    assert caught.value.path == "state.t"


def test_state_must_be_a_json_object() -> None:
    """§1.8 (ours): a state encodes to a JSON object; anything else is a CodecError."""
    for value in ([1], "text", 3, None):
        with pytest.raises(CodecError) as caught:
            StateCodec(None).dump(value)
        assert caught.value.op == "encode" and caught.value.path == "state"
    with pytest.raises(CodecError) as decoding:
        StateCodec(DState).load([1])
    assert decoding.value.op == "decode"


def test_encoder_output_the_decoder_rejects() -> None:
    """§8.10: an encoding its decoder rejects fails clone with op "decode" at the field."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(CodecError) as caught:
            StateCodec(DState).clone(DState(n="not a number"))  # type: ignore[arg-type]
    assert caught.value.op == "decode"
    assert caught.value.path == "state.n"
    assert str(caught.value).startswith("flow: codec decode at state.n: ")


@pytest.mark.parametrize(
    ("kind", "doc", "path"),
    [
        ("dataclass", {"inner": {"x": 1, "tags": [1]}}, "state.inner.tags[0]"),
        ("pydantic", {"items": [1, "two"]}, "state.items[1]"),
        (
            "typeddict",
            {"inner": {"x": 1, "tags": []}, "counts": {}, "items": [], "name": 5, "n": 0},
            "state.name",
        ),
    ],
)
def test_decode_error_names_the_path(kind: str, doc: dict[str, Any], path: str) -> None:
    """§8.10: a stored document that does not fit the state type names the bad path."""
    with pytest.raises(CodecError) as caught:
        codec(kind).load(doc)
    assert (caught.value.op, caught.value.path) == ("decode", path)


# -- dumps ----------------------------------------------------------------------------------


def test_dumps_is_compact_sorted_utf8() -> None:
    """§1.8 (ours): compact separators, sorted keys, UTF-8 without escaping."""
    assert dumps({"b": [1, 2.5], "a": {"é": None, "c": True}}) == (
        '{"a":{"c":true,"é":null},"b":[1,2.5]}'.encode()
    )


def test_equal_values_give_equal_bytes() -> None:
    """§1.8 (ours): key order does not matter, so content addressing works."""
    one = {"x": 1, "y": {"p": [1], "q": "s"}}
    two = {"y": {"q": "s", "p": [1]}, "x": 1}
    assert dumps(one) == dumps(two)


@pytest.mark.parametrize(
    ("value", "path"),
    [
        ({"a": {"b": Opaque()}}, "$.a.b"),
        ({"a": [0, math.nan]}, "$.a[1]"),
        ({"a": math.inf}, "$.a"),
    ],
)
def test_dumps_names_the_offending_path(value: Any, path: str) -> None:
    """§8.10: dumps refuses what JSON cannot hold and names where."""
    with pytest.raises(CodecError) as caught:
        dumps(value)
    assert caught.value.op == "encode" and caught.value.path == path


# -- loads strictness -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "data",
    [
        b'{"a":1,"a":2}',
        b'{"x":{"k":1,"k":1}}',
        b'{"a":1} x',
        b"{} {}",
        b"[1]]",
        b"NaN",
        b"[Infinity]",
        b'{"a":-Infinity}',
        b"",
        b"   ",
        b"\xff\xfe",
        b"[",
        b"]",
        b'{"a":',
        b"{'a': 1}",
        b"[1,]",
    ],
)
def test_loads_rejects_doubtful_documents(data: bytes) -> None:
    """§6.3: duplicate keys, trailing data, NaN, bad UTF-8, malformed -> CodecError."""
    with pytest.raises(CodecError) as caught:
        loads(data)
    assert caught.value.op == "decode"
    assert str(caught.value).startswith("flow: codec decode")


def test_loads_takes_bytes_only() -> None:
    """§6.3 (ours): loads takes bytes (or bytearray), never str."""
    assert loads(bytearray(b'{"a":[1]}')) == {"a": [1]}
    with pytest.raises(CodecError):
        loads('{"a": 1}')  # type: ignore[arg-type]


def nested(depth: int, opener: bytes = b"[", closer: bytes = b"]") -> bytes:
    return opener * depth + closer * depth


def nested_objects(depth: int) -> bytes:
    return b'{"k":' * (depth - 1) + b"{}" + b"}" * (depth - 1)


def test_depth_limit_is_64() -> None:
    """§6.3: nesting depth 64 is accepted; 65 is refused before parsing (arrays, objects).

    Ours: user values are held to 64 levels; stored documents, which wrap them a few
    levels deep, are read with a margin of 8."""
    assert MAX_DEPTH == 64
    assert loads(nested(64), max_depth=MAX_DEPTH) is not None
    assert loads(nested_objects(64), max_depth=MAX_DEPTH) is not None
    for data in (nested(65), nested_objects(65), b'{"a":' + nested(64) + b"}"):
        with pytest.raises(CodecError, match="nesting deeper than 64"):
            loads(data, max_depth=MAX_DEPTH)
    assert loads(nested(72)) is not None
    with pytest.raises(CodecError, match="nesting deeper than 72"):
        loads(nested(73))
    with pytest.raises(CodecError, match="nesting"):
        loads(nested(100_000))
    assert loads(nested(3), max_depth=3) == [[[]]]
    with pytest.raises(CodecError):
        loads(nested(4), max_depth=3)


def test_brackets_inside_strings_do_not_count() -> None:
    """§6.3: the depth counter skips strings, including escaped quotes."""
    text = '["' + "[" * 100 + '\\"' + "{" * 100 + '", "]]]"]'
    assert loads(text.encode()) == ["[" * 100 + '"' + "{" * 100, "]]]"]


def test_size_limit() -> None:
    """§6.3: documents above the byte limit are refused before parsing (default 16 MiB)."""
    doc = b'"' + b"a" * 98 + b'"'
    assert len(doc) == 100
    assert loads(doc, max_bytes=100) == "a" * 98
    with pytest.raises(CodecError, match="limit is 99"):
        loads(doc, max_bytes=99)
    assert MAX_DOCUMENT_BYTES == 16 << 20
    with pytest.raises(CodecError, match="limit"):
        loads(b'"' + b"a" * MAX_DOCUMENT_BYTES + b'"')


def test_loads_error_keeps_its_cause() -> None:
    """§8.11: a parse failure's CodecError chains the parser's error as __cause__."""
    with pytest.raises(CodecError) as caught:
        loads(b'{"a":1,"a":2}')
    assert isinstance(caught.value.__cause__, ValueError)
    assert "duplicate key" in str(caught.value)


def test_to_json_value_depth_bound() -> None:
    """§1.8: encoding refuses values nested deeper than the limit, naming the path."""
    value: Any = 1
    for _ in range(MAX_DEPTH + 1):
        value = [value]
    with pytest.raises(CodecError) as caught:
        to_json_value(value)
    assert caught.value.path.startswith("$[0][0]")


# -- hypothesis round trips -------------------------------------------------------------------

TEXT = st.text(st.characters(blacklist_categories=("Cs",)), max_size=12)
SCALARS = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | TEXT
)
JSON = st.recursive(
    SCALARS,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(TEXT, children, max_size=4),
    max_leaves=25,
)


@settings(max_examples=200, deadline=None)
@given(JSON)
def test_json_round_trip(value: Any) -> None:
    """§8.7 (codec): JSON values round-trip through dumps/loads; re-encoding is byte-identical."""
    data = dumps(value)
    back = loads(data)
    assert back == value
    assert dumps(back) == data


@settings(max_examples=100, deadline=None)
@given(st.dictionaries(TEXT, JSON, max_size=6))
def test_dict_state_round_trip(state: dict[str, Any]) -> None:
    """§8.8: any JSON-object state clones equal through the plain-dict codec."""
    c = StateCodec(None)
    assert c.clone(state) == state
    assert c.load(c.dump(state)) == state


LEAVES = st.builds(Leaf, x=JSON, tags=st.lists(TEXT, max_size=3))
DSTATES = st.builds(
    DState,
    inner=LEAVES,
    counts=st.dictionaries(TEXT, st.integers(), max_size=4),
    items=st.lists(st.integers(), max_size=5),
    name=TEXT,
    n=st.integers(),
)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(DSTATES)
def test_typed_state_round_trip(state: DState) -> None:
    """§8.8: dataclass and pydantic states clone equal; their dump is stable JSON."""
    c = StateCodec(DState)
    doc = c.dump(state)
    assert loads(dumps(doc)) == doc
    assert c.load(doc) == state
    model = PState(
        inner=PLeaf(x=state.inner.x, tags=state.inner.tags),
        counts=state.counts,
        items=state.items,
        name=state.name,
        n=state.n,
    )
    assert StateCodec(PState).dump(model) == doc
    assert StateCodec(PState).clone(model) == model
