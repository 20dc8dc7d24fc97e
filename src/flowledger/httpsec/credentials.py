"""Which session a bearer token serves, compared in constant time.

A request presents a token (``Authorization: Bearer <token>``, or the dashboard's sign-in
form); `TokenTable.session_of` answers the session it serves. The table keeps only the
tokens' SHA-256 digests, and a lookup compares the presented token's digest with *every*
known digest through `hmac.compare_digest`, whether or not one matched already: how long
it takes depends on the number of tokens, never on how much of a token a guess got right
nor on which token matched. (A dict keyed by digest would compare the hash and then the
bytes with ``==``, which stops at the first differing byte.)
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Mapping

from starlette.datastructures import Headers

__all__ = ["TokenTable", "bearer_token", "digest"]


def digest(secret: str) -> bytes:
    """The SHA-256 digest a secret is kept and compared as."""
    return hashlib.sha256(secret.encode("utf-8")).digest()


def bearer_token(headers: Headers) -> str | None:
    """The token of the request's single ``Authorization: Bearer <token>`` header;
    ``None`` without one, with several, with another scheme, or with a value that is not
    one token."""
    values = headers.getlist("authorization")
    if len(values) != 1:
        return None
    scheme, _, token = values[0].strip().partition(" ")
    token = token.strip()
    if scheme.lower() != "bearer" or not token or " " in token:
        return None
    return token


class TokenTable:
    """``{token: session_id}``, kept as digests."""

    def __init__(self, tokens: Mapping[str, str]) -> None:
        self._entries = tuple((digest(token), session) for token, session in tokens.items())

    def __bool__(self) -> bool:
        return bool(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def session_count(self) -> int:
        """How many different sessions the tokens serve."""
        return len({session for _, session in self._entries})

    def session_of(self, token: str) -> str | None:
        """The session ``token`` serves, or ``None`` for an unknown token."""
        presented = digest(token)
        found: str | None = None
        for known, session in self._entries:
            # no early exit: every entry costs the same whether or not it matches
            if hmac.compare_digest(presented, known):
                found = session
        return found
