"""Fixtures for the deploy tests: the real MCP servers of `servers`."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from flowledger.deploy import StdioSource

from .servers import everything_http_server, everything_stdio, time_source


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
