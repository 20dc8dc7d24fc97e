"""The cost of a call rate limit per tool call (issue #28, item 4).

Times `RateLimits.acquire` (what every tool call of a deployed run to a registered
source does before the call) on a fresh SQLite file and a fresh PostgreSQL schema
(``FLOWLEDGER_TEST_POSTGRES_URL``), interleaved round by round:

* *none*: the source has no limit (one KV read);
* *limit*: a limit the calls never reach (read the limit and the window, write the
  window by compare-and-swap);
* *contended*: ``--tasks`` tasks over two store connections reserve at once (each
  reservation may lose a compare-and-swap and read again); per reservation.

Medians and min-max in milliseconds, with the load average (the machine is shared).

    .venv/bin/python bench/rate_limits.py --calls 200 --tasks 8 --backends sqlite,postgres
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests._postgres import postgres_url

from flowledger.deploy.registry.rates import MAX_CALLS, RateLimits
from flowledger.deploy.registry.store import SourceRegistry
from flowledger.storage import open_store


def source(name: str) -> dict[str, object]:
    return {
        "format": "flowledger.source/v1",
        "name": name,
        "stdio": {"command": sys.executable, "args": ["-V"]},
    }


def summary(values: list[float]) -> str:
    return f"{statistics.median(values):.2f} ({min(values):.2f}-{max(values):.2f})"


async def measure(url: str, calls: int, tasks: int) -> dict[str, list[float]]:
    times: dict[str, list[float]] = {"none": [], "limit": [], "contended": []}
    async with open_store(url) as first, open_store(url) as second:
        registry = SourceRegistry.over(first)
        for name in ("free", "paid"):
            await registry.add(source(name))
        limits = [RateLimits(SourceRegistry.over(s)) for s in (first, second)]
        # never reached: more than MAX_CALLS reservations cannot fit a day's window,
        # so each round uses its own day-long window on a fresh limit
        await limits[0].set("paid", MAX_CALLS, "1d")

        async def timed(gate: RateLimits, name: str) -> float:
            began = time.perf_counter()
            await gate.acquire(name)
            return (time.perf_counter() - began) * 1000

        for _ in range(calls // tasks):
            times["none"].append(await timed(limits[0], "free"))
            times["limit"].append(await timed(limits[0], "paid"))
            batch = await asyncio.gather(*(timed(limits[i % 2], "paid") for i in range(tasks)))
            times["contended"].extend(batch)
            if await limits[0].in_window("paid") > MAX_CALLS - tasks - 2:
                await limits[0].clear("paid")  # a fresh window: drop the old one's record
                await first.kv.delete("deploy/rates/windows/paid")
                await limits[0].set("paid", MAX_CALLS, "1d")
    return times


@contextlib.contextmanager
def backend_url(name: str) -> Iterator[str]:
    if name == "sqlite":
        with tempfile.TemporaryDirectory() as folder:
            yield f"sqlite:///{folder}/rates.db"
    else:
        with postgres_url() as url:
            yield url


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--tasks", type=int, default=8)
    parser.add_argument("--backends", default="sqlite,postgres")
    args = parser.parse_args()
    print(f"load average before: {os.getloadavg()[0]:.1f}")
    print("| backend | none | limit | contended |")
    print("| --- | --- | --- | --- |")
    for name in args.backends.split(","):
        with backend_url(name) as url:
            times = asyncio.run(measure(url, args.calls, args.tasks))
        row = " | ".join(summary(times[k]) for k in ("none", "limit", "contended"))
        print(f"| {name} | {row} |")
    print(f"load average after: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
