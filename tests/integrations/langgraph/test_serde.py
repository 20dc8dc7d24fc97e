"""`JsonSerializer`: LangGraph's serializer protocol with JSON as the only format."""

from __future__ import annotations

import dataclasses
import datetime as dt
import decimal
import enum
import json
import uuid
from typing import Any, NamedTuple

import pydantic
import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langgraph.types import Command, Interrupt, Send

from flowledger.integrations.langgraph import (
    CorruptCheckpointError,
    JsonSerializer,
    UnknownTypeError,
    UnserializableValueError,
)


@dataclasses.dataclass
class Order:
    item: str
    qty: int
    tags: tuple[str, ...] = ()


class Color(enum.Enum):
    RED = "red"


class Point(NamedTuple):
    x: int
    y: int


class Profile(pydantic.BaseModel):
    name: str
    born: dt.date


VALUES: list[Any] = [
    None,
    True,
    -3,
    2.5,
    float("inf"),
    "text \u00e9\U0001f600",
    "\ud800",  # a lone surrogate still round-trips
    [1, [2, (3, 4)]],
    {"a": {1, 2}, "b": frozenset({"x"})},
    {1: "int key", ("t", 2): "tuple key", "__fl__": "the reserved key"},
    b"\x00\xff",
    bytearray(b"ab"),
    dt.datetime(2026, 1, 2, 3, 4, 5, 6, tzinfo=dt.UTC),
    dt.date(2026, 1, 2),
    dt.time(3, 4),
    dt.timedelta(days=1, seconds=2, microseconds=3),
    uuid.UUID("12345678-1234-5678-1234-567812345678"),
    decimal.Decimal("1.10"),
    AIMessage(content="hi", tool_calls=[{"name": "f", "args": {"a": 1}, "id": "c1"}]),
    HumanMessage(content=[{"type": "text", "text": "hello"}], id="h1"),
    ToolMessage(content="ok", tool_call_id="c1"),
    (Interrupt(value={"question": "ok?"}, id="i1"),),
    Send("node", {"arg": [1, 2]}),
    Command(resume={"approved": True}),
    Order("tea", 2, ("hot",)),
    Color.RED,
    Point(1, 2),
    Profile(name="ada", born=dt.date(1815, 12, 10)),
]


@pytest.mark.parametrize("value", VALUES, ids=lambda v: type(v).__name__)
def test_round_trip(value: Any) -> None:
    serde = JsonSerializer()
    type_tag, data = serde.dumps_typed(value)
    assert type_tag == "json"
    json.loads(data)  # JSON text, nothing else
    back = serde.loads_typed((type_tag, data))
    if isinstance(value, float) and value != value:
        assert back != back
    else:
        assert back == value and type(back) is type(value)


def test_equal_values_give_equal_bytes() -> None:
    serde = JsonSerializer()
    assert serde.dumps({"b": 1, "a": [1, 2]}) == serde.dumps({"b": 1, "a": [1, 2]})


def test_a_value_without_json_form_names_its_path() -> None:
    with pytest.raises(
        UnserializableValueError, match=r"\['a'\]\[1\]\['item'\]: a builtins:object"
    ):
        JsonSerializer().dumps({"a": [0, Order(object(), 1)]})  # type: ignore[arg-type]


def test_classes_are_rebuilt_only_when_allowed() -> None:
    data = JsonSerializer().dumps(Order("tea", 1))
    # its module is imported: rebuilt; strict: only when named
    assert JsonSerializer().loads(data) == Order("tea", 1)
    with pytest.raises(UnknownTypeError, match="Order is not allowed to be rebuilt"):
        JsonSerializer(strict=True).loads(data)
    assert JsonSerializer(strict=True, types=[Order]).loads(data) == Order("tea", 1)
    # a class of a module that is not imported is never imported because data names it
    foreign = data.replace(Order.__module__.encode(), b"antigravity")
    with pytest.raises(UnknownTypeError, match="antigravity:Order is not imported"):
        JsonSerializer().loads(foreign)


def test_damaged_data_is_a_typed_error() -> None:
    serde = JsonSerializer()
    for raw in (b"{", b'{"__fl__": "nope"}', b'{"__fl__": "bytes", "v": "***"}', b"NaN"):
        with pytest.raises(CorruptCheckpointError):
            serde.loads(raw)


@pytest.mark.parametrize(
    "value",
    [
        {"source": "loop", "step": 3, "parents": {"": "1f0"}, "score": 0.5, "ok": True},
        {"nested": [{"a": [1, 2, None]}, "x"], "empty": {}},
        {"bad": (1, 2)},
        {"bad": float("nan")},
        {"deep": {"__fl__": "tuple"}},
        {"deep": [{1: "not a string key"}]},
        {"bytes": b"x"},
    ],
)
def test_plain_copy_is_a_deep_copy_of_exactly_the_plain_values(value: dict[str, Any]) -> None:
    from flowledger.integrations.langgraph.serde import is_plain, plain_copy

    copied = plain_copy(value)
    if not is_plain(value):
        assert copied is None
        return
    assert copied == value
    stack: list[tuple[Any, Any]] = [(copied, value)]
    while stack:  # no container is shared with the original
        mine, theirs = stack.pop()
        assert mine is not theirs
        pairs = (mine.values(), theirs.values()) if isinstance(mine, dict) else (mine, theirs)
        items = zip(*pairs, strict=True)
        stack.extend((a, b) for a, b in items if isinstance(a, dict | list))


class Note(pydantic.BaseModel):
    text: str


def _load_error(serde: JsonSerializer, raw: bytes) -> str:
    with pytest.raises(CorruptCheckpointError) as caught:
        serde.loads(raw)
    return str(caught.value)


def test_a_model_class_met_before_is_rebuilt_as_the_first_time() -> None:
    """Decoding remembers an allowed model class (`_decode_tagged`'s short path): what it
    gives, the errors it raises and the class a path names stay as on the long path."""
    serde = JsonSerializer(types=[Note])
    data = serde.dumps(Note(text="a"))
    damaged = [
        data.replace(b'"text":"a"', b'"text":5'),  # fields the class refuses
        data.replace(b'"cls":', b'"cls":["x"],"was":'),  # a class that is not a path
        data.replace(b'"v":{', b'"v":[],"was":{'),  # fields that are not an object
    ]
    cold = [_load_error(JsonSerializer(types=[Note]), raw) for raw in damaged]
    for _ in range(2):  # the first time finds the class, the second remembers it
        assert serde.loads(data) == Note(text="a")
        assert [_load_error(serde, raw) for raw in damaged] == cold
    # a class allowed later under the same path (a module reloaded): that one from then on
    reloaded = pydantic.create_model(
        "Note", text=(str, ...), seen=(bool, True), __module__=Note.__module__
    )
    serde.allow([reloaded])
    assert type(serde.loads(data)) is reloaded
