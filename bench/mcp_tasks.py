"""``tasks/get`` latency (the MCP tasks extension, `flowledger.mcp.tasks`) with few and
with many runs in the session.

Two SQLite files, each served by `flowledger.mcp.HttpMcpServer` in this process on a
loopback port and read by the SDK client over streamable HTTP (2026-07-28, declaring
``io.modelcontextprotocol/tasks``): one holding --few runs, one holding --runs runs. The
runs are written by a fast generator (run records created through `RunRegistry.create`
of the served session, completed, failed and cancelled in turn, of the ``loop``
definition of bench/dashboard_pages.py), not executed. ``tasks/get`` is sent --requests
times to a ``--read-only`` server for task IDs drawn at random from the session's runs,
after ten warm-up requests; the time is the client's wall time around the request (HTTP,
the server's two registry reads of a completed task, the JSON), median, p99 and min-max.

Why read-only: the generated records lack the activity publication an executed run
leaves, so a server owning the session reconciles all of them in the background after it
starts (seconds of SQLite writes for 10,000 runs): that one-time repair, not
``tasks/get``, would be measured. A read-only server reads the same records the same way.

    python bench/mcp_tasks.py [--runs 10000] [--few 10] [--requests 500]
    python bench/mcp_tasks.py --quick     # 2000 runs, 200 requests
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Literal

import mcp_types as types
from mcp import Client
from mcp.client.extension import advertise
from pydantic import TypeAdapter

sys.path.insert(0, str(Path(__file__).resolve().parent))
from dashboard_pages import catalog, fill
from flowledger.host import open_session
from flowledger.mcp import HttpMcpServer
from flowledger.mcp.tasks import TASKS_EXTENSION

_ANY = TypeAdapter(dict[str, Any])


class TasksGet(types.Request[types.GetTaskRequestParams, Literal["tasks/get"]]):
    method: Literal["tasks/get"] = "tasks/get"
    params: types.GetTaskRequestParams
    name_param = "taskId"


async def build(db: Path, runs: int) -> list[str]:
    """Fill ``db`` with ``runs`` runs; their task IDs."""
    async with open_session(f"sqlite:///{db}?synchronous=OFF", catalog(), activate=False) as s:
        # `fill` reads only the session and its ID of a served session
        await fill(SimpleNamespace(session=s, session_id=s.session_id), runs)  # type: ignore[arg-type]
        page = await s.registry.list(s.session_id)
        ids = [run.id for run in page.runs]
        after = page.next
        while after:
            page = await s.registry.list(s.session_id, after=after)
            ids += [run.id for run in page.runs]
            after = page.next
    return [f"run-{run_id}" for run_id in ids]


async def measure(db: Path, task_ids: list[str], requests: int) -> list[float]:
    server = HttpMcpServer(
        f"sqlite:///{db}",
        app="dashboard_pages:catalog",
        host="127.0.0.1",
        port=0,
        tokens={},
        read_only=True,  # see the module doc
    )
    ready: asyncio.Future[str] = asyncio.get_running_loop().create_future()
    task = asyncio.create_task(server.run(ready=ready.set_result))
    url = await ready
    times: list[float] = []
    rng = random.Random(7)
    try:
        async with Client(url, extensions=[advertise(TASKS_EXTENSION)]) as client:
            for n in range(requests + 10):
                task_id = rng.choice(task_ids)
                request = TasksGet(params=types.GetTaskRequestParams(task_id=task_id))
                began = time.perf_counter()
                answer = await client.session.send_request(request, _ANY)
                elapsed = time.perf_counter() - began
                assert answer["taskId"] == task_id, answer
                if n >= 10:
                    times.append(elapsed * 1000)
    finally:
        server.stop()
        await task
    return times


def summary(label: str, times: list[float]) -> str:
    ordered = sorted(times)
    p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
    return (
        f"{label:>12}: median {statistics.median(ordered):.2f} ms, p99 {p99:.2f} ms, "
        f"min-max {ordered[0]:.2f}-{ordered[-1]:.2f} ms ({len(ordered)} requests)"
    )


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10_000)
    parser.add_argument("--few", type=int, default=10)
    parser.add_argument("--requests", type=int, default=500)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    if args.quick:
        args.runs, args.requests = 2000, 200
    with tempfile.TemporaryDirectory() as folder:
        for label, runs in ((f"{args.few} runs", args.few), (f"{args.runs} runs", args.runs)):
            db = Path(folder) / f"{runs}.db"
            ids = await build(db, runs)
            print(summary(label, await measure(db, ids, args.requests)), flush=True)


if __name__ == "__main__":
    asyncio.run(main())
