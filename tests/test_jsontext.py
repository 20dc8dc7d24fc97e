"""`flowledger.jsontext.decode_json`: duplicate keys refused with the key's JSON pointer."""

from __future__ import annotations

import json
from decimal import Decimal

import pytest

from flowledger.jsontext import DuplicateKeyError, decode_json, json_pointer


@pytest.mark.parametrize(
    ("text", "pointer", "key"),
    [
        ('{"n":3,"n":4}', "/n", "n"),
        ('{"params":{"arguments":{"input":{"n":3,"n":4}}}}', "/params/arguments/input/n", "n"),
        ('[0,{"a":[{"k":1},{"k":1,"k":2}]}]', "/1/a/1/k", "k"),
        ('{"a/b":{"~":1,"~":2}}', "/a~1b/~0", "~"),
        # the outer repeat dropped the inner object: the outer one is what is reported
        ('{"a":{"x":1,"x":2},"a":3}', "/a", "a"),
        # two repeats: the first in document order
        ('{"p":{"y":1,"y":1},"q":{"z":1,"z":1}}', "/p/y", "y"),
    ],
)
def test_duplicate_keys_name_their_pointer(text: str, pointer: str, key: str) -> None:
    with pytest.raises(DuplicateKeyError) as caught:
        decode_json(text)
    assert caught.value.pointer == pointer
    assert caught.value.key == key
    assert str(caught.value) == f"duplicate key {key!r} at {pointer}"


def test_long_pointers_are_shortened_in_the_message_only() -> None:
    key = "k" * 1000
    with pytest.raises(DuplicateKeyError) as caught:
        decode_json(json.dumps({"a": 1})[:-1] + f',"{key}":1,"{key}":2}}')
    assert caught.value.pointer == "/" + key
    assert len(str(caught.value)) < 450


def test_good_documents_decode_like_json_loads() -> None:
    text = '{"a":[1,2.5,{"b":null}],"c":"\\u00e9","d":{}}'
    assert decode_json(text) == json.loads(text)
    assert decode_json(text.encode()) == json.loads(text)
    assert decode_json("1.5", parse_float=Decimal) == Decimal("1.5")
    sizes: list[int] = []
    decode_json(text, on_object=sizes.append)
    assert sorted(sizes) == [0, 1, 3]


def test_other_malformed_text_raises_what_json_raises() -> None:
    with pytest.raises(json.JSONDecodeError):
        decode_json('{"a":1} x')
    with pytest.raises(ValueError, match="digits"):
        decode_json("1" * 5000)


def test_json_pointer_escapes() -> None:
    assert json_pointer(()) == ""
    assert json_pointer(("a/b", "m~n", 0, "")) == "/a~1b/m~0n/0/"
