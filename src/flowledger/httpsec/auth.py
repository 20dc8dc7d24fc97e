"""Authentication of one HTTP server: its tokens and its bound on failed attempts."""

from __future__ import annotations

from collections.abc import Mapping

from .credentials import TokenTable
from .throttle import DEFAULT_BOUND, FailureBound, FailureLimiter, TooManyFailuresError

__all__ = ["Authenticator"]


class Authenticator:
    """Which session a presented token serves, for a client that may still try.

    `authenticate` first asks the client's failure bound (`flowledger.httpsec.throttle`):
    a client over it gets `TooManyFailuresError` and its token is not even compared.
    Otherwise the token is compared in constant time
    (`flowledger.httpsec.credentials`), and a token that serves no session counts as a
    failure of the client."""

    def __init__(self, tokens: Mapping[str, str], bound: FailureBound = DEFAULT_BOUND) -> None:
        self._table = TokenTable(tokens)
        self.limiter = FailureLimiter(bound)

    @property
    def uses_tokens(self) -> bool:
        return bool(self._table)

    @property
    def token_count(self) -> int:
        return len(self._table)

    @property
    def serves_one_session(self) -> bool:
        """Whether every client reaches the same session (no tokens: the default one).
        What spans the process (its metrics) may be shown only then: with several
        sessions, one tenant would read the others' definition and tool names."""
        return self._table.session_count <= 1

    def authenticate(self, token: str, client: str) -> str | None:
        """The session ``token`` serves, or ``None`` (a failure of ``client``); raises
        `TooManyFailuresError` while ``client`` is over its bound."""
        wait = self.limiter.retry_after(client)
        if wait is not None:
            raise TooManyFailuresError(wait)
        session = self._table.session_of(token)
        if session is None:
            self.limiter.failed(client)
        return session
