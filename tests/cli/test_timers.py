"""Durable timers through the CLI, in real time, across processes: a run parked by
``flowledger start`` survives its owner's SIGKILL and is woken exactly once by the next
``flowledger worker`` (side effects counted in a file). Timers are seconds long; the
only time limits are generous hang deadlines."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from flowledger.storage import open_store

from .._postgres import postgres_url
from .conftest import Cli

ROOT = Path(__file__).resolve().parents[2]
APP = "tests.workflows.timers._app:app"
HANG = 60.0
FLOWLEDGER = (sys.executable, "-m", "flowledger")


def _env(marks: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "FLOWLEDGER_DB"}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH", "")) if p)
    env["FLOWLEDGER_TIMER_MARKS"] = str(marks)
    return env


def _worker(cli: Cli, marks: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [*FLOWLEDGER, "worker", "--db", cli.db, "--app", APP, "--lease-ttl", "1", "--poll", "0.1"],
        cwd=cli.cwd,
        env=_env(marks),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        text=True,
    )


@pytest.fixture(params=["sqlite", "postgres"])
def db(request: pytest.FixtureRequest, cli: Cli) -> Iterator[Cli]:
    """The CLI over SQLite, or over a fresh PostgreSQL schema (skipped without a server,
    failing instead when CI=true)."""
    if request.param == "sqlite":
        yield cli
    else:
        with postgres_url() as url:
            yield Cli(url, cli.cwd)


@pytest.fixture
def processes() -> Iterator[list[subprocess.Popen[str]]]:
    started: list[subprocess.Popen[str]] = []
    yield started
    for proc in started:
        if proc.poll() is None:
            proc.kill()
        proc.wait()


def _owned_sessions(db: str) -> set[str]:
    async def read() -> set[str]:
        async with open_store(db) as store:
            owned: set[str] = set()
            for key in await store.kv.keys("workflows/workers/"):
                owned.update(json.loads((await store.kv.get(key)).value)["sessions"])
            return owned

    return asyncio.run(read())


def _wait(check: object, what: str) -> None:
    deadline = time.monotonic() + HANG
    while not check():  # type: ignore[operator]
        assert time.monotonic() < deadline, f"hang: {what}"
        time.sleep(0.05)


def _show(cli: Cli, run_id: str) -> dict[str, object]:
    shown = cli.json("runs", "show", run_id, "--app", APP)
    assert isinstance(shown, dict)
    return shown


def test_a_parked_run_survives_its_owners_sigkill_and_wakes_exactly_once(
    db: Cli, tmp_path: Path, processes: list[subprocess.Popen[str]]
) -> None:
    cli = db
    marks = tmp_path / "marks.txt"
    until = datetime.now(UTC) + timedelta(seconds=8)
    document = json.dumps({"until": until.isoformat()})
    started = subprocess.run(
        [
            *FLOWLEDGER,
            "start",
            "sleeper",
            "v1",
            "--db",
            cli.db,
            "--app",
            APP,
            "--json",
            "-i",
            document,
        ],
        cwd=cli.cwd,
        env=_env(marks),
        capture_output=True,
        text=True,
        timeout=HANG,
        check=False,
    )
    assert started.returncode == 0, started.stderr
    run = json.loads(started.stdout)
    run_id = str(run["run_id"])
    assert run["run_status"] == "interrupted"
    assert run["pending"]["kind"] == "timer"
    assert run["pending"]["wake_at"].startswith(until.strftime("%Y-%m-%dT%H:%M:%S"))
    human = cli("runs", "show", run_id, "--app", APP)
    assert "parked until" in human.stdout, human.stdout

    first = _worker(cli, marks)
    processes.append(first)
    _wait(lambda: bool(_owned_sessions(cli.db)), "the first worker owns the session")
    first.send_signal(signal.SIGKILL)
    first.wait()
    assert _show(cli, run_id)["run_status"] == "interrupted"  # killed while parked
    assert not marks.exists()

    second = _worker(cli, marks)
    processes.append(second)
    _wait(lambda: _show(cli, run_id)["run_status"] == "completed", "the wake")
    assert datetime.now(UTC) >= until
    second.send_signal(signal.SIGTERM)
    second.wait(HANG)
    assert len(marks.read_text().splitlines()) == 1  # woken once, its next vertex ran once
