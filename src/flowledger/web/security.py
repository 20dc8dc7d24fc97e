"""Who a request is, and whether it may change anything.

The parts the dashboard shares with the MCP server live in `flowledger.httpsec`: the
tokens file, constant-time token comparison and the bound on failed authentications
(`flowledger.httpsec.Authenticator`), and the Host/Origin checks and body limit every
request passes first (`flowledger.httpsec.Guard`, applied by `Dashboard.asgi_app`). What
is the dashboard's own:

* **Sign-in.** Without tokens the dashboard serves one session and only on a loopback
  address. With tokens every request is anonymous until it carries
  ``Authorization: Bearer <token>`` or the login cookie that ``POST /login`` sets in
  exchange for a token (``HttpOnly; SameSite=Strict``, and ``Secure`` on a request that
  came over HTTPS); the token selects the session. Login cookies are random, kept in
  memory (a restart logs everyone out) and never contain the token. A bearer token and
  a sign-in token count against the client's failure bound (429 with ``Retry-After``
  once over it); a login cookie does not (it is not a guess at a token).
* **CSRF.** Every browser gets a random ``fl_csrf`` cookie (``HttpOnly;
  SameSite=Strict``); every form carries the same value, and every POST whose form field
  does not match the cookie is refused (403) before anything runs. A cross-site page
  cannot read the cookie, so it cannot forge the field.
"""

from __future__ import annotations

import hmac
import secrets
from collections.abc import Mapping
from typing import Final

from starlette.requests import Request

from ..httpsec import DEFAULT_BOUND, Authenticator, FailureBound, bearer_token, client_key
from ..httpsec.credentials import digest

__all__ = [
    "CSRF_COOKIE",
    "CSRF_FIELD",
    "LOGIN_COOKIE",
    "Gate",
    "new_secret",
]

LOGIN_COOKIE: Final = "fl_login"
CSRF_COOKIE: Final = "fl_csrf"
CSRF_FIELD: Final = "csrf"


def new_secret() -> str:
    return secrets.token_urlsafe(32)


class Gate:
    """The tokens of a dashboard, its failure bound and its logins.

    `session_of` and `log_in` raise `flowledger.httpsec.TooManyFailuresError` for a
    client over its bound of failed authentications (``failed_auth``)."""

    def __init__(
        self,
        tokens: Mapping[str, str],
        *,
        loopback: bool,
        failed_auth: FailureBound = DEFAULT_BOUND,
    ) -> None:
        self.auth = Authenticator(tokens, failed_auth)
        self._logins: dict[bytes, str] = {}
        self.loopback = loopback

    @property
    def uses_tokens(self) -> bool:
        return self.auth.uses_tokens

    def session_of(self, request: Request) -> str | None:
        """The session the request may use (tokens), or None (not signed in)."""
        if "authorization" in request.headers:
            token = bearer_token(request.headers)
            if token is None:
                return None
            return self.auth.authenticate(token, client_key(request.scope))
        login = request.cookies.get(LOGIN_COOKIE)
        if login:
            # A dict lookup is fine here: a login is 256 random bits, kept as a digest.
            return self._logins.get(digest(login))
        return None

    def log_in(self, request: Request, token: str) -> str | None:
        """A new login cookie value for ``token``, or None for an unknown token."""
        session = self.auth.authenticate(token, client_key(request.scope))
        if session is None:
            return None
        login = new_secret()
        self._logins[digest(login)] = session
        return login

    def log_out(self, request: Request) -> None:
        login = request.cookies.get(LOGIN_COOKIE)
        if login:
            self._logins.pop(digest(login), None)

    @staticmethod
    def csrf_matches(request: Request, submitted: object) -> bool:
        cookie = request.cookies.get(CSRF_COOKIE, "")
        if not cookie or not isinstance(submitted, str) or not submitted:
            return False
        return hmac.compare_digest(cookie.encode(), submitted.encode())
