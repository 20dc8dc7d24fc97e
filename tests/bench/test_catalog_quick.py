"""The capability catalog benchmark runs end to end on a small registry (and one refresh
of the three real sources) and prints every row."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from ..deploy.servers import node_command, time_command

ROOT = Path(__file__).resolve().parents[2]
ROWS = (
    "| capability_list {query} (whole tool call) |",
    "| ranked index alone (RankedIndex.search) |",
    "| capability_list {limit: 20} (no query) |",
    "| capability_list {refresh: true}, 3 sources in parallel |",
    "| probe of clock alone |",
    "| probe of everything alone |",
    "| probe of paging alone |",
)


def test_a_small_run_prints_every_row() -> None:
    time_command(), node_command()  # the refresh's real servers (skips, or fails in CI)
    done = subprocess.run(
        [
            sys.executable,
            str(ROOT / "bench" / "catalog.py"),
            "--sources",
            "3",
            "--tools",
            "10",
            "--queries",
            "20",
            "--refreshes",
            "1",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,  # only catches a hang
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("30 tools from 3 sources, 20 queries"), done.stdout
    for row in ROWS:
        assert any(line.startswith(row) for line in done.stdout.splitlines()), (row, done.stdout)
