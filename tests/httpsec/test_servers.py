"""The security layer as both servers apply it, through real HTTP: ``flowledger mcp
--http`` (`HttpMcpServer`) and ``flowledger web`` (`WebServer`) on 127.0.0.1, driven by
httpx clients from 127.0.0.1 and 127.0.0.2."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from types import SimpleNamespace
from urllib.parse import urlencode

import pytest

from flowledger.httpsec import FailureBound, credentials

from ..mcp.conftest import http_client, payload
from .servers import (
    ACCEPT,
    INITIALIZE,
    KINDS,
    SESSION_A,
    SESSION_B,
    TOKEN_A,
    TOKEN_B,
    WRONG,
    Clock,
    client,
    csrf,
    serving,
)

LIMIT = 1 << 20  # both servers' body limit
TOKENS = {TOKEN_A: SESSION_A, TOKEN_B: SESSION_B}


def db(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path}/s.db"


# -- Host and Origin --------------------------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
async def test_a_loopback_server_answers_only_loopback_host_names(
    tmp_path: Path, kind: str
) -> None:
    """DNS rebinding: a page on attacker.example re-pointed at 127.0.0.1 reaches nothing."""
    async with serving(kind, db(tmp_path)) as served, client() as http:
        port = served.base.rsplit(":", 1)[1]
        rebound = await served.attempt(http, None, Host=f"attacker.example:{port}")
        assert rebound.status_code == served.host_refused
        assert "mcp-session-id" not in rebound.headers
        if kind == "mcp":
            assert rebound.json()["error"]["message"] == (
                "this server answers only to a loopback host name"
            )
        else:
            assert "loopback host name" in rebound.text
            static = f"{served.base}/static/app.css"  # assets too
            assert (await http.get(static, headers={"Host": "evil.example"})).status_code == 400
        for host in (f"localhost:{port}", f"127.0.0.1:{port}", f"[::1]:{port}"):
            assert (await served.attempt(http, None, Host=host)).status_code == 200, host


@pytest.mark.parametrize("kind", KINDS)
async def test_a_cross_origin_request_is_refused(tmp_path: Path, kind: str) -> None:
    async with serving(kind, db(tmp_path)) as served, client() as http:
        port = int(served.base.rsplit(":", 1)[1])
        for origin in (
            "http://evil.example",
            f"http://localhost:{port}",  # loopback, but another origin
            f"http://127.0.0.1:{port + 1}",  # another local port
            "null",
        ):
            refused = await served.attempt(http, None, Origin=origin)
            assert refused.status_code == 403, origin
            assert "cross-origin request refused" in refused.text
        same = await served.attempt(http, None, Origin=served.base)
        assert same.status_code == 200


# -- the body limit ---------------------------------------------------------------------------


async def _chunks(size: int) -> AsyncIterator[bytes]:
    """``size`` bytes in 64 KiB chunks (the last one smaller)."""
    step = 1 << 16
    for start in range(0, size, step):
        yield b"x" * min(step, size - start)


async def test_the_mcp_server_refuses_an_oversized_body_before_the_sdk(tmp_path: Path) -> None:
    """413 for a declared and for a chunked body over 1 MiB, and the tools/call in it
    never ran."""
    async with serving("mcp", db(tmp_path)) as served, client() as http:
        opened = await http.post(served.url, json=INITIALIZE, headers=ACCEPT)
        headers = {
            **ACCEPT,
            "mcp-session-id": opened.headers["mcp-session-id"],
            "mcp-protocol-version": "2025-06-18",
        }
        initialized = b'{"jsonrpc":"2.0","method":"notifications/initialized"}'
        assert (
            await http.post(served.url, content=initialized, headers=headers)
        ).status_code == 202
        arguments = {
            "definition_name": "document_review",
            "definition_version": "v1",
            "input": {"title": "t", "document": "d" * LIMIT},
        }
        call = {
            "jsonrpc": "2.0",
            "id": 2,
            "method": "tools/call",
            "params": {"name": "workflow_run_start", "arguments": arguments},
        }
        body = json.dumps(call).encode()
        declared = await http.post(served.url, content=body, headers=headers)
        assert declared.status_code == 413
        assert declared.json()["error"]["message"] == f"the request body is over {LIMIT} bytes"

        async def streamed() -> AsyncIterator[bytes]:
            yield body[: LIMIT // 2]
            yield body[LIMIT // 2 :]

        chunked = await http.post(served.url, content=streamed(), headers=headers)
        assert chunked.status_code == 413
        async with http_client(served.url, None) as sdk:
            assert payload(await sdk.call_tool("workflow_run_list", {}))["runs"] == []


async def test_the_dashboard_refuses_an_oversized_body_before_its_routes(tmp_path: Path) -> None:
    async with serving("web", db(tmp_path)) as served, client() as http:
        form = f"{served.base}/definitions/document_review/v1"
        fields = {"csrf": await csrf(http, form), "title": "t", "document": "d" * LIMIT}
        declared = await http.post(f"{form}/start", data=fields)
        assert declared.status_code == 413
        assert f"the request body is over {LIMIT} bytes" in declared.text
        body = urlencode(fields).encode()

        async def streamed() -> AsyncIterator[bytes]:
            yield body[: LIMIT // 2]
            yield body[LIMIT // 2 :]

        chunked = await http.post(
            f"{form}/start",
            content=streamed(),
            headers={"Content-Type": "application/x-www-form-urlencoded"},
        )
        assert chunked.status_code == 413
        assert "No runs" in (await http.get(f"{served.base}/runs")).text
        # the same form within the limit starts the run
        fields["document"] = "d"
        assert (await http.post(f"{form}/start", data=fields)).status_code == 303


# -- the bound on failed authentications ------------------------------------------------------


class Spy:
    """`hmac.compare_digest` of `flowledger.httpsec.credentials`, counting its calls."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, a: bytes, b: bytes) -> bool:
        import hmac

        self.calls += 1
        return hmac.compare_digest(a, b)


@pytest.fixture
def spy(monkeypatch: pytest.MonkeyPatch) -> Spy:
    recorder = Spy()
    monkeypatch.setattr(credentials, "hmac", SimpleNamespace(compare_digest=recorder))
    return recorder


@pytest.mark.parametrize("kind", KINDS)
async def test_failed_bearer_tokens_are_bounded_per_client(
    tmp_path: Path, kind: str, spy: Spy
) -> None:
    """After 3 wrong tokens from 127.0.0.2 within the window, its next attempt, even
    with a valid token, is 429 with Retry-After and no token is compared; 127.0.0.1
    signs in meanwhile; once the window has passed 127.0.0.2 may try again."""
    clock = Clock()
    bound = FailureBound(failures=3, window=60, clock=clock)
    async with (
        serving(kind, db(tmp_path), tokens=TOKENS, bound=bound) as served,
        client("127.0.0.2") as attacker,
        client("127.0.0.1") as neighbour,
    ):
        for _ in range(3):
            assert served.refused_token(await served.attempt(attacker, WRONG))
        compared = spy.calls
        throttled = await served.attempt(attacker, TOKEN_A)
        assert throttled.status_code == 429
        assert throttled.headers["retry-after"] == "60"
        assert "too many failed authentications" in throttled.text
        assert spy.calls == compared  # refused without comparing the token
        clock.now += 59
        assert (await served.attempt(attacker, TOKEN_B)).headers["retry-after"] == "1"
        # another client is unaffected, and requests without a token are no attempts
        assert (await served.attempt(neighbour, TOKEN_B)).status_code == 200
        without = await served.attempt(attacker, None)
        assert without.status_code == (401 if kind == "mcp" else 303)
        clock.now += 1
        assert (await served.attempt(attacker, TOKEN_A)).status_code == 200
        # a success cleared nothing: the failures count until they age out
        clock.now += 30
        assert served.refused_token(await served.attempt(attacker, WRONG))
        assert served.refused_token(await served.attempt(attacker, WRONG))
        assert served.refused_token(await served.attempt(attacker, WRONG))
        assert (await served.attempt(attacker, TOKEN_A)).status_code == 429


async def test_failed_sign_ins_share_the_bound_and_a_login_cookie_keeps_working(
    tmp_path: Path, spy: Spy
) -> None:
    clock = Clock()
    bound = FailureBound(failures=3, window=60, clock=clock)
    async with (
        serving("web", db(tmp_path), tokens=TOKENS, bound=bound) as served,
        client("127.0.0.2") as signed_in,
        client("127.0.0.2") as attacker,
        client("127.0.0.1") as neighbour,
    ):
        login = f"{served.base}/login"
        form = {"csrf": await csrf(signed_in, login), "token": TOKEN_A}
        assert (await signed_in.post(login, data=form)).status_code == 303
        token = await csrf(attacker, login)
        for _ in range(2):
            wrong = await attacker.post(login, data={"csrf": token, "token": WRONG})
            assert wrong.status_code == 401 and "unknown token" in wrong.text
        assert served.refused_token(await served.attempt(attacker, WRONG))  # the third
        compared = spy.calls
        refused = await attacker.post(login, data={"csrf": token, "token": TOKEN_A})
        assert refused.status_code == 429
        assert refused.headers["retry-after"] == "60"
        assert "too many failed authentications" in refused.text
        events = await attacker.get(
            f"{served.base}/events/runs", headers={"Authorization": f"Bearer {TOKEN_A}"}
        )
        assert events.status_code == 429 and events.headers["retry-after"] == "60"
        assert spy.calls == compared
        # the browser signed in before keeps its session; the neighbour signs in
        assert (await signed_in.get(f"{served.base}/runs")).status_code == 200
        form = {"csrf": await csrf(neighbour, login), "token": TOKEN_B}
        assert (await neighbour.post(login, data=form)).status_code == 303
