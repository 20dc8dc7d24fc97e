"""``flowledger source probe`` as a child process, against real MCP servers."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from flowledger.cli import app
from flowledger.deploy import SourceSession, StdioSource
from flowledger.deploy.sources.fingerprint import short

from .servers import REPO, free_port, time_command

DEVNULL = open(os.devnull, "w")  # noqa: SIM115 - the servers' stderr, for the whole module


def probe(*args: str, cwd: Path = REPO) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "FLOWLEDGER_DEBUG"}
    env["COLUMNS"] = "120"
    return subprocess.run(
        [sys.executable, "-m", "flowledger", "source", "probe", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        encoding="utf-8",
        timeout=120,
        check=False,
    )


def one_line_error(done: subprocess.CompletedProcess[str], *fragments: str) -> str:
    assert done.returncode == 1, (done.returncode, done.stdout, done.stderr)
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("error: ") and "Traceback" not in done.stderr
    for fragment in fragments:
        assert fragment in lines[0], (fragment, lines[0])
    return lines[0]


async def expected(source: StdioSource) -> dict[str, Any]:
    async with SourceSession(source, errlog=DEVNULL) as session:
        return {tool.name: tool.to_json() for tool in await session.list_tools()}


async def test_probe_prints_a_table_of_tools_and_fingerprints() -> None:
    command = [time_command(), "--local-timezone", "Etc/UTC"]
    done = probe("--stdio", shlex.join(command))
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("server mcp-time ")
    assert lines[1].split() == ["tool", "read-only", "idempotent", "contract", "full"]
    tools = await expected(StdioSource(command[0], command[1:]))
    rows = {line.split()[0]: line.split() for line in lines[2:-1]}
    assert rows.keys() == tools.keys()
    for name, tool in tools.items():
        assert rows[name][1:] == [
            "yes" if tool["read_only"] else "no",
            "yes" if tool["idempotent"] else "no",
            short(tool["contract_fingerprint"]),
            short(tool["full_fingerprint"]),
        ]
    assert lines[-1].startswith("2 tools;")


async def test_probe_json_is_the_whole_listing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FLOWLEDGER_PROBE_SECRET", "inherited-secret")
    command = [time_command(), "--local-timezone", "Europe/Paris"]
    done = probe(
        "--stdio",
        shlex.join(command),
        "--env",
        "TZ_NOTE=secret-value",
        "--env",
        "FLOWLEDGER_PROBE_SECRET",  # a bare name passes this environment's value on
        "--json",
    )
    assert done.returncode == 0, done.stderr
    printed = json.loads(done.stdout)
    assert printed["source"] == {
        "transport": "stdio",
        "command": command[0],
        "args": command[1:],
        "env": ["FLOWLEDGER_PROBE_SECRET", "TZ_NOTE"],
        "cwd": None,
    }
    assert "secret-value" not in done.stdout and "inherited-secret" not in done.stdout
    assert printed["server"]["name"] == "mcp-time"
    tools = await expected(StdioSource(command[0], command[1:]))
    assert {tool["name"]: tool for tool in printed["tools"]} == tools
    now = next(tool for tool in printed["tools"] if tool["name"] == "get_current_time")
    assert now["input_schema"]["required"] == ["timezone"]
    assert now["contract_fingerprint"].startswith("sha256:") and len(now["full_fingerprint"]) == 71


def test_probe_over_http(everything_http: str) -> None:
    done = probe("--url", everything_http, "--header", "X-Probe=1", "--json")
    assert done.returncode == 0, done.stderr
    printed = json.loads(done.stdout)
    assert printed["source"] == {
        "transport": "http",
        "url": everything_http,
        "headers": ["x-probe"],
    }
    assert {"echo", "get-sum"} <= {tool["name"] for tool in printed["tools"]}


def test_unreachable_sources_are_one_line_errors() -> None:
    one_line_error(
        probe("--stdio", "flowledger-no-such-command --flag"),
        'MCP source "flowledger-no-such-command --flag" is unreachable',
        "command not found",
    )
    url = f"http://127.0.0.1:{free_port()}/mcp"
    line = one_line_error(
        probe("--url", url, "-H", "Authorization=Bearer hidden-token"),
        f"MCP source {url} is unreachable",
    )
    assert "hidden-token" not in line
    one_line_error(
        probe(
            "--stdio",
            shlex.join([sys.executable, "-c", "import time; time.sleep(60)"]),
            "--timeout",
            "0.5",
        ),
        "no handshake within 0.5s",
    )


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        ((), "give exactly one of --stdio and --url"),
        (("--stdio", "x", "--url", "http://127.0.0.1:1/mcp"), "exactly one"),
        (("--stdio", "x", "--header", "A=b"), "--header needs --url"),
        (("--url", "http://127.0.0.1:1/mcp", "--env", "A=b"), "need --stdio"),
        (("--url", "http://127.0.0.1:1/mcp", "-H", "Authorization: hidden"), "NAME=VALUE"),
        (("--url", "ftp://x/mcp"), "must start with http:// or https://"),
        (("--stdio", "'unbalanced"), "cannot split the command line"),
        (("--stdio", "x", "--env", "FLOWLEDGER_UNSET_VARIABLE"), "is not set in this environment"),
    ],
)
def test_bad_options_are_usage_errors(args: tuple[str, ...], fragment: str) -> None:
    done = CliRunner().invoke(app, ["source", "probe", *args], env={"COLUMNS": "200"})
    assert done.exit_code == 2, done.output
    assert fragment in " ".join(done.stderr.replace("│", " ").split())
    assert "hidden" not in done.stderr


def test_probe_has_help() -> None:
    done = CliRunner().invoke(app, ["source", "probe", "--help"], env={"COLUMNS": "200"})
    assert done.exit_code == 0, done.output
    for option in ("--stdio", "--url", "--header", "--env", "--cwd", "--timeout", "--json"):
        assert option in done.stdout
    listed = CliRunner().invoke(app, ["--help"], env={"COLUMNS": "200"})
    assert "source" in listed.stdout
