"""bench/step_cpu.py (issue #33 item 3's before/after harness) runs end to end on a tiny N,
on a fresh and on a settled directory, and prints one line each."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "bench" / "step_cpu.py"


@pytest.mark.parametrize("extra", [[], ["--settled"]])
def test_quick_run_prints_cpu_per_step(extra: list[str]) -> None:
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), "--n", "5", "--reps", "2", *extra],
        capture_output=True,
        text=True,
        timeout=300,  # only catches a hang
    )
    assert proc.returncode == 0, proc.stderr
    where = "settled" if extra else "fresh"
    pattern = (
        rf"a\) loop N=5 synchronous=OFF {where} directory: [0-9.]+ CPU us/step \([0-9.]+-[0-9.]+\)"
    )
    assert re.fullmatch(pattern, proc.stdout.strip()), proc.stdout
