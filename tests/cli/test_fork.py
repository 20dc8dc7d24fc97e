"""``flowledger runs fork RUN --at REV [--patch JSON]``, as a child process."""

from __future__ import annotations

import json

import pytest

from .conftest import REVIEW_INPUT, Cli
from .test_worker import wait_for_status, worker  # noqa: F401 - the worker fixture


def test_fork_from_a_revision_with_a_patch_executes_the_fork(cli: Cli) -> None:
    db = ("--db", cli.db)
    started = cli.process(
        "start", "document_review", "v1", "--input", json.dumps(REVIEW_INPUT), "--json", *db
    )
    assert started.returncode == 0, started.stderr
    origin = json.loads(started.stdout)
    assert origin["run_status"] == "interrupted"
    before = cli.process("runs", "show", origin["run_id"], "--json", *db)
    assert before.returncode == 0, before.stderr
    history = cli.process("history", origin["run_id"], "--json", *db).stdout

    forked = cli.process(
        "runs",
        "fork",
        origin["run_id"],
        "--at",
        "0",
        "--patch",
        '{"title": "Other"}',
        "--json",
        *db,
    )
    assert forked.returncode == 0, forked.stderr
    fork = json.loads(forked.stdout)
    assert fork["run_id"] != origin["run_id"]
    assert fork["run_status"] == "interrupted"  # the whole graph ran again, to the approval
    assert fork["definition_name"] == "document_review"
    assert fork["forked_from"]["run_id"] == origin["run_id"]
    assert fork["forked_from"]["revision"] == 0
    assert fork["forked_from"]["checkpoint_digest"].startswith("sha256:")
    shown = json.loads(cli.process("runs", "show", fork["run_id"], "--json", *db).stdout)
    assert shown["pending"]["info"]["question"] == "Publish 'Other'?"
    assert shown["forked_from"] == fork["forked_from"]
    after = cli.process("runs", "show", origin["run_id"], "--json", *db)
    # The origin is untouched (any owning process re-reads an interrupted run's pause and
    # bumps its record's updated_at; that is not the fork's doing).
    unchanged = json.loads(after.stdout)
    unchanged.pop("updated_at")
    expected = json.loads(before.stdout)
    expected.pop("updated_at")
    assert unchanged == expected
    assert cli.process("history", origin["run_id"], "--json", *db).stdout == history

    human = cli.process("runs", "fork", origin["run_id"], "--at", "0", *db)
    assert human.returncode == 0, human.stderr
    assert "forked run" in human.stdout and "is interrupted" in human.stdout

    resumed = cli.process(
        "resume", fork["run_id"], "--payload", '{"approved": true}', "--json", *db
    )
    assert resumed.returncode == 0, resumed.stderr
    assert json.loads(resumed.stdout)["run_status"] == "completed"


def test_refused_forks_are_one_line_errors_and_write_nothing(cli: Cli) -> None:
    db = ("--db", cli.db)
    started = cli.process(
        "start", "document_review", "v1", "--input", json.dumps(REVIEW_INPUT), "--json", *db
    )
    origin = json.loads(started.stdout)["run_id"]
    listed = runs_without_times(cli, db)
    for arguments, words in (
        (("--at", "-1"), "invalid fork revision"),
        (("--at", "999"), "invalid fork revision"),
        (("--at", "0", "--patch", '{"nope": 1}'), "state field 'nope'"),
        (("--at", "0", "--patch", '{"words": "many"}'), "state field 'words'"),
        (("--at", "0", "--patch", "[1]"), "field 'patch' must be a JSON object"),
    ):
        result = cli.process("runs", "fork", origin, *arguments, *db)
        assert result.returncode == 1, (arguments, result.stdout, result.stderr)
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
        assert words in lines[0], (words, lines[0])
        assert "Traceback" not in result.stderr
    assert runs_without_times(cli, db) == listed  # no run was added


def runs_without_times(cli: Cli, db: tuple[str, str]) -> list[dict[str, object]]:
    """The runs, without ``updated_at`` (every owning process re-reads an interrupted
    run's pause, which bumps it)."""
    runs = json.loads(cli.process("runs", "list", "--json", *db).stdout)["runs"]
    return [{k: v for k, v in run.items() if k != "updated_at"} for run in runs]


@pytest.mark.usefixtures("worker")
def test_a_front_door_fork_is_executed_by_a_worker_process(cli: Cli) -> None:
    """``runs fork --no-execute`` only records the fork; the ``flowledger worker``
    process executes it (while the origin stays paused)."""
    started = cli.json(
        "start", "document_review", "v1", "--input", json.dumps(REVIEW_INPUT), "--no-execute"
    )
    origin = started["run_id"]
    wait_for_status(cli, origin, "interrupted")
    forked = cli.process(
        "runs",
        "fork",
        origin,
        "--at",
        "0",
        "--patch",
        '{"title": "By the worker"}',
        "--no-execute",
        "--json",
        "--db",
        cli.db,
    )
    assert forked.returncode == 0, forked.stderr
    fork = json.loads(forked.stdout)
    assert fork["forked_from"]["run_id"] == origin
    wait_for_status(cli, fork["run_id"], "interrupted")
    shown = cli.json("runs", "show", fork["run_id"])
    assert shown["pending"]["info"]["question"] == "Publish 'By the worker'?"
    assert cli.json("runs", "show", origin)["run_status"] == "interrupted"
