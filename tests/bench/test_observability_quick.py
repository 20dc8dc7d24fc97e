"""bench/observability.py (issue #30's overhead measurement, traces and metrics in one
script) runs end to end at a tiny size: both sides measured, the traced child recorded
every span (two per step and the segment), and both ratios printed."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "bench" / "observability.py"


def test_quick_run_measures_traces_and_metrics_against_off() -> None:
    quick = ["--instrument", "both", "--workloads", "a", "--n", "20", "--rounds", "1"]
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), *quick],
        capture_output=True,
        text=True,
        timeout=600,  # only catches a hang
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    # steps 0..20 (the loop's 20 ticks and its stop): 21 steps, 2 spans each, one segment
    spread = r"\d+ \(\d+-\d+\)"
    row = rf"\| a\) loop, N=20 \| {spread} \| {spread} \| \d\.\d{{3}} \| \d\.\d{{3}} \| 43 \|"
    assert re.search(row, proc.stdout), proc.stdout
