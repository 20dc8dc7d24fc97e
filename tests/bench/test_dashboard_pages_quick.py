"""The dashboard page benchmark runs end to end on tiny databases and prints every page."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "bench" / "dashboard_pages.py"
PAGES = (
    "runs page",
    "runs page, status filter",
    "runs page, definition + status",
    "runs page, run ID search",
    "run page (history first page)",
    "run page, history last page",
)


def test_tiny_run_prints_every_page() -> None:
    proc = subprocess.run(
        [
            sys.executable,
            str(SCRIPT),
            "--runs",
            "120",
            "--revisions",
            "160",
            "--small-runs",
            "80",
            "--small-revisions",
            "120",
            "--requests",
            "3",
        ],
        capture_output=True,
        text=True,
        timeout=600,  # only catches a hang
    )
    assert proc.returncode == 0, proc.stderr
    rows = [line for line in proc.stdout.splitlines() if line.startswith("| ")]
    for page in PAGES:
        assert any(row.startswith(f"| {page} |") for row in rows), proc.stdout
