"""`flowledger.mcp.screen.refusal`: which messages the server answers before the SDK."""

from __future__ import annotations

from typing import Any

import pytest

from flowledger.mcp.screen import refusal


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
