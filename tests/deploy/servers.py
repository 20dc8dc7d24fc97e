"""Real MCP servers for the deploy tests: ``mcp-server-time`` (PyPI, from this virtual
environment) and ``@modelcontextprotocol/server-everything`` (npm, installed into
``tests/deploy/npm`` by ``npm ci --prefix tests/deploy/npm``, which ``.ci/run`` does),
over stdio and streamable HTTP.

A server that is not installed skips the test that needs it, with the reason, except
when ``CI=true``: there it fails, so CI can never pass without running these tests.
The HTTP server listens on 127.0.0.1 only (``npm/loopback.mjs``) on a free port.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import NoReturn

import pytest

from flowledger.deploy import HttpSource, StdioSource

REPO = Path(__file__).resolve().parents[2]
NPM = Path(__file__).resolve().parent / "npm"
PACKAGE = NPM / "node_modules" / "@modelcontextprotocol" / "server-everything"
EVERYTHING = PACKAGE / "dist" / "index.js"
LOOPBACK = NPM / "loopback.mjs"
INSTALL_HINT = "run: npm ci --prefix tests/deploy/npm"
START_TIMEOUT = 30.0


def unavailable(reason: str) -> NoReturn:
    """Skip (or, with CI=true, fail) a test whose server is not installed."""
    if os.environ.get("CI") == "true":
        pytest.fail(f"{reason} [CI=true: the real-MCP-server tests must run]", pytrace=False)
    pytest.skip(reason)


def time_command() -> str:
    """The ``mcp-server-time`` console script of this virtual environment."""
    script = Path(sys.executable).parent / "mcp-server-time"
    if not script.exists():
        unavailable("mcp-server-time is not installed (pip install -e '.[dev]')")
    return str(script)


def time_source(local_timezone: str = "Etc/UTC") -> StdioSource:
    """``mcp-server-time`` over stdio. Its descriptions name the local time zone, so a
    fixed one keeps them the same on every machine."""
    return StdioSource(time_command(), ["--local-timezone", local_timezone])


def node_command() -> str:
    node = shutil.which("node")
    if node is None:
        unavailable("node is not installed (server-everything needs Node.js 18+)")
    if not EVERYTHING.exists():
        unavailable(f"@modelcontextprotocol/server-everything is not installed ({INSTALL_HINT})")
    return node


def everything_stdio(*, env: dict[str, str] | None = None) -> StdioSource:
    """server-everything over stdio."""
    return StdioSource(node_command(), [str(EVERYTHING), "stdio"], env=env or {})


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@contextmanager
def everything_http_server(
    log: Path, *, port: int | None = None
) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """server-everything over streamable HTTP on 127.0.0.1 and ``port`` (default: a free
    one): yields its URL and process, and stops it afterwards. Its output goes to ``log``."""
    node = node_command()
    chosen = port
    for _attempt in range(1 if chosen is not None else 3):  # a free port may be taken first
        port = chosen if chosen is not None else free_port()
        with log.open("wb") as out:
            process = subprocess.Popen(
                [node, "--import", LOOPBACK.as_uri(), str(EVERYTHING), "streamableHttp"],
                env={**os.environ, "PORT": str(port)},
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        try:
            if _wait_listening(process, port):
                yield f"http://127.0.0.1:{port}/mcp", process
                return
        finally:
            stop(process)
    raise AssertionError(f"server-everything did not start over HTTP: {log.read_text()[-2000:]}")


def _wait_listening(process: subprocess.Popen[bytes], port: int) -> bool:
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        if process.poll() is not None:
            return False
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return True
        except OSError:
            time.sleep(0.05)
    raise AssertionError(f"server-everything did not listen on port {port} in {START_TIMEOUT}s")


def stop(process: subprocess.Popen[bytes]) -> None:
    """SIGTERM, then SIGKILL, and reap."""
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(10)


def http_source(url: str, headers: dict[str, str] | None = None) -> HttpSource:
    return HttpSource(url, headers or {})
