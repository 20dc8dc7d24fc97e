"""L4 web dashboard: ``flowledger web``.

A Starlette application (`Dashboard`) served by uvicorn (`WebServer`), rendered on the
server with Jinja2 templates, with one small script of our own for live updates (SSE)
and form checks; every asset is served from this package. It reads and changes runs
only through the session's `flowledger.tools.WorkflowTools`, so it shows exactly what
the tools show. See ``docs/dashboard.md``.
"""

from .app import Dashboard
from .security import Gate
from .server import DEFAULT_HOST, DEFAULT_PORT, WebServer, WebStartupError, announce
from .sessions import SessionPool

__all__ = [
    "DEFAULT_HOST",
    "DEFAULT_PORT",
    "Dashboard",
    "Gate",
    "SessionPool",
    "WebServer",
    "WebStartupError",
    "announce",
]
