"""A stdio server's stderr never mixes unmarked into the CLI's output: every line it
writes reaches the CLI's stderr prefixed with ``[NAME] `` (the server's program name),
and none reaches stdout. ``flowledger source probe`` in-process (typer's CliRunner),
``flowledger deploy run`` once as a child process (the database prepared in-process),
both against the tests' own ``banner_server.py``, which prints a banner when it starts
and a line per call."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from flowledger.cli import app
from flowledger.deploy.sources.stderr import server_name

from .runs import banner_server
from .runs.app import HERE as RUNS
from .servers import REPO

SERVER = RUNS / "banner_server.py"
PREFIX = "[banner_server.py] "
ARTIFACT = """
format: flowledger.artifact/v1
name: greeting
version: "1"
input_schema: {type: object, additionalProperties: false, properties: {}}
output_schema:
  type: object
  additionalProperties: false
  required: [text]
  properties: {text: {type: string}}
dependencies:
  banner: {tools: [greet]}
state:
  text: {initial: ""}
start: greet
nodes:
  greet:
    kind: tool
    dependency: banner
    tool: greet
    arguments: {name: world}
    assign: {text: "${ result.text }"}
    next: done
  done:
    kind: end
    outcome: greeted
    output: {text: "${ state.text }"}
"""


def banner_lines(stderr: str) -> list[str]:
    """The lines of ``stderr`` that carry something the server wrote."""
    said = (*banner_server.BANNER, banner_server.CALLED)
    return [line for line in stderr.splitlines() if any(text in line for text in said)]


@pytest.mark.parametrize(
    ("command", "args", "name"),
    [
        (sys.executable, [str(SERVER)], "banner_server.py"),
        ("python3", ["-u", "-m", "tests.deploy.runs.env_server"], "tests.deploy.runs.env_server"),
        ("npx", ["-y", "@modelcontextprotocol/server-everything"], "server-everything"),
        ("/usr/local/bin/mcp-server-time", ["--local-timezone", "Etc/UTC"], "mcp-server-time"),
        ("sh", ["-c", "exec server"], "sh"),
    ],
)
def test_a_server_is_named_by_the_program_it_runs(command: str, args: list[str], name: str) -> None:
    assert server_name(command, args) == name


def test_a_probe_prefixes_the_servers_banner() -> None:
    command = shlex.join([sys.executable, str(SERVER)])
    for extra in ([], ["--json"]):
        done = CliRunner().invoke(
            app, ["source", "probe", "--stdio", command, *extra], env={"COLUMNS": "200"}
        )
        assert done.exit_code == 0, done.output
        assert banner_lines(done.stdout) == []  # the listing alone
        assert banner_lines(done.stderr) == [PREFIX + line for line in banner_server.BANNER]
        assert "greet" in done.stdout
    assert json.loads(done.stdout)["tools"][0]["name"] == "greet"


def test_a_deployed_run_prefixes_every_line_its_server_writes(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'banner.db'}"
    (tmp_path / "greeting.yaml").write_text(ARTIFACT)
    deployment = {
        "format": "flowledger.deployment/v1",
        "name": "greeting_dep",
        "artifact": {"name": "greeting", "version": "1"},
        "sources": {
            "banner": {
                "stdio": {"command": sys.executable, "args": [str(SERVER)]},
                "allow_tools": ["greet"],
            }
        },
    }
    (tmp_path / "deployment.json").write_text(json.dumps(deployment))
    for saving in (
        ["artifact", "save", str(tmp_path / "greeting.yaml")],
        ["deploy", "set", str(tmp_path / "deployment.json")],
    ):
        saved = CliRunner().invoke(app, [*saving, "--db", db])
        assert saved.exit_code == 0, saved.output
    env = {k: v for k, v in os.environ.items() if k != "FLOWLEDGER_DB"}
    done = subprocess.run(
        [sys.executable, "-m", "flowledger", "deploy", "run", "greeting_dep", "--db", db, "--json"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,  # only catches a hang
        check=False,
    )
    assert done.returncode == 0, (done.stdout, done.stderr)
    finished = json.loads(done.stdout)  # stdout is the run's one line of JSON
    assert (finished["status"], finished["output"]) == ("completed", {"text": "hello world"})
    assert banner_lines(done.stdout) == []
    lines = banner_lines(done.stderr)
    assert PREFIX + banner_server.CALLED in lines
    assert lines and all(line.startswith(PREFIX) for line in lines), done.stderr
