"""Backends under test. Every module in this folder runs once per backend, unchanged.

``postgres`` runs on a fresh schema per test (see ``tests/_postgres.py``); it is skipped
when no server is reachable, and fails instead when ``CI=true``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from flowledger.storage import Store, open_store

from .._postgres import postgres_url

BACKENDS = ["memory", "sqlite", "postgres"]


@pytest.fixture(params=BACKENDS)
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    backend: str = request.param
    if backend == "memory":
        yield "memory://"
    elif backend == "sqlite":
        yield f"sqlite:///{tmp_path / 'store.db'}"
    else:
        with postgres_url() as url:
            yield url


@pytest.fixture
async def store(store_url: str) -> AsyncIterator[Store]:
    async with open_store(store_url) as opened:
        yield opened
