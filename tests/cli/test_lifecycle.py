"""start, resume and cancel: the process executes the run, and ``--json`` prints the
tool result."""

from __future__ import annotations

import json
import re

from .conftest import REVIEW_INPUT, Cli, assert_one_line_error


def test_start_runs_until_the_pause_and_prints_the_question(cli: Cli) -> None:
    result = cli("start", "document_review", "v1", "--input", json.dumps(REVIEW_INPUT))
    assert result.exit_code == 0, result.output
    out = result.stdout
    for fragment in (
        "started run",
        "run started",
        "intake",
        "summary",
        "(failed once, retried)",
        "report",
        "5/7",
        "paused, waiting for input",
        "is interrupted",
        "Publish 'Notes'?",
        "resume with: flowledger resume",
    ):
        assert fragment in out, fragment
    assert out.index("intake") < out.index("report") < out.index("paused")


def test_start_json_prints_the_run_once_it_stopped(cli: Cli) -> None:
    printed = cli.json("start", "document_review", "v1", "--input", json.dumps(REVIEW_INPUT))
    assert set(printed) >= {"run_id", "definition_name", "run_status", "created_at"}
    assert printed["run_status"] == "interrupted"  # followed until it paused
    assert printed == cli.tool("workflow_run_get", {"run_id": printed["run_id"]})


def test_start_detach_returns_once_revision_0_is_durable(cli: Cli) -> None:
    result = cli(
        "start", "document_review", "v1", "--input", json.dumps(REVIEW_INPUT), "--detach", "--json"
    )
    assert result.exit_code == 0, result.output
    printed = json.loads(result.stdout)
    assert printed["run_status"] == "running"  # the start tool's result, once seeded
    run_id = printed["run_id"]
    # cut at once: at its seed, or a step later if that committed meanwhile (no pacing here)
    said = re.search(rf"run {run_id} left running at revision (\d+); it continues", result.stderr)
    assert said is not None, result.stderr
    assert f"flowledger resume {run_id}" in result.stderr
    left = cli.tool("workflow_run_get", {"run_id": run_id})
    assert left["run_status"] == "running"
    assert left["checkpoint_revision"] == int(said.group(1))  # the record caught up
    assert left["owner"]["live"] is False
    assert cli.json("history", run_id)["entries"][0]["kind"] == "run_started"
    # `resume RUN` (no payload) continues it from its checkpoint until it pauses
    continued = cli("resume", run_id)
    assert continued.exit_code == 0, continued.output
    assert "continuing run" in continued.stdout
    assert "is interrupted" in continued.stdout
    kinds = [e["kind"] for e in cli.json("history", run_id, "--limit", "100")["entries"]]
    assert kinds.count("run_started") == 1
    assert kinds[-1] == "run_interrupted"
    assert "owner" not in cli.tool("workflow_run_get", {"run_id": run_id})


def test_input_from_a_file_and_from_stdin(cli: Cli) -> None:
    path = cli.cwd / "input.json"
    path.write_text(json.dumps(REVIEW_INPUT), encoding="utf-8")
    assert cli("start", "document_review", "v1", "--input", f"@{path}").exit_code == 0
    piped = cli("start", "document_review", "v1", "--input", "-", input=json.dumps(REVIEW_INPUT))
    assert piped.exit_code == 0, piped.output
    assert len(cli.json("runs", "list")["runs"]) == 2


def test_resume_completes_the_run(cli: Cli) -> None:
    run_id = cli.start_review()
    result = cli("resume", run_id, "--payload", '{"approved": false, "note": "no"}')
    assert result.exit_code == 0, result.output
    for fragment in ("resuming run", "resumed", "approval", "finalize", "7/7", "is completed"):
        assert fragment in result.stdout, fragment
    run = cli.tool("workflow_run_get", {"run_id": run_id})
    assert run["run_status"] == "completed"
    assert run["status_summary"] == "rejected"


def test_resume_json_prints_the_tool_result(cli: Cli) -> None:
    run_id = cli.start_review()
    printed = cli.json("resume", run_id, "--payload", '{"approved": true}')
    assert printed == cli.tool("workflow_run_get", {"run_id": run_id})
    assert printed["run_status"] == "completed"


def test_resume_of_a_run_that_is_not_paused(cli: Cli) -> None:
    run_id = cli.start_review()
    assert cli("resume", run_id, "--payload", '{"approved": true}').exit_code == 0
    again = cli("resume", run_id, "--payload", '{"approved": true}')
    assert_one_line_error(again, "resume requires interrupted run", "completed")
    assert "resuming run" not in again.stdout


def test_resume_with_a_payload_the_schema_refuses(cli: Cli) -> None:
    run_id = cli.start_review()
    result = cli("resume", run_id, "--payload", '{"approved": "yes"}')
    assert_one_line_error(result, "workflow tools: invalid resume")
    assert cli.tool("workflow_run_get", {"run_id": run_id})["run_status"] == "interrupted"


def test_cancel_paths(cli: Cli) -> None:
    run_id = cli.start_review()
    result = cli("cancel", run_id, "--reason", "changed my mind")
    assert result.exit_code == 0, result.output
    assert "cancelled" in result.stdout
    assert cli.tool("workflow_run_get", {"run_id": run_id})["run_status"] == "cancelled"

    again = cli.json("cancel", run_id)
    assert again == {"run_id": run_id, "run_status": "cancelled", "idempotent": True}
    assert "it already was" in cli("cancel", run_id).stdout

    done = cli.start_review()
    assert cli("resume", done, "--payload", '{"approved": true}').exit_code == 0
    refused = cli("cancel", done)
    assert_one_line_error(refused, "terminal run cannot be cancelled")


def test_the_cancel_reason_is_shown_by_runs_show(cli: Cli) -> None:
    run_id = cli.start_review()
    assert cli("cancel", run_id, "--reason", "wrong quarter").exit_code == 0
    shown = cli("runs", "show", run_id)
    assert shown.exit_code == 0, shown.output
    assert re.search(r"cancel reason +wrong quarter", shown.stdout), shown.stdout
    assert cli.json("runs", "show", run_id)["cancel_reason"] == "wrong quarter"
    # issue #31: history answers with the reason beside its entries; the activities
    # themselves never copy it (they are the same for every reader, models included)
    page = cli.json("history", run_id)
    assert page["cancel_reason"] == "wrong quarter"
    assert "wrong quarter" not in json.dumps(page["entries"])
    assert re.search(r"cancel reason: wrong quarter", cli("history", run_id).stdout)
    marked = cli.start_review()
    assert cli("cancel", marked, "--reason", "[bold]not markup[/bold]").exit_code == 0
    assert "[bold]not markup[/bold]" in cli("runs", "show", marked).stdout
    silent = cli.start_review()
    assert cli("cancel", silent).exit_code == 0
    assert cli.json("runs", "show", silent)["cancel_reason"] == "cancel requested"


def test_cancel_json(cli: Cli) -> None:
    run_id = cli.start_review()
    printed = cli.json("cancel", run_id)
    assert printed == {"run_id": run_id, "run_status": "cancelled", "idempotent": False}


def test_cancel_reason_too_long(cli: Cli) -> None:
    run_id = cli.start_review()
    assert_one_line_error(cli("cancel", run_id, "--reason", "x" * 600), "reason is 600 bytes")
