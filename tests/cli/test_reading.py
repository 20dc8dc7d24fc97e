"""Reading commands: ``--json`` prints exactly the tool result; tables otherwise."""

from __future__ import annotations

import json

from .conftest import Cli, hold_session


def test_definitions_json_equals_the_tool_result(cli: Cli) -> None:
    printed = cli.json("definitions")
    assert printed == cli.tool("workflow_definition_list", {})
    assert [d["name"] for d in printed["definitions"]] == ["document_review"]
    assert printed["definitions"][0]["resume_supported"] is True


def test_definitions_table(cli: Cli) -> None:
    result = cli("definitions")
    assert result.exit_code == 0
    assert "document_review" in result.stdout
    assert "title*" in result.stdout and "document*" in result.stdout


def test_json_is_one_compact_line(cli: Cli) -> None:
    result = cli("definitions", "--json")
    assert result.stdout.count("\n") == 1
    assert result.stderr == ""


def test_runs_list_on_an_empty_database(cli: Cli) -> None:
    assert cli.json("runs", "list") == {"runs": []}
    result = cli("runs", "list")
    assert result.exit_code == 0
    assert "No runs yet" in result.stdout


def test_runs_show_history_and_list_equal_the_tools(cli: Cli) -> None:
    run_id = cli.start_review()

    assert cli.json("runs", "list") == cli.tool("workflow_run_list", {})
    assert cli.json("runs", "list", "--limit", "1") == cli.tool("workflow_run_list", {"limit": 1})
    shown = cli.json("runs", "show", run_id)
    assert shown == cli.tool("workflow_run_get", {"run_id": run_id})
    assert shown["run_status"] == "interrupted"

    history = cli.json("history", run_id)
    assert history == cli.tool("workflow_run_history", {"run_id": run_id})
    kinds = [entry["kind"] for entry in history["entries"]]
    assert kinds[0] == "run_started" and kinds[-1] == "run_interrupted"
    assert kinds.count("vertex_completed") == 5

    page = cli.json("history", run_id, "--limit", "2")
    assert page == cli.tool("workflow_run_history", {"run_id": run_id, "limit": 2})
    assert len(page["entries"]) == 2 and "next_revision" in page
    arguments = ["--after-revision", str(page["next_revision"])]
    if "next_event_id" in page:
        arguments += ["--after-event-id", page["next_event_id"]]
    rest = cli.json("history", run_id, *arguments)
    tool_arguments: dict[str, object] = {"run_id": run_id, "after_revision": page["next_revision"]}
    if "next_event_id" in page:
        tool_arguments["after_event_id"] = page["next_event_id"]
    assert rest == cli.tool("workflow_run_history", tool_arguments)
    ids = [e["event_id"] for e in page["entries"]] + [e["event_id"] for e in rest["entries"]]
    assert ids == [entry["event_id"] for entry in history["entries"]]


def test_tables_for_a_paused_run(cli: Cli) -> None:
    run_id = cli.start_review()

    listing = cli("runs", "list")
    assert listing.exit_code == 0
    assert run_id in listing.stdout and "interrupted" in listing.stdout

    shown = cli("runs", "show", run_id)
    assert shown.exit_code == 0
    assert "interrupted" in shown.stdout
    assert "Publish 'Notes'?" in shown.stdout  # the question, from the latest checkpoint
    assert f"flowledger resume {run_id} --payload" in shown.stdout
    assert '"approved": true' in shown.stdout
    assert f"--db {cli.db}" in shown.stdout

    history = cli("history", run_id)
    assert history.exit_code == 0
    for fragment in ("run_started", "vertex_completed", "summary (summarize)", "5/7"):
        assert fragment in history.stdout

    paged = cli("history", run_id, "--limit", "2")
    assert "more: flowledger history" in paged.stdout and "--after-revision" in paged.stdout


def test_runs_list_paging_hint(cli: Cli) -> None:
    cli.start_review()
    cli.start_review()
    first = cli.json("runs", "list", "--limit", "1")
    assert len(first["runs"]) == 1 and "next" in first
    second = cli.json("runs", "list", "--after", first["next"])
    assert second == cli.tool("workflow_run_list", {"after": first["next"]})
    assert len(second["runs"]) == 1
    table = cli("runs", "list", "--limit", "1")
    assert f"--after {first['next']}" in table.stdout


def test_reading_works_while_another_process_owns_the_session(cli: Cli) -> None:
    run_id = cli.start_review()
    with hold_session(cli.db):
        assert cli.json("runs", "show", run_id)["run_status"] == "interrupted"
        assert cli.json("history", run_id)["entries"]
        assert cli("runs", "list").exit_code == 0


def test_explicit_session(cli: Cli) -> None:
    session = "5f0c2a4e-8d1b-4c3a-9e2f-1a2b3c4d5e6f"
    result = cli(
        "start",
        "document_review",
        "v1",
        "--input",
        json.dumps({"title": "t", "document": "d."}),
        "--session",
        session,
    )
    assert result.exit_code == 0, result.output
    assert f"--session {session}" in result.stdout  # the resume hint keeps the session
    assert len(cli.json("runs", "list", "--session", session)["runs"]) == 1
    assert cli.json("runs", "list") == {"runs": []}  # the default session has none
