"""The cost of flowledger's MCP source session over the bare SDK, per tool call.

    .venv/bin/python bench/tool_calls.py [--calls 1000] [--warmup 50] [--json]

Two ``mcp-server-time`` processes over stdio (the dev extra installs it): one driven
through `flowledger.deploy.SourceSession.call_tool`, one through the SDK's own
``ClientSession.call_tool`` on an ``mcp.Client`` (response cache off, as the source
session has it). Both call ``get_current_time`` with the same arguments; the two are
alternated call by call, and the order within each pair flips every pair, so machine
noise lands on both alike. Reported: median, p99 and mean latency per call, and the
overhead (source session minus SDK) at the median, at the p99, and as the median of the
differences of adjacent calls (the steadiest of the three on a busy machine).

What the overhead contains: the tool-name check against the session's listing, the call
timeout's cancel scope, the SDK's ``Client.call_tool`` wrapper (input-required driver)
and converting content blocks to JSON dicts. The target is at most 2 ms at the median.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client

from flowledger.deploy import SourceSession, StdioSource

TOOL = "get_current_time"
ARGUMENTS = {"timezone": "Europe/Paris"}
TARGET_MEDIAN_MS = 2.0


def server_command() -> list[str]:
    script = Path(sys.executable).parent / "mcp-server-time"
    if not script.exists():
        raise SystemExit("mcp-server-time is not installed: pip install -e '.[dev]'")
    return [str(script), "--local-timezone", "Etc/UTC"]


def percentile(samples: list[float], fraction: float) -> float:
    ordered = sorted(samples)
    index = min(len(ordered) - 1, max(0, round(fraction * (len(ordered) - 1))))
    return ordered[index]


def summary(samples: list[float]) -> dict[str, float]:
    return {
        "median_ms": statistics.median(samples),
        "p99_ms": percentile(samples, 0.99),
        "mean_ms": statistics.fmean(samples),
        "min_ms": min(samples),
    }


async def measure(calls: int, warmup: int) -> dict[str, Any]:
    command = server_command()
    errlog = open(os.devnull, "w")  # noqa: SIM115, ASYNC230 - the servers' stderr, for the run
    source = StdioSource(command[0], command[1:])
    params = StdioServerParameters(command=command[0], args=command[1:])
    sdk_ms: list[float] = []
    source_ms: list[float] = []
    async with (
        SourceSession(source, errlog=errlog) as session,
        Client(stdio_client(params, errlog=errlog), cache=None) as client,
    ):
        await client.session.list_tools()  # what the source session does on its first call

        async def via_sdk() -> float:
            started = time.perf_counter_ns()
            result = await client.session.call_tool(TOOL, ARGUMENTS)
            elapsed = (time.perf_counter_ns() - started) / 1e6
            assert not result.is_error
            return elapsed

        async def via_source() -> float:
            started = time.perf_counter_ns()
            result = await session.call_tool(TOOL, ARGUMENTS)
            elapsed = (time.perf_counter_ns() - started) / 1e6
            assert not result.is_error
            return elapsed

        for _ in range(warmup):
            await via_sdk()
            await via_source()
        for i in range(calls):
            if i % 2 == 0:
                sdk_ms.append(await via_sdk())
                source_ms.append(await via_source())
            else:
                source_ms.append(await via_source())
                sdk_ms.append(await via_sdk())
        server = session.server_info
    errlog.close()
    sdk, ours = summary(sdk_ms), summary(source_ms)
    return {
        "calls": calls,
        "server": f"{server.name} {server.version} (stdio, protocol {server.protocol_version})",
        "sdk": sdk,
        "source_session": ours,
        "overhead_median_ms": ours["median_ms"] - sdk["median_ms"],
        "overhead_p99_ms": ours["p99_ms"] - sdk["p99_ms"],
        # adjacent calls share the machine's state: the median of their differences is
        # the steadiest estimate on a busy machine
        "overhead_paired_median_ms": statistics.median(
            mine - theirs for mine, theirs in zip(source_ms, sdk_ms, strict=True)
        ),
        "target_median_ms": TARGET_MEDIAN_MS,
        "python": platform.python_version(),
        "machine": f"{platform.machine()}, {os.cpu_count()} CPUs",
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=1000, help="measured calls per client")
    parser.add_argument("--warmup", type=int, default=50, help="unmeasured calls first")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    options = parser.parse_args()
    result = asyncio.run(measure(options.calls, options.warmup))
    if options.json:
        print(json.dumps(result, indent=2))
        return
    print(f"{result['calls']} calls each of {TOOL} on {result['server']}")
    print(f"python {result['python']}, {result['machine']}\n")
    print("| client | median ms | p99 ms | mean ms | min ms |")
    print("| --- | ---: | ---: | ---: | ---: |")
    for label, key in (
        ("SDK ClientSession.call_tool", "sdk"),
        ("SourceSession.call_tool", "source_session"),
    ):
        row = result[key]
        print(
            f"| {label} | {row['median_ms']:.3f} | {row['p99_ms']:.3f} | "
            f"{row['mean_ms']:.3f} | {row['min_ms']:.3f} |"
        )
    print(
        f"\noverhead: {result['overhead_median_ms']:.3f} ms at the median, "
        f"{result['overhead_p99_ms']:.3f} ms at the p99, "
        f"{result['overhead_paired_median_ms']:.3f} ms median of paired differences "
        f"(target: at most {TARGET_MEDIAN_MS} ms at the median)"
    )


if __name__ == "__main__":
    main()
