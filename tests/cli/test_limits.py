"""``flowledger limits``: set, show, clear; a start beyond a limit is queued, ``runs show``
says where, a cancel takes it out of the queue, and a freed slot lets the next start."""

from __future__ import annotations

import json

import pytest

from .conftest import REVIEW_INPUT, Cli


def start(cli: Cli) -> str:
    before = {run["run_id"] for run in cli.json("runs", "list")["runs"]}
    result = cli("start", "document_review", "v1", "--input", json.dumps(REVIEW_INPUT))
    assert result.exit_code == 0, result.output
    (new,) = [r["run_id"] for r in cli.json("runs", "list")["runs"] if r["run_id"] not in before]
    return str(new)


@pytest.mark.parametrize("bad", ["0", "-1", "1.5", "two", "10001"])
def test_a_bad_limit_is_a_usage_error_naming_the_option(cli: Cli, bad: str) -> None:
    result = cli("limits", "set", "--definition", "document_review", "--max-running", bad)
    assert result.exit_code == 2, result.output
    assert "--max-running" in result.output
    assert "Traceback" not in result.output
    assert cli.json("limits", "show") == {"limits": []}


def test_the_scope_must_be_one_definition_deployment_or_session(cli: Cli) -> None:
    neither = cli("limits", "set", "--max-running", "1")
    assert neither.exit_code == 2 and "--definition/--deployment/--session" in neither.output
    two = cli("limits", "set", "--definition", "x", "--deployment", "y", "--max-running", "1")
    assert two.exit_code == 2 and "--definition/--deployment/--session" in two.output
    both = cli("limits", "set", "--definition", "x", "--session", "y", "--max-running", "1")
    assert both.exit_code == 2
    not_a_session = cli("limits", "set", "--session", "nope", "--max-running", "1")
    assert not_a_session.exit_code == 2 and "--session" in not_a_session.output
    assert cli.json("limits", "show") == {"limits": []}


def test_starts_beyond_the_limit_are_queued_and_start_as_slots_free(cli: Cli) -> None:
    set_limit = cli.json("limits", "set", "--definition", "document_review", "--max-running", "1")
    assert set_limit == {"scope": "definition/document_review", "max_running": 1}
    first = start(cli)  # pauses for approval: a paused run keeps its slot
    assert cli.json("runs", "show", first)["run_status"] == "interrupted"
    second = start(cli)
    third = start(cli)
    shown = cli.json("runs", "show", second)
    assert shown["run_status"] == "pending"
    assert shown["queued"] == {"scope": "definition/document_review", "position": 1}
    assert cli.json("runs", "show", third)["queued"]["position"] == 2
    text = cli("runs", "show", third)
    assert "position 2 for definition/document_review" in text.stdout

    assert cli("cancel", second).exit_code == 0  # a queued run leaves the queue
    cancelled = cli.json("runs", "show", second)
    assert cancelled["run_status"] == "cancelled" and "queued" not in cancelled

    assert cli("cancel", first).exit_code == 0  # frees the slot
    assert cli("resume", third).exit_code == 0  # an owner: it starts the queued run
    assert cli.json("runs", "show", third)["run_status"] == "interrupted"
    assert "queued" not in cli.json("runs", "show", third)

    assert cli("limits", "clear", "--definition", "document_review").exit_code == 0
    assert cli.json("limits", "show") == {"limits": []}
