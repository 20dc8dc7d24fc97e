"""PostgreSQL for the test suites: one reachability check, and an isolated schema per test.

The server comes from ``FLOWLEDGER_TEST_POSTGRES_URL`` (default
``postgresql://postgres@127.0.0.1:5432/test``). When it cannot be reached (or psycopg is
not installed), tests that need it are skipped with the reason - except when the
environment variable ``CI`` is ``true``: there they fail, so a CI run can never pass
while silently testing nothing on PostgreSQL.

`postgres_url()` yields a store URL on a fresh schema (``t_<uuid hex>``) and drops the
schema afterwards. The store creates the schema (and its tables) on first open, so a
test that never opens a store costs one ``DROP SCHEMA IF EXISTS``. Per test that is
about 15 ms of DDL and 5-10 ms of drop on a local server; migrating schemas ahead of time
on a background thread was tried and bought nothing on a 2-core machine (the server's
CPU is the bottleneck), so this stays simple.
"""

from __future__ import annotations

import contextlib
import functools
import os
import uuid
from collections.abc import Iterator
from typing import Any
from urllib.parse import quote, urlsplit, urlunsplit

import pytest

ENV_VAR = "FLOWLEDGER_TEST_POSTGRES_URL"
DEFAULT_URL = "postgresql://postgres@127.0.0.1:5432/test"


def base_url() -> str:
    return os.environ.get(ENV_VAR) or DEFAULT_URL


def with_options(url: str, **options: object) -> str:
    """``url`` with query ``options`` added (they must not be in it already)."""
    parts = urlsplit(url)
    extra = "&".join(f"{quote(k, safe='')}={quote(str(v), safe='')}" for k, v in options.items())
    query = f"{parts.query}&{extra}" if parts.query and extra else parts.query or extra
    return urlunsplit(parts._replace(query=query))


def _shown(url: str) -> str:
    from flowledger.storage.store import redact_url

    return redact_url(url)


@functools.cache
def _unavailable() -> str | None:
    """Why PostgreSQL cannot be used (checked once per process), or None if it can."""
    try:
        import psycopg
        import psycopg_pool  # noqa: F401
    except ImportError as exc:
        return f"psycopg is not installed ({exc}); pip install -e '.[dev]'"
    try:
        with psycopg.connect(base_url(), connect_timeout=3, autocommit=True) as conn:
            conn.execute("SELECT 1")
    except psycopg.Error as exc:
        first_line = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        return (
            f"PostgreSQL at {_shown(base_url())} is unreachable ({first_line}); "
            f"set {ENV_VAR} to a server the tests may create schemas in"
        )
    return None


def require_postgres() -> str:
    """The server's base URL; skips the test if unreachable (fails it when CI=true)."""
    reason = _unavailable()
    if reason is not None:
        if os.environ.get("CI") == "true":
            pytest.fail(f"{reason} [CI=true: PostgreSQL tests must run]", pytrace=False)
        pytest.skip(reason)
    return base_url()


class _Admin:
    """One autocommit connection per process for dropping test schemas."""

    conn: Any = None

    @classmethod
    def execute(cls, query: str) -> None:
        import psycopg

        if cls.conn is None or cls.conn.closed or cls.conn.broken:
            cls.conn = psycopg.connect(base_url(), autocommit=True)
            cls.conn.execute("SET lock_timeout = '30s'")
        cls.conn.execute(query)


def new_schema() -> str:
    return f"t_{uuid.uuid4().hex}"


def drop_schema(schema: str) -> None:
    assert schema.startswith("t_") and schema.isidentifier()
    _Admin.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


@contextlib.contextmanager
def postgres_url(**options: object) -> Iterator[str]:
    """A store URL on a schema of its own, dropped on exit; skips if PostgreSQL is absent."""
    base = require_postgres()
    schema = new_schema()
    try:
        yield with_options(base, schema=schema, **options)
    finally:
        drop_schema(schema)
