"""``flowledger runs list`` shows queued runs with their place, and ``--status queued``
lists only them."""

from __future__ import annotations

import pytest

from .conftest import Cli
from .test_limits import start


def test_runs_list_shows_queued_runs_with_scope_and_position(
    cli: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "200")  # a wide terminal: no column is cut
    cli.json("limits", "set", "--definition", "document_review", "--max-running", "1")
    first = start(cli)  # pauses for approval and keeps its slot
    second = start(cli)
    third = start(cli)

    listed = {run["run_id"]: run for run in cli.json("runs", "list")["runs"]}
    assert "queued" not in listed[first]
    assert listed[second]["queued"] == {"scope": "definition/document_review", "position": 1}
    assert listed[third]["queued"] == {"scope": "definition/document_review", "position": 2}

    queued = cli.json("runs", "list", "--status", "queued")["runs"]
    assert sorted(run["run_id"] for run in queued) == sorted([second, third])
    assert [
        run["run_id"] for run in cli.json("runs", "list", "--status", "interrupted")["runs"]
    ] == [first]
    text = cli("runs", "list", "--status", "queued").stdout
    assert "queued 1 in definition/document_review" in text
    assert "queued 2 in definition/document_review" in text

    bad = cli("runs", "list", "--status", "waiting")
    assert bad.exit_code != 0 and "queued" in bad.output  # the error lists what is allowed
