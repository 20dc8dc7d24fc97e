"""Run semantics through the CLI as a user runs it (child processes, one SQLite file, a
user app next to it): a changed graph blocks a resume instead of failing the run, an
errored pause shows its error and is retried without ``--payload``, and ``runs show``
needs no ``--app`` to show what a paused run waits for."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from .conftest import Cli

APP_SOURCE = Path(__file__).resolve().parents[1] / "workflows" / "semantics_app.py"
APP = ["--app", "semantics_app:catalog"]


@pytest.fixture
def user(cli: Cli, monkeypatch: pytest.MonkeyPatch) -> Cli:
    shutil.copy(APP_SOURCE, cli.cwd / "semantics_app.py")
    monkeypatch.delenv("SEMANTICS_GRAPH", raising=False)
    monkeypatch.setenv("SEMANTICS_FLAG", str(cli.cwd / "upstream-is-back"))
    return cli


def run(cli: Cli, *args: str, graph: str = "") -> Any:
    if graph:
        os.environ["SEMANTICS_GRAPH"] = graph
    try:
        return cli.process(*args, "--db", cli.db)
    finally:
        os.environ.pop("SEMANTICS_GRAPH", None)


def show(cli: Cli, run_id: str, *extra: str, graph: str = "") -> dict[str, Any]:
    result = run(cli, "runs", "show", run_id, "--json", *extra, graph=graph)
    assert result.returncode == 0, result.stderr
    shown: dict[str, Any] = json.loads(result.stdout)
    return shown


def started(cli: Cli, name: str, document: dict[str, Any]) -> str:
    result = run(cli, "start", name, "v1", "--input", json.dumps(document), *APP)
    assert result.returncode == 0, result.stderr
    listed = json.loads(run(cli, "runs", "list", "--json").stdout)["runs"]
    return str(max(listed, key=lambda r: r["created_at"])["run_id"])


def test_a_changed_graph_blocks_resume_and_the_old_graph_finishes_it(user: Cli) -> None:
    """Regression: ``flowledger resume`` after a graph change printed ``failed (workflow
    checkpoint unavailable)``, exited 0, and the run was lost for good."""
    run_id = started(user, "ask", {"text": "hello"})
    assert show(user, run_id, *APP)["run_status"] == "interrupted"

    refused = run(user, "resume", run_id, "--payload", '{"approved": true}', *APP, graph="changed")
    assert refused.returncode == 1, refused.stdout
    assert "blocked" in refused.stderr and "graph_changed" in refused.stderr
    assert "Traceback" not in refused.stderr
    after = show(user, run_id, *APP, graph="changed")
    assert after["run_status"] == "interrupted"
    assert after["resume_readiness"]["status"] == "blocked"
    assert after["resume_readiness"]["diagnostics"][0]["code"] == "graph_changed"
    screen = run(user, "runs", "show", run_id, *APP, graph="changed")
    assert "resume is blocked" in screen.stdout and "register the graph" in screen.stdout

    done = run(user, "resume", run_id, "--payload", '{"approved": true}', *APP)
    assert done.returncode == 0, done.stderr
    assert show(user, run_id, *APP)["run_status"] == "completed"


def test_an_errored_pause_shows_its_error_and_is_retried_without_a_payload(user: Cli) -> None:
    """Regression: an errored pause looked like a question, the CLI suggested an approval
    payload and the error's type and message appeared nowhere."""
    run_id = started(user, "flaky", {"source": "db-7"})
    screen = run(user, "runs", "show", run_id)  # no --app: read from the pending record
    assert screen.returncode == 0, screen.stderr
    assert "ConnectionError: upstream db-7 unavailable" in screen.stdout
    assert "failed at Fetch the source" in screen.stdout
    assert "--payload" not in screen.stdout
    assert f"flowledger resume {run_id}" in " ".join(screen.stdout.split())

    with_payload = run(user, "resume", run_id, "--payload", "{}", *APP)
    assert with_payload.returncode == 1
    assert "takes no payload" in with_payload.stderr

    (user.cwd / "upstream-is-back").touch()
    retried = run(user, "resume", run_id, *APP)
    assert retried.returncode == 0, retried.stderr
    assert show(user, run_id)["run_status"] == "completed"


def test_a_question_is_shown_without_the_app(user: Cli) -> None:
    run_id = started(user, "ask", {"text": "hello"})
    shown = show(user, run_id)  # the built-in catalog does not know "ask"
    assert shown["pending"]["info"] == {"question": "publish 'hello'?", "words": 5}
    assert shown["pending"]["vertex_label"] == "Approve the text"
    screen = run(user, "runs", "show", run_id)
    assert "publish 'hello'?" in screen.stdout
    assert "waiting at Approve the text" in screen.stdout
    assert "--payload '{\"approved\": true}'" in " ".join(screen.stdout.split())


def test_on_error_fail_shows_failed_with_the_error(user: Cli) -> None:
    run_id = started(user, "strict", {"source": "db-9"})
    shown = show(user, run_id)
    assert shown["run_status"] == "failed"
    assert shown["error"] == {"type": "ConnectionError", "message": "upstream db-9 unavailable"}
    screen = run(user, "runs", "show", run_id)
    assert "ConnectionError: upstream db-9 unavailable" in screen.stdout


def test_old_runs_finish_on_v1_and_new_runs_on_v2_through_a_worker(user: Cli) -> None:
    """The migration path across processes: ``--no-execute`` front doors start one run of
    each version and resume them; a ``flowledger worker`` with both versions registered
    executes them, each on its own graph (only v2 has the audit step)."""
    worker = subprocess.Popen(
        [sys.executable, "-m", "flowledger", "worker", "--db", user.db, *APP,
         "--lease-ttl", "2", "--poll", "0.1"],
        cwd=user.cwd,
        env={k: v for k, v in os.environ.items() if k != "FLOWLEDGER_DB"},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        runs = {}
        for version in ("v1", "v2"):
            started = run(
                user, "start", "ask", version, "--input", '{"text": "hi"}', "--no-execute",
                "--json", *APP,
            )  # fmt: skip
            assert started.returncode == 0, started.stderr
            runs[version] = json.loads(started.stdout)["run_id"]
        for run_id in runs.values():
            wait_until(user, run_id, "interrupted")
            resumed = run(
                user, "resume", run_id, "--payload", '{"approved": true}', "--no-execute", *APP
            )
            assert resumed.returncode == 0, resumed.stderr
            wait_until(user, run_id, "completed")
    finally:
        worker.terminate()
        worker.wait(timeout=60)
    steps = {}
    for version, run_id in runs.items():
        history = json.loads(run(user, "history", run_id, "--json").stdout)["entries"]
        steps[version] = [e["vertex_id"] for e in history if e["kind"] == "vertex_completed"]
    assert steps["v1"] == ["draft", "approve", "publish"]
    assert steps["v2"] == ["draft", "approve", "audit", "publish"]


def wait_until(cli: Cli, run_id: str, status: str, seconds: float = 300) -> None:
    deadline = time.monotonic() + seconds
    while (current := show(cli, run_id)["run_status"]) != status:
        assert time.monotonic() < deadline, f"run {run_id} is {current}, not {status}"
        time.sleep(0.1)
