"""Stores for the checkpointer's tests, and the LangGraph conformance reports in the log.

``store_url`` runs a test once per backend: ``memory://``, an SQLite file, and a fresh
PostgreSQL schema (skipped when no server is reachable, failing when ``CI=true``). The
conformance test stashes each backend's report; `pytest_terminal_summary` prints them at
the end of the run, so they are in the CI log whatever the capture settings.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ..._postgres import postgres_url

BACKENDS = ["memory", "sqlite", "postgres"]
REPORTS: dict[str, str] = {}


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


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if not REPORTS:
        return
    terminalreporter.write_sep(
        "=", "LangGraph checkpoint conformance (langgraph-checkpoint-conformance)"
    )
    for backend, text in sorted(REPORTS.items()):
        terminalreporter.write_line(f"backend: {backend}")
        for line in text.rstrip().splitlines():
            terminalreporter.write_line(line)
