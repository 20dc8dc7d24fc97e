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


def test_quick_run_on_postgres_prints_cpu_per_step_and_drops_its_schema() -> None:
    psycopg = pytest.importorskip("psycopg")
    from .._postgres import require_postgres

    base = require_postgres()
    proc = subprocess.Popen(
        [sys.executable, str(SCRIPT), "--n", "5", "--reps", "2", "--postgres-url", base],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    out, err = proc.communicate(timeout=300)  # only catches a hang
    assert proc.returncode == 0, err
    pattern = r"a\) loop N=5 PostgreSQL: [0-9.]+ CPU us/step \([0-9.]+-[0-9.]+\)"
    assert re.fullmatch(pattern, out.strip()), out
    with psycopg.connect(base) as conn:
        left = conn.execute(
            "SELECT 1 FROM pg_namespace WHERE nspname = %s", (f"bench_step_cpu_{proc.pid}",)
        ).fetchall()
    assert left == []
