"""The usability issue through the CLI as a child process: errors a person can act on."""

from __future__ import annotations

import json

from .conftest import Cli


def test_schema_errors_name_every_violation(cli: Cli) -> None:
    """Usability 1: a refused input names each violation with its path and reason."""
    document = json.dumps({"title": 5, "extra": "private words"})
    done = cli.process("start", "document_review", "v1", "--input", document, "--db", cli.db)
    assert done.returncode == 1, done.stderr
    assert done.stderr.strip() == (
        "error: workflow tools: invalid input: $.document: required property missing; "
        "$.extra: additional property not allowed; $.title: expected a string, got a number"
    )
    assert "private words" not in done.stderr


def test_resume_errors_name_every_violation(cli: Cli) -> None:
    """Usability 1: the same for a resume payload."""
    run_id = cli.start_review()
    payload = json.dumps({"approved": "yes", "note": "x" * 501, "more": 1})
    done = cli.process("resume", run_id, "--payload", payload, "--db", cli.db)
    assert done.returncode == 1, done.stderr
    assert done.stderr.strip() == (
        "error: workflow tools: invalid resume: $.approved: expected a boolean, got a string; "
        "$.more: additional property not allowed; $.note: longer than 500 characters"
    )
    assert cli.json("runs", "show", run_id)["run_status"] == "interrupted"
