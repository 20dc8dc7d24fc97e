"""``flowledger schedule``: the commands in-process (tables, ``--json``, one-line errors
that write nothing, ``runs show`` naming the schedule), and two ``flowledger worker``
processes on PostgreSQL firing a 1-second schedule while the owner is SIGKILLed and
restarted: every slot between the first and the last fired exactly once."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

from flowledger.storage import open_store
from flowledger.workflows.records.registry import RunRegistry
from flowledger.workflows.runtime.session import default_session_id
from flowledger.workflows.runtime.worker import read_workers

from .._postgres import postgres_url
from .conftest import REVIEW_INPUT, Cli, assert_one_line_error

DAILY = ["--cron", "0 9 * * 1-5", "--timezone", "Europe/Riga"]


def keys(cli: Cli) -> list[str]:
    async def read() -> list[str]:
        async with open_store(cli.db) as store:
            # the default session's ID is made by the first front door, valid input or not
            return [k for k in await store.kv.keys("") if k != "flowledger/default-session"]

    return asyncio.run(read())


def test_schedule_commands(cli: Cli) -> None:
    review = json.dumps(REVIEW_INPUT)
    added = cli.json("schedule", "add", "document_review", "v1", *DAILY, "--input", review)
    schedule_id = added["schedule_id"]
    assert added["cron"] == "0 9 * * 1-5" and len(added["next_fire_times"]) == 3

    listed = cli("schedule", "list")
    assert listed.exit_code == 0 and schedule_id in listed.stdout and "Europe/Riga" in listed.stdout
    assert [s["schedule_id"] for s in cli.json("schedule", "list")["schedules"]] == [schedule_id]

    paused = cli("schedule", "pause", schedule_id)
    assert (
        paused.exit_code == 0 and "paused" in paused.stdout and "none while paused" in paused.stdout
    )
    fired = cli.json("schedule", "trigger", schedule_id)
    assert fired["manual"] is True
    # nobody owns the session here: the run waits for its owner, and says who started it
    shown = cli("runs", "show", fired["run_id"])
    assert shown.exit_code == 0, shown.output
    (line,) = [x for x in shown.stdout.splitlines() if x.startswith("scheduled by")]
    assert line.split()[2:] == [schedule_id, "(triggered", "at", f"{fired['slot']})"]
    assert cli.json("runs", "show", fired["run_id"])["scheduled_by"]["schedule_id"] == schedule_id
    detail = cli("schedule", "show", schedule_id)
    assert "recent firings" in detail.stdout and fired["run_id"] in detail.stdout
    resumed = cli.json("schedule", "resume", schedule_id)
    assert resumed["paused"] is False
    assert cli.json("schedule", "remove", schedule_id) == {
        "schedule_id": schedule_id,
        "removed": True,
    }
    assert cli.json("schedule", "list") == {"schedules": []}


def test_bad_input_is_one_line_naming_the_field_and_writes_nothing(cli: Cli) -> None:
    review = json.dumps(REVIEW_INPUT)
    before = keys(cli)
    for args, field in [
        (["--cron", "0 9 * *", "--input", review], "invalid schedule cron"),
        (["--cron", "0 9 * * *", "--timezone", "Moon/Base", "--input", review], "timezone"),
        (["--every", "0", "--input", review], "invalid schedule every"),
        (["--every", "60", "--input", '{"title": 1}'], "invalid schedule input"),
        (["--every", "60", "--input", review, "--overlap", "pile"], "invalid schedule overlap"),
        (["--every", "60", "--input", review, "--catch-up", "x"], "invalid schedule catch_up"),
        (["--input", review], "give exactly one of cron and every"),
    ]:
        assert_one_line_error(cli("schedule", "add", "document_review", "v1", *args), field)
    assert_one_line_error(
        cli("schedule", "add", "nope", "v1", "--every", "5"), "invalid schedule target"
    )
    assert_one_line_error(
        cli("schedule", "pause", "6f1c2d4e-0000-4000-8000-000000000000"), "not found"
    )
    assert keys(cli) == before


# -- workers on PostgreSQL ---------------------------------------------------------------


def _worker(url: str, cwd: Path) -> subprocess.Popen[str]:
    env = {k: v for k, v in os.environ.items() if k != "FLOWLEDGER_DB"}
    return subprocess.Popen(
        [sys.executable, "-m", "flowledger", "worker", "--db", url, "--lease-ttl", "1"],
        cwd=cwd,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )


async def _owner_pid(url: str) -> int | None:
    async with open_store(url) as store:
        for record in await read_workers(store):
            if record.sessions:
                return record.pid
    return None


async def _fired(url: str) -> tuple[list[Any], dict[str, Any]]:
    async with open_store(url) as store:
        session_id = await default_session_id(store)
        registry = RunRegistry(store.kv)
        runs, after = [], ""
        while True:
            page = await registry.list(session_id, after=after, limit=100)
            runs.extend(page.runs)
            if not page.next:
                break
            after = page.next
        from flowledger.workflows.schedules import ScheduleStore

        (schedule,) = await ScheduleStore(store.kv).list(session_id)
        return [r for r in runs if r.scheduled_by is not None], schedule.to_json()


def _wait_for_owner(url: str, workers: list[subprocess.Popen[str]]) -> int:
    """The pid of the worker owning the session, once there is one (a deadline that only
    catches hangs: two Python processes start slowly on a busy machine)."""
    deadline = time.monotonic() + 60
    while True:
        owner = asyncio.run(_owner_pid(url))
        if owner is not None:
            return owner
        for proc in workers:
            assert proc.poll() is None, proc.communicate()[1]
        assert time.monotonic() < deadline, "no worker claimed the scheduled session"
        time.sleep(0.2)


def test_two_workers_fire_every_slot_once_across_a_sigkill(tmp_path: Path) -> None:
    with postgres_url() as url:
        cli = Cli(url, tmp_path)
        cli.json(
            "schedule",
            "add",
            "document_review",
            "v1",
            "--every",
            "1",
            "--catch-up",
            "all",
            "--overlap",
            "allow",
            "--input",
            json.dumps(REVIEW_INPUT),
        )
        workers = [_worker(url, tmp_path), _worker(url, tmp_path)]
        kills = 0
        try:
            owner = _wait_for_owner(url, workers)
            time.sleep(2)
            (victim,) = [w for w in workers if w.pid == owner]
            victim.send_signal(signal.SIGKILL)
            victim.wait(10)
            kills += 1
            workers.remove(victim)
            time.sleep(2.5)  # the survivor takes over once the lease (1 s) runs out
            workers.append(_worker(url, tmp_path))
            time.sleep(2)
        finally:
            for proc in workers:
                proc.send_signal(signal.SIGTERM)
            for proc in workers:
                _, stderr = proc.communicate(timeout=30)
                assert "Traceback" not in stderr, stderr
        runs, schedule = asyncio.run(_fired(url))
        per_slot = Counter(r.scheduled_by.slot for r in runs if r.scheduled_by)
        slots = sorted(per_slot)
        assert len(slots) >= 6, slots
        span = int((slots[-1] - slots[0]).total_seconds()) + 1
        duplicates = sum(n - 1 for n in per_slot.values())
        print(f"kills={kills} firings={len(runs)} slots={span} duplicates={duplicates}")
        assert duplicates == 0
        assert len(slots) == span  # catch_up all: none missed between first and last
        assert schedule["fired"] == len(runs) and schedule["skipped"] == 0
