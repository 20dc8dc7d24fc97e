"""The side-by-side benchmark runs in quick mode with only flowledger (CI has no peers)."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path

from .._postgres import require_postgres

COMPARE = Path(__file__).resolve().parents[2] / "bench" / "compare.py"
WORKLOADS = ("a)", "b)", "c)", "d)", "e)", "f)")


def test_quick_flowledger_and_floor(tmp_path: Path) -> None:
    out = tmp_path / "b.md"
    proc = subprocess.run(
        [
            sys.executable,
            str(COMPARE),
            "--quick",
            "--only",
            "flowledger",
            "--quiet",
            "--out",
            str(out),
            "--dir",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr

    rows = [line for line in proc.stdout.splitlines() if line.startswith("| ")]
    for key in WORKLOADS:
        matching = [row for row in rows if row.startswith(f"| {key} ")]
        assert matching, f"no table line for workload {key}:\n{proc.stdout}"
        for row in matching:
            cells = [cell.strip() for cell in row.strip("|").split("|")]
            # the flowledger column (or the floor's, for f) holds a number
            column = cells[3] if key == "f)" else cells[2]
            assert column.split(" ")[0].replace(".", "", 1).isdigit(), row
    assert "flowledger / sqlite" in proc.stdout
    assert "synchronous=FULL journal_mode=wal" in proc.stdout

    written = out.read_text()
    assert "<!-- results:begin -->" in written and "<!-- results:end -->" in written
    assert all(f"| {key} " in written for key in WORKLOADS)


def test_out_keeps_the_text_around_the_results(tmp_path: Path) -> None:
    sys.path.insert(0, str(COMPARE.parent))
    try:
        import compare
    finally:
        sys.path.remove(str(COMPARE.parent))
    doc = tmp_path / "doc.md"
    around = "# Title\n\nbefore\n\n{}\n{}{}\n\nafter\n"
    doc.write_text(around.format(compare.BEGIN, "old\n", compare.END))
    compare.write_out(str(doc), "new\n")
    assert doc.read_text() == around.format(compare.BEGIN, "new\n", compare.END)


def test_quick_postgres_backend(tmp_path: Path) -> None:
    """``--backend postgres`` measures a), b) and the raw floor on fresh databases of the
    server, reads synchronous_commit back, and leaves no database behind."""
    url = require_postgres()
    import psycopg

    prefix = f"bench_t{uuid.uuid4().hex[:8]}"

    def databases() -> list[str]:
        with psycopg.connect(url, autocommit=True) as conn:
            rows = conn.execute(
                "SELECT datname FROM pg_database WHERE datname LIKE %s", (f"{prefix}%",)
            ).fetchall()
        return [str(row[0]) for row in rows]

    proc = subprocess.run(
        [
            sys.executable,
            str(COMPARE),
            "--quick",
            "--only",
            "flowledger",
            "--quiet",
            "--backend",
            "postgres",
            "--postgres-url",
            url,
        ],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "FLOWLEDGER_BENCH_DATABASE_PREFIX": prefix},
    )
    assert proc.returncode == 0, proc.stderr
    rows = [line for line in proc.stdout.splitlines() if line.startswith("| ")]
    for key in ("a)", "b)", "f)"):
        matching = [row for row in rows if row.startswith(f"| {key} ")]
        assert matching, f"no table line for workload {key}:\n{proc.stdout}"
        for row in matching:
            cells = [cell.strip() for cell in row.strip("|").split("|")]
            column = cells[3] if key == "f)" else cells[2]
            assert column.split(" ")[0].replace(".", "", 1).isdigit(), row
    assert not [row for row in rows if row.startswith(("| c) ", "| d) ", "| e) "))]
    assert "flowledger / postgres" in proc.stdout
    assert "flowledger synchronous_commit=on; postgres synchronous_commit=on" in proc.stdout
    assert "measured on" in proc.stdout and prefix in proc.stdout  # the databases it made
    assert databases() == []


def test_postgres_backend_says_when_the_server_is_unreachable() -> None:
    proc = subprocess.run(
        [
            sys.executable,
            str(COMPARE),
            "--quick",
            "--only",
            "flowledger",
            "--backend",
            "postgres",
            "--postgres-url",
            "postgresql://nobody@127.0.0.1:1/none",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    assert "is unreachable" in proc.stderr and "skipping" in proc.stderr
    assert "| a) " not in proc.stdout
