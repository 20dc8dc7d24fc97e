"""Bad input: one line on stderr, exit code 1 (2 for usage errors), never a traceback."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from .conftest import Cli, assert_one_line_error, hold_session

UNKNOWN_RUN = "6f1d3c2b-0a9e-4f8d-b7c6-5e4d3c2b1a09"


@pytest.mark.parametrize(
    ("args", "fragments"),
    [
        (
            ["start", "document_review", "v1", "--input", "{bad"],
            ["--input is not valid JSON"],
        ),
        (
            ["start", "document_review", "v1", "--input", "[1, 2]"],
            ["workflow tools: invalid arguments:", "must be a JSON object"],
        ),
        (
            ["start", "document_review", "v1", "--input", '{"title": "t"}'],
            ["workflow tools: invalid input:", "document"],
        ),
        (
            ["start", "no_such_flow", "v1", "--input", "{}"],
            ["unknown workflow definition 'no_such_flow' version 'v1'"],
        ),
        (
            ["start", "document_review", "v9", "--input", "{}"],
            ["unknown workflow definition"],
        ),
        (
            ["start", "document_review", "v1", "--input", "@/no/such/file.json"],
            ["--input: cannot read"],
        ),
        (["runs", "show", UNKNOWN_RUN], [f"run {UNKNOWN_RUN} not found"]),
        (["runs", "show", "not-a-uuid"], ["run_id must be a nonzero UUID"]),
        (["history", UNKNOWN_RUN], ["not found"]),
        (["history", "12345"], ["run_id must be a nonzero UUID"]),
        (["history", UNKNOWN_RUN, "--limit", "101"], ["limit must be in 1..100"]),
        (["resume", UNKNOWN_RUN, "--payload", "{}"], ["not found"]),
        (["resume", UNKNOWN_RUN], ["not found"]),
        # without --payload a front door can still retry an errored pause: the run decides
        (["resume", UNKNOWN_RUN, "--no-execute"], ["not found"]),
        (["resume", UNKNOWN_RUN, "--payload", "nope"], ["--payload is not valid JSON"]),
        (["cancel", UNKNOWN_RUN], ["not found"]),
        (["cancel", "bad-uuid"], ["run_id must be a nonzero UUID"]),
        (["runs", "list", "--limit", "500"], ["limit must be in 1..100"]),
        (["runs", "list", "--after", "x"], ["after must be empty or a run ID"]),
        (["runs", "list", "--session", "not-a-uuid"], ["--session must be a UUID"]),
        (["definitions", "--app", "no_such_module:catalog"], ["cannot import 'no_such_module'"]),
        (["definitions", "--app", "no-colon"], ["--app must look like module:attribute"]),
        # regression: the deploy and draft commands printed a traceback for bad JSON
        (["deploy", "run", "clock", "--input", "{bad"], ["--input is not valid JSON"]),
        (["deploy", "resume", UNKNOWN_RUN, "--payload", "{bad"], ["--payload is not valid JSON"]),
        (["draft", "patch", "d", "--ops", "{bad"], ["--ops is not valid JSON"]),
    ],
)
def test_bad_input_is_one_line_and_exit_code_1(
    cli: Cli, args: list[str], fragments: list[str]
) -> None:
    assert_one_line_error(cli(*args), *fragments)


def test_bad_database_urls(cli: Cli) -> None:
    assert_one_line_error(cli("runs", "list", "--db", "mysql://nowhere/x", db=False), "scheme")
    assert_one_line_error(
        cli("runs", "list", "--db", "sqlite:////no/such/dir/x.db", db=False), "/no/such/dir"
    )


def test_flowledger_db_environment_variable(cli: Cli, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FLOWLEDGER_DB", cli.db)
    cli.start_review()
    result = cli("runs", "list", "--json", db=False)
    assert len(json.loads(result.stdout)["runs"]) == 1


@pytest.mark.parametrize(
    "args",
    [
        ["start"],
        ["start", "document_review"],
        ["runs", "list", "--limit", "many"],
        ["no-such-command"],
        ["mcp", "--tokens-file", "tokens.txt"],
        ["mcp", "--port", "70000", "--http"],
    ],
)
def test_usage_errors_exit_2(cli: Cli, args: list[str]) -> None:
    result = cli(*args)
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output


def test_session_owned_by_another_process(cli: Cli) -> None:
    with hold_session(cli.db):
        started = cli("start", "document_review", "v1", "--input", '{"title":"t","document":"d"}')
        assert_one_line_error(started, "the session is owned by another process")
        assert_one_line_error(
            cli("resume", UNKNOWN_RUN, "--payload", "{}"), "owned by another process"
        )
        assert_one_line_error(cli("cancel", UNKNOWN_RUN), "owned by another process")
        assert_one_line_error(cli("demo"), "owned by another process")
    assert cli.json("runs", "list") == {"runs": []}  # nothing was written


def test_session_owned_in_a_child_process_too(cli: Cli) -> None:
    with hold_session(cli.db):
        done = cli.process("start", "document_review", "v1", "--input", "{}", "--db", cli.db)
    assert done.returncode == 1
    assert done.stderr.strip().startswith("error: the session is owned by another process")
    assert len(done.stderr.strip().splitlines()) == 1
    assert "Traceback" not in done.stdout + done.stderr


def test_process_errors_have_no_traceback(cli: Cli) -> None:
    done = cli.process("start", "document_review", "v1", "--input", "{oops", "--db", cli.db)
    assert done.returncode == 1
    assert done.stderr.strip() == (
        "error: --input is not valid JSON: Expecting property name enclosed in double "
        "quotes (line 1, column 2)"
    )
    assert done.stdout == ""


def test_duplicate_json_keys_are_refused_with_their_pointer(cli: Cli, tmp_path: Path) -> None:
    """Reliability II item 6: ``{"n":3,"n":4}`` from an option, a file or stdin is refused,
    naming the repeated key's JSON pointer, and nothing is written."""
    repeated = '{"title":"t","document":"d","title":"u"}'
    assert_one_line_error(
        cli("start", "document_review", "v1", "--input", repeated),
        "--input is not valid JSON: duplicate key 'title' at /title",
    )
    path = tmp_path / "input.json"
    path.write_text('{"title":"t","document":"d","meta":[{"k":1,"k":2}]}', encoding="utf-8")
    done = cli.process("start", "document_review", "v1", "--input", f"@{path}", "--db", cli.db)
    assert done.returncode == 1
    assert done.stderr.strip() == (
        "error: --input is not valid JSON: duplicate key 'k' at /meta/0/k"
    )
    assert_one_line_error(
        cli("resume", UNKNOWN_RUN, "--payload", '{"approved":true,"approved":false}'),
        "--payload is not valid JSON: duplicate key 'approved' at /approved",
    )
    assert cli.json("runs", "list") == {"runs": []}
