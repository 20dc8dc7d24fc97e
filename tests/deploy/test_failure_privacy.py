"""What a failed run's status summary may hold: the error's type and the vertex, never a
tool's or an exception's text.

A deployed run of the clock artifact asks a real `mcp-server-time` for the time in a zone
named by the run input. The zone is a sentinel, the server refuses it, and its error text
echoes the sentinel. The run fails (`on_error="fail"`). The summary used to be
``workflow failed: <label>: <Type>: <message>`` - the message, with the sentinel, in every
run listing. Now the sentinel is in no listing, no history entry and no status summary;
the owner still reads the whole error in ``workflow_run_get``'s ``error`` (docs/workflows.md).
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from ..cli.conftest import Cli, _create
from .servers import REPO, time_command

SENTINEL = "Sentinel/Xq7Private"


@pytest.fixture
def cli(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Cli:
    monkeypatch.delenv("FLOWLEDGER_DB", raising=False)
    monkeypatch.chdir(tmp_path)
    url = f"sqlite:///{tmp_path}/p.db"
    asyncio.run(_create(url))
    return Cli(url, tmp_path)


def test_a_tool_error_echoing_the_input_stays_out_of_summaries(cli: Cli, tmp_path: Path) -> None:
    deployment = (REPO / "examples" / "clock_deployment.yaml").read_text()
    deployment = deployment.replace("command: mcp-server-time", f"command: {time_command()}")
    (tmp_path / "deployment.yaml").write_text(deployment)
    for args in (
        ("artifact", "save", str(REPO / "examples" / "clock.yaml")),
        ("deploy", "set", str(tmp_path / "deployment.yaml")),
    ):
        assert cli(*args).exit_code == 0
    started = cli("deploy", "run", "what_time_local", "--input", json.dumps({"timezone": SENTINEL}))
    assert started.exit_code in (0, 1), started.output
    run_id = cli.json("runs", "list")["runs"][0]["run_id"]

    def child(*args: str) -> str:
        result = cli.process(*args, "--db", cli.db)
        assert result.returncode == 0, result.stderr
        return result.stdout

    shown = json.loads(child("runs", "show", run_id, "--json"))
    assert shown["run_status"] == "failed"
    assert shown["status_summary"] == "workflow failed: Ask the clock: ToolErrorResult"
    # The owner's own detail has the whole error: the sentinel did reach the system.
    assert shown["error"]["type"] == "ToolErrorResult"
    assert SENTINEL in shown["error"]["message"]

    listed = child("runs", "list", "--json")
    history = child("history", run_id, "--json")
    kinds = [entry["kind"] for entry in json.loads(history)["entries"]]
    assert kinds[-1] == "run_failed"
    table = child("runs", "list")
    for text in (listed, history, table, json.dumps(shown["status_summary"])):
        assert SENTINEL not in text
    assert cli.tool("workflow_run_list", {"order": "newest"})["runs"][0]["run_id"] == run_id
    assert SENTINEL not in json.dumps(cli.tool("workflow_run_list", {"order": "newest"}))
