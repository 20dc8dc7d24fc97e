"""`flowledger.httpsec.credentials`: tokens are compared in constant time, over digests."""

from __future__ import annotations

import hashlib
import hmac
from types import SimpleNamespace

import pytest
from starlette.datastructures import Headers

from flowledger.httpsec import TokenTable, bearer_token, credentials

TOKEN_A = "token-a-0123456789abcdef"
TOKEN_B = "token-b-0123456789abcdef"
SESSION_A = "7c9e6679-7425-40de-944b-e07fc1f90ae7"
SESSION_B = "6ba7b810-9dad-41d1-80b4-00c04fd430c8"


class Spy:
    """`hmac.compare_digest`, recording what it compares."""

    def __init__(self) -> None:
        self.calls: list[tuple[bytes, bytes]] = []

    def __call__(self, a: bytes, b: bytes) -> bool:
        self.calls.append((a, b))
        return hmac.compare_digest(a, b)


@pytest.fixture
def spy(monkeypatch: pytest.MonkeyPatch) -> Spy:
    recorder = Spy()
    monkeypatch.setattr(credentials, "hmac", SimpleNamespace(compare_digest=recorder))
    return recorder


def test_every_known_digest_is_compared_with_compare_digest(spy: Spy) -> None:
    """The lookup goes through `hmac.compare_digest` over SHA-256 digests, once per known
    token whether or not one matched (no early exit, no ``==``, no dict lookup)."""
    table = TokenTable({TOKEN_A: SESSION_A, TOKEN_B: SESSION_B})
    known = {hashlib.sha256(t.encode()).digest() for t in (TOKEN_A, TOKEN_B)}
    for token, session in [(TOKEN_A, SESSION_A), (TOKEN_B, SESSION_B), ("x" * 24, None)]:
        spy.calls.clear()
        assert table.session_of(token) == session
        presented = hashlib.sha256(token.encode()).digest()
        assert len(spy.calls) == 2
        assert all(a == presented and len(b) == 32 for a, b in spy.calls)
        assert {b for _, b in spy.calls} == known


def test_a_wrong_token_of_the_same_length_is_refused(spy: Spy) -> None:
    table = TokenTable({TOKEN_A: SESSION_A})
    for wrong in (TOKEN_A[:-1] + "g", "T" + TOKEN_A[1:], TOKEN_A.upper()):
        assert len(wrong) == len(TOKEN_A)
        assert table.session_of(wrong) is None
    assert table.session_of(TOKEN_A + "x") is None
    assert table.session_of(TOKEN_A[:-1]) is None
    assert table.session_of("") is None
    assert len(spy.calls) == 6  # each one compared, through compare_digest


def test_an_empty_table_serves_nothing() -> None:
    table = TokenTable({})
    assert not table and len(table) == 0
    assert table.session_of(TOKEN_A) is None


@pytest.mark.parametrize(
    ("values", "token"),
    [
        ([f"Bearer {TOKEN_A}"], TOKEN_A),
        ([f"bearer   {TOKEN_A}  "], TOKEN_A),
        ([], None),
        ([f"Basic {TOKEN_A}"], None),
        (["Bearer"], None),
        (["Bearer "], None),
        ([f"Bearer {TOKEN_A} {TOKEN_B}"], None),
        ([f"Bearer {TOKEN_A}", f"Bearer {TOKEN_B}"], None),
    ],
)
def test_bearer_token_takes_one_well_formed_header(values: list[str], token: str | None) -> None:
    headers = Headers(raw=[(b"authorization", v.encode()) for v in values])
    assert bearer_token(headers) == token
