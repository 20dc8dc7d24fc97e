"""Backends under test. Every module in this folder runs once per backend, unchanged."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from flowledger.storage import Store, open_store

BACKENDS = ["memory", "sqlite"]


@pytest.fixture(params=BACKENDS)
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    backend: str = request.param
    if backend == "memory":
        return "memory://"
    return f"sqlite:///{tmp_path / 'store.db'}"


@pytest.fixture
async def store(store_url: str) -> AsyncIterator[Store]:
    async with open_store(store_url) as opened:
        yield opened
