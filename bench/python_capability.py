"""What calling a Python function as a capability costs over calling it directly.

    .venv/bin/python bench/python_capability.py [--calls 2000] [--warmup 100] [--json]

A module written to a temporary directory (so it is imported like any registered
module) defines ``add_up(a: int, b: int) -> int`` and an async twin; the built-in
``template`` transform is the third function. Each is called ``--calls`` times directly
(``add_up(**arguments)``, ``await add_up_async(**arguments)``, ``std.template(...)``)
and through `PythonSession.call_tool` (what a tool node calls through the run's pool),
alternated call by call with the order flipped every pair, so machine noise lands on
both alike. Reported per function: median and p99 of each, the overhead at the median
and at the p99, and the median of the paired differences (the steadiest on a busy
machine).

What the overhead contains: the tool lookup, validating the arguments with the
function's pydantic model, the hop of a sync function to a thread of the Python sources'
pool and back (or the ``wait_for`` of an async one), validating and serialising
the result against the return type, and building the `ToolResult` (structured content
plus its JSON text). A tool node adds its own work on top (arguments checked against
the input schema, the trace entry): see ``bench/deploy_nodes.py``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import statistics
import sys
import tempfile
import textwrap
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from flowledger.deploy.sources import std
from flowledger.deploy.sources.python_session import PythonSession
from flowledger.deploy.sources.python_spec import PythonSource

MODULE = '''
def add_up(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


async def add_up_async(a: int, b: int) -> int:
    """Add two numbers, asynchronously."""
    return a + b
'''
ADD = {"a": 20, "b": 22}
TEMPLATE = {"text": "{{who}} owes {{n}}", "values": {"who": "Ada", "n": 3}}


def percentile(samples: list[float], fraction: float) -> float:
    ordered = sorted(samples)
    index = min(len(ordered) - 1, max(0, round(fraction * (len(ordered) - 1))))
    return ordered[index]


def summary(samples: list[float]) -> dict[str, float]:
    return {
        "median_us": statistics.median(samples),
        "p99_us": percentile(samples, 0.99),
        "mean_us": statistics.fmean(samples),
    }


async def _pair(
    direct: Callable[[], Awaitable[Any]],
    capability: Callable[[], Awaitable[Any]],
    calls: int,
    warmup: int,
) -> dict[str, Any]:
    async def timed(call: Callable[[], Awaitable[Any]]) -> float:
        started = time.perf_counter_ns()
        await call()
        return (time.perf_counter_ns() - started) / 1e3

    for _ in range(warmup):
        await timed(direct)
        await timed(capability)
    direct_us: list[float] = []
    capability_us: list[float] = []
    for i in range(calls):
        if i % 2 == 0:
            direct_us.append(await timed(direct))
            capability_us.append(await timed(capability))
        else:
            capability_us.append(await timed(capability))
            direct_us.append(await timed(direct))
    plain, ours = summary(direct_us), summary(capability_us)
    return {
        "direct": plain,
        "capability": ours,
        "overhead_median_us": ours["median_us"] - plain["median_us"],
        "overhead_p99_us": ours["p99_us"] - plain["p99_us"],
        "overhead_paired_median_us": statistics.median(
            mine - theirs for mine, theirs in zip(capability_us, direct_us, strict=True)
        ),
    }


async def measure(calls: int, warmup: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as folder:
        name = f"bench_calc_{uuid.uuid4().hex[:8]}"
        (Path(folder) / f"{name}.py").write_text(textwrap.dedent(MODULE))
        sys.path.insert(0, folder)
        try:
            source = PythonSource(name, read_only=("add_up", "add_up_async"))
            async with (
                PythonSession(source) as session,
                PythonSession(PythonSource.std()) as library,
            ):
                module = sys.modules[name]

                async def add_direct() -> int:
                    result: int = module.add_up(**ADD)
                    return result

                async def add_async_direct() -> int:
                    result: int = await module.add_up_async(**ADD)
                    return result

                async def template_direct() -> str:
                    return std.template(**TEMPLATE)  # type: ignore[arg-type]

                async def checked(
                    on: PythonSession, tool: str, arguments: dict[str, Any], expected: Any
                ) -> None:
                    result = await on.call_tool(tool, arguments)
                    assert result.structured_content == {"result": expected}, result

                results = {
                    "add_up (sync)": await _pair(
                        add_direct, lambda: checked(session, "add_up", ADD, 42), calls, warmup
                    ),
                    "add_up_async (async)": await _pair(
                        add_async_direct,
                        lambda: checked(session, "add_up_async", ADD, 42),
                        calls,
                        warmup,
                    ),
                    "std template (sync)": await _pair(
                        template_direct,
                        lambda: checked(library, "template", TEMPLATE, "Ada owes 3"),
                        calls,
                        warmup,
                    ),
                }
        finally:
            sys.path.remove(folder)
            sys.modules.pop(name, None)
    return {
        "calls": calls,
        "functions": results,
        "python": platform.python_version(),
        "machine": f"{platform.machine()}, {os.cpu_count()} CPUs",
        "load": os.getloadavg()[0],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=2000, help="measured calls each way")
    parser.add_argument("--warmup", type=int, default=100, help="unmeasured calls first")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    options = parser.parse_args()
    result = asyncio.run(measure(options.calls, options.warmup))
    if options.json:
        print(json.dumps(result, indent=2))
        return
    print(
        f"{result['calls']} calls each way, python {result['python']}, {result['machine']}, "
        f"load {result['load']:.1f}\n"
    )
    print(
        "| function | direct median / p99 µs | capability median / p99 µs | "
        "overhead at the median / p99 µs | paired median µs |"
    )
    print("| --- | ---: | ---: | ---: | ---: |")
    for label, row in result["functions"].items():
        print(
            f"| {label} | {row['direct']['median_us']:.1f} / {row['direct']['p99_us']:.1f} | "
            f"{row['capability']['median_us']:.1f} / {row['capability']['p99_us']:.1f} | "
            f"{row['overhead_median_us']:.1f} / {row['overhead_p99_us']:.1f} | "
            f"{row['overhead_paired_median_us']:.1f} |"
        )


if __name__ == "__main__":
    main()
