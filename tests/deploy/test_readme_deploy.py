"""The README's deploy flow, command by command, as a user types it (child processes in a
fresh directory, the virtual environment on PATH so `mcp-server-time` is found)."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

from .servers import REPO, time_command

README = REPO / "README.md"


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
