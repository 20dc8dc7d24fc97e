"""``flowledger mcp``: the command parses its options and hands over to the MCP server."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from ..mcp.conftest import READ_ONLY_NAMES
from .conftest import Cli, assert_one_line_error


def _rpc(id_: int | None, method: str, params: dict[str, object] | None = None) -> str:
    message: dict[str, object] = {"jsonrpc": "2.0", "method": method}
    if id_ is not None:
        message["id"] = id_
    if params is not None:
        message["params"] = params
    return json.dumps(message) + "\n"


def test_stdio_read_only_lists_only_reading_tools(cli: Cli) -> None:
    requests = (
        _rpc(
            1,
            "initialize",
            {
                "protocolVersion": "2025-03-26",
                "capabilities": {},
                "clientInfo": {"name": "test", "version": "1"},
            },
        )
        + _rpc(None, "notifications/initialized")
        + _rpc(2, "tools/list", {})
    )
    env = {k: v for k, v in os.environ.items() if k != "FLOWLEDGER_DB"}
    done = subprocess.run(
        [sys.executable, "-m", "flowledger", "mcp", "--read-only", "--db", cli.db],
        input=requests,
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    replies = {m.get("id"): m for m in map(json.loads, done.stdout.splitlines()) if "id" in m}
    names = {tool["name"] for tool in replies[2]["result"]["tools"]}
    assert names == set(READ_ONLY_NAMES)  # the reading tools of every bundle
    assert "Traceback" not in done.stderr


def test_startup_errors_are_one_line(cli: Cli) -> None:
    assert_one_line_error(
        cli("mcp", "--http", "--tokens-file", str(cli.cwd / "missing.txt")),
        "cannot read the tokens file",
    )
    assert_one_line_error(cli("mcp", "--http", "--host", "0.0.0.0"), "non-loopback")


def test_a_world_writable_tokens_file_is_refused_on_any_address(cli: Cli) -> None:
    """Reliability II item 8: serving 0.0.0.0 with a tokens file anyone can rewrite stops
    before listening, with one line that says how to fix it."""
    tokens = cli.cwd / "tokens.txt"
    tokens.write_text("abcdefghijklmnop0123\n", encoding="utf-8")
    tokens.chmod(0o666)
    done = cli.process(
        "mcp",
        "--http",
        "--host",
        "0.0.0.0",
        "--port",
        "8799",
        "--tokens-file",
        str(tokens),
        "--db",
        cli.db,
    )
    assert done.returncode == 1
    assert done.stderr.strip() == (
        f"error: the tokens file {str(tokens)!r} is writable by group or others (mode 0666); "
        f"fix it with: chmod go-w {tokens}"
    )
