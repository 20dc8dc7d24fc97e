"""``flowledger demo``: end to end, on the default database, resumed by a child process."""

from __future__ import annotations

import json

from .conftest import Cli


def test_demo_end_to_end_on_the_default_database(cli: Cli) -> None:
    done = cli.process("demo")  # its 60 s timeout only catches a hang
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Traceback" not in done.stdout + done.stderr
    out = done.stdout
    # live progress of the first segment, the retried summary, the pause and its question
    for fragment in (
        "run started",
        "intake",
        "fact check",
        "style check",
        "summary",
        "(failed once, retried)",
        "report",
        "paused, waiting for input",
        "waiting at approval",
        "Publish 'Flowledger 1.0 launch note'?",
        # the resume, by a new process
        "Resume from a new process",
        "resuming run",
        "resumed",
        "finalize",
        # the history table and the final status
        "Activity history",
        "run_interrupted",
        "run_resumed",
        "run_completed",
        "Final status: completed (published)",
    ):
        assert fragment in out, fragment
    assert out.index("waiting at approval") < out.index("resuming run") < out.index("run_resumed")

    # the database is left behind, in the working directory, for `flowledger runs list`
    assert (cli.cwd / "flowledger.db").exists()
    listing = cli("runs", "list", "--json", db=False)
    assert listing.exit_code == 0, listing.output
    runs = json.loads(listing.stdout)["runs"]
    assert len(runs) == 1
    run = runs[0]
    assert run["definition_name"] == "document_review"
    assert run["run_status"] == "completed"
    assert run["status_summary"] == "published"

    table = cli("runs", "list", db=False)
    assert table.exit_code == 0
    assert run["run_id"] in table.stdout and "completed" in table.stdout

    history = cli("history", run["run_id"], "--json", db=False)
    kinds = [entry["kind"] for entry in json.loads(history.stdout)["entries"]]
    assert kinds[0] == "run_started"
    assert kinds.count("vertex_completed") == 7
    assert kinds[-3:] == ["vertex_completed", "vertex_completed", "run_completed"]
    assert "run_interrupted" in kinds and "run_resumed" in kinds


def test_demo_in_process_relays_the_child_output(cli: Cli) -> None:
    """Under a test runner's captured stdout the child's output is relayed, not lost."""
    result = cli("demo")
    assert result.exit_code == 0, result.output
    assert "resuming run" in result.stdout  # printed by the child process
    assert "Final status: completed" in result.stdout
    runs = cli.json("runs", "list")["runs"]
    assert [run["run_status"] for run in runs] == ["completed"]
