"""The HTTP security layer of ``flowledger mcp --http`` and ``flowledger web``.

Both servers are built on these parts, so both behave the same wherever they meet a
client (``docs/mcp.md``, "HTTP security"):

* `tokens` - token sources: the tokens file (refused when its group or others can
  write it) and ``FLOWLEDGER_MCP_TOKENS``;
* `credentials` - which session a token serves, compared in constant time over digests;
* `throttle` - the bound on failed authentications per client (429, ``Retry-After``);
* `auth` - the two together: `Authenticator`;
* `loopback` - which addresses may be served without tokens;
* `origins` - the Host (DNS rebinding) and Origin (cross-origin) checks;
* `guard` - the ASGI middleware every request passes first: those checks and the body
  limit (413 before the application sees anything);
* `hosts` - one served session per tenant, each in its own task;
* `errors` - `StartupError`, what a host shows when a server cannot start.

It imports nothing from `flowledger.mcp` or `flowledger.web`; they import it.
"""

from .auth import Authenticator
from .credentials import TokenTable, bearer_token
from .errors import StartupError
from .guard import DEFAULT_MAX_BODY, Guard, Refusal, request_body
from .hosts import ServerStoppingError, SessionHosts
from .loopback import is_loopback, open_bind_refusal
from .origins import HostPolicy
from .throttle import DEFAULT_BOUND, FailureBound, FailureLimiter, TooManyFailuresError, client_key
from .tokens import TOKENS_ENV, TokenError, load_tokens, parse_tokens, session_for_token

__all__ = [
    "DEFAULT_BOUND",
    "DEFAULT_MAX_BODY",
    "TOKENS_ENV",
    "Authenticator",
    "FailureBound",
    "FailureLimiter",
    "Guard",
    "HostPolicy",
    "Refusal",
    "ServerStoppingError",
    "SessionHosts",
    "StartupError",
    "TokenError",
    "TokenTable",
    "TooManyFailuresError",
    "bearer_token",
    "client_key",
    "is_loopback",
    "load_tokens",
    "open_bind_refusal",
    "parse_tokens",
    "request_body",
    "session_for_token",
]
