"""``flowledger web`` as a subprocess: what it refuses before listening."""

from __future__ import annotations

import os
import re
import signal
import time
from pathlib import Path

import httpx2 as httpx
import pytest

from .servers import cli, web_process, web_server

DEADLINE = 60.0  # only catches a hang

pytestmark = pytest.mark.slow


def test_non_loopback_without_tokens_is_refused(tmp_path: Path) -> None:
    done = cli(tmp_path / "a.db", "web", "--host", "0.0.0.0", "--port", "0")
    assert done.returncode == 1
    assert "error: refusing to serve on non-loopback address '0.0.0.0' without tokens" in (
        done.stderr
    )


def test_a_tokens_file_others_can_write_is_refused(tmp_path: Path) -> None:
    tokens = tmp_path / "tokens"
    tokens.write_text("a-long-enough-token-123\n")
    os.chmod(tokens, 0o666)
    done = cli(tmp_path / "a.db", "web", "--tokens-file", str(tokens), "--port", "0")
    assert done.returncode == 1
    assert "writable by group or others" in done.stderr
    assert "a-long-enough-token-123" not in done.stderr


def test_a_session_owned_elsewhere_is_refused_but_read_only_serves(tmp_path: Path) -> None:
    db = tmp_path / "owned.db"
    with web_server(db):
        done = cli(db, "web", "--port", "0")
        assert done.returncode == 1
        assert "is owned by another process" in done.stderr
        assert "--read-only" in done.stderr
        with web_server(db, "--read-only") as url:
            assert url.startswith("http://127.0.0.1:")


def test_read_only_needs_an_existing_database(tmp_path: Path) -> None:
    done = cli(tmp_path / "missing.db", "web", "--read-only", "--port", "0")
    assert done.returncode == 1
    assert "error:" in done.stderr
    assert not (tmp_path / "missing.db").exists()


def test_sigint_stops_runs_at_the_next_step_boundary(tmp_path: Path) -> None:
    flag = tmp_path / "go"
    with web_process(tmp_path / "stop.db") as served:
        with httpx.Client(base_url=served.url, timeout=DEADLINE) as client:
            page = client.get("definitions/waiter/v1").text
            match = re.search(r'name="csrf" value="([^"]+)"', page)
            assert match is not None
            started = client.post(
                "definitions/waiter/v1/start", data={"csrf": match.group(1), "path": str(flag)}
            )
            assert started.status_code == 303
            run_id = started.headers["location"].rsplit("/", 1)[1]
            assert "status-running" in client.get(f"runs/{run_id}").text  # `wait` in flight
        served.process.send_signal(signal.SIGINT)
        deadline = time.monotonic() + DEADLINE
        while not any("the runs in flight stop" in line for line in served.stderr):
            assert time.monotonic() < deadline, served.stderr
            time.sleep(0.02)
        flag.touch()  # the step in flight ends; the run stops at that boundary
        assert served.process.wait(timeout=DEADLINE) == 0
        assert served.done.wait(DEADLINE)
    text = "".join(served.stderr)
    assert f"run {run_id} left running at revision" in text
    after = cli(tmp_path / "stop.db", "runs", "show", run_id, "--json")
    assert after.returncode == 0, after.stderr
    assert '"run_status":"running"' in after.stdout
