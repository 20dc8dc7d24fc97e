"""The README's deploy flow, command by command, as a user types it (child processes in a
fresh directory, the virtual environment on PATH so `mcp-server-time` is found). The
same commands are docs/deploy.md's "Try it", whose server comes with the package's own
`examples` extra; its Python example compiles the same artifact."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest

from flowledger.workflows import Catalog

from .servers import REPO, time_command

README = REPO / "README.md"
DEPLOY_DOC = REPO / "docs" / "deploy.md"
INSTALL = "pip install 'flowledger[examples]'"


def blocks(text: str, language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", text, re.S)


def commands_of(block: str) -> list[str]:
    return [line.split("  #")[0].strip() for line in block.splitlines()]


def test_the_examples_extra_brings_the_server_the_docs_use(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    extras = tomllib.loads((REPO / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]
    assert [req.split(">=")[0] for req in extras["examples"]] == ["mcp-server-time"]
    readme = README.read_text().split("## Declarative workflows over MCP tools", 1)[1]
    guide = DEPLOY_DOC.read_text().split("## Try it", 1)[1].split("\n## ", 1)[0]
    assert INSTALL in " ".join(readme.split()) and INSTALL in guide
    assert not any("tests/" in block for block in blocks(guide, "sh"))  # a user's example
    # the guide's commands are the README's, which the test below runs
    assert commands_of(blocks(guide, "sh")[1]) == commands_of(blocks(readme, "sh")[0])
    assert (
        "clock_deployment.yaml" in guide
        and "command: mcp-server-time" in (REPO / "examples" / "clock_deployment.yaml").read_text()
    )

    # "Running an artifact": the Python example compiles the same example (nothing runs)
    running = DEPLOY_DOC.read_text().split("## Running an artifact", 1)[1]
    code = blocks(running, "python")[0]
    assert "tests/" not in code
    shutil.copytree(REPO / "examples", tmp_path / "examples")
    monkeypatch.chdir(tmp_path)
    scope: dict[str, Any] = {}
    exec(compile(code, "docs/deploy.md", "exec"), scope)
    catalog = scope["catalog"]
    assert isinstance(catalog, Catalog)
    assert [(item.name, item.version) for item in catalog.list()] == [("what_time", "1")]


def test_the_readme_deploy_flow_runs_as_written(tmp_path: Path) -> None:
    time_command()  # skips (fails with CI=true) without the server
    section = README.read_text().split("## Declarative workflows over MCP tools", 1)[1]
    block = re.search(r"```sh\n(.*?)```", section, re.S)
    assert block is not None
    commands = [line.split("  #")[0].strip() for line in block.group(1).splitlines()]
    assert [c.split()[:3] for c in commands] == [
        ["flowledger", "artifact", "save"],
        ["flowledger", "deploy", "set"],
        ["flowledger", "deploy", "check"],
        ["flowledger", "deploy", "run"],
        ["flowledger", "deploy", "resume"],
        ["flowledger", "trace", "RUN"],
    ]
    shutil.copytree(REPO / "examples", tmp_path / "examples")
    env = {k: v for k, v in os.environ.items() if k != "FLOWLEDGER_DB"}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    run_id = ""
    outputs = []
    for command in commands:
        argv = shlex.split(command.replace("RUN", run_id))
        done = subprocess.run(
            # The README shows what a person reads; the test reads the same commands' JSON.
            [sys.executable, "-m", "flowledger", *argv[1:], "--json"],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        assert done.returncode == 0, (command, done.stderr)
        outputs.append(json.loads(done.stdout))
        if argv[2] == "run":
            run_id = outputs[-1]["run_id"]
    checked, started, resumed, trace = outputs[2:6]
    assert (checked["status"], checked["revision"]) == ("runnable", 1)
    assert started["status"] == "interrupted"
    assert started["interrupt"]["info"]["question"] == "Is this the time you wanted?"
    assert resumed["status"] == "completed" and resumed["output"]["confirmed"] is True
    assert resumed["output"]["time"] == started["interrupt"]["info"]["time"]
    assert [entry["node"] for entry in trace["entries"]] == [
        "ask_clock",
        "confirm",
        "confirm",
        "done",
    ]
    assert trace["total"] == 4
