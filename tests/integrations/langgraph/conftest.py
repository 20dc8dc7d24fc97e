"""Stores for the checkpointer's tests.

``store_url`` runs a test once per backend: ``memory://``, an SQLite file, and a fresh
PostgreSQL schema (skipped when no server is reachable, failing when ``CI=true``). The
conformance test's reports are printed at the end of the run (tests/_reports.py), so they
are in the CI log whatever the capture settings and however many workers run the tests.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from ..._postgres import postgres_url

BACKENDS = ["memory", "sqlite", "postgres"]


@pytest.fixture(params=BACKENDS)
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "memory":
        yield "memory://"
    elif request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'lg.db'}"
    else:
        with postgres_url() as url:
            yield url


@pytest.fixture(params=["sqlite", "postgres"])
def durable_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A store other processes can open too."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'lg.db'}"
    else:
        with postgres_url() as url:
            yield url
