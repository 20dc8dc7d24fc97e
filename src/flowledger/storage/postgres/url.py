"""PostgreSQL URLs: libpq connection URIs, ``postgresql://user:password@host:port/dbname``
(``postgres://`` is the same).

Query options of our own:

* ``schema`` - the schema holding every table (default ``flowledger``); created
  on first open if missing. 1 to 63 characters of ``[a-z0-9_]``, not starting
  with a digit or ``pg_``. Stores on different schemas of one database are
  independent.
* ``pool_min`` / ``pool_max`` - connections the store's pool keeps open at least
  (default 1) and opens at most (default ``max(10, pool_min)``).
* ``connect_timeout`` - whole seconds (1..3600, default 10) to wait for a new
  connection; passed on to libpq, and also the longest a call waits for a free
  connection of a busy pool.
* ``prepare`` - ``on`` (the default) or ``off``: whether a connection prepares the
  statements it runs repeatedly on the server (psycopg's ``prepare_threshold``), so that
  PostgreSQL parses and plans each of them once per connection instead of on every call.
  ``off`` for a transaction-mode pooler that cannot keep prepared statements (PgBouncer
  before 1.21, or without ``max_prepared_statements``).
* ``listen_url`` - where the store's wake-up listener (``LISTEN``, see
  `storage.postgres.wakeups`) connects: a percent-encoded ``postgresql://`` URL of a
  *session* connection straight to PostgreSQL (or through a session-mode pooler), or
  ``off`` for no wake-ups (waiters poll). Default: the store's own URL - unless
  ``prepare=off`` says a transaction-mode pooler is in between, where ``LISTEN`` cannot
  work: then wake-ups are off (a warning is logged when a listener is asked for) until
  ``listen_url`` names a direct connection.

Every other query parameter must be one of libpq's own connection keywords
(``sslmode``, ``sslrootcert``, ``application_name``, ``target_session_attrs``,
...) and is passed on to libpq unchanged. Unknown or repeated options, bad
values and a ``#fragment`` raise `UnsupportedURLError` (with any password in the
URL masked).
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from typing import Final
from urllib.parse import quote, unquote, urlsplit, urlunsplit

import psycopg

from ..store import UnsupportedURLError, redact_url

__all__ = ["PostgresSettings", "parse_postgres_url"]

_DEFAULT_SCHEMA: Final = "flowledger"
_DEFAULT_POOL_MIN: Final = 1
_DEFAULT_POOL_MAX: Final = 10
_MAX_POOL: Final = 1000
_DEFAULT_CONNECT_TIMEOUT: Final = 10
_MAX_CONNECT_TIMEOUT: Final = 3600


@dataclass(frozen=True, slots=True)
class PostgresSettings:
    conninfo: str  # the URL without our own options: what libpq gets
    schema: str = _DEFAULT_SCHEMA
    pool_min: int = _DEFAULT_POOL_MIN
    pool_max: int = _DEFAULT_POOL_MAX
    connect_timeout: int = _DEFAULT_CONNECT_TIMEOUT
    prepare: bool = True
    listen: str | None = None  # the listener's conninfo (None: wake-ups off)
    listen_off: str = ""  # why wake-ups are off, when they are


_OWN_OPTIONS: Final = (
    "schema",
    "pool_min",
    "pool_max",
    "connect_timeout",
    "prepare",
    "listen_url",
)
_SWITCH: Final = {"on": True, "off": False}
# libpq keywords that would turn the connection into something other than a SQL session.
_REFUSED_LIBPQ: Final = frozenset({"replication"})
_SCHEMA_NAME: Final = re.compile(r"[a-z_][a-z0-9_]{0,62}")
_DIGITS: Final = re.compile(r"[0-9]+")


@functools.cache
def _libpq_keywords() -> frozenset[str]:
    """The connection keywords the linked libpq understands."""
    options = psycopg.pq.Conninfo.get_defaults()
    return frozenset(o.keyword.decode() for o in options) - _REFUSED_LIBPQ - set(_OWN_OPTIONS)


def _whole(url: str, option: str, value: str, low: int, high: int) -> int:
    if not _DIGITS.fullmatch(value) or not low <= int(value) <= high:
        raise UnsupportedURLError(
            redact_url(url), f"{option} must be a whole number in {low}..{high}, not {value!r}"
        )
    return int(value)


def _parse_query(shown: str, query: str) -> list[tuple[str, str]]:
    """``key=value`` pairs, percent-decoded the way libpq does (a ``+`` stays a ``+``)."""
    if not query:
        return []
    pairs = []
    for part in query.split("&"):
        key, equals, value = part.partition("=")
        if not equals or not key:
            raise UnsupportedURLError(shown, "malformed query string")
        pairs.append((unquote(key), unquote(value)))
    return pairs


def parse_postgres_url(url: str) -> PostgresSettings:
    """Parse a ``postgresql:`` URL (see the module docstring) or raise `UnsupportedURLError`."""
    shown = redact_url(url)
    scheme, _, rest = url.partition(":")
    if scheme.lower() not in ("postgresql", "postgres") or not rest.startswith("//"):
        raise UnsupportedURLError(shown, "expected postgresql://[user@]host[:port]/dbname")
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - validates the port
    except ValueError as exc:
        raise UnsupportedURLError(shown, f"malformed URL: {exc}") from None
    if parts.fragment or url.endswith("#"):
        raise UnsupportedURLError(shown, "a postgres URL has no #fragment")
    options = _parse_query(shown, parts.query)

    known = _libpq_keywords()
    seen: set[str] = set()
    passed: list[tuple[str, str]] = []
    own: dict[str, str] = {}
    for option, value in options:
        if option in seen:
            raise UnsupportedURLError(shown, f"option {option!r} is given more than once")
        seen.add(option)
        if option in _OWN_OPTIONS:
            own[option] = value
        elif option in known:
            passed.append((option, value))
        else:
            raise UnsupportedURLError(
                shown,
                f"unknown option {option!r} (ours: {', '.join(_OWN_OPTIONS)}; "
                f"anything else must be a libpq connection keyword such as sslmode)",
            )

    schema = own.get("schema", _DEFAULT_SCHEMA)
    if not _SCHEMA_NAME.fullmatch(schema) or schema.startswith("pg_"):
        raise UnsupportedURLError(
            shown,
            f"schema must be 1-63 characters of [a-z0-9_], not starting with a digit "
            f"or 'pg_', not {schema!r}",
        )
    pool_min = _DEFAULT_POOL_MIN
    if "pool_min" in own:
        pool_min = _whole(url, "pool_min", own["pool_min"], 0, _MAX_POOL)
    pool_max = max(_DEFAULT_POOL_MAX, pool_min)
    if "pool_max" in own:
        pool_max = _whole(url, "pool_max", own["pool_max"], 1, _MAX_POOL)
        if pool_max < pool_min:
            raise UnsupportedURLError(
                shown, f"pool_max ({pool_max}) must not be less than pool_min ({pool_min})"
            )
    connect_timeout = _DEFAULT_CONNECT_TIMEOUT
    if "connect_timeout" in own:
        connect_timeout = _whole(
            url, "connect_timeout", own["connect_timeout"], 1, _MAX_CONNECT_TIMEOUT
        )
    prepare = _SWITCH.get(own.get("prepare", "on"))
    if prepare is None:
        raise UnsupportedURLError(shown, f"prepare must be on or off, not {own['prepare']!r}")
    passed.append(("connect_timeout", str(connect_timeout)))
    query = "&".join(f"{quote(k, safe='')}={quote(v, safe='')}" for k, v in passed)
    conninfo = urlunsplit(parts._replace(query=query, fragment=""))
    listen, listen_off = _listen(shown, own.get("listen_url"), conninfo, prepare)
    return PostgresSettings(
        conninfo, schema, pool_min, pool_max, connect_timeout, prepare, listen, listen_off
    )


def _listen(shown: str, option: str | None, conninfo: str, prepare: bool) -> tuple[str | None, str]:
    """The wake-up listener's conninfo and, when there is none, why (see ``listen_url``)."""
    if option is None:
        if prepare:
            return conninfo, ""
        return None, (
            "prepare=off says a transaction-mode pooler is in between, where LISTEN "
            "cannot work; give listen_url=<a direct postgresql:// URL> for wake-ups"
        )
    if option == "off":
        return None, "listen_url=off"
    scheme, _, rest = option.partition(":")
    if scheme.lower() not in ("postgresql", "postgres") or not rest.startswith("//"):
        raise UnsupportedURLError(
            shown, "listen_url must be a percent-encoded postgresql:// URL or off"
        )
    try:
        psycopg.conninfo.conninfo_to_dict(option)
    except psycopg.ProgrammingError:
        # libpq's message may quote the URL, password and all: say only what is wrong
        raise UnsupportedURLError(shown, "listen_url is not a valid libpq URL") from None
    return option, ""
