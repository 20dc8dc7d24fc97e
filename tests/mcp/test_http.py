"""Streamable HTTP: bearer tokens, one workflow session per token, read-only mode, and
the refusal to serve a non-loopback address without tokens. The server runs in-process
on 127.0.0.1 and an ephemeral port; the SDK's client drives it."""

from __future__ import annotations

import json
from pathlib import Path

import httpx2
import pytest

from flowledger.mcp import HttpMcpServer, McpStartupError, session_for_token
from flowledger.storage import open_store

from .conftest import (
    BAD_IDS,
    READ_ONLY_NAMES,
    REVIEW_INPUT,
    TOOL_NAMES,
    bad_id_answer,
    error_text,
    http_client,
    http_server,
    payload,
)

TOKEN_A = "token-a-0123456789abcdef"
TOKEN_B = "token-b-0123456789abcdef"
SESSION_A = "7c9e6679-7425-40de-944b-e07fc1f90ae7"
START = {"definition_name": "document_review", "definition_version": "v1", "input": REVIEW_INPUT}
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "raw", "version": "0"},
    },
}
ACCEPT = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


def db(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path}/h.db"


async def test_requests_without_a_valid_token_get_401(tmp_path: Path) -> None:
    async with (
        http_server(db(tmp_path), tokens={TOKEN_A: SESSION_A}) as url,
        httpx2.AsyncClient(timeout=10) as http,
    ):
        for headers, invalid in [
            ({}, False),
            ({"Authorization": "Bearer wrong-token-0123456789"}, True),
            ({"Authorization": f"Basic {TOKEN_A}"}, False),
            ({"Authorization": f"Bearer {TOKEN_A}x"}, True),
        ]:
            response = await http.post(url, json=INITIALIZE, headers={**ACCEPT, **headers})
            assert response.status_code == 401, headers
            challenge = response.headers["www-authenticate"]
            assert challenge.startswith("Bearer")
            assert ('error="invalid_token"' in challenge) is invalid
            assert "Unauthorized" in response.json()["error"]["message"]
        get = await http.get(url, headers={"Accept": "text/event-stream"})
        assert get.status_code == 401

        ok = await http.post(
            url, json=INITIALIZE, headers={**ACCEPT, "Authorization": f"Bearer {TOKEN_A}"}
        )
        assert ok.status_code == 200
        assert ok.headers.get("mcp-session-id")


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_each_token_has_its_own_session(tmp_path: Path, mode: str) -> None:
    tokens = {TOKEN_A: SESSION_A, TOKEN_B: session_for_token(TOKEN_B)}
    async with (
        http_server(db(tmp_path), tokens=tokens) as url,
        http_client(url, TOKEN_A, mode=mode) as a,
        http_client(url, TOKEN_B, mode=mode) as b,
    ):
        assert [t.name for t in (await a.list_tools()).tools] == TOOL_NAMES
        run_a = payload(await a.call_tool("workflow_run_start", START))["run_id"]
        run_b = payload(await b.call_tool("workflow_run_start", START))["run_id"]

        assert [
            r["run_id"] for r in payload(await a.call_tool("workflow_run_list", {}))["runs"]
        ] == [run_a]
        assert [
            r["run_id"] for r in payload(await b.call_tool("workflow_run_list", {}))["runs"]
        ] == [run_b]
        for client, foreign in ((a, run_b), (b, run_a)):
            for tool, arguments in [
                ("workflow_run_get", {"run_id": foreign}),
                ("workflow_run_history", {"run_id": foreign}),
                ("workflow_run_cancel", {"run_id": foreign}),
            ]:
                assert "not found" in error_text(await client.call_tool(tool, arguments))
        # the foreign run is untouched
        assert payload(await a.call_tool("workflow_run_get", {"run_id": run_a}))["run_id"] == run_a


async def test_a_token_cannot_use_another_tokens_mcp_session(tmp_path: Path) -> None:
    tokens = {TOKEN_A: SESSION_A, TOKEN_B: session_for_token(TOKEN_B)}
    async with (
        http_server(db(tmp_path), tokens=tokens) as url,
        httpx2.AsyncClient(timeout=10) as http,
    ):
        opened = await http.post(
            url, json=INITIALIZE, headers={**ACCEPT, "Authorization": f"Bearer {TOKEN_A}"}
        )
        session = opened.headers["mcp-session-id"]
        listing = {"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}}
        hijack = await http.post(
            url,
            json=listing,
            headers={
                **ACCEPT,
                "Authorization": f"Bearer {TOKEN_B}",
                "mcp-session-id": session,
                "mcp-protocol-version": "2025-06-18",
            },
        )
        assert hijack.status_code == 404


async def test_read_only_hides_and_refuses_mutating_tools(tmp_path: Path) -> None:
    async with open_store(db(tmp_path)):
        pass  # a read-only server opens an existing database only
    async with http_server(db(tmp_path), tokens={TOKEN_A: SESSION_A}, read_only=True) as url:
        for mode in ("auto", "legacy"):
            async with http_client(url, TOKEN_A, mode=mode) as client:
                tools = (await client.list_tools()).tools
                assert [t.name for t in tools] == READ_ONLY_NAMES
                assert all(t.annotations and t.annotations.read_only_hint for t in tools)
                refused = error_text(await client.call_tool("workflow_run_start", START))
                assert "read-only" in refused
                for name in ("workflow_run_resume", "workflow_run_cancel"):
                    assert "read-only" in error_text(await client.call_tool(name, {}))
                assert payload(await client.call_tool("workflow_run_list", {}))["runs"] == []


async def test_loopback_without_tokens_serves_the_default_session(tmp_path: Path) -> None:
    async with http_server(db(tmp_path)) as url, http_client(url, None) as client:
        started = payload(await client.call_tool("workflow_run_start", START))
        runs = payload(await client.call_tool("workflow_run_list", {}))["runs"]
        assert [r["run_id"] for r in runs] == [started["run_id"]]


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "192.0.2.10", "example.com"])
async def test_non_loopback_without_tokens_is_refused_before_listening(
    tmp_path: Path, host: str
) -> None:
    with pytest.raises(McpStartupError, match="without tokens"):
        HttpMcpServer(db(tmp_path), app=None, host=host, port=0, tokens={})


async def test_non_loopback_with_tokens_is_allowed(tmp_path: Path) -> None:
    server = HttpMcpServer(
        db(tmp_path), app=None, host="0.0.0.0", port=0, tokens={TOKEN_A: SESSION_A}
    )
    assert server.uses_tokens


def test_serve_http_refuses_session_with_tokens(tmp_path: Path) -> None:
    with pytest.raises(McpStartupError, match="--session"):
        HttpMcpServer(db(tmp_path), app=None, tokens={TOKEN_A: SESSION_A}, session=SESSION_A)


async def test_tool_results_are_compact_json(tmp_path: Path) -> None:
    async with (
        http_server(db(tmp_path), tokens={TOKEN_A: SESSION_A}) as url,
        http_client(url, TOKEN_A) as client,
    ):
        result = await client.call_tool("workflow_definition_list", {})
        text = result.content[0].text  # type: ignore[union-attr]
        assert text == json.dumps(json.loads(text), separators=(",", ":"), ensure_ascii=False)


async def test_a_session_owned_elsewhere_is_503_until_it_is_free(tmp_path: Path) -> None:
    from flowledger.examples import catalog
    from flowledger.host import open_session

    session_b = session_for_token(TOKEN_B)
    tokens = {TOKEN_A: SESSION_A, TOKEN_B: session_b}
    initialize = {**ACCEPT, "Authorization": f"Bearer {TOKEN_B}"}
    async with (
        http_server(db(tmp_path), tokens=tokens) as url,
        httpx2.AsyncClient(timeout=10) as http,
    ):
        async with open_session(db(tmp_path), catalog(), session_b):  # a worker owns B
            busy = await http.post(url, json=INITIALIZE, headers=initialize)
            assert busy.status_code == 503
            message = busy.json()["error"]["message"]
            assert "unavailable" in message and session_b not in message
            async with http_client(url, TOKEN_A) as a:  # A is unaffected
                assert payload(await a.call_tool("workflow_run_list", {}))["runs"] == []
        # the owner is gone: the next request opens B
        async with http_client(url, TOKEN_B) as b:
            assert payload(await b.call_tool("workflow_run_list", {}))["runs"] == []


async def test_repeated_json_keys_are_refused_with_their_pointer(tmp_path: Path) -> None:
    """Reliability II item 6: a body whose keys repeat starts nothing; the 400 names the
    key's JSON pointer and the request's id."""
    async with (
        http_server(db(tmp_path)) as url,
        httpx2.AsyncClient(timeout=30) as http,
    ):
        opened = await http.post(url, json=INITIALIZE, headers=ACCEPT)
        headers = {
            **ACCEPT,
            "mcp-session-id": opened.headers["mcp-session-id"],
            "mcp-protocol-version": "2025-06-18",
        }
        initialized = b'{"jsonrpc":"2.0","method":"notifications/initialized"}'
        assert (await http.post(url, content=initialized, headers=headers)).status_code == 202
        body = (
            '{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"workflow_run_start",'
            '"arguments":{"definition_name":"document_review","definition_version":"v1",'
            '"input":{"title":"t","document":"d","title":"u"}}}}'
        )
        refused = await http.post(url, content=body.encode(), headers=headers)
        assert refused.status_code == 400
        assert refused.json() == {
            "jsonrpc": "2.0",
            "id": 2,
            "error": {
                "code": -32700,
                "message": "Parse error: duplicate key 'title' at /params/arguments/input/title",
            },
        }
        async with http_client(url, None) as client:
            assert payload(await client.call_tool("workflow_run_list", {}))["runs"] == []


async def test_a_request_with_a_bad_id_gets_invalid_request(tmp_path: Path) -> None:
    """Issue #25 item 9d: a request whose id is an object, array, fraction, boolean or
    null was answered a bare 202 (the SDK took it for a notification); now it is 400
    with JSON-RPC's invalid request and id null, and nothing ran."""
    async with (
        http_server(db(tmp_path)) as url,
        httpx2.AsyncClient(timeout=30) as http,
    ):
        opened = await http.post(url, json=INITIALIZE, headers=ACCEPT)
        headers = {
            **ACCEPT,
            "mcp-session-id": opened.headers["mcp-session-id"],
            "mcp-protocol-version": "2025-06-18",
        }
        initialized = b'{"jsonrpc":"2.0","method":"notifications/initialized"}'
        assert (await http.post(url, content=initialized, headers=headers)).status_code == 202
        for bad, kind in BAD_IDS:
            body = (
                f'{{"jsonrpc":"2.0","id":{bad},"method":"tools/call","params":'
                '{"name":"workflow_run_start","arguments":{"definition_name":"document_review",'
                '"definition_version":"v1","input":{"title":"t","document":"d"}}}}'
            )
            refused = await http.post(url, content=body.encode(), headers=headers)
            assert refused.status_code == 400, bad
            assert refused.headers["content-type"] == "application/json"
            assert refused.json() == bad_id_answer(kind), bad
        async with http_client(url, None) as client:
            assert payload(await client.call_tool("workflow_run_list", {}))["runs"] == []
