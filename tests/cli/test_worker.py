"""``flowledger worker`` and the ``--no-execute`` front doors (CLI and MCP), on SQLite:
a worker process executes what front doors write, and stops cleanly on SIGTERM."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from ..mcp.conftest import TOOL_NAMES
from .conftest import REVIEW_INPUT, Cli, hold_session

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def worker(cli: Cli) -> Iterator[subprocess.Popen[str]]:
    env = {k: v for k, v in os.environ.items() if k != "FLOWLEDGER_DB"}
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "flowledger",
            "worker",
            "--db",
            cli.db,
            "--lease-ttl",
            "2",
            "--poll",
            "0.1",
        ],
        cwd=cli.cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()


def wait_for_status(cli: Cli, run_id: str, status: str, seconds: float = 30) -> None:
    deadline = time.monotonic() + seconds
    while True:
        current = cli.json("runs", "show", run_id)["run_status"]
        if current == status:
            return
        assert time.monotonic() < deadline, f"run {run_id} is {current}, not {status}"
        time.sleep(0.1)


def test_front_door_commands_and_a_worker_process(cli: Cli, worker: subprocess.Popen[str]) -> None:
    started = cli.json(
        "start", "document_review", "v1", "--input", json.dumps(REVIEW_INPUT), "--no-execute"
    )
    run_id = started["run_id"]
    assert started["run_status"] in ("running", "interrupted")
    wait_for_status(cli, run_id, "interrupted")

    resumed = cli("resume", run_id, "--payload", '{"approved": true}', "--no-execute")
    assert resumed.exit_code == 0, resumed.output
    assert f"run {run_id} is completed" in resumed.stdout
    # the worker's activities, read back from the journal while the front door waited
    shown = [line.split()[:2] for line in resumed.stdout.splitlines() if line.startswith("  ")]
    assert shown == [["↻", "resumed"], ["✓", "approval"], ["✓", "finalize"], ["✔", "completed"]]

    doomed = cli.json(
        "start", "document_review", "v1", "--input", json.dumps(REVIEW_INPUT), "--no-execute"
    )["run_id"]
    cancelled = cli.json("cancel", doomed, "--reason", "not today", "--no-execute")
    assert cancelled["run_status"] == "cancelled"

    worker.send_signal(signal.SIGTERM)
    _, stderr = worker.communicate(timeout=20)
    assert worker.returncode == 0, stderr
    assert "claimed session" in stderr
    assert "stopped (released" in stderr
    assert "Traceback" not in stderr
    # The lease is free at once: this process can own the session now.
    again = cli("cancel", doomed)
    assert again.exit_code == 0, again.output
    assert "(it already was)" in again.stdout


def test_mcp_no_execute_serves_every_tool_beside_the_owner(cli: Cli) -> None:
    """A front-door MCP server does not own the session, so it starts while another
    process owns it, and that owner executes what the server's tools write."""
    messages = [
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-03-26",
                "capabilities": {},
                "clientInfo": {"name": "test", "version": "1"},
            },
        },
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}},
        {
            "jsonrpc": "2.0",
            "id": 3,
            "method": "tools/call",
            "params": {
                "name": "workflow_run_start",
                "arguments": {
                    "definition_name": "document_review",
                    "definition_version": "v1",
                    "input": REVIEW_INPUT,
                },
            },
        },
    ]
    env = {k: v for k, v in os.environ.items() if k != "FLOWLEDGER_DB"}
    with hold_session(cli.db):
        done = subprocess.run(
            [sys.executable, "-m", "flowledger", "mcp", "--no-execute", "--db", cli.db],
            input="".join(json.dumps(m) + "\n" for m in messages),
            capture_output=True,
            text=True,
            timeout=60,
            env=env,
            cwd=cli.cwd,
            check=False,
        )
    assert done.returncode == 0, done.stderr
    replies = {m.get("id"): m for m in map(json.loads, done.stdout.splitlines()) if "id" in m}
    names = {tool["name"] for tool in replies[2]["result"]["tools"]}
    assert names == set(TOOL_NAMES)  # the workflow_* and the deploy tools
    result = replies[3]["result"]
    assert not result.get("isError"), result
    payload = json.loads(result["content"][0]["text"])
    assert payload["run_status"] in ("running", "interrupted")
