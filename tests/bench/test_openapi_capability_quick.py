"""The OpenAPI capability benchmark runs end to end on a few calls (in this process),
each operation's result through the capability checked as the plain call's is."""

from __future__ import annotations

import importlib.util
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "bench" / "openapi_capability.py"


async def test_a_tiny_run_measures_each_operation_both_ways() -> None:
    spec = importlib.util.spec_from_file_location("bench_openapi_capability", SCRIPT)
    assert spec is not None and spec.loader is not None
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    result = await bench.measure(calls=4, warmup=1)
    assert list(result["operations"]) == ["listItems (GET, 5 items)", "addItem (POST, JSON body)"]
    for row in result["operations"].values():
        assert row["plain"]["median_us"] > 0 and row["capability"]["median_us"] > 0
