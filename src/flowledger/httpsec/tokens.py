"""Token sources of the HTTP servers (``flowledger mcp --http`` and ``flowledger web``):
which token serves which workflow session.

A token source is a file (``--tokens-file``) or, without one, the environment variable
``FLOWLEDGER_MCP_TOKENS`` (the MCP server only; the dashboard takes a file). Both use
one format: entries of the form

    <token> <session-uuid>      the token serves that session
    <token>                     the token serves its own session, ``uuid5(NAMESPACE, token)``

In a file there is one entry per line; blank lines and lines starting with ``#`` are
skipped. In the variable, entries are separated by commas or newlines. A token is at
least 16 characters of the RFC 6750 ``b64token`` alphabet (letters, digits and
``-._~+/``, optionally ending in ``=``). Several tokens may serve the same session; one
token listed twice must name the same session both times.

A tokens file writable by its group or by others is refused (anyone who can write it
can give themselves a session), like ssh refuses such key files: ``chmod go-w`` it.

Errors (`TokenError`) name the line or entry, never the token itself.
"""

from __future__ import annotations

import os
import re
import shlex
import stat
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Final

from .errors import StartupError

__all__ = [
    "MIN_TOKEN_LENGTH",
    "NAMESPACE",
    "TOKENS_ENV",
    "TokenError",
    "load_tokens",
    "parse_tokens",
    "session_for_token",
]

TOKENS_ENV: Final = "FLOWLEDGER_MCP_TOKENS"
MIN_TOKEN_LENGTH: Final = 16
MAX_TOKEN_LENGTH: Final = 4096
#: Namespace of the sessions derived from tokens listed without one.
NAMESPACE: Final = uuid.UUID("6a4f9d1e-2c0b-5f3a-9e8d-7b1c0a2f4e6d")

_TOKEN: Final = re.compile(r"[A-Za-z0-9\-._~+/]+=*")
_ZERO: Final = uuid.UUID(int=0)


class TokenError(StartupError, ValueError):
    """A token source is malformed. The message never contains a token."""


def session_for_token(token: str) -> str:
    """The session a token listed without one serves: stable, and reveals nothing of it."""
    return str(uuid.uuid5(NAMESPACE, token))


def _entry(fields: list[str], where: str) -> tuple[str, str]:
    if len(fields) > 2:
        raise TokenError(f"{where}: expected '<token>' or '<token> <session-uuid>'")
    token = fields[0]
    if len(token) < MIN_TOKEN_LENGTH:
        raise TokenError(f"{where}: a token must be at least {MIN_TOKEN_LENGTH} characters")
    if len(token) > MAX_TOKEN_LENGTH:
        raise TokenError(f"{where}: a token must be at most {MAX_TOKEN_LENGTH} characters")
    if _TOKEN.fullmatch(token) is None:
        raise TokenError(
            f"{where}: a token may only hold letters, digits and -._~+/ (and trailing =)"
        )
    if len(fields) == 1:
        return token, session_for_token(token)
    try:
        session = uuid.UUID(fields[1])
    except ValueError:
        raise TokenError(f"{where}: the session must be a UUID") from None
    if session == _ZERO:
        raise TokenError(f"{where}: the session must be a nonzero UUID")
    return token, str(session)


def _add(tokens: dict[str, str], token: str, session: str, where: str) -> None:
    previous = tokens.setdefault(token, session)
    if previous != session:
        raise TokenError(f"{where}: this token is already listed for another session")


def parse_tokens(text: str, *, source: str = "tokens", separators: str = "\n") -> dict[str, str]:
    """Parse token entries separated by any of ``separators``; ``{token: session_id}``.

    Entries are numbered from 1 in error messages (``<source> line 3`` for newline-only
    separators, else ``<source> entry 3``)."""
    unit = "line" if separators == "\n" else "entry"
    pattern = "[" + re.escape(separators) + "]"
    tokens: dict[str, str] = {}
    for number, raw in enumerate(re.split(pattern, text), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        where = f"{source} {unit} {number}"
        token, session = _entry(line.split(), where)
        _add(tokens, token, session, where)
    return tokens


def _check_private(file: Path, status: os.stat_result) -> None:
    """Refuse a tokens file that others could rewrite (as ssh refuses such key files):
    whoever can add a line can grant themselves a session. Checked on the opened file,
    so the file read is the file checked."""
    if os.name != "posix":  # pragma: no cover - POSIX permission bits only
        return
    mode = stat.S_IMODE(status.st_mode)
    if mode & (stat.S_IWGRP | stat.S_IWOTH):
        raise TokenError(
            f"the tokens file {str(file)!r} is writable by group or others "
            f"(mode {mode:04o}); fix it with: chmod go-w {shlex.quote(str(file))}"
        )


def load_tokens(
    path: str | os.PathLike[str] | None = None,
    *,
    environ: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """The tokens of ``path`` if given, else of ``$FLOWLEDGER_MCP_TOKENS``, else none:
    ``{token: session_id}``. A file that cannot be read, one writable by its group or by
    others, or any malformed entry, raises `TokenError`; an empty token file also does
    (it is surely a mistake)."""
    if path is not None:
        file = Path(path)
        try:
            with file.open("rb") as stream:
                _check_private(file, os.fstat(stream.fileno()))
                text = stream.read().decode("utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else "unreadable"
            raise TokenError(f"cannot read the tokens file {str(file)!r}: {reason}") from None
        tokens = parse_tokens(text, source=f"tokens file {file.name!r}")
        if not tokens:
            raise TokenError(f"the tokens file {str(file)!r} lists no token")
        return tokens
    env = os.environ if environ is None else environ
    value = env.get(TOKENS_ENV, "")
    if not value.strip():
        return {}
    return parse_tokens(value, source=TOKENS_ENV, separators=",\n")
