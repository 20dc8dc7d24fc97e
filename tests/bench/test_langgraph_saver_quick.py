"""The LangGraph saver bench in quick mode: both savers measured side by side on SQLite
and PostgreSQL, every table row filled, the report written into its block."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from .._postgres import base_url, require_postgres

BENCH = Path(__file__).resolve().parents[2] / "bench" / "langgraph_saver.py"
ROWS = ("a) 1-vertex loop, N=20", "b) growing chat, T=20 turns")


def test_quick_both_savers_on_both_backends(tmp_path: Path) -> None:
    require_postgres()
    out = tmp_path / "b.md"
    out.write_text("# Benchmarks\n\nbefore\n")
    proc = subprocess.run(
        [
            sys.executable,
            str(BENCH),
            "--quick",
            "--quiet",
            "--out",
            str(out),
            "--dir",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "FLOWLEDGER_BENCH_POSTGRES_URL": base_url()},
    )
    assert proc.returncode == 0, proc.stderr
    for peer in ("SqliteSaver", "PostgresSaver"):
        assert f"| FlowledgerSaver | {peer} | FlowledgerSaver / {peer} |" in proc.stdout
    rows = [
        line for line in proc.stdout.splitlines() if line.startswith(tuple(f"| {r} " for r in ROWS))
    ]
    assert len(rows) == 2 * 8, proc.stdout  # every metric, on both backends
    for row in rows:
        cells = [cell.strip() for cell in row.strip("| ").split("|")]
        for number in cells[2:]:
            float(number.split(" ")[0])  # both savers measured, and their ratio
    # the durability settings read back on each saver's own connection
    assert "sqlite/flowledger: synchronous=FULL journal_mode=wal" in proc.stdout
    assert "sqlite/langgraph: synchronous=FULL journal_mode=wal" in proc.stdout
    assert "postgres/flowledger: synchronous_commit=on" in proc.stdout
    written = out.read_text()
    assert written.startswith("# Benchmarks\n\nbefore\n")
    assert (
        "<!-- results-langgraph:begin -->" in written
        and "<!-- results-langgraph:end -->" in written
    )


def test_a_baseline_checkout_is_measured_in_the_same_run(tmp_path: Path) -> None:
    """--baseline-src: a third system, FlowledgerSaver imported from another src folder (here
    this checkout's own), alternated with the others; --workloads loop runs the loop alone."""
    src = BENCH.parents[1] / "src"
    proc = subprocess.run(
        [
            sys.executable,
            str(BENCH),
            "--quick",
            "--quiet",
            "--backends",
            "sqlite",
            "--workloads",
            "loop",
            "--baseline-src",
            str(src),
            "--dir",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr
    assert f"Baseline: FlowledgerSaver from `{src}`" in proc.stdout
    assert "| baseline | baseline / SqliteSaver |" in proc.stdout
    rows = [line for line in proc.stdout.splitlines() if line.startswith(f"| {ROWS[0]} ")]
    assert len(rows) == 3, proc.stdout  # µs, CPU and bytes per step; no chat rows
    assert not any(line.startswith(f"| {ROWS[1]} ") for line in proc.stdout.splitlines())
    for row in rows:
        cells = [cell.strip() for cell in row.strip("| ").split("|")]
        assert len(cells) == 7, row
        for number in cells[2:]:
            float(number.split(" ")[0])
    assert "sqlite/baseline: synchronous=FULL journal_mode=wal" in proc.stdout
