"""``flowledger prune`` and ``flowledger worker --retention`` as child processes, on SQLite
and PostgreSQL."""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from flowledger.host import open_session
from flowledger.storage import open_store
from flowledger.workflows.records.run import run_key

from .._postgres import postgres_url
from ..workflows._retention_support import Runs, backdate, catalog, snapshot

APP_SOURCE = Path(__file__).resolve().parents[1] / "workflows" / "semantics_app.py"
HANG = 120.0  # a hang deadline only


@pytest.fixture(params=["sqlite", "postgres"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'cli.db'}"
    else:
        with postgres_url() as found:
            yield found


def flowledger(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("FLOWLEDGER_DB", "FLOWLEDGER_DEBUG")}
    env["COLUMNS"] = "120"
    return subprocess.run(
        [sys.executable, "-m", "flowledger", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=HANG,
        check=False,
    )


async def _runs(url: str) -> dict[str, str]:
    async with open_session(url, catalog()) as session:
        runs = Runs(session)
        made = {
            "completed": await runs.completed("a"),
            "cancelled": await runs.cancelled("b"),
            "failed": await runs.failed("c"),
            "interrupted": await runs.interrupted("a"),
            "recent": await runs.completed("d"),
        }
        sid = session.session_id
    async with open_store(url) as store:
        for name in ("completed", "cancelled", "failed", "interrupted"):
            await backdate(store, sid, made[name])
    made["session"] = sid
    return made


def _digest(url: str) -> str | None:
    if not url.startswith("sqlite"):
        return None
    path = Path(url.removeprefix("sqlite:///"))
    wal = path.with_name(path.name + "-wal")
    assert not wal.exists() or wal.stat().st_size == 0
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_prune_dry_run_then_prune(url: str, tmp_path: Path) -> None:
    made = asyncio.run(_runs(url))
    sid = made["session"]
    before = asyncio.run(_snapshot(url))
    digest = _digest(url)

    table = flowledger(tmp_path, "prune", "--older-than", "30d", "--dry-run", "--db", url)
    assert table.returncode == 0, table.stderr
    assert "would delete" in table.stdout and "dry run: nothing was written" in table.stdout
    assert "runs completed" in table.stdout and "input blobs" in table.stdout
    assert "attachment(s) of the store would be swept" in table.stdout
    dry = flowledger(tmp_path, "prune", "--older-than", "30d", "--dry-run", "--json", "--db", url)
    assert dry.returncode == 0, dry.stderr
    plan = json.loads(dry.stdout)
    assert _digest(url) == digest
    assert asyncio.run(_snapshot(url)) == before
    assert plan["dry_run"] is True and plan["session_id"] == sid
    assert plan["runs"] == {"completed": 1, "cancelled": 1, "failed": 1, "total": 3}
    assert set(plan["run_ids"]) == {made["completed"], made["cancelled"], made["failed"]}
    assert plan["attachments"]["swept"] is True

    real = flowledger(tmp_path, "prune", "--older-than", "30d", "--json", "--db", url)
    assert real.returncode == 0, real.stderr
    done = json.loads(real.stdout)
    assert done["dry_run"] is False
    assert {k: done[k] for k in ("runs", "run_ids", "deleted", "bytes")} == {
        k: plan[k] for k in ("runs", "run_ids", "deleted", "bytes")
    }
    after = asyncio.run(_snapshot(url))
    for name in ("completed", "cancelled", "failed"):
        assert run_key(sid, made[name]) not in after.kv
    for name in ("interrupted", "recent"):
        assert run_key(sid, made[name]) in after.kv
    gone = before - after
    assert len(gone.kv) == done["deleted"]["records"] + done["deleted"]["kv_keys"]
    assert len(gone.logs) == done["deleted"]["logs"]
    assert len(gone.blobs) == done["deleted"]["input_blobs"] == 2  # "a" is still in use

    listed = flowledger(tmp_path, "runs", "list", "--json", "--db", url)
    assert listed.returncode == 0, listed.stderr
    assert {r["run_id"] for r in json.loads(listed.stdout)["runs"]} == {
        made["interrupted"],
        made["recent"],
    }
    status_only = flowledger(
        tmp_path, "prune", "--older-than", "1m", "--status", "completed", "--json", "--db", url
    )
    assert json.loads(status_only.stdout)["run_ids"] == []  # "recent" is not a minute old


async def _snapshot(url: str) -> Any:
    async with open_store(url) as store:
        return await snapshot(store)


@pytest.mark.parametrize(
    ("args", "fragments"),
    [
        (["--older-than", "3x"], ["invalid duration '3x'", "hint:", "30d"]),
        (["--older-than", "0d"], ["longer than zero", "hint:"]),
        (["--older-than", "1d", "--status", "running"], ["status 'running'", "hint:"]),
        (["--older-than", "1d", "--status", "completed,paused"], ["status 'paused'"]),
    ],
)
def test_bad_input_is_one_line_error(tmp_path: Path, args: list[str], fragments: list[str]) -> None:
    url = f"sqlite:///{tmp_path / 'bad.db'}"
    result = flowledger(tmp_path, "prune", *args, "--db", url)
    assert result.returncode == 1, result
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    for fragment in fragments:
        assert fragment in lines[0]
    assert not (tmp_path / "bad.db").exists()  # nothing was opened, let alone written


def test_prune_needs_older_than_and_a_uuid_session(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'bad.db'}"
    assert flowledger(tmp_path, "prune", "--db", url).returncode == 2
    result = flowledger(tmp_path, "prune", "--older-than", "1d", "--session", "x", "--db", url)
    assert result.returncode == 2 and "UUID" in result.stderr


def test_worker_with_retention_prunes_an_old_finished_run(url: str, tmp_path: Path) -> None:
    shutil.copy(APP_SOURCE, tmp_path / "semantics_app.py")
    made = asyncio.run(_runs(url))
    sid = made["session"]
    env = {k: v for k, v in os.environ.items() if k not in ("FLOWLEDGER_DB", "FLOWLEDGER_DEBUG")}
    log = tmp_path / "worker.log"
    with log.open("w") as stderr:
        worker = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "flowledger",
                "worker",
                "--db",
                url,
                "--app",
                "semantics_app:catalog",
                "--poll",
                "0.1",
                "--retention",
                "30d",
            ],
            cwd=tmp_path,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=stderr,
            text=True,
        )
        try:
            deadline = time.monotonic() + HANG
            # The worker logs a pass that pruned something once the pass is over.
            while "retention of session" not in log.read_text():
                assert worker.poll() is None, log.read_text()
                assert time.monotonic() < deadline, "the worker never pruned"
                time.sleep(0.1)
        finally:
            worker.send_signal(signal.SIGTERM)
            worker.wait(timeout=HANG)
    assert worker.returncode == 0, log.read_text()
    assert "pruned 3 run(s)" in log.read_text()
    after = asyncio.run(_snapshot(url))
    for name in ("completed", "cancelled", "failed"):
        assert run_key(sid, made[name]) not in after.kv
    for name in ("interrupted", "recent"):
        assert run_key(sid, made[name]) in after.kv
    resumed = flowledger(
        tmp_path,
        "resume",
        made["interrupted"],
        "--payload",
        '{"approved": true}',
        "--app",
        "semantics_app:catalog",
        "--db",
        url,
    )
    assert resumed.returncode == 0, resumed.stderr
    assert "completed" in resumed.stdout


def test_backfill_refs_lets_prune_sweep_an_upgraded_database(url: str, tmp_path: Path) -> None:
    """A database written before attachment references were kept: prune deletes its runs
    but sweeps no attachment, and its note names `flowledger backfill-refs`; that command
    registers the logs' references (idempotently), after which prune sweeps again."""
    asyncio.run(_runs(url))
    asyncio.run(_forget_refs(url))

    before = flowledger(tmp_path, "prune", "--older-than", "30d", "--json", "--db", url)
    assert before.returncode == 0, before.stderr
    report = json.loads(before.stdout)
    assert report["runs"]["total"] == 3
    assert report["attachments"]["swept"] is False
    assert "flowledger backfill-refs" in report["attachments"]["note"]

    filled = flowledger(tmp_path, "backfill-refs", "--json", "--db", url)
    assert filled.returncode == 0, filled.stderr
    result = json.loads(filled.stdout)
    assert result["refs_complete"] is True and result["logs"] >= 2  # the two runs left
    assert asyncio.run(_refs_complete(url))
    again = flowledger(tmp_path, "backfill-refs", "--db", url)
    assert again.returncode == 0, again.stderr
    assert f"registered the attachment references of {result['logs']} log(s)" in again.stdout

    after = flowledger(tmp_path, "prune", "--older-than", "1m", "--json", "--db", url)
    assert after.returncode == 0, after.stderr
    assert json.loads(after.stdout)["attachments"]["swept"] is True


async def _forget_refs(url: str) -> None:
    from ..flow.test_ledger_refs import forget_refs

    async with open_store(url) as store:
        await forget_refs(store)


async def _refs_complete(url: str) -> bool:
    async with open_store(url) as store:
        return await store.ledger.refs_complete()


def test_backfill_refs_of_an_unreachable_database_is_one_line(tmp_path: Path) -> None:
    done = flowledger(
        tmp_path, "backfill-refs", "--db", "postgresql://nobody@127.0.0.1:1/none?connect_timeout=2"
    )
    assert done.returncode == 1
    assert done.stderr.startswith("error: ") and len(done.stderr.strip().splitlines()) == 1
    assert done.stdout == ""
