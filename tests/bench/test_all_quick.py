"""``bench/all.py`` (``bash bench/run.sh all``) in quick mode with only flowledger: every
part runs, writes its own block of the output file, and says so when PostgreSQL is away."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path

from .._postgres import require_postgres

ALL = Path(__file__).resolve().parents[2] / "bench" / "all.py"
UNREACHABLE = "postgresql://nobody@127.0.0.1:1/none"
KEPT = "# Benchmarks\n\nwritten by hand, kept\n"


def _run(tmp_path: Path, *argv: str, env: dict[str, str] | None = None) -> tuple[str, str]:
    out = tmp_path / "b.md"
    out.write_text(KEPT)
    proc = subprocess.run(
        [sys.executable, str(ALL), "--quick", "--only", "flowledger", "--out", str(out), *argv],
        capture_output=True,
        text=True,
        timeout=900,  # only catches a hang
        env={**os.environ, **(env or {})},
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout, out.read_text()


def _rows(text: str, key: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith(f"| {key} ")]


def test_sqlite_parts_and_one_line_when_postgres_is_unreachable(tmp_path: Path) -> None:
    cache = tmp_path / "scale-cache"
    stdout, written = _run(tmp_path, "--postgres-url", UNREACHABLE, "--scale-cache", str(cache))
    assert stdout.count("unreachable") == 1
    assert f"PostgreSQL at {UNREACHABLE} unreachable" in stdout
    assert "skipped the PostgreSQL comparison (a, b, f, g)" in stdout
    assert written.startswith(KEPT)
    for block in (
        "results",
        "results-scale",
        "results-prune",
        "results-resume",
        "results-step-cpu",
    ):
        assert f"<!-- {block}:begin -->" in written and f"<!-- {block}:end -->" in written
    for block in ("results-postgres", "results-workers", "results-wakeups"):
        assert f"<!-- {block}:begin -->" not in written
    for key in ("a)", "b)", "d)", "e)", "f)", "g)"):
        assert _rows(written, key), key
    assert {row.split("|")[1].strip() for row in _rows(written, "c)")} == {
        "c) fan-out of 8, N=5",
        "c) fan-out of 16, N=5",
        "c) fan-out of 32, N=5",
    }
    scale = written.partition("<!-- results-scale:begin -->")[2]
    assert "| resume to completion |" in scale and "SQLite: 300 runs" in scale
    assert "generating" not in scale  # progress lines stay out of the block


def test_postgres_parts_write_their_own_blocks(tmp_path: Path) -> None:
    url = require_postgres()
    import psycopg

    prefix = f"bench_t{uuid.uuid4().hex[:8]}"
    # resume and step-cpu never touch PostgreSQL: the test above runs them as they would
    # run here (same arguments, SQLite files of their own)
    skipped = ("sqlite", "scale", "resume", "step-cpu")
    stdout, written = _run(
        tmp_path,
        "--postgres-url",
        url,
        *(x for part in skipped for x in ("--skip", part)),
        env={"FLOWLEDGER_BENCH_DATABASE_PREFIX": prefix},
    )
    assert "unreachable" not in stdout
    assert written.startswith(KEPT)
    for block in ("results", "results-scale", "results-resume", "results-step-cpu"):
        assert f"<!-- {block}:begin -->" not in written  # skipped
    postgres = written.partition("<!-- results-postgres:begin -->")[2].partition(
        "<!-- results-postgres:end -->"
    )[0]
    assert "flowledger synchronous_commit=on" in postgres
    for key in ("a)", "b)", "f)", "g)"):
        assert _rows(postgres, key), key
    g = _rows(postgres, "g)")
    assert {row.split("|")[2].strip() for row in g} >= {"durable steps/s", "p99 ms/step"}
    workers = written.partition("<!-- results-workers:begin -->")[2]
    assert "<!-- results-workers:end -->" in workers
    for count in ("1", "2", "3"):
        assert any(line.startswith(f"| {count} | ") for line in workers.splitlines()), count
    wakeups = written.partition("<!-- results-wakeups:begin -->")[2]
    assert "<!-- results-wakeups:end -->" in wakeups
    assert _rows(wakeups, "before") and _rows(wakeups, "after")
    prune = written.partition("<!-- results-prune:begin -->")[2]
    assert "<!-- results-prune:end -->" in prune
    assert "postgres after" in prune.partition("<!-- results-prune:end -->")[0]
    with psycopg.connect(url, autocommit=True) as conn:
        left = conn.execute(
            "SELECT datname FROM pg_database WHERE datname LIKE %s", (f"{prefix}%",)
        ).fetchall()
    assert left == []
