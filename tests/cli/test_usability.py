"""The usability issue through the CLI as a child process: errors a person can act on."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from .._readonly import read_only_command
from .conftest import REVIEW_INPUT, Cli

UNKNOWN_RUN = "6f1d3c2b-0a9e-4f8d-b7c6-5e4d3c2b1a09"


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


@pytest.mark.parametrize(
    "command",
    [["runs", "list"], ["definitions"], ["history", UNKNOWN_RUN], ["runs", "show", UNKNOWN_RUN]],
)
def test_reading_commands_never_create_a_database(cli: Cli, command: list[str]) -> None:
    """Usability 3: a mistyped --db is reported, not created."""
    missing = cli.cwd / "typo.db"
    done = cli.process(*command, "--db", f"sqlite:///{missing}")
    assert done.returncode == 1, done.stdout
    assert done.stderr.strip() == f"error: no database at {missing}"
    assert not missing.exists()


def _run(argv: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "FLOWLEDGER_DB"}
    env["COLUMNS"] = "120"
    return subprocess.run(
        argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=60, check=False
    )


def test_reading_commands_work_in_a_read_only_directory(cli: Cli, tmp_path: Path) -> None:
    """Usability 3: a database in a directory nobody may write is read, and a command
    that writes says where and why it cannot."""
    shelf = tmp_path / "shelf"
    shelf.mkdir()
    db = f"sqlite:///{shelf}/runs.db"
    started = cli.process(
        "start", "document_review", "v1", "--input", json.dumps(REVIEW_INPUT), "--db", db
    )
    assert started.returncode == 0, started.stderr
    assert sorted(path.name for path in shelf.iterdir()) == ["runs.db"]
    flowledger = [sys.executable, "-m", "flowledger"]
    try:
        listed = _run(
            read_only_command(shelf, [*flowledger, "runs", "list", "--json", "--db", db]), cli.cwd
        )
        assert listed.returncode == 0, listed.stderr
        runs = json.loads(listed.stdout)["runs"]
        assert [run["run_status"] for run in runs] == ["interrupted"]
        shown = _run(
            read_only_command(shelf, [*flowledger, "history", runs[0]["run_id"], "--db", db]),
            cli.cwd,
        )
        assert shown.returncode == 0, shown.stderr
        assert "run_interrupted" in shown.stdout or "interrupted" in shown.stdout
        writing = _run(
            read_only_command(
                shelf,
                [
                    *flowledger,
                    "start",
                    "document_review",
                    "v1",
                    "--input",
                    json.dumps(REVIEW_INPUT),
                    "--db",
                    db,
                ],
            ),
            cli.cwd,
        )
        answer = '{"approved": true}'
        resuming = _run(
            read_only_command(
                shelf,
                [*flowledger, "resume", runs[0]["run_id"], "--payload", answer, "--db", db],
            ),
            cli.cwd,
        )
    finally:
        shelf.chmod(0o755)
    for refused in (writing, resuming):
        assert refused.returncode == 1
        line = refused.stderr.strip()
        assert line.startswith(f"error: cannot open the database {shelf}/runs.db: "), line
        assert "is read-only" in line, line
    assert sorted(path.name for path in shelf.iterdir()) == ["runs.db"]


BROKEN_APP = textwrap.dedent(
    """
    from pydantic import BaseModel

    from flowledger import flow
    from flowledger.workflows import Catalog, Metadata, TypedDefinition, VertexMetadata

    MODE = "{mode}"


    class Tally(BaseModel):
        count: int = 0


    def definition(properties):
        graph = flow.Graph("tally", state=Tally)
        graph.add_vertex("add", lambda state: {{"count": state.count + 1}})
        metadata = Metadata(
            "tally",
            "v1",
            description="Adds one.",
            input_schema={{
                "type": "object",
                "additionalProperties": False,
                "properties": properties,
            }},
            vertices=[VertexMetadata("add", "add")],
        )
        return TypedDefinition(metadata, graph.compile(entry="add", finish="add"))


    if MODE == "import":
        raise RuntimeError("the app's settings file is missing")


    def catalog():
        if MODE == "factory":
            raise KeyError("API_TOKEN")
        tallies = Catalog()
        if MODE == "dropped":
            label = {{"type": "string"}}
            tallies.register(definition({{"count": {{"type": "integer"}}, "label": label}}))
        else:  # "loose": a schema that says nothing about count's type
            tallies.register(definition({{"count": {{}}}}))
        return tallies
    """
)


@pytest.mark.parametrize(
    ("mode", "message"),
    [
        (
            "import",
            "error: while loading --app {module}:catalog: "
            "RuntimeError: the app's settings file is missing",
        ),
        ("factory", "error: while loading --app {module}:catalog: KeyError: 'API_TOKEN'"),
        (
            "dropped",
            "error: while loading --app {module}:catalog: InvalidSchemaError: invalid workflow "
            "schema (input): input schema property 'label' has no field in the state type Tally",
        ),
    ],
)
def test_app_mistakes_are_reported_as_such(cli: Cli, mode: str, message: str) -> None:
    """Usability 2: what the app raises while loading says where it came from."""
    module = f"broken_{mode}_app"
    (cli.cwd / f"{module}.py").write_text(BROKEN_APP.format(mode=mode), encoding="utf-8")
    done = cli.process("definitions", "--app", f"{module}:catalog", "--db", cli.db)
    assert done.returncode == 1
    assert done.stderr.strip().startswith(message.format(module=module)), done.stderr
    assert "Traceback" not in done.stderr


def test_a_decoder_failure_is_the_definitions_error(cli: Cli) -> None:
    """Usability 2: input that passed the schema but not the state type is the author's
    mistake, named with the field, not 'invalid input'."""
    (cli.cwd / "loose_app.py").write_text(BROKEN_APP.format(mode="loose"), encoding="utf-8")
    done = cli.process(
        "start",
        "tally",
        "v1",
        "--input",
        '{"count": "many"}',
        "--app",
        "loose_app:catalog",
        "--db",
        cli.db,
    )
    assert done.returncode == 1
    assert done.stderr.strip() == (
        "error: workflow tools: validate input: workflow definition 'tally' version 'v1' is broken "
        "(not your input): its input decoder refused a document that passed its input schema "
        "at state field count"
    )
    assert cli.json("runs", "list")["runs"] == []


def test_limit_zero_is_refused(cli: Cli) -> None:
    """Usability 6: --limit is 1-100, as the help says (0 is not "the default")."""
    for command in (["runs", "list"], ["history", UNKNOWN_RUN]):
        done = cli.process(*command, "--limit", "0", "--db", cli.db)
        assert done.returncode == 1
        assert done.stderr.strip() == "error: --limit must be in 1..100, not 0"


@pytest.mark.parametrize(
    "command",
    [["worker"], ["mcp"], ["start"], ["resume"], ["cancel"], ["runs", "list"], ["history"]],
)
def test_help_shows_no_types_for_flags_and_keeps_paragraphs(cli: Cli, command: list[str]) -> None:
    """Usability 6: flags show no ``<bool>``, options a word for their value, and help
    paragraphs are wrapped by the terminal, not by the source's line breaks."""
    done = cli.process(*command, "--help")
    assert done.returncode == 0, done.stderr
    assert "<bool>" not in done.stdout
    assert "<int range>" not in done.stdout and "<str>" not in done.stdout
    if command == ["worker"]:
        assert (
            "Run as many as you like against one PostgreSQL database. SIGTERM or Ctrl-C stops "
            "a worker cleanly" in done.stdout
        )
