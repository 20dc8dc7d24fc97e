"""A flipped byte in an SQLite *index* page: a lookup misses a row the table still holds.

Per-value checksums never cover SQLite's own b-tree pages, so before this the miss read
as absence: `flowledger history` of a completed run printed "No activity recorded", `runs
show` of a paused run left out what it waits for, and `flowledger resume` turned a paused
run whose checkpoints were all intact permanently `failed (workflow checkpoint missing)`,
writing `run_failed` twice. The rule now: a miss that contradicts another record is never
taken as "missing". Reads answer a typed corrupt error; a terminal write that rests on a
miss is confirmed with the store first (`storage.Integrity.confirm_absent`) and refused
while the store cannot confirm it, so nothing is written and a repair (`REINDEX`) gives
the run back whole.

The damage is made for real (`SqliteBytes.flip_in_index`: one bit of the index entry, in
the file) and the CLI runs as a child process, as an operator would run it.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from flowledger.host import load_catalog, open_session
from flowledger.storage import open_store
from flowledger.tools import ToolError
from flowledger.workflows.errors import CorruptRecordError
from flowledger.workflows.records.run import Run
from flowledger.workflows.runtime.session import default_session_id

from ..cli.conftest import Cli, _create
from ..workflows.conftest import build_session
from ._sqlite_bytes import SqliteBytes

APPROVE = json.dumps({"approved": True})
CORRUPT = "is corrupt (the database is damaged; `flowledger check` reports where)"


@dataclass
class Runs:
    cli: Cli
    path: Path
    paused: Run
    completed: Run

    @property
    def bytes(self) -> SqliteBytes:
        return SqliteBytes(self.path)

    def fails_corrupt(self, *args: str, child: bool = True) -> str:
        """Run the CLI as a child process (or, to save a process start on a busy machine,
        in this one): exit code 1, one ``error:`` line saying the stored record is
        corrupt. Returns that line."""
        if child:
            result = self.cli.process(*args, "--db", self.cli.db)
            code, stderr = result.returncode, result.stderr
        else:
            here = self.cli(*args)
            code, stderr = here.exit_code, here.stderr
        assert code == 1, (code, stderr)
        lines = stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: "), stderr
        assert CORRUPT in lines[0], lines[0]
        assert "Traceback" not in stderr
        return lines[0]

    def check_names(self, index: str, kind: str, name: str, run: Run) -> dict[str, Any]:
        """`flowledger check` (a child process) exits 1 and names the damaged index, the
        value whose entry it lost, and the run that value belongs to."""
        result = self.cli.process("check", "--json", "--db", self.cli.db)
        assert result.returncode == 1 and result.stdout, result.stderr
        report: dict[str, Any] = json.loads(result.stdout)
        assert any(index in problem for problem in report["database"]["problems"])
        assert {"kind": kind, "name": name} in report["database"]["rows"]
        lost = [d for d in report["damage"] if (d["place"], d["name"]) == (kind, name)]
        assert lost and all(run.id in d["runs"] for d in lost), report["damage"]
        assert run.id in report["runs"]
        return report


async def _runs(url: str, ids: list[str]) -> list[Run]:
    async with open_store(url, read_only=True) as store:
        session = build_session(store, await default_session_id(store))
        return [await session.registry.get(session.session_id, run_id) for run_id in ids]


@dataclass(frozen=True)
class Template:
    path: Path
    paused: str
    completed: str


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Template]:
    """A database with a document review paused for approval and one completed, made
    once; every test damages a copy of it."""
    from flowledger.examples import review

    folder = tmp_path_factory.mktemp("index-damage")
    path = folder / "template.db"
    url = f"sqlite:///{path}"
    asyncio.run(_create(url))
    with pytest.MonkeyPatch.context() as patch:
        patch.delenv("FLOWLEDGER_DB", raising=False)
        patch.chdir(folder)
        patch.setattr(review, "STEP_SECONDS", 0.0)
        cli = Cli(url, folder)
        paused = cli.start_review()
        completed = cli.start_review()
        result = cli("resume", completed, "--payload", APPROVE)
        assert result.exit_code == 0, result.output
    yield Template(path, paused, completed)


@pytest.fixture
def runs(template: Template, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Runs:
    monkeypatch.delenv("FLOWLEDGER_DB", raising=False)
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "c.db"
    shutil.copyfile(template.path, path)  # closed: no write-ahead log beside it
    url = f"sqlite:///{path}"
    paused, completed = asyncio.run(_runs(url, [template.paused, template.completed]))
    assert (str(paused.status), str(completed.status)) == ("interrupted", "completed")
    return Runs(Cli(url, tmp_path), path, paused, completed)


def _journal(run: Run) -> str:
    return f"sessions/{run.session_id}/workflows/activity/{run.id}"


def test_history_of_a_completed_run_is_corrupt_not_empty(runs: Runs) -> None:
    """The index entry of the completed run's journal log is damaged: `history` used to
    print "No activity recorded (yet)"; the run's activity cursor promises activities."""
    runs.bytes.flip_in_index("sqlite_autoindex_ledger_logs_1", _journal(runs.completed))
    before = runs.bytes.dump()
    runs.fails_corrupt("history", runs.completed.id)
    runs.fails_corrupt("history", runs.completed.id, "--json", child=False)
    assert runs.bytes.dump() == before
    runs.check_names(
        "sqlite_autoindex_ledger_logs_1", "log", _journal(runs.completed), runs.completed
    )


def test_get_of_a_paused_run_without_its_pause_request_is_corrupt(runs: Runs) -> None:
    """The index entry of the paused run's pending record is damaged: `runs show` used to
    show the run without the question it waits for."""
    pending = f"sessions/{runs.paused.session_id}/workflows/pending/{runs.paused.id}"
    runs.bytes.flip_in_index("sqlite_autoindex_kv_1", pending)
    before = runs.bytes.dump()
    runs.fails_corrupt("runs", "show", runs.paused.id)
    runs.fails_corrupt("runs", "show", runs.paused.id, "--json", child=False)
    assert runs.bytes.dump() == before
    report = runs.check_names("sqlite_autoindex_kv_1", "kv", pending, runs.paused)
    assert {
        "place": "kv",
        "name": pending,
        "problem": "the run is interrupted, but what it waits for is not stored",
        "runs": [runs.paused.id],
    } in report["damage"]


def test_resume_over_a_damaged_checkpoint_index_writes_nothing(runs: Runs) -> None:
    """The index entry of the paused run's checkpoint log is damaged. `resume` used to fail
    the run for good ("workflow checkpoint missing", `run_failed` twice); now the store
    cannot confirm the miss, the answer is the corrupt error, and no record changes - so
    once the index is rebuilt the same run resumes and completes."""
    runs.bytes.flip_in_index("sqlite_autoindex_ledger_logs_1", runs.paused.ledger_locator)
    before = runs.bytes.dump()
    runs.fails_corrupt("resume", runs.paused.id, "--payload", APPROVE)
    runs.fails_corrupt("resume", runs.paused.id, "--payload", APPROVE, "--json", child=False)
    runs.fails_corrupt("runs", "show", runs.paused.id, child=False)
    assert runs.bytes.dump() == before
    runs.check_names(
        "sqlite_autoindex_ledger_logs_1", "log", runs.paused.ledger_locator, runs.paused
    )

    with sqlite3.connect(runs.path) as db:  # the operator's repair
        db.execute("REINDEX")
    assert runs.bytes.problems() == []
    resumed = runs.cli.process(
        "resume", runs.paused.id, "--payload", APPROVE, "--json", "--db", runs.cli.db
    )
    assert resumed.returncode == 0, resumed.stderr
    assert json.loads(resumed.stdout)["run_status"] == "completed"
    shown = runs.cli.process("history", runs.paused.id, "--json", "--db", runs.cli.db)
    history = json.loads(shown.stdout)
    kinds = [entry["kind"] for entry in history["entries"]]
    assert kinds[-1] == "run_completed" and "run_failed" not in kinds


def _other_last(text: str) -> str:
    """``text`` with its last character another hex digit (a run ID stays a run ID)."""
    return text[:-1] + ("1" if text[-1] == "0" else "0")


def test_a_damaged_run_record_key_reads_corrupt_everywhere(runs: Runs) -> None:
    """(c) The index entry of a run record's key is damaged (its last byte flipped):
    `list` found the damaged key and said corrupt, while `get` and `history` said "not
    found". Every read says corrupt now - the run left its journal, so its record was
    there."""
    run = runs.completed
    key = f"sessions/{run.session_id}/workflows/runs/{run.id}"
    runs.bytes.flip_in_index("sqlite_autoindex_kv_1", key)
    before = runs.bytes.dump()
    for args in (("runs", "show", run.id), ("history", run.id), ("runs", "list")):
        runs.fails_corrupt(*args)
    assert runs.bytes.dump() == before
    report = runs.check_names("sqlite_autoindex_kv_1", "kv", key, run)
    assert {
        "place": "run",
        "name": run.id,
        "problem": "the run's activity journal exists, but its run record is not found",
        "runs": [run.id],
    } in report["damage"]

    async def python_api() -> None:
        async with open_session(
            runs.cli.db, load_catalog(), activate=False, read_only=True
        ) as session:
            with pytest.raises(CorruptRecordError):
                await session.registry.get(run.session_id, run.id)
            with pytest.raises(CorruptRecordError):
                await session.registry.list(run.session_id)

    asyncio.run(python_api())
    for tool, arguments in (
        ("workflow_run_get", {"run_id": run.id}),
        ("workflow_run_history", {"run_id": run.id}),
        ("workflow_run_list", {}),
    ):
        with pytest.raises(ToolError, match="is corrupt"):
            runs.cli.tool(tool, arguments)


def test_a_renamed_run_record_key_reads_corrupt_everywhere(runs: Runs) -> None:
    """(c) The key itself damaged in the table and its index alike (the record moved to a
    neighbouring key): the same answers."""
    run = runs.completed
    key = f"sessions/{run.session_id}/workflows/runs/{run.id}"
    with sqlite3.connect(runs.path) as db:
        db.execute("UPDATE kv SET key = ? WHERE key = ?", (_other_last(key), key))
    for args in (("runs", "show", run.id), ("history", run.id), ("runs", "list")):
        runs.fails_corrupt(*args, child=False)
    assert runs.bytes.problems() == []  # the engine sees nothing wrong: only flowledger can
    checked = runs.cli.process("check", "--json", "--db", runs.cli.db)
    assert checked.returncode == 1
    report = json.loads(checked.stdout)
    assert report["database"]["ok"]
    assert {
        "place": "kv",
        "name": _other_last(key),
        "problem": "it does not match its stored checksum",
        "runs": [_other_last(run.id)],
    } in report["damage"]
    assert run.id in report["runs"]


async def test_a_pending_run_whose_input_lookup_misses_is_not_failed(tmp_path: Path) -> None:
    """The index entry of a pending run's input blob is damaged: starting it used to fail
    it for good ("workflow input unavailable"). The store cannot confirm the miss, so the
    owner reports the corrupt record and leaves the run pending, writing nothing."""
    path = tmp_path / "input.db"
    url = f"sqlite:///{path}"
    async with open_store(url) as store:
        run = await build_session(store).create_run("counter", {"count": 7})
    damaged = SqliteBytes(path)
    damaged.flip_in_index("sqlite_autoindex_blobs_1", run.input.key)
    before = damaged.dump()
    async with open_store(url) as store:
        session = build_session(store, run.session_id)
        supervisor = session.supervisor(integrity=store.integrity)
        await supervisor.activate()  # adoption starts the pending run
        try:
            error = await supervisor.wait_idle()
        finally:
            await supervisor.shutdown()
        chain: list[BaseException] = []
        while error is not None:
            chain.append(error)
            error = error.__cause__
        assert any(isinstance(link, CorruptRecordError) for link in chain), chain
        after = await session.registry.get(run.session_id, run.id)
    assert str(after.status) == "pending"
    assert damaged.dump() == before
