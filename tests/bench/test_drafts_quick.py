"""The draft_patch benchmark runs end to end on a small draft and prints its table."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "bench" / "drafts.py"


def test_tiny_run_prints_the_table() -> None:
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), "--nodes", "6", "--patches", "10"],
        capture_output=True,
        text=True,
        timeout=600,  # only catches a hang
    )
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0] == "draft_patch on a 6-node draft, 10 patches (ms per call)"
    rows = [line for line in lines if line.startswith("| memory") or line.startswith("| SQLite")]
    assert len(rows) == 2
    for row in rows:
        cells = [cell.strip() for cell in row.strip("|").split("|")]
        assert all(float(value) > 0 for value in cells[1:])
