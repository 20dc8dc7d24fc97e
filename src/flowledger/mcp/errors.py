"""The one error a host shows when an MCP server cannot start."""

from __future__ import annotations

from ..httpsec.errors import StartupError

__all__ = ["McpStartupError"]


class McpStartupError(StartupError):
    """The server could not start (bad options, no catalog, the session is owned by
    another process, an unsafe bind address). ``str(error)`` is one line meant for the
    person who started the server. A malformed token source is a
    `flowledger.httpsec.TokenError`, the other `StartupError` hosts catch."""
