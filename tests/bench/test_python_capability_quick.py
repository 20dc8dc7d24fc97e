"""The Python capability benchmark runs end to end on a few calls (in this process) and
finds each function's result through the capability as the direct call does."""

from __future__ import annotations

import importlib.util
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "bench" / "python_capability.py"


async def test_a_tiny_run_measures_each_function_both_ways() -> None:
    spec = importlib.util.spec_from_file_location("bench_python_capability", SCRIPT)
    assert spec is not None and spec.loader is not None
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    result = await bench.measure(calls=6, warmup=1)
    assert list(result["functions"]) == [
        "add_up (sync)",
        "add_up_async (async)",
        "std template (sync)",
    ]
    for row in result["functions"].values():
        assert row["direct"]["median_us"] > 0 and row["capability"]["median_us"] > 0
