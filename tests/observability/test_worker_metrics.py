"""``flowledger worker --metrics-port`` on PostgreSQL, as an operator runs it: two worker
processes, a run started by a front door, one worker killed while the run's step is in
flight. Both workers' ``/metrics`` are fetched over HTTP and read with the Prometheus
client's own parser; their logs are JSON lines. The run's input, state and resume
payload hold a sentinel that appears in neither."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from .._postgres import postgres_url
from ._scrape import DEADLINE, Stderr, fetch, parse, scrape_until, value

pytest.importorskip("prometheus_client")

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
APP = "tests.mcp.gated_app:catalog"
SENTINEL = "sentinel-8d1f0c2e-do-not-leak"


@pytest.fixture
def url() -> Iterator[str]:
    with postgres_url() as u:
        yield u


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k != "FLOWLEDGER_DB"}


@contextlib.contextmanager
def worker(db: str) -> Iterator[tuple[subprocess.Popen[str], str, Stderr]]:
    """A worker process with metrics on a free loopback port and JSON logs; yields it,
    its metrics URL and its stderr."""
    process = subprocess.Popen(
        [
            sys.executable, "-m", "flowledger", "worker", "--app", APP, "--db", db,
            "--lease-ttl", "1", "--poll", "0.05", "--metrics-port", "0", "--log-format", "json",
        ],
        cwd=ROOT,
        env=_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    assert process.stderr is not None
    stderr = Stderr()
    reader = stderr.follow(process.stderr)
    try:
        line = stderr.wait_for(lambda text: '"metrics_serving"' in text, process)
        address = str(json.loads(line)["message"]).rsplit(" ", 1)[-1]
        yield process, address, stderr
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=DEADLINE)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        reader.join(timeout=DEADLINE)


def flowledger(db: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "flowledger", *args, "--app", APP, "--db", db],
        cwd=ROOT,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=DEADLINE * 2,
        check=False,
    )


def wait_for_file(path: Path) -> None:
    deadline = time.monotonic() + DEADLINE
    while not path.exists():
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.01)


def test_counters_move_and_a_killed_worker_is_adopted(url: str, tmp_path: Path) -> None:
    folder = tmp_path / SENTINEL  # the run's input and state name it
    folder.mkdir()
    gate = json.dumps({"folder": str(folder)})
    with worker(url) as (first, first_url, first_err):
        before = parse(fetch(first_url))
        assert value(before, "flowledger_runs_started_total", definition="gated") == 0
        started = flowledger(url, "start", "gated", "v1", "--input", gate, "--no-execute", "--json")
        assert started.returncode == 0, started.stderr
        run_id = json.loads(started.stdout)["run_id"]
        wait_for_file(folder / "pid")  # the hold step is in flight in the only worker
        assert int((folder / "pid").read_text()) == first.pid
        _, during = scrape_until(
            first_url,
            lambda s: value(s, "flowledger_runs_executing") == 1,
            "the first worker executes the run",
        )
        assert value(during, "flowledger_runs_started_total", definition="gated") == 1
        assert value(during, "flowledger_runs_unfinished", status="running") == 1
        assert value(during, "flowledger_runs_unfinished", status="interrupted") == 0
        assert value(during, "flowledger_leases_acquired_total") >= 1  # the session's lease
        first_text = fetch(first_url)

        with worker(url) as (second, second_url, second_err):
            scrape_until(second_url, lambda s: True, "the second worker answers")
            first.kill()  # no release, no goodbye: its session lease runs out
            first.wait(timeout=DEADLINE)
            (folder / "open").touch()
            text, after = scrape_until(
                second_url,
                lambda s: value(s, "flowledger_runs_adopted_total") >= 1,
                "the second worker adopts the running run",
            )
            assert value(after, "flowledger_leases_acquired_total") >= 1
            scrape_until(
                second_url,
                lambda s: value(s, "flowledger_step_seconds_count") >= 2,  # mark, ask
                "the adopted run's steps are timed",
            )
            scrape_until(
                second_url,
                lambda s: (
                    value(s, "flowledger_runs_unfinished", status="interrupted") == 1
                    and value(s, "flowledger_runs_unfinished", status="running") == 0
                ),
                "the run waits for its answer",
            )
            resumed = flowledger(
                url, "resume", run_id, "--payload", json.dumps({"note": SENTINEL}),
                "--no-execute", "--json",
            )  # fmt: skip
            assert resumed.returncode == 0, resumed.stderr
            assert json.loads(resumed.stdout)["run_status"] == "completed"
            last, done = scrape_until(
                second_url,
                lambda s: (
                    value(
                        s, "flowledger_runs_finished_total", definition="gated", status="completed"
                    )
                    == 1
                ),
                "the resumed run completes in the second worker",
            )
            for status in ("pending", "running", "interrupted"):
                assert value(done, "flowledger_runs_unfinished", status=status) == 0
            assert value(done, "flowledger_runs_executing") == 0
            assert value(done, "flowledger_commit_seconds_count") >= 3
            assert value(done, "flowledger_fence_refusals_total") == 0
        assert second.returncode == 0, second_err.text()

    # the no-secret rule: not in any scrape, not in any log line (all of them JSON)
    for exposed in (first_text, text, last):
        assert SENTINEL not in exposed
        assert run_id not in exposed  # no run ids as labels either
    for err in (first_err, second_err):
        assert SENTINEL not in err.text()
        for record in err.records():
            assert {"time", "level", "event", "message"} <= record.keys(), record
    assert any("claimed session" in str(r["message"]) for r in second_err.records())


def test_a_stalled_worker_counts_its_lost_lease_after_the_other_adopts(
    url: str, tmp_path: Path
) -> None:
    """SIGSTOP stalls the worker executing a run past its lease; the other adopts the
    run. Once continued, the stalled one's own metrics show the lease it lost."""
    gate = json.dumps({"folder": str(tmp_path)})
    with worker(url) as (first, first_url, _):
        started = flowledger(url, "start", "gated", "v1", "--input", gate, "--no-execute", "--json")
        assert started.returncode == 0, started.stderr
        wait_for_file(tmp_path / "pid")
        assert int((tmp_path / "pid").read_text()) == first.pid
        with worker(url) as (_, second_url, _):
            first.send_signal(signal.SIGSTOP)
            try:
                scrape_until(
                    second_url,
                    lambda s: value(s, "flowledger_runs_adopted_total") >= 1,
                    "the second worker adopts the stalled worker's run",
                )
            finally:
                first.send_signal(signal.SIGCONT)
            (tmp_path / "open").touch()  # both holds may finish; only one may write
            _, lost = scrape_until(
                first_url,
                lambda s: (
                    sum(
                        value(s, "flowledger_leases_lost_total", reason=reason)
                        for reason in ("expired", "taken_over")
                    )
                    >= 1
                ),
                "the stalled worker counts its lost session lease",
            )
            assert value(lost, "flowledger_leases_acquired_total") >= 1
