"""Fixtures for the deploy tests: the example artifacts (the ones docs/deploy.md shows),
a store on every backend, and the real MCP servers of `servers`."""

from __future__ import annotations

import copy
import subprocess
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from flowledger.deploy import StdioSource, read_document
from flowledger.storage import Store, open_store

from .._postgres import postgres_url
from .servers import everything_http_server, everything_stdio, time_source

HERE = Path(__file__).parent
APPROVAL = (HERE / "approval.yaml").read_text()
BRIEFING = (HERE / "city_briefing.yaml").read_text()


def approval_data() -> dict[str, Any]:
    return copy.deepcopy(read_document(APPROVAL))


def briefing_data() -> dict[str, Any]:
    return copy.deepcopy(read_document(BRIEFING))


def minimal(**changes: Any) -> dict[str, Any]:
    """The smallest valid artifact (one end node), with top-level ``changes``."""
    doc: dict[str, Any] = {
        "format": "flowledger.artifact/v1",
        "name": "minimal",
        "version": "1",
        "input_schema": {"type": "object", "additionalProperties": False},
        "output_schema": {"type": "object", "additionalProperties": False},
        "start": "done",
        "nodes": {"done": {"kind": "end", "outcome": "ok"}},
    }
    doc.update(changes)
    return doc


@pytest.fixture(params=["memory", "sqlite", "postgres"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "memory":
        yield "memory://"
    elif request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'store.db'}"
    else:
        with postgres_url() as url:
            yield url


@pytest.fixture
async def store(store_url: str) -> AsyncIterator[Store]:
    async with open_store(store_url) as opened:
        yield opened


@pytest.fixture
def time_server() -> StdioSource:
    """mcp-server-time over stdio (its local time zone fixed to Etc/UTC)."""
    return time_source()


@pytest.fixture
def everything() -> StdioSource:
    """server-everything over stdio."""
    return everything_stdio()


@pytest.fixture
def everything_http(tmp_path: Path) -> Iterator[str]:
    """The URL of a server-everything over streamable HTTP, on loopback, for this test."""
    with everything_http_server(tmp_path / "everything-http.log") as (url, _process):
        yield url


@pytest.fixture
def everything_http_process(
    tmp_path: Path,
) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """Like `everything_http`, with the server's process (to kill it)."""
    with everything_http_server(tmp_path / "everything-http.log") as served:
        yield served
