"""``flowledger draft ...`` and the lifecycle commands (``deploy list|check|rollback|
delete``, ``artifact list|delete``), mostly in-process through typer's `CliRunner`
(each command opens the SQLite database as a user's would), against the registered,
probed mcp-server-time: build a workflow from a capability through drafts (an invalid
step kept with its diagnostics, a stale revision refused), publish with a deployment,
check it, roll back, and delete what nothing uses any more. One real subprocess checks
the console script's output and exit codes."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from click.testing import Result
from typer.testing import CliRunner

from flowledger.cli import app

from .drafts.test_drafts_mcp import registered_clock
from .servers import REPO


def cli(*args: str) -> Result:
    return CliRunner().invoke(app, list(args), env={"COLUMNS": "160"})


def ok(*args: str) -> Result:
    done = cli(*args)
    assert done.exit_code == 0, (args, done.stdout, done.stderr)
    return done


def as_json(*args: str) -> Any:
    lines = ok(*args, "--json").stdout.splitlines()
    assert len(lines) == 1, lines
    return json.loads(lines[0])


def refused(*args: str, code: str) -> str:
    done = cli(*args)
    assert done.exit_code == 1, (args, done.stdout, done.stderr)
    line = done.stderr.strip()
    assert line.startswith(f"error: [{code}]") and "\n" not in line, line
    return line


def test_drafts_and_the_lifecycle_through_the_cli(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'cli.db'}"
    asyncio.run(registered_clock(db))
    at = ("--db", db)

    made = as_json(
        "draft", "create", "clock_now", "--source", "clock", "--tool", "get_current_time", *at
    )
    assert (made["revision"], made["valid"], made["bindings"]) == (1, True, {"clock": "clock"})
    ok("draft", "create", "scratch", *at)
    refused("draft", "create", "scratch", *at, code="draft_exists")
    half = cli("draft", "create", "other", "--source", "clock", *at)
    assert half.exit_code == 1 and "give --source with --tool" in half.stderr

    # an edit that breaks the draft is kept, and its diagnostics are printed
    broken = ok(
        "draft",
        "patch",
        "scratch",
        "--ops",
        '[{"op": "replace", "path": "/start", "value": "x"}]',
        *at,
    )
    assert "scratch revision 2 invalid: 1 issue" in broken.stdout
    assert "unknown_node" in broken.stdout and "next: explain" in broken.stdout
    stale = refused(
        "draft", "patch", "scratch", "--revision", "1", "--ops", "[]", *at, code="revision_conflict"
    )
    assert "nothing was applied" in stale
    assert as_json("draft", "show", "scratch", *at)["revision"] == 2
    not_deployable = cli("draft", "validate", "scratch", *at)
    assert not_deployable.exit_code == 1 and "not deployable" in not_deployable.stdout

    # focused edits: a state field, a second step pre-mapped from it, the output
    patched = as_json(
        "draft",
        "patch",
        "clock_now",
        "--revision",
        "1",
        "--ops",
        json.dumps(
            [
                {"op": "add", "path": "/state/timezone", "value": {"initial": "Asia/Tokyo"}},
                {"op": "add", "path": "/state/tokyo", "value": {}},
            ]
        ),
        *at,
    )
    added = as_json(
        "draft",
        "add-tool",
        "clock_now",
        "clock",
        "get_current_time",
        "--node",
        "tokyo_time",
        "--after",
        "get_current_time",
        "--assign",
        '{"tokyo": "${ result.text }"}',
        "--revision",
        str(patched["revision"]),
        *at,
    )
    assert added["document"]["nodes"]["tokyo_time"]["arguments"] == {
        "timezone": "${ state.timezone }"
    }
    assert added["valid"], added["diagnostics"]
    shown = ok(
        "draft",
        "set-output",
        "clock_now",
        '{"text": "${ join(\' / \', [state.text, state.tokyo]) }"}',
        *at,
    )
    assert "updated clock_now revision 4 valid" in shown.stdout
    wrong = refused("draft", "connect", "scratch", "done", "done", *at, code="edit_invalid")
    assert "nothing was applied" in wrong
    routed = as_json("draft", "connect", "clock_now", "tokyo_time", "done", *at)
    assert routed["applied"] and routed["document"]["nodes"]["tokyo_time"]["next"] == "done"
    assert as_json("draft", "validate", "clock_now", *at)["deployable"] is True
    listed = as_json("draft", "list", "--limit", "1", *at)
    assert ([d["draft"] for d in listed["drafts"]], listed["next"]) == (["clock_now"], "clock_now")
    human = ok("draft", "list", "--limit", "1", *at).stdout
    assert "more: flowledger draft list --limit=1 --db" in human and "--cursor clock_now" in human
    rest = as_json("draft", "list", "--cursor", "clock_now", *at)
    assert [d["draft"] for d in rest["drafts"]] == ["scratch"]

    published = as_json("draft", "publish", "clock_now", "1", "--deploy", *at)
    assert published["deployment"]["checked_against"]["clock"]["source"] == "clock"
    ok("draft", "publish", "clock_now", "2", "--deploy", *at)  # revision 2 of the deployment
    check = ok("deploy", "check", "clock_now", *at)
    assert "runnable" in check.stdout

    # lifecycle: lists with a query, rollback under compare-and-swap, refused deletes
    assert as_json("deploy", "list", "--query", "clock", *at)["deployments"] == [
        {"name": "clock_now", "live": 2, "revisions": 2}
    ]
    assert as_json("artifact", "list", "--query", "nothing", *at) == {"artifacts": [], "next": None}
    refused("deploy", "rollback", "clock_now", "--expect", "1", *at, code="deployment_conflict")
    rolled = as_json("deploy", "rollback", "clock_now", *at)
    assert (rolled["revision"], rolled["previous"]) == (1, 2)
    in_use = refused("artifact", "delete", "clock_now", "1", *at, code="artifact_in_use")
    assert "deployment clock_now (revision 1)" in in_use
    refused("deploy", "delete", "nothing_here", *at, code="deployment_missing")
    deleted = ok("deploy", "delete", "clock_now", *at)
    assert "deleted deployment clock_now (revisions 1, 2)" in deleted.stdout
    assert as_json("artifact", "delete", "clock_now", "1", *at)["deleted"] is True
    ok("draft", "delete", "scratch", *at)
    assert [d["draft"] for d in as_json("draft", "list", *at)["drafts"]] == ["clock_now"]


def flowledger(*args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "FLOWLEDGER_DEBUG"}
    return subprocess.run(
        [sys.executable, "-m", "flowledger", *args],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )


def test_the_console_script(tmp_path: Path) -> None:
    """Real processes: the JSON line on stdout; a refusal as one error line, exit 1."""
    db = f"sqlite:///{tmp_path / 'proc.db'}"
    created = flowledger("draft", "create", "hello", "--db", db, "--json")
    assert created.returncode == 0, created.stderr
    assert json.loads(created.stdout)["draft"] == "hello"
    missing = flowledger("artifact", "delete", "hello", "1", "--db", db)
    assert (missing.returncode, missing.stdout) == (1, ""), missing
    [line] = missing.stderr.strip().splitlines()
    assert line.startswith("error: [artifact_missing] $: no saved artifact hello@1"), line
