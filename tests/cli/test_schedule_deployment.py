"""``flowledger schedule add --deployment`` and ``flowledger limits --deployment`` as a
user runs them (child processes): a deployment is scheduled with its input checked, a
bad target is one line naming the field and writes nothing, a trigger records the
revision it chose, a deployment's ``max_running`` is set, shown and cleared, and a
``flowledger worker`` fires a deployment's schedule."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from flowledger.storage import open_store
from flowledger.workflows.records.registry import RunRegistry
from flowledger.workflows.runtime.session import default_session_id

from .conftest import Cli

GREETING: dict[str, Any] = {
    "format": "flowledger.artifact/v1",
    "name": "greeting",
    "version": "1",
    "input_schema": {
        "type": "object",
        "properties": {"team": {"type": "string"}},
        "required": ["team"],
        "additionalProperties": False,
    },
    "output_schema": {"type": "object", "additionalProperties": False},
    "start": "done",
    "nodes": {"done": {"kind": "end", "outcome": "ok"}},
}
GREET: dict[str, Any] = {
    "format": "flowledger.deployment/v1",
    "name": "greet",
    "artifact": {"name": "greeting", "version": "1"},
    "sources": {},
}


def run(cli: Cli, *args: str) -> subprocess.CompletedProcess[str]:
    return cli.process(*args, "--db", cli.db)


def as_json(cli: Cli, *args: str) -> Any:
    done = run(cli, *args, "--json")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def one_line_error(done: subprocess.CompletedProcess[str], *fragments: str) -> None:
    assert done.returncode == 1, (done.returncode, done.stdout, done.stderr)
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith("error: ") and "Traceback" not in done.stderr
    for fragment in fragments:
        assert fragment in line, (fragment, line)


def deployed(cli: Cli, tmp_path: Path) -> None:
    (tmp_path / "greeting.json").write_text(json.dumps(GREETING))
    (tmp_path / "greet.json").write_text(json.dumps(GREET))
    assert run(cli, "artifact", "save", str(tmp_path / "greeting.json")).returncode == 0
    assert run(cli, "deploy", "set", str(tmp_path / "greet.json")).returncode == 0


def test_schedule_a_deployment_from_the_cli(cli: Cli, tmp_path: Path) -> None:
    deployed(cli, tmp_path)
    every = ["--every", "3600"]
    one_line_error(
        run(cli, "schedule", "add", "--deployment", "nope_nope", *every, "--input", "{}"),
        "invalid schedule deployment",
    )
    one_line_error(
        run(cli, "schedule", "add", "--deployment", "greet", *every, "--input", '{"team": 1}'),
        "invalid schedule input",
    )
    neither = run(cli, "schedule", "add", *every)
    assert neither.returncode == 2 and "--deployment" in neither.stderr
    assert as_json(cli, "schedule", "list") == {"schedules": []}

    added = as_json(
        cli, "schedule", "add", "--deployment", "greet", *every, "--input", '{"team": "ops"}'
    )
    assert added["deployment"] == "greet" and added["input"] == {"team": "ops"}
    listed = run(cli, "schedule", "list")
    assert "deployment greet" in listed.stdout, listed.stdout

    fired = as_json(cli, "schedule", "trigger", added["schedule_id"])
    assert fired["deployment_revision"] == 1
    # nobody owns the session: the pinned run waits, pending, for its owner
    shown = as_json(cli, "runs", "show", fired["run_id"])
    assert (shown["definition_name"], shown["definition_version"]) == ("greet", "r1")
    assert shown["scheduled_by"]["schedule_id"] == added["schedule_id"]
    text = run(cli, "schedule", "show", added["schedule_id"]).stdout
    assert "deployment greet" in text and "revision 1" in text, text


def test_a_deployments_limit_is_set_shown_and_cleared(cli: Cli, tmp_path: Path) -> None:
    deployed(cli, tmp_path)
    missing = run(cli, "limits", "set", "--deployment", "nope_nope", "--max-running", "1")
    one_line_error(missing, "--deployment: no deployment 'nope_nope'")
    assert as_json(cli, "limits", "show") == {"limits": []}

    set_limit = as_json(cli, "limits", "set", "--deployment", "greet", "--max-running", "2")
    session = as_json(cli, "deploy", "list")  # the same default session
    assert set_limit["max_running"] == 2
    scope = set_limit["scope"]
    assert scope.startswith("deployment/") and scope.endswith("/greet"), (scope, session)
    assert as_json(cli, "limits", "show") == {"limits": [{"scope": scope, "max_running": 2}]}
    shown = run(cli, "limits", "show").stdout
    assert "deployment" in shown and "greet" in shown
    assert run(cli, "limits", "clear", "--deployment", "greet").returncode == 0
    assert as_json(cli, "limits", "show") == {"limits": []}


def test_a_worker_fires_a_deployment_schedule(cli: Cli, tmp_path: Path) -> None:
    """A ``flowledger worker`` (a child process) owns the session because of the active
    schedule, and each firing runs the deployment's live revision to completion."""
    # set up in this process (the worker is what this test is about)
    (tmp_path / "greeting.json").write_text(json.dumps(GREETING))
    (tmp_path / "greet.json").write_text(json.dumps(GREET))
    assert cli("artifact", "save", str(tmp_path / "greeting.json")).exit_code == 0
    assert cli("deploy", "set", str(tmp_path / "greet.json")).exit_code == 0
    added = cli.json(
        "schedule",
        "add",
        "--deployment",
        "greet",
        "--every",
        "1",
        "--input",
        '{"team": "ops"}',
        "--overlap",
        "allow",
    )

    async def completed() -> list[tuple[str, str]]:
        async with open_store(cli.db) as store:
            session = await default_session_id(store)
            page = await RunRegistry(store.kv).list(session, limit=100)
            return [
                (run.definition_name, run.definition_version)
                for run in page.runs
                if run.scheduled_by is not None and run.status.value == "completed"
            ]

    env = {k: v for k, v in os.environ.items() if k != "FLOWLEDGER_DB"}
    worker = subprocess.Popen(
        [sys.executable, "-m", "flowledger", "worker", "--db", cli.db, "--poll", "0.2"],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 60  # only catches a hang
        while len(asyncio.run(completed())) < 2:
            assert worker.poll() is None, worker.stderr.read() if worker.stderr else ""
            assert time.monotonic() < deadline, "the worker fired no deployment run"
            time.sleep(0.2)
    finally:
        worker.send_signal(signal.SIGTERM)
        _, stderr = worker.communicate(timeout=30)
    assert "Traceback" not in stderr, stderr
    assert set(asyncio.run(completed())) == {("greet", "r1")}
    shown = cli.json("schedule", "show", added["schedule_id"])
    assert shown["fired"] >= 2 and "failed" not in shown
    assert {f["deployment_revision"] for f in shown["recent_firings"]} == {1}
