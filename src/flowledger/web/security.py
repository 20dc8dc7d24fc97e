"""Who a request is, and whether it may change anything.

* **Tokens.** Without tokens the dashboard serves one session and only on a loopback
  address (`refuse_open_bind`). With tokens (the MCP tokens file format,
  `flowledger.mcp.tokens`) every request is anonymous until it carries
  ``Authorization: Bearer <token>`` or the login cookie that ``POST /login`` sets in
  exchange for a token (``HttpOnly; SameSite=Strict``, and ``Secure`` on a request that
  came over HTTPS); the token selects the session. Login cookies are random, kept in
  memory (a restart logs everyone out) and never contain the token.
* **CSRF.** Every browser gets a random ``fl_csrf`` cookie (``HttpOnly;
  SameSite=Strict``); every form carries the same value, and every POST whose form field
  does not match the cookie is refused (403) before anything runs. A cross-site page
  cannot read the cookie, so it cannot forge the field. A POST whose ``Origin`` names
  another host is refused too.
* **DNS rebinding.** On a loopback address the ``Host`` header must name a loopback
  host, so a page on another name that resolves to 127.0.0.1 reaches nothing.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import secrets
from collections.abc import Mapping
from typing import Final
from urllib.parse import urlsplit

from starlette.requests import Request

__all__ = [
    "CSRF_COOKIE",
    "CSRF_FIELD",
    "LOGIN_COOKIE",
    "Gate",
    "is_loopback",
    "new_secret",
]

LOGIN_COOKIE: Final = "fl_login"
CSRF_COOKIE: Final = "fl_csrf"
CSRF_FIELD: Final = "csrf"


def new_secret() -> str:
    return secrets.token_urlsafe(32)


def is_loopback(host: str) -> bool:
    """Whether ``host`` names only this machine (``localhost`` or a loopback address)."""
    name = host.strip().strip("[]").lower()
    if name == "localhost":
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def _digest(text: str) -> bytes:
    return hashlib.sha256(text.encode("utf-8")).digest()


def _host_name(host_header: str) -> str:
    try:
        return urlsplit(f"//{host_header}").hostname or ""
    except ValueError:
        return ""


class Gate:
    """The tokens of a dashboard and its logins."""

    def __init__(self, tokens: Mapping[str, str], *, loopback: bool) -> None:
        self._tokens = {_digest(token): session for token, session in tokens.items()}
        self._logins: dict[bytes, str] = {}
        self.loopback = loopback

    @property
    def uses_tokens(self) -> bool:
        return bool(self._tokens)

    def session_of_token(self, token: str) -> str | None:
        return self._tokens.get(_digest(token))

    def session_of(self, request: Request) -> str | None:
        """The session the request may use (tokens), or None (not signed in)."""
        values = request.headers.getlist("authorization")
        if len(values) == 1:
            scheme, _, token = values[0].strip().partition(" ")
            if scheme.lower() == "bearer" and token.strip():
                return self.session_of_token(token.strip())
            return None
        login = request.cookies.get(LOGIN_COOKIE)
        if login:
            return self._logins.get(_digest(login))
        return None

    def log_in(self, token: str) -> str | None:
        """A new login cookie value for ``token``, or None for an unknown token."""
        session = self.session_of_token(token)
        if session is None:
            return None
        login = new_secret()
        self._logins[_digest(login)] = session
        return login

    def log_out(self, request: Request) -> None:
        login = request.cookies.get(LOGIN_COOKIE)
        if login:
            self._logins.pop(_digest(login), None)

    def host_allowed(self, request: Request) -> bool:
        """On a loopback address, only loopback host names (no DNS rebinding)."""
        if not self.loopback:
            return True
        return is_loopback(_host_name(request.headers.get("host", "")))

    @staticmethod
    def origin_allowed(request: Request) -> bool:
        """A POST's ``Origin``, when sent, must be this server."""
        origin = request.headers.get("origin")
        if origin is None:
            return True
        try:
            parts = urlsplit(origin)
        except ValueError:
            return False
        return parts.netloc.lower() == request.headers.get("host", "").lower()

    @staticmethod
    def csrf_matches(request: Request, submitted: object) -> bool:
        cookie = request.cookies.get(CSRF_COOKIE, "")
        if not cookie or not isinstance(submitted, str) or not submitted:
            return False
        return hmac.compare_digest(cookie.encode(), submitted.encode())
