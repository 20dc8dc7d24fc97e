"""Host and Origin checks: no DNS rebinding, no cross-origin requests.

* **Host.** A server bound to a loopback address answers only requests whose ``Host``
  header names a loopback host (``127.0.0.1``, ``[::1]``, ``localhost``; any port). A
  page on ``attacker.example`` that its DNS re-points at 127.0.0.1 runs in the victim's
  browser with the victim's network position, but its requests say
  ``Host: attacker.example``: they reach nothing. On any other address tokens are
  required, and the Host is not checked (a reverse proxy may use any name).
* **Origin.** A request that carries ``Origin`` (a browser sends it on cross-origin
  requests, on POSTs and on ``EventSource``/``fetch`` calls) must come from the server
  itself: the origin's scheme is ``http`` or ``https`` and its ``host[:port]`` equals
  the ``Host`` header. Anything else (another site, another local port, ``null``) is
  refused, on every address. A reverse proxy must therefore pass ``Host`` through.

A request without ``Origin`` (a command-line client, an SDK, a same-origin navigation)
passes the Origin check.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Final
from urllib.parse import urlsplit

from starlette.datastructures import Headers

from .loopback import is_loopback

__all__ = ["Check", "HostPolicy", "host_name"]

_WEB_SCHEMES: Final = frozenset({"http", "https"})


class Check(Enum):
    """Which check refused a request."""

    HOST = "host"
    ORIGIN = "origin"


def host_name(host_header: str) -> str:
    """The host name of a ``Host`` header (``[::1]:80`` -> ``::1``); ``""`` if it has
    none or cannot be read."""
    try:
        return urlsplit(f"//{host_header}").hostname or ""
    except ValueError:
        return ""


def _same_origin(origin: str, host_header: str) -> bool:
    try:
        parts = urlsplit(origin)
    except ValueError:
        return False
    if parts.scheme.lower() not in _WEB_SCHEMES or not parts.netloc:
        return False
    # an origin is scheme://host[:port] and nothing more
    if parts.path or parts.query or parts.fragment or "@" in parts.netloc:
        return False
    return parts.netloc.lower() == host_header.strip().lower()


@dataclass(frozen=True)
class HostPolicy:
    """The Host and Origin checks of a server bound to ``loopback`` (or not)."""

    loopback: bool

    def refusal(self, headers: Headers) -> Check | None:
        """The check a request with ``headers`` fails, or ``None`` if it passes."""
        host = headers.get("host", "")
        if self.loopback and not is_loopback(host_name(host)):
            return Check.HOST
        origin = headers.getlist("origin")
        if origin and (len(origin) != 1 or not _same_origin(origin[0], host)):
            return Check.ORIGIN
        return None
