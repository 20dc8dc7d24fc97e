"""The timers benchmark runs end to end at its smallest size and prints a row per N."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SMALL = ("--parked", "0", "20", "--probes", "2", "--reps", "1", "--idle", "0.2", "--sleep", "0.2")


def test_a_small_run_prints_a_row_per_size() -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "timers.py"), *SMALL],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    rows = [line for line in done.stdout.splitlines() if line.startswith("| ") and "ms" in line]
    assert [row.split("|")[1].strip() for row in rows] == ["0", "20"]
    assert all(float(row.split("|")[6]) > 0 for row in rows)  # the loop read the index head
