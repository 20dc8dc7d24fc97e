"""SQLite URLs: ``sqlite:///relative/path.db`` or ``sqlite:////absolute/path.db``.

A relative path is relative to the current directory when the store is opened; the
path is percent-decoded. Query options:

* ``synchronous`` - ``FULL`` (the default: a commit survives power loss),
  ``NORMAL`` (a commit survives a process crash but may be lost, never torn, on
  power loss) or ``OFF``; case-insensitive.
* ``busy_timeout`` - milliseconds a writer waits for another writer (default 5000).

Anything else (unknown or repeated options, bad values, an empty path, a host)
raises `UnsupportedURLError`. The parent directory must exist; the file is
created on first open.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final, Literal
from urllib.parse import parse_qsl, unquote, urlsplit

from ..store import UnsupportedURLError

__all__ = ["SQLiteSettings", "Synchronous", "parse_sqlite_url"]

Synchronous = Literal["FULL", "NORMAL", "OFF"]

_DEFAULT_BUSY_TIMEOUT_MS: Final = 5000
_MAX_BUSY_TIMEOUT_MS: Final = 2**31 - 1  # sqlite3_busy_timeout takes a C int


@dataclass(frozen=True, slots=True)
class SQLiteSettings:
    path: str  # as written in the URL (decoded); relative paths resolve at open time
    synchronous: Synchronous = "FULL"
    busy_timeout_ms: int = _DEFAULT_BUSY_TIMEOUT_MS


_DIGITS: Final = re.compile(r"[0-9]+")
_SYNCHRONOUS_MODES: Final[dict[str, Synchronous]] = {
    "FULL": "FULL",
    "NORMAL": "NORMAL",
    "OFF": "OFF",
}


def parse_sqlite_url(url: str) -> SQLiteSettings:
    """Parse a ``sqlite:`` URL (see the module docstring) or raise `UnsupportedURLError`."""
    scheme, _, rest = url.partition(":")
    if scheme.lower() != "sqlite" or not rest.startswith("//"):
        raise UnsupportedURLError(url, "expected sqlite:///relative/path or sqlite:////abs/path")
    parts = urlsplit(url)
    if parts.netloc:
        raise UnsupportedURLError(
            url, "a sqlite URL has no host: use sqlite:///relative/path or sqlite:////abs/path"
        )
    if parts.fragment or url.endswith("#"):
        raise UnsupportedURLError(url, "a sqlite URL has no #fragment")
    path = unquote(parts.path[1:])  # drop the "/" that separates the empty host
    if not path:
        raise UnsupportedURLError(url, "the database path is empty")
    if "\0" in path:
        raise UnsupportedURLError(url, "the database path contains a NUL byte")
    if path.endswith("/"):
        raise UnsupportedURLError(url, "the database path names a directory")

    synchronous: Synchronous = "FULL"
    busy_timeout_ms = _DEFAULT_BUSY_TIMEOUT_MS
    try:
        options = parse_qsl(parts.query, keep_blank_values=True, strict_parsing=bool(parts.query))
    except ValueError:
        raise UnsupportedURLError(url, "malformed query string") from None
    seen: set[str] = set()
    for option, value in options:
        if option in seen:
            raise UnsupportedURLError(url, f"option {option!r} is given more than once")
        seen.add(option)
        if option == "synchronous":
            mode = _SYNCHRONOUS_MODES.get(value.upper())
            if mode is None:
                raise UnsupportedURLError(
                    url, f"synchronous must be FULL, NORMAL or OFF, not {value!r}"
                )
            synchronous = mode
        elif option == "busy_timeout":
            if not _DIGITS.fullmatch(value) or int(value) > _MAX_BUSY_TIMEOUT_MS:
                raise UnsupportedURLError(
                    url,
                    f"busy_timeout must be a whole number of milliseconds "
                    f"(0..{_MAX_BUSY_TIMEOUT_MS}), not {value!r}",
                )
            busy_timeout_ms = int(value)
        else:
            raise UnsupportedURLError(
                url, f"unknown option {option!r} (known: synchronous, busy_timeout)"
            )
    return SQLiteSettings(path, synchronous, busy_timeout_ms)
