"""`flowledger.httpsec.origins` and `loopback`: who may serve without tokens, and which
Host and Origin headers a server answers."""

from __future__ import annotations

import pytest
from starlette.datastructures import Headers

from flowledger.httpsec import HostPolicy, is_loopback, open_bind_refusal
from flowledger.httpsec.origins import Check, host_name


def headers(**values: str) -> Headers:
    return Headers(raw=[(k.encode(), v.encode()) for k, v in values.items()])


@pytest.mark.parametrize(
    ("host", "loopback"),
    [
        ("127.0.0.1", True),
        ("127.3.4.5", True),
        ("::1", True),
        ("[::1]", True),
        ("localhost", True),
        ("LOCALHOST", True),
        ("0.0.0.0", False),
        ("::", False),
        ("192.0.2.10", False),
        ("localhost.example", False),
        ("", False),
    ],
)
def test_is_loopback(host: str, loopback: bool) -> None:
    assert is_loopback(host) is loopback


def test_only_loopback_may_be_served_without_tokens() -> None:
    assert open_bind_refusal("127.0.0.1", tokens=False, how="--tokens-file") is None
    assert open_bind_refusal("0.0.0.0", tokens=True, how="--tokens-file") is None
    message = open_bind_refusal("0.0.0.0", tokens=False, how="--tokens-file")
    assert message == (
        "refusing to serve on non-loopback address '0.0.0.0' without tokens: anyone who "
        "can reach it could run workflows; give --tokens-file, or bind 127.0.0.1"
    )


@pytest.mark.parametrize(
    ("host", "name"),
    [("127.0.0.1:8000", "127.0.0.1"), ("[::1]:80", "::1"), ("LocalHost", "localhost"), ("", "")],
)
def test_host_name(host: str, name: str) -> None:
    assert host_name(host) == name


@pytest.mark.parametrize(
    "host",
    ["127.0.0.1:8000", "127.0.0.1", "localhost:8000", "[::1]:8000", "127.9.9.9:1"],
)
def test_a_loopback_bind_answers_loopback_host_names(host: str) -> None:
    assert HostPolicy(loopback=True).refusal(headers(host=host)) is None


@pytest.mark.parametrize(
    "host", ["attacker.example:8000", "attacker.example", "192.0.2.1:8000", "", "[bad"]
)
def test_a_loopback_bind_refuses_other_host_names(host: str) -> None:
    """DNS rebinding: a name that resolves to 127.0.0.1 still says its own name."""
    assert HostPolicy(loopback=True).refusal(headers(host=host)) is Check.HOST
    assert HostPolicy(loopback=False).refusal(headers(host=host)) is None


@pytest.mark.parametrize("loopback", [True, False])
@pytest.mark.parametrize(
    ("origin", "allowed"),
    [
        ("http://127.0.0.1:8000", True),
        ("https://127.0.0.1:8000", True),
        ("HTTP://127.0.0.1:8000", True),
        ("http://localhost:8000", False),  # another origin, though loopback
        ("http://127.0.0.1:9000", False),  # another local port
        ("http://evil.example", False),
        ("null", False),
        ("file://127.0.0.1:8000", False),
        ("http://user@127.0.0.1:8000", False),
        ("http://127.0.0.1:8000/path", False),
        ("", False),
    ],
)
def test_an_origin_must_be_the_server_itself(origin: str, allowed: bool, loopback: bool) -> None:
    check = HostPolicy(loopback=loopback).refusal(headers(host="127.0.0.1:8000", origin=origin))
    assert check is (None if allowed else Check.ORIGIN)


def test_no_origin_passes_and_two_are_refused() -> None:
    policy = HostPolicy(loopback=True)
    assert policy.refusal(headers(host="127.0.0.1:8000")) is None
    twice = Headers(
        raw=[
            (b"host", b"127.0.0.1:8000"),
            (b"origin", b"http://127.0.0.1:8000"),
            (b"origin", b"http://127.0.0.1:8000"),
        ]
    )
    assert policy.refusal(twice) is Check.ORIGIN
