"""The traces overhead benchmark runs end to end at a tiny size: both modes measured, the
traced runs recorded every span (two per step and the segment), and the ratios printed."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "bench" / "tracing_overhead.py"


def test_quick_run_measures_both_modes() -> None:
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), "--n", "20", "--repeat", "1"],
        capture_output=True,
        text=True,
        timeout=600,  # only catches a hang
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    # steps 0..20 (the loop's 20 ticks and its stop): 21 steps, 2 spans each, one segment
    assert "a) loop, N=20, 1 runs per mode; 43 spans per traced run" in out
    assert re.search(r"^off +\d+ \(\d+-\d+\) +\d+ \(\d+-\d+\)$", out, re.M)
    assert re.search(r"^traces +\d+ \(\d+-\d+\) +\d+ \(\d+-\d+\)$", out, re.M)
    assert re.search(r"CPU ratio traces/off \(medians\): \d+\.\d{3}", out)
