"""The one error a host shows when an MCP server cannot start."""

from __future__ import annotations

__all__ = ["McpStartupError"]


class McpStartupError(Exception):
    """The server could not start (bad options, no catalog, the session is owned by
    another process, a malformed token source, an unsafe bind address). ``str(error)``
    is one line meant for the person who started the server."""

    def __init__(self, message: str) -> None:
        super().__init__(" ".join(message.split()))
