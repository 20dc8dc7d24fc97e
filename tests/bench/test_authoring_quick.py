"""The authoring benchmark runs end to end at its smallest and prints its two tables
(both ways of building the clock workflow end with the same artifact: the bench asserts
it)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "bench" / "authoring.py"


def test_tiny_run_prints_both_tables() -> None:
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), "--reps", "1", "--nodes", "6", "--patches", "10"],
        capture_output=True,
        text=True,
        timeout=600,  # only catches a hang
    )
    assert proc.returncode == 0, proc.stderr
    rows = {
        cells[0]: cells[1:]
        for line in proc.stdout.splitlines()
        if line.startswith("| ") and not line.startswith("| ---")
        for cells in [[cell.strip() for cell in line.strip("|").split("|")]]
    }
    assert rows["whole document"][0] == "4" and rows["drafts"][0] == "9", proc.stdout
    for label in ("whole document", "drafts"):
        assert float(rows[label][1].split()[0]) > 0
    for backend in ("memory", "SQLite"):
        assert all(float(value) > 0 for value in rows[backend])
