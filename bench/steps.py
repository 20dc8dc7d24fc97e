"""Durable step cost of the flow engine on SQLite (WAL, synchronous=FULL).

Two shapes, state ``{count: int, payload: 1 KiB str}``:

* loop  - one vertex routing to itself N times;
* chain - N distinct vertices in a line.

Prints microseconds per durable step (median of --repeat runs) and database
growth per step (file size after the run, minus an empty database's).

    python bench/steps.py [--n 1000] [--repeat 3] [--sync FULL]
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import os
import statistics
import tempfile
import time
from dataclasses import dataclass

from flowledger import flow
from flowledger.storage import open_store

PAYLOAD = "x" * 1024


@dataclass
class Counter:
    count: int = 0
    payload: str = PAYLOAD


async def bump(state: Counter) -> dict[str, int]:
    return {"count": state.count + 1}


def loop_graph(n: int) -> flow.Graph[Counter]:
    graph = flow.Graph("loop", state=Counter)
    graph.add_vertex("tick", bump)
    graph.add_vertex("stop", bump)
    graph.add_route(
        "tick", targets=["tick", "stop"], pick=lambda s: "tick" if s.count < n else "stop"
    )
    return graph


def chain_graph(n: int) -> flow.Graph[Counter]:
    graph = flow.Graph("chain", state=Counter)
    names = [f"v{i:05d}" for i in range(n)]
    for name in names:
        graph.add_vertex(name, bump)
    for a, b in itertools.pairwise(names):
        graph.add_edge(a, b)
    return graph


async def measure(shape: str, n: int, sync: str) -> tuple[float, float, int]:
    graph = loop_graph(n) if shape == "loop" else chain_graph(n)
    entry, finish = ("tick", "stop") if shape == "loop" else ("v00000", f"v{n - 1:05d}")
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "bench.db")
        url = f"sqlite:///{path}?synchronous={sync}"
        async with open_store(url) as store:
            pass
        empty = _size(path)
        async with open_store(url) as store:
            runner = graph.compile(
                entry=entry, finish=finish, store=flow.LedgerCheckpointStore(store.ledger)
            )
            started = time.perf_counter()
            result = await runner.run(Counter(), max_steps=n + 10)
            elapsed = time.perf_counter() - started
            assert result.run.status is flow.RunStatus.COMPLETED, result
            steps = result.run.step + 1
        size = _size(path) + _size(path + "-wal")
        return elapsed / steps * 1e6, (size - empty) / steps, steps


def _size(path: str) -> int:
    return os.path.getsize(path) if os.path.exists(path) else 0


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--sync", default="FULL")
    args = parser.parse_args()
    for shape in ("loop", "chain"):
        times, sizes = [], []
        for _ in range(args.repeat):
            micros, size, steps = await measure(shape, args.n, args.sync)
            times.append(micros)
            sizes.append(size)
        spread = f"min {min(times):.1f}, max {max(times):.1f}"
        print(
            f"{shape:5s} N={args.n} steps={steps} synchronous={args.sync}: "
            f"{statistics.median(times):7.1f} us/step ({spread}), "
            f"{statistics.median(sizes):7.0f} bytes/step"
        )


if __name__ == "__main__":
    asyncio.run(main())
