"""``flowledger check``: the database's damage, named, with the runs it touches.

A real database - a document review paused for approval and a deployed run of the clock
artifact (a real `mcp-server-time`) paused at its interrupt, so it has a pin and a trace -
is checked clean, then bytes of several kinds of stored value are flipped
in the file and one check names each of them and the run each belongs to. Index damage
is checked in `tests/reliability/test_index_damage.py`. The command runs as a child
process; it opens the database read-only, so the file is the same afterwards.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from .._postgres import base_url, postgres_url
from ..deploy.servers import REPO, time_command
from ..reliability._sqlite_bytes import SqliteBytes, flip
from .conftest import REVIEW_INPUT, Cli


def check(cli: Cli, db: str | None = None) -> tuple[int, dict[str, Any]]:
    result = cli.process("check", "--json", "--db", db or cli.db)
    assert result.stderr == "", result.stderr
    return result.returncode, json.loads(result.stdout)


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def deployed_run(cli: Cli, tmp_path: Path) -> str:
    """Save the clock artifact, deploy it on this machine's `mcp-server-time` and run it
    until it pauses for confirmation."""
    deployment = (REPO / "examples" / "clock_deployment.yaml").read_text()
    deployment = deployment.replace("command: mcp-server-time", f"command: {time_command()}")
    (tmp_path / "deployment.yaml").write_text(deployment)
    for args in (
        ("artifact", "save", str(REPO / "examples" / "clock.yaml")),
        ("deploy", "set", str(tmp_path / "deployment.yaml")),
    ):
        result = cli(*args)
        assert result.exit_code == 0, result.output
    started = cli.json("deploy", "run", "what_time_local", "--input", '{"timezone": "Etc/UTC"}')
    assert started["status"] == "interrupted", started
    return str(started["run_id"])


def _damage(report: dict[str, Any], place: str, name: str) -> dict[str, Any]:
    found = [d for d in report["damage"] if d["place"] == place and d["name"] == name]
    assert found, (place, name, report["damage"])
    return found[0]


def test_a_clean_database_checks_ok_and_each_damaged_value_is_named_with_its_run(
    cli: Cli, tmp_path: Path
) -> None:
    review = cli.start_review()
    deployed = deployed_run(cli, tmp_path)
    path = Path(cli.db.removeprefix("sqlite:///"))
    runs = {run["run_id"]: run for run in cli.json("runs", "list")["runs"]}
    assert set(runs) == {review, deployed}

    before = sha256(path)
    code, report = check(cli)
    assert code == 0 and report["ok"], report["damage"]
    assert report["damage"] == [] and report["runs"] == []
    assert report["database"] == {
        "method": "sqlite integrity_check",
        "ok": True,
        "complete": True,
        "problems": [],
        "note": "",
        "rows": [],
    }
    checked = report["checked"]
    assert checked["runs"] == 2 and checked["journals"] == 2 and checked["inputs"] == 2
    assert (checked["artifacts"], checked["deployment revisions"]) == (1, 1)
    assert (checked["pins"], checked["traces"]) == (1, 1)  # a read-only tool keeps no intents
    table = cli.process("check", "--db", cli.db)
    assert table.returncode == 0 and "no damage found" in table.stdout
    assert sha256(path) == before  # read-only: not a byte written

    damaged = tmp_path / "damaged.db"
    shutil.copyfile(path, damaged)
    url = f"sqlite:///{damaged}"
    surgery = SqliteBytes(damaged)
    with sqlite3.connect(damaged) as db:
        session = (
            db.execute("SELECT key FROM kv WHERE key LIKE 'sessions/%/workflows/runs/%'")
            .fetchone()[0]
            .split("/")[1]
        )
        (artifact_blob,) = db.execute(
            "SELECT key FROM blobs WHERE key LIKE '%/deploy/artifacts/blobs/%'"
        ).fetchone()
        (graph,) = db.execute(
            "SELECT name FROM ledger_logs WHERE name LIKE 'deploy/pins/%'"
        ).fetchone()
    graph = graph.rsplit("/", 1)[1]
    record_key = f"sessions/{session}/workflows/runs/{review}"
    deployed_key = f"sessions/{session}/workflows/runs/{deployed}"
    input_key = json.loads(surgery.read("kv", deployed_key))["run"]["input"]["key"]
    checkpoints = f"flow/runs/{graph}"
    for table_name, key in (
        ("kv", record_key),
        ("blobs", input_key),
        ("blobs", artifact_blob),
    ):
        surgery.write(table_name, key, flip(surgery.read(table_name, key), 7))
    for log in (checkpoints, f"deploy/pins/{graph}"):
        surgery.write_record(log, 1, flip(surgery.read_record(log, 1), 3))

    code, report = check(cli, url)
    assert code == 1 and not report["ok"]
    assert report["database"]["ok"]  # the engine's structures are fine: the values are not
    checksum = "it does not match its stored checksum"
    assert _damage(report, "kv", record_key) == {
        "place": "kv",
        "name": record_key,
        "problem": checksum,
        "runs": [review],
    }
    assert _damage(report, "blob", input_key)["runs"] == [deployed]
    assert _damage(report, "blob", artifact_blob)["problem"] == checksum
    assert _damage(report, "log", f"{checkpoints}#1")["runs"] == [deployed]
    assert _damage(report, "log", f"deploy/pins/{graph}#1")["runs"] == [deployed]
    assert report["runs"] == sorted([review, deployed])
    table = cli.process("check", "--db", url)
    assert table.returncode == 1
    assert "damaged:" in table.stdout and review in table.stdout and deployed in table.stdout
    assert REVIEW_INPUT["document"] not in table.stdout + json.dumps(report)


def test_a_missing_database_is_an_error_and_is_not_created(cli: Cli, tmp_path: Path) -> None:
    result = cli.process("check", "--db", f"sqlite:///{tmp_path}/nothere.db")
    assert result.returncode == 1
    assert result.stderr.startswith("error: no database at ")
    assert not (tmp_path / "nothere.db").exists()


def test_postgres_without_amcheck_checks_the_records_and_says_so(cli: Cli) -> None:
    """PostgreSQL: without amcheck installed, the engine's part is incomplete (and the note
    says how to complete it), the records are all checked, and damage is named."""
    import psycopg

    with postgres_url() as url:
        pg = Cli(url, cli.cwd)
        with psycopg.connect(base_url(), autocommit=True) as admin:
            if admin.execute("SELECT 1 FROM pg_extension WHERE extname = 'amcheck'").fetchone():
                pytest.skip("amcheck is installed in the test database already")
        review = pg.start_review()
        code, report = check(cli, url)
        assert code == 0 and report["ok"]
        assert report["database"]["complete"] is False
        assert "CREATE EXTENSION amcheck" in report["database"]["note"]
        assert report["checked"]["runs"] == 1
        schema = url.rsplit("schema=", 1)[1]
        with psycopg.connect(base_url(), autocommit=True) as admin:
            (key,) = admin.execute(
                f'SELECT key FROM "{schema}".kv WHERE key LIKE %s', ("%/workflows/runs/%",)
            ).fetchone()
            admin.execute(
                f'UPDATE "{schema}".kv SET content = content || %s WHERE key = %s', (b" ", key)
            )
        code, report = check(cli, url)
    assert code == 1
    assert _damage(report, "kv", key)["runs"] == [review]


def test_a_finished_run_whose_journal_lost_its_last_records_is_named(cli: Cli) -> None:
    """A lost *last* journal record moves the log's tip back with it, so no read can tell
    it from one never written; but a completed run whose activities were all published
    must end with `run_completed`, and `check` says it does not."""
    run_id = cli.start_review()
    assert cli("resume", run_id, "--payload", '{"approved": true}').exit_code == 0
    path = Path(cli.db.removeprefix("sqlite:///"))
    with sqlite3.connect(path) as db:
        (journal,) = db.execute(
            "SELECT name FROM ledger_logs WHERE name LIKE ?", (f"%/workflows/activity/{run_id}",)
        ).fetchone()
    assert check(cli)[0] == 0
    surgery = SqliteBytes(path)
    tip = len(
        json.loads(cli.process("history", run_id, "--json", "--db", cli.db).stdout)["entries"]
    )
    surgery.delete_record(journal, tip)
    code, report = check(cli)
    assert code == 1
    assert _damage(report, "log", journal) == {
        "place": "log",
        "name": journal,
        "problem": "the run is completed and its activities were all published, but its "
        "journal does not end with run_completed",
        "runs": [run_id],
    }


def test_a_stored_name_damaged_into_no_valid_name_is_named(cli: Cli) -> None:
    """A flipped byte can turn a stored key or log name into no valid name at all (``a``
    into a backquote): the check used to stop there with `invalid storage name`; it names
    the damage and goes on."""
    run_id = cli.start_review()
    path = Path(cli.db.removeprefix("sqlite:///"))
    bad = run_id[:-1] + "`"
    with sqlite3.connect(path) as db:
        (pending,) = db.execute(
            "SELECT key FROM kv WHERE key LIKE ?", (f"%/workflows/pending/{run_id}",)
        ).fetchone()
        (journal,) = db.execute(
            "SELECT name FROM ledger_logs WHERE name LIKE ?", (f"%/workflows/activity/{run_id}",)
        ).fetchone()
        db.execute("UPDATE kv SET key = ? WHERE key = ?", (pending[:-1] + "`", pending))
        db.execute("UPDATE ledger_logs SET name = ? WHERE name = ?", (journal[:-1] + "`", journal))
    code, report = check(cli)
    assert code == 1
    problem = "its stored name is no valid name (a damaged byte)"
    assert _damage(report, "kv", pending[:-1] + "`")["problem"] == problem
    assert _damage(report, "log", journal[:-1] + "`")["problem"] == problem
    assert _damage(report, "kv", pending)["runs"] == [run_id]  # the paused run lost its question
    assert bad not in report["runs"]
