"""``flowledger schedule``: the commands in-process (tables, ``--json``, one-line errors
that write nothing, ``runs show`` naming the schedule). Worker processes firing a
schedule under SIGKILLs: ``tests/cli/test_time_faults.py``."""

from __future__ import annotations

import asyncio
import json

from flowledger.storage import open_store

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
