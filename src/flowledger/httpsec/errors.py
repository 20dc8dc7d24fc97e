"""The error a host shows when an HTTP (or stdio) server cannot start."""

from __future__ import annotations

__all__ = ["StartupError"]


class StartupError(Exception):
    """A server could not start: bad options, a malformed or unsafe token source, an
    unsafe bind address, a session it cannot serve. ``str(error)`` is one line meant for
    the person who started the server; hosts (the CLI) catch this class, whose
    subclasses are each server's own (``McpStartupError``, ``WebStartupError``) and
    `flowledger.httpsec.tokens.TokenError`."""

    def __init__(self, message: str) -> None:
        super().__init__(" ".join(message.split()))
