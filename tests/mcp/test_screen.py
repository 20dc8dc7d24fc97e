"""`flowledger.mcp.screen.refusal`: which messages the server answers before the SDK."""

from __future__ import annotations

from typing import Any

import pytest

from flowledger.mcp.screen import body_refusal, refusal


def refused(text: str) -> tuple[int, Any, str]:
    error = refusal(text)
    assert error is not None, text
    return error.error.code, error.id, error.error.message


@pytest.mark.parametrize(
    "text",
    [
        '{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}',
        '{"jsonrpc":"2.0","method":"notifications/initialized"}',
        '{"jsonrpc":"2.0","id":"a","result":{}}',
        '{"jsonrpc":"2.0","id":1,"method":"x","params":{"s":"\\ud83d\\ude00"}}',
    ],
)
def test_messages_the_sdk_reads_pass(text: str) -> None:
    assert refusal(text) is None


def test_repeated_keys_are_parse_errors_naming_the_pointer() -> None:
    code, request_id, message = refused(
        '{"jsonrpc":"2.0","id":7,"method":"tools/call",'
        '"params":{"name":"t","arguments":{"n":3,"n":4}}}'
    )
    assert (code, request_id) == (-32700, 7)
    assert message == "Parse error: duplicate key 'n' at /params/arguments/n"
    # a repeated id is no id to answer to
    assert refused('{"jsonrpc":"2.0","id":1,"id":2,"method":"ping"}')[:2] == (-32700, None)


def test_ids_are_recovered_where_they_can_be() -> None:
    assert refused('{"jsonrpc":"2.0","id":"x","method":"m","params":"\\ud800"}')[1] == "x"
    deep = "[" * 3000 + "]" * 3000
    assert refused('{"jsonrpc":"2.0","id":-3,"method":"m","params":' + deep + "}")[1] == -3
    assert refused('{"id":"a\\"b","method":' + deep)[1] == 'a"b'
    assert refused('{"method":"m","id":4,' + "1" * 5000)[1] is None  # not a leading id
    assert refused('{"jsonrpc":"2.0","id":true}')[:2] == (-32600, None)
    assert refused('{"jsonrpc":"2.0","id":' + "9" * 80 + ",}")[1] is None


def test_messages_are_bounded() -> None:
    code, _, message = refused('{"jsonrpc":"2.0","id":1,"method":"m","params":{"' + "k" * 5000)
    assert code == -32700
    assert len(message) < 400


@pytest.mark.parametrize(
    ("value", "kind"),
    [
        ("{}", "an object"),
        ("[]", "an array"),
        ("0.5", "a number written with a fraction or an exponent"),
        ("-1E3", "a number written with a fraction or an exponent"),
        ("NaN", "a number that is not finite"),
        ("true", "a boolean"),
        ("null", "null"),
    ],
)
def test_a_request_whose_id_is_not_a_string_or_integer_is_invalid(value: str, kind: str) -> None:
    expected = (-32600, None, f"Invalid Request: the id must be a string or an integer, not {kind}")
    for text in (
        '{"jsonrpc":"2.0","id":' + value + ',"method":"tools/list"}',
        '{"jsonrpc":"2.0","method":"notifications/initialized","id":' + value + "}",
    ):
        assert refused(text) == expected
        error = body_refusal(text.encode())
        assert error is not None
        assert (error.error.code, error.id, error.error.message) == expected


@pytest.mark.parametrize(
    "text",
    [
        '{"jsonrpc":"2.0","id":-0,"method":"ping"}',
        '{"jsonrpc":"2.0","id":"","method":"ping"}',
        '{"jsonrpc":"2.0","id":' + "9" * 60 + ',"method":"ping"}',
        '{"jsonrpc":"2.0","method":"notifications/initialized"}',
        '{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"m"}}',  # a response
    ],
)
def test_allowed_ids_and_responses_pass_the_id_check(text: str) -> None:
    assert refusal(text) is None
    assert body_refusal(text.encode()) is None


def test_body_refusal_leaves_unreadable_bodies_to_the_sdk() -> None:
    assert body_refusal(b"{not json") is None
    assert body_refusal(b"\xff") is None
    duplicate = body_refusal(b'{"jsonrpc":"2.0","id":4,"method":"m","params":{"a":1,"a":2}}')
    assert duplicate is not None and (duplicate.error.code, duplicate.id) == (-32700, 4)
