"""No run is stranded in ``running``: an owner stopped by SIGTERM or by its output pipe
closing stops at the next step boundary, releases the session and says what it left;
``runs show`` says nobody executes the run; the next ``start`` adopts and continues it.

Every process here is a real ``python -m flowledger`` child on one SQLite file (the
review example paces its steps, so a signal lands while a step is in flight)."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path
from typing import IO, Any

from .conftest import REVIEW_INPUT, Cli

LEFT = re.compile(r"run ([0-9a-f-]{36}) left running at revision (\d+); it continues when")


def spawn_start(cli: Cli) -> subprocess.Popen[str]:
    env = {k: v for k, v in os.environ.items() if k != "FLOWLEDGER_DB"}
    env["COLUMNS"] = "120"
    return subprocess.Popen(
        [
            *(sys.executable, "-m", "flowledger", "start", "document_review", "v1"),
            *("--input", json.dumps(REVIEW_INPUT), "--db", cli.db),
        ],
        cwd=cli.cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        encoding="utf-8",
    )


def read_until(stream: IO[str] | None, fragment: str) -> list[str]:
    assert stream is not None
    lines: list[str] = []
    for line in stream:
        lines.append(line)
        if fragment in line:
            return lines
    raise AssertionError(f"{fragment!r} never printed: {lines}")


def assert_left_then_adopted(cli: Cli, stderr: str) -> None:
    """The one run was left running at the revision the record shows, nobody owns it,
    and the next ``start`` continues it from there (nothing runs twice)."""
    found = LEFT.findall(stderr)
    assert len(found) == 1, stderr
    run_id, revision = found[0][0], int(found[0][1])
    assert f"(flowledger resume {run_id} --db {cli.db})" in stderr
    left = cli.tool("workflow_run_get", {"run_id": run_id})
    assert left["run_status"] == "running"
    assert left["checkpoint_revision"] == revision > 0
    assert left["owner"]["live"] is False
    assert datetime.fromisoformat(left["owner"]["since"]) >= datetime.fromisoformat(
        left["updated_at"]
    )

    shown = cli.process("runs", "show", run_id, "--db", cli.db)
    assert shown.returncode == 0, shown.stderr
    assert "none since" in shown.stdout
    assert f"continue it with: flowledger resume {run_id} --db {cli.db}" in shown.stdout

    nxt = cli.process(
        "start", "document_review", "v1", "--input", json.dumps(REVIEW_INPUT), "--db", cli.db
    )
    assert nxt.returncode == 0, nxt.stderr
    assert f"continuing run {run_id}, left running at revision {revision}" in nxt.stderr
    adopted = cli.tool("workflow_run_get", {"run_id": run_id})
    assert adopted["run_status"] == "interrupted"  # continued to the approval pause
    assert "owner" not in adopted
    entries: list[dict[str, Any]] = cli.json("history", run_id, "--limit", "100")["entries"]
    kinds = [e["kind"] for e in entries]
    assert kinds.count("run_started") == 1
    done = [e["vertex_id"] for e in entries if e["kind"] == "vertex_completed"]
    assert sorted(done) == sorted(set(done))  # no vertex completed twice
    assert {"intake", "report"} <= set(done)


def test_sigterm_stops_at_the_step_boundary_and_the_next_start_adopts(cli: Cli) -> None:
    child = spawn_start(cli)
    try:
        read_until(child.stdout, "intake")  # the first step committed; the next runs
        child.send_signal(signal.SIGTERM)
        stdout, stderr = child.communicate(timeout=60)
    finally:
        if child.poll() is None:
            child.kill()
    assert child.returncode == 128 + signal.SIGTERM, (child.returncode, stderr)
    assert "SIGTERM: stopping at the next step boundary" in stderr
    assert "Traceback" not in stderr
    assert "paused" not in stdout
    assert_left_then_adopted(cli, stderr)


def test_a_closed_output_pipe_stops_at_the_step_boundary_and_the_next_start_adopts(
    cli: Cli,
) -> None:
    child = spawn_start(cli)
    try:
        read_until(child.stdout, "run started")
        assert child.stdout is not None
        child.stdout.close()  # as `| head -2` does
        assert child.stderr is not None
        stderr = child.stderr.read()
        child.wait(timeout=60)
    finally:
        if child.poll() is None:
            child.kill()
    assert child.returncode == 141, (child.returncode, stderr)  # 128 + SIGPIPE
    assert "output closed: stopping at the next step boundary" in stderr
    assert "Traceback" not in stderr and "Exception ignored" not in stderr
    assert_left_then_adopted(cli, stderr)


def test_resume_with_a_payload_of_a_left_run_says_how_to_continue_it(cli: Cli) -> None:
    started = cli(
        "start", "document_review", "v1", "--input", json.dumps(REVIEW_INPUT), "--detach", "--json"
    )
    run_id = json.loads(started.stdout)["run_id"]
    refused = cli("resume", run_id, "--payload", '{"approved": true}')
    assert refused.exit_code == 1
    assert f"run {run_id} is running, not paused: it needs no payload" in refused.stderr
    assert f"continue it with flowledger resume {run_id}" in refused.stderr
    paused = cli("resume", run_id, "--json")
    assert paused.exit_code == 0, paused.output
    assert json.loads(paused.stdout)["run_status"] == "interrupted"
    again = cli("resume", run_id)  # a request pause: without a payload it is refused
    assert again.exit_code == 1
    assert "this run waits for a payload" in again.stderr


def test_sigterm_to_a_worker_stops_at_the_step_boundary(cli: Cli) -> None:
    """A worker's run finishes the step in flight, is logged as left, and the next
    ``start`` continues it (``hold`` waits for a file, so the step is in flight for as
    long as the test needs)."""
    root = Path(__file__).resolve().parents[2]
    app = "tests.mcp.gated_app:catalog"
    env = {k: v for k, v in os.environ.items() if k != "FLOWLEDGER_DB"}

    def flowledger(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "flowledger", *args, "--app", app, "--db", cli.db],
            cwd=root,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )

    gate = json.dumps({"folder": str(cli.cwd)})
    worker = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "flowledger",
            "worker",
            "--app",
            app,
            "--db",
            cli.db,
            "--poll",
            "0.05",
        ],
        cwd=root,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        started = flowledger("start", "gated", "v1", "--input", gate, "--no-execute", "--json")
        assert started.returncode == 0, started.stderr
        run_id = json.loads(started.stdout)["run_id"]
        pid_file = cli.cwd / "pid"
        for _ in range(6000):  # until the hold step has begun in the worker (or 60 s)
            if pid_file.exists():
                break
            time.sleep(0.01)
        assert int(pid_file.read_text()) == worker.pid
        worker.send_signal(signal.SIGTERM)
        said = read_until(worker.stderr, "stopping; runs in flight stop")
        (cli.cwd / "open").touch()  # only now: the step in flight ends after the request
        _, rest = worker.communicate(timeout=60)
        stderr = "".join(said) + rest
    finally:
        if worker.poll() is None:
            worker.kill()
    assert worker.returncode == 0, stderr
    assert f"run {run_id} left running at revision" in stderr
    left = cli.tool("workflow_run_get", {"run_id": run_id})
    assert (left["run_status"], left["owner"]["live"]) == ("running", False)
    nxt = flowledger("start", "gated", "v1", "--input", gate)
    assert nxt.returncode == 0, nxt.stderr
    assert f"continuing run {run_id}" in nxt.stderr
    assert cli.tool("workflow_run_get", {"run_id": run_id})["run_status"] == "interrupted"
    kinds = [e.get("vertex_id") for e in cli.json("history", run_id)["entries"]]
    assert kinds.count("hold") == 1


def test_a_second_sigterm_stops_at_once_and_the_step_runs_again_later(cli: Cli) -> None:
    """The step in flight never ends (``hold`` waits for a file): the first SIGTERM waits
    for its boundary, the second one cuts it; the run is left at its seed, and the next
    ``start`` runs ``hold`` again from there."""
    root = Path(__file__).resolve().parents[2]
    app = "tests.mcp.gated_app:catalog"
    env = {k: v for k, v in os.environ.items() if k != "FLOWLEDGER_DB"}
    gate = json.dumps({"folder": str(cli.cwd)})
    command = [sys.executable, "-m", "flowledger", "start", "gated", "v1", "--app", app]
    command += ["--input", gate, "--db", cli.db]
    child = subprocess.Popen(
        command, cwd=root, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        read_until(child.stdout, "run started")
        assert child.stderr is not None
        child.send_signal(signal.SIGTERM)
        assert "stopping at the next step boundary" in child.stderr.readline()
        child.send_signal(signal.SIGTERM)
        _, stderr = child.communicate(timeout=60)
    finally:
        if child.poll() is None:
            child.kill()
    assert child.returncode == 143, stderr
    assert "SIGTERM: stopping now; the steps in flight will run again" in stderr
    found = LEFT.findall(stderr)
    assert len(found) == 1 and found[0][1] == "0", stderr
    run_id = found[0][0]
    (cli.cwd / "open").touch()
    nxt = subprocess.run(command, cwd=root, env=env, capture_output=True, text=True, timeout=120)
    assert nxt.returncode == 0, nxt.stderr
    assert f"continuing run {run_id}, left running at revision 0" in nxt.stderr
    assert cli.tool("workflow_run_get", {"run_id": run_id})["run_status"] == "interrupted"
