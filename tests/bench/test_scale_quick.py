"""The scale benchmark (workload h) runs end to end in quick mode: it generates its tiny
databases, reads generated runs back through the tools, and prints every operation."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "bench" / "scale.py"
OPERATIONS = (
    "start, cold (open + activate + start)",
    "start, open session",
    "run list first page (run ID order)",
    "run list last page (run ID order)",
    "run list first page (newest)",
    "run list last page (newest)",
    "history first page (long run)",
    "history last page (long run)",
    "latest checkpoint (long run)",
    "workflow_run_get (long run)",
    "resume to completion",
)


def _run(cache: Path) -> str:
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), "--quick", "--repeat", "3", "--cache", str(cache)],
        capture_output=True,
        text=True,
        timeout=600,  # only catches a hang
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_quick_run_generates_then_reuses_its_databases(tmp_path: Path) -> None:
    out = _run(tmp_path)
    assert "SQLite: generating" in out
    assert "300 runs, 3000 checkpoints generated" in out
    rows = [line for line in out.splitlines() if line.startswith("| ")]
    for operation in OPERATIONS:
        assert any(row.startswith(f"| {operation} |") for row in rows), out
    again = _run(tmp_path)  # cached: measured without generating, after a read-back check
    assert "generating" not in again
    assert "(cached)" in again
