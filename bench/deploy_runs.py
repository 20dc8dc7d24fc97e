"""What a deployed run costs before it does any work, and what revalidation costs.

    python bench/deploy_runs.py [--runs 20] [--quick] [--db-dir DIR] [--json FILE]

Run from the repository root with the project's environment (``mcp-server-time`` and
server-everything in ``tests/deploy/npm``, as for the deploy tests). Two deployments of
one artifact (an interrupt first, then one tool call), one per kind of source:

* **stdio**: ``mcp-server-time`` (``get_current_time``);
* **http**: server-everything over streamable HTTP on loopback (``echo``).

For each, ``--runs`` times (``--quick``: 3), through `DeployService` on an owned session
(SQLite file, ``synchronous=FULL``):

1. ``run_deployment`` (``wait_seconds=0``): the call (the environment check connects to
   the source and lists its tools, the pin is written, the run starts), and the time
   until the run's first durable checkpoint is visible (`workflow_run_get` polled every
   millisecond from the call's start);
2. ``inspect_run`` with and without ``revalidate``: their difference is the cost of the
   revalidation of the pinned environment (connect, list tools, compare fingerprints);
3. ``resume_run`` of the paused run (revalidation, then the tool call, to completion),
   and how many source checks (connections opened to list tools) the resume made; and
   where its time goes, from spans around the source session's methods (`SpanLog`):
   before the server is started (the run read, payload check, lock), the server's start
   and MCP ``initialize`` (one span: the request waits in the pipe until the server has
   started), ``tools/list`` (and how many), from the list to the call (fingerprints
   compared, the segment started, the tool intent recorded), ``tools/call``, and after
   the call: the server's stop, and the rest (the result recorded, the run completed).

Then a deployment binding both sources at once: revalidation (``inspect_run`` and the
resume path) counts the source connections it opens and whether they overlap in time,
checking that each source is connected and listed once, the sources in parallel (one
check of the pinned environment probes its sources with `asyncio.gather`). The resume
path checks once: the owner, under the run's lock, in the source pool the resumed
segment then calls through (before issue #33 it checked twice, and connected again for
the tool call).

Printed: median, p99, min and max per measure; ``--json FILE`` writes the samples
(seconds) too, for `bench/compare_trees.py`, which alternates this script over two
source trees. Nothing here is a test.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Awaitable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # tests.deploy.servers starts the real MCP servers

from tests.deploy.servers import everything_http_server, time_command  # noqa: E402

from flowledger.deploy import DeployService  # noqa: E402
from flowledger.deploy.deployments import validation  # noqa: E402
from flowledger.storage import open_store  # noqa: E402
from flowledger.workflows import Catalog  # noqa: E402
from flowledger.workflows.runtime.session import WorkflowSession  # noqa: E402

OBJECT = {"type": "object", "additionalProperties": False}
TOOLS = {
    "clock": ("get_current_time", {"timezone": "Etc/UTC"}),
    "echo": ("echo", {"message": "hi"}),
}


def artifact(name: str, dependencies: list[str]) -> dict[str, Any]:
    nodes: dict[str, Any] = {
        "ask": {
            "kind": "interrupt",
            "label": "Go ahead",
            "request": {"question": "Go?"},
            "resume_schema": {
                **OBJECT,
                "required": ["go"],
                "properties": {"go": {"type": "boolean"}},
            },
            "next": f"call_{dependencies[0]}",
        }
    }
    for index, dependency in enumerate(dependencies):
        tool, arguments = TOOLS[dependency]
        last = index + 1 == len(dependencies)
        nodes[f"call_{dependency}"] = {
            "kind": "tool",
            "dependency": dependency,
            "tool": tool,
            "arguments": arguments,
            "next": "done" if last else f"call_{dependencies[index + 1]}",
        }
    nodes["done"] = {"kind": "end", "outcome": "done"}
    return {
        "format": "flowledger.artifact/v1",
        "name": name,
        "version": "1",
        "input_schema": OBJECT,
        "output_schema": OBJECT,
        "dependencies": {dep: {"tools": [TOOLS[dep][0]]} for dep in dependencies},
        "start": "ask",
        "nodes": nodes,
    }


def deployment(name: str, bindings: dict[str, dict[str, Any]]) -> dict[str, Any]:
    return {
        "format": "flowledger.deployment/v1",
        "name": name,
        "artifact": {"name": name, "version": "1"},
        "sources": {
            dep: {**binding, "allow_tools": [TOOLS[dep][0]]} for dep, binding in bindings.items()
        },
        "drift": "block",
    }


@asynccontextmanager
async def deploy_service(url: str) -> AsyncIterator[DeployService]:
    async with open_store(url) as store:
        session = WorkflowSession.build(store, str(uuid.uuid4()), Catalog())
        await session.supervisor.activate()
        try:
            yield DeployService(session)
        finally:
            await session.supervisor.shutdown()


class ProbeLog:
    """Wraps the environment check's per-source probe: when each connection ran."""

    def __init__(self) -> None:
        self.spans: list[tuple[str, float, float]] = []
        self._observe = validation._observe

    def install(self) -> None:
        original = self._observe

        async def observe(prepared: Any, *args: Any) -> Any:
            started = time.perf_counter()
            try:
                return await original(prepared, *args)
            finally:
                self.spans.append((prepared.dependency, started, time.perf_counter()))

        validation._observe = observe

    def take(self) -> list[tuple[str, float, float]]:
        spans, self.spans = self.spans, []
        return spans


class SpanLog:
    """Spans around `SourceSession`'s ``open``, ``list_tools``, ``call_tool`` and
    ``close`` (MCP sources: stdio and HTTP alike)."""

    METHODS = ("open", "list_tools", "call_tool", "close")

    def __init__(self) -> None:
        self.spans: list[tuple[str, float, float]] = []

    def install(self) -> None:
        from flowledger.deploy.sources.session import SourceSession

        for name in self.METHODS:
            self._wrap(SourceSession, name)

    def _wrap(self, owner: Any, name: str) -> None:
        original = getattr(owner, name)

        async def spanned(*args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                return await original(*args, **kwargs)
            finally:
                self.spans.append((name, started, time.perf_counter()))

        setattr(owner, name, spanned)

    def take(self) -> list[tuple[str, float, float]]:
        spans, self.spans = self.spans, []
        return spans


RESUME_PARTS = (
    "resume: before the server start",
    "resume: server start + initialize",
    "resume: tools/list",
    "resume: tools/list (count)",
    "resume: list to call",
    "resume: tools/call",
    "resume: server stop",
    "resume: after the call, besides the stop",
)


def resume_parts(began: float, ended: float, spans: list[tuple[str, float, float]]) -> list[float]:
    """A resume's time by `RESUME_PARTS` (seconds; the count as is), from its spans."""
    opened = [s for s in spans if s[0] == "open"]
    lists = [s for s in spans if s[0] == "list_tools"]
    calls = [s for s in spans if s[0] == "call_tool"]
    if not (opened and calls):
        return []
    first_open, call = opened[0], calls[-1]
    listed_end = max((e for _, _, e in lists), default=first_open[2])
    stop = sum(e - b for name, b, e in spans if name == "close" and b >= call[2])
    return [
        first_open[1] - began,
        sum(e - b for _, b, e in opened),
        sum(e - b for _, b, e in lists),
        float(len(lists)),
        call[1] - listed_end,
        call[2] - call[1],
        stop,
        ended - call[2] - stop,
    ]


def overlapping(spans: list[tuple[str, float, float]]) -> bool:
    return len(spans) > 1 and max(s for _, s, _ in spans) < min(e for _, _, e in spans)


async def timed(work: Awaitable[Any]) -> tuple[float, Any]:
    """How long awaiting ``work`` (a coroutine not started yet) takes."""
    started = time.perf_counter()
    result = await work
    return time.perf_counter() - started, result


async def first_checkpoint(service: DeployService, name: str) -> tuple[float, float, str]:
    """The ``run_deployment`` call, and the time until its first checkpoint is visible."""
    started = time.perf_counter()
    result = await service.run_deployment(name, {}, wait_seconds=0)
    called = time.perf_counter() - started
    run_id = str(result["run_id"])
    while True:
        got = await service.tools.call("workflow_run_get", {"run_id": run_id})
        if got.get("checkpoint_revision") is not None:
            return called, time.perf_counter() - started, run_id
        await asyncio.sleep(0.001)


async def measure(
    service: DeployService, name: str, runs: int, log: ProbeLog, spans: SpanLog
) -> dict[str, list[float]]:
    found: dict[str, list[float]] = {
        "run_deployment call": [],
        "to first checkpoint": [],
        "inspect_run": [],
        "inspect_run --revalidate": [],
        "revalidation (difference)": [],
        "resume_run to completion": [],
        "source checks in resume_run (count)": [],
        **{part: [] for part in RESUME_PARTS},
    }
    for _ in range(runs):
        called, checkpoint, run_id = await first_checkpoint(service, name)
        done = await service._until_stopped(run_id, 60)
        assert done.status.value == "interrupted", done
        plain, _ = await timed(service.inspect_run(run_id, revalidate=False))
        checked, described = await timed(service.inspect_run(run_id))
        assert described["resume_readiness"]["status"] == "ready", described
        log.take()
        spans.take()
        began = time.perf_counter()
        result = await service.resume_run(run_id, {"go": True})
        ended = time.perf_counter()
        resumed = ended - began
        assert result["status"] == "completed", result
        for part, value in zip(
            RESUME_PARTS, resume_parts(began, ended, spans.take()), strict=False
        ):
            found[part].append(value)
        found["source checks in resume_run (count)"].append(len(log.take()))
        found["run_deployment call"].append(called)
        found["to first checkpoint"].append(checkpoint)
        found["inspect_run"].append(plain)
        found["inspect_run --revalidate"].append(checked)
        found["revalidation (difference)"].append(checked - plain)
        found["resume_run to completion"].append(resumed)
    return found


def ms(value: float) -> str:
    return f"{value * 1000:.1f}"


def report(source: str, found: dict[str, list[float]]) -> None:
    print(f"\n{source}: ms, median / p99 / min-max over {len(next(iter(found.values())))} runs")
    for what, values in found.items():
        ordered = sorted(values)
        p99 = ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))]
        if what.endswith("(count)"):
            low, high = ordered[0], ordered[-1]
            print(f"  {what:28} {statistics.median(ordered):g} / {p99:g} / {low:g}-{high:g}")
            continue
        print(
            f"  {what:28} {ms(statistics.median(ordered)):>8} / {ms(p99):>8} / "
            f"{ms(ordered[0])}-{ms(ordered[-1])}"
        )


async def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--runs", type=int, default=20)
    p.add_argument("--quick", action="store_true", help="3 runs")
    p.add_argument("--db-dir", help="where the SQLite files go (default: a temporary directory)")
    p.add_argument("--json", help="also write the samples (seconds) to this file")
    args = p.parse_args()
    samples: dict[str, dict[str, list[float]]] = {}
    runs = 3 if args.quick else args.runs
    log = ProbeLog()
    log.install()
    spans = SpanLog()
    spans.install()
    with tempfile.TemporaryDirectory(dir=args.db_dir) as folder:
        work = Path(folder)
        with everything_http_server(work / "everything.log") as (everything_url, _process):
            bindings: dict[str, dict[str, Any]] = {
                "clock": {
                    "stdio": {"command": time_command(), "args": ["--local-timezone", "Etc/UTC"]}
                },
                "echo": {"http": {"url": everything_url}},
            }
            async with deploy_service(f"sqlite:///{work / 'deploy.db'}") as service:
                sid = service.session.session_id
                for name, deps in (
                    ("stdio_dep", ["clock"]),
                    ("http_dep", ["echo"]),
                    ("both", ["clock", "echo"]),
                ):
                    await service.artifacts.save(sid, artifact(name, deps))
                    await service.deployment_save(deployment(name, {d: bindings[d] for d in deps}))
                for name, label in (
                    ("stdio_dep", "stdio (mcp-server-time)"),
                    ("http_dep", "http (server-everything)"),
                ):
                    await first_checkpoint(service, name)  # warm up: imports, the servers' caches
                    log.take()
                    samples[label] = await measure(service, name, runs, log, spans)
                    report(label, samples[label])
                    log.take()

                _, _, run_id = await first_checkpoint(service, "both")
                await service._until_stopped(run_id, 60)
                log.take()
                await service.inspect_run(run_id)
                inspected = log.take()
                await service.resume_run(run_id, {"go": True})
                resumed = log.take()
    print("\nrevalidation of a run pinned to both sources (connections opened, overlapping):")
    for what, spans in (("inspect_run --revalidate", inspected), ("resume_run", resumed)):
        spans.sort(key=lambda span: span[1])
        checks = [spans[i : i + 2] for i in range(0, len(spans), 2)]  # two sources a check
        for number, check in enumerate(checks, 1):
            names = sorted(dep for dep, _, _ in check)
            print(f"  {what:28} check {number}: {names}  overlapping={overlapping(check)}")

    if args.json:
        with open(args.json, "w") as out:  # noqa: ASYNC230 - once, after the measurements
            json.dump(samples, out)


if __name__ == "__main__":
    asyncio.run(main())
