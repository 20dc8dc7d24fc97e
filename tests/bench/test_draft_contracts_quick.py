"""The draft-contracts benchmark runs end to end on a small draft and prints its table
(set steps and tool steps, each call's draft valid and its capabilities recorded)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "bench" / "draft_contracts.py"


def test_tiny_run_prints_the_table() -> None:
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), "--nodes", "4", "--patches", "5"],
        capture_output=True,
        text=True,
        timeout=600,  # only catches a hang
    )
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].startswith("draft_patch on a 4-node draft, 5 patches (ms per call)")
    rows = [line.strip("|").split("|") for line in lines if line.startswith("| ")][2:]
    assert [(r[0].strip(), r[1].strip()) for r in rows] == [
        ("memory", "set"),
        ("memory", "tool"),
        ("SQLite", "set"),
        ("SQLite", "tool"),
    ]
    for row in rows:
        assert all(float(value) > 0 for value in row[2:])
