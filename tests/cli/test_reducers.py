"""The three-branch lost update through the CLI, as a child process
(``--app reducers_app:catalog``, see ``tests/mcp/reducers_app.py``).

Without a field reducer the run does not complete with one branch's note: the later
branches fail with a conflicting update and the run pauses as errored. The CLI shows the
errored pause; the error itself (type, field, both vertices) is in the run's durable
checkpoint, where the session's owner reads it. With ``flow.append`` on the field the
run completes with every branch's note.
"""

from __future__ import annotations

import asyncio
import json
import shutil
from pathlib import Path
from typing import Any

from flowledger.host import load_catalog, open_session

from .conftest import Cli

APP_SOURCE = Path(__file__).resolve().parents[1] / "mcp" / "reducers_app.py"
APP = ["--app", "reducers_app:catalog"]
TOPIC = json.dumps({"topic": "tea"})


def install_app(cli: Cli) -> None:
    shutil.copy(APP_SOURCE, cli.cwd / "reducers_app.py")


def only_run(cli: Cli) -> dict[str, Any]:
    listed = cli.process("runs", "list", "--json", "--db", cli.db)
    assert listed.returncode == 0, listed.stderr
    runs = json.loads(listed.stdout)["runs"]
    assert len(runs) == 1
    return dict(runs[0])


def stored_pause(cli: Cli, run_id: str) -> list[tuple[str, str]]:
    """(vertex, error text) of each errored pause, from the run's latest checkpoint, as
    the session's owner sees it."""

    async def read() -> list[tuple[str, str]]:
        async with open_session(cli.db, load_catalog("reducers_app:catalog"), activate=False) as s:
            run = await s.registry.get(s.session_id, run_id)
            definition = s.catalog.resolve(run.definition_name, run.definition_version)
            result = await definition.get(run.graph_run_id)
            assert result.interrupts is not None
            return [(i.vertex, str(i.cause)) for i in result.interrupts]

    return asyncio.run(read())


def test_lost_update_is_reported_not_lost(cli: Cli) -> None:
    install_app(cli)
    started = cli.process("start", "branches_plain", "v1", "--input", TOPIC, *APP, "--db", cli.db)
    assert started.returncode == 0, started.stderr
    assert "is interrupted" in started.stdout
    assert "failed at beta, paused" in started.stdout
    # regression: the live line used to say "paused, waiting for input" for an error too
    assert "paused by an error" in started.stdout
    assert "waiting for input" not in started.stdout
    screen = " ".join(started.stdout.replace("│", " ").split())
    assert "ConflictingUpdateError: conflicting update of field 'notes'" in screen
    assert "Traceback" not in started.stdout + started.stderr

    run = only_run(cli)
    assert run["run_status"] == "interrupted"
    history = cli.process("history", run["run_id"], "--json", "--db", cli.db)
    assert history.returncode == 0, history.stderr
    completed = [
        e["vertex_id"]
        for e in json.loads(history.stdout)["entries"]
        if e["kind"] == "vertex_completed"
    ]
    assert completed == ["split", "alpha"]  # beta and gamma did not overwrite alpha's note

    shown = cli.process("runs", "show", run["run_id"], "--json", "--db", cli.db)
    pending = json.loads(shown.stdout)["pending"]
    assert pending["kind"] == "error"
    assert [(v["vertex_id"], v["error"]["type"]) for v in pending["vertices"]] == [
        ("beta", "ConflictingUpdateError"),
        ("gamma", "ConflictingUpdateError"),
    ]

    pauses = stored_pause(cli, run["run_id"])
    assert [vertex for vertex, _ in pauses] == ["beta", "gamma"]
    for vertex, error in pauses:
        assert "conflicting update of field 'notes'" in error
        assert f"vertex {vertex} would overwrite the update of vertex alpha" in error


def test_field_reducer_keeps_every_branch(cli: Cli) -> None:
    install_app(cli)
    started = cli.process("start", "branches_reduced", "v1", "--input", TOPIC, *APP, "--db", cli.db)
    assert started.returncode == 0, started.stderr
    assert "is completed (alpha on tea; beta on tea; gamma on tea)" in started.stdout
    run = only_run(cli)
    assert run["run_status"] == "completed"
    assert run["status_summary"] == "alpha on tea; beta on tea; gamma on tea"
