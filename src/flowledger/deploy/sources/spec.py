"""Where an MCP capability source lives: a command to launch (stdio) or a URL (HTTP).

A source spec is immutable and hashable; two equal specs are the same source, which is
what `SourcePool` keys its sessions by. Equality includes environment and header
*values* (two credentials are two sources), but nothing that prints a spec shows them:
``repr``, `label` and `identity` carry variable and header *names* only. Secrets belong
in ``env`` or ``headers``, never in ``args`` or the URL: arguments are shown in labels,
and only URL credentials (``user:password@``) are removed from what is shown.

Construction validates everything the transport would otherwise reject late or
dangerously (NUL bytes in a command line, CR/LF in a header value) and raises
`SourceSpecError` saying which field is wrong.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any, Final, TypeAlias
from urllib.parse import urlsplit, urlunsplit

from .errors import SourceSpecError, clip
from .openapi_spec import OpenApiSource
from .python_spec import PythonSource

__all__ = ["HttpSource", "McpSource", "OpenApiSource", "PythonSource", "Source", "StdioSource"]

MAX_LABEL_CHARS: Final = 120
_ENV_NAME: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# RFC 9110 token characters
_HEADER_NAME: Final = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_EMPTY: Final[Mapping[str, str]] = MappingProxyType({})


def _frozen(pairs: Mapping[str, str]) -> Mapping[str, str]:
    return MappingProxyType(dict(sorted(pairs.items())))


@dataclass(frozen=True, repr=False, eq=False)
class StdioSource:
    """A server launched as ``command args...`` in ``cwd``, spoken to over stdin/stdout.

    ``env`` is added to the few variables the MCP SDK passes on by default (``PATH``,
    ``HOME``, ``USER``, ``SHELL``, ``TERM``, ``LOGNAME``); nothing else of this process's
    environment reaches the server."""

    command: str
    args: Sequence[str] = ()
    env: Mapping[str, str] = field(default_factory=lambda: _EMPTY)
    cwd: str | None = None

    def __post_init__(self) -> None:
        command = self.command
        if not isinstance(command, str) or not command.strip():
            raise SourceSpecError("stdio", "command must be a non-empty string")
        if "\0" in command:
            raise SourceSpecError("stdio", "command contains a NUL character")
        if isinstance(self.args, str) or not isinstance(self.args, Sequence):
            raise SourceSpecError(
                _stdio_label(command, ()), "args must be a list of strings, not one string"
            )
        args = tuple(self.args)
        label = _stdio_label(command, tuple(a for a in args if isinstance(a, str)))
        for index, arg in enumerate(args):
            if not isinstance(arg, str):
                raise SourceSpecError(label, f"args[{index}] is not a string")
            if "\0" in arg:
                raise SourceSpecError(label, f"args[{index}] contains a NUL character")
        if not isinstance(self.env, Mapping):
            raise SourceSpecError(label, "env must be a mapping of names to strings")
        for name, value in self.env.items():
            if not isinstance(name, str) or not _ENV_NAME.fullmatch(name):
                raise SourceSpecError(label, f"env name {clip(repr(name), 60)} is not a valid name")
            if not isinstance(value, str) or "\0" in value:
                raise SourceSpecError(label, f"env {name} must be a string without NUL characters")
        cwd = self.cwd
        if isinstance(cwd, Path):
            cwd = str(cwd)
        if cwd is not None and (not isinstance(cwd, str) or not cwd or "\0" in cwd):
            raise SourceSpecError(label, "cwd must be a non-empty path")
        object.__setattr__(self, "args", args)
        object.__setattr__(self, "env", _frozen(self.env))
        object.__setattr__(self, "cwd", cwd)

    def __hash__(self) -> int:
        return hash(("stdio", self.command, self.args, tuple(self.env.items()), self.cwd))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, StdioSource):
            return NotImplemented
        return (self.command, self.args, dict(self.env), self.cwd) == (
            other.command,
            other.args,
            dict(other.env),
            other.cwd,
        )

    def __repr__(self) -> str:
        return (
            f"StdioSource(command={self.command!r}, args={self.args!r}, "
            f"env=<{', '.join(self.env) or 'none'}>, cwd={self.cwd!r})"
        )

    @property
    def label(self) -> str:
        """How messages name this source: the command line, quoted (no env values)."""
        return _stdio_label(self.command, tuple(self.args))

    def identity(self) -> dict[str, Any]:
        """JSON for pins and probes: transport fields and env *names*, never values."""
        return {
            "transport": "stdio",
            "command": self.command,
            "args": list(self.args),
            "env": sorted(self.env),
            "cwd": self.cwd,
        }


@dataclass(frozen=True, repr=False, eq=False)
class HttpSource:
    """A server at a streamable HTTP endpoint, sent ``headers`` with every request."""

    url: str
    headers: Mapping[str, str] = field(default_factory=lambda: _EMPTY)

    def __post_init__(self) -> None:
        url = self.url
        if not isinstance(url, str) or not url:
            raise SourceSpecError("http", "url must be a non-empty string")
        if any(c.isspace() or ord(c) < 0x20 or c == "\x7f" for c in url):
            raise SourceSpecError("http", "url contains whitespace or control characters")
        try:
            parts = urlsplit(url)
            parts.port  # noqa: B018 - raises ValueError for a malformed port
        except ValueError as exc:
            raise SourceSpecError(_http_label(url), f"url is malformed: {exc}") from None
        label = _http_label(url)
        if parts.scheme not in ("http", "https"):
            raise SourceSpecError(label, "url must start with http:// or https://")
        if not parts.hostname:
            raise SourceSpecError(label, "url has no host")
        if not isinstance(self.headers, Mapping):
            raise SourceSpecError(label, "headers must be a mapping of names to strings")
        headers: dict[str, str] = {}
        for name, value in self.headers.items():
            if not isinstance(name, str) or not _HEADER_NAME.fullmatch(name):
                raise SourceSpecError(
                    label, f"header name {clip(repr(name), 60)} is not a valid HTTP header name"
                )
            if not isinstance(value, str) or any(c in value for c in "\r\n\0"):
                raise SourceSpecError(
                    label, f"header {name} must be a string without CR, LF or NUL characters"
                )
            folded = name.lower()
            if folded in headers:
                raise SourceSpecError(label, f"header {name} is given twice")
            headers[folded] = value
        object.__setattr__(self, "headers", _frozen(headers))

    def __hash__(self) -> int:
        return hash(("http", self.url, tuple(self.headers.items())))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, HttpSource):
            return NotImplemented
        return (self.url, dict(self.headers)) == (other.url, dict(other.headers))

    def __repr__(self) -> str:
        return f"HttpSource(url={self.label!r}, headers=<{', '.join(self.headers) or 'none'}>)"

    @property
    def label(self) -> str:
        """How messages name this source: the URL without credentials, query or fragment."""
        return _http_label(self.url)

    def identity(self) -> dict[str, Any]:
        """JSON for pins and probes: the URL without credentials, and header *names*."""
        return {
            "transport": "http",
            "url": _without_userinfo(self.url),
            "headers": sorted(self.headers),
        }


McpSource: TypeAlias = StdioSource | HttpSource
"""A source spoken to over MCP."""
Source: TypeAlias = McpSource | PythonSource | OpenApiSource
"""Any capability source: an MCP server, Python functions (`PythonSource`), or the
operations of an OpenAPI document (`OpenApiSource`)."""


def _stdio_label(command: str, args: tuple[str, ...]) -> str:
    return clip(shlex.join([command, *args]), MAX_LABEL_CHARS).join('""')


def _without_userinfo(url: str) -> str:
    try:
        parts = urlsplit(url)
    except ValueError:
        return "<malformed url>"
    netloc = parts.netloc.rpartition("@")[2]
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))


def _http_label(url: str) -> str:
    try:
        parts = urlsplit(url)
    except ValueError:
        return "<malformed url>"
    netloc = parts.netloc.rpartition("@")[2]
    return clip(urlunsplit((parts.scheme, netloc, parts.path, "", "")), MAX_LABEL_CHARS)
