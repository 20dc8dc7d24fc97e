"""Server time of the dashboard's pages on an empty database and on a full one.

Builds three SQLite files and serves each with the dashboard (`flowledger.web.Dashboard`
over a `SessionPool`, in Starlette's TestClient, so no network and no browser):

* small - what the pages show and no more: --small-runs runs (a full runs page for
  each status filter) and one run of --small-revisions steps (more than the run page's
  history window, `RECENT_REVISIONS`, and three timeline pages), so every page does
  its full work; a database with fewer runs or a shorter run only renders less;
* full  - --runs runs and one run of --revisions steps.

and, for the record, a bare one (a single 1-step run): what near-empty pages cost.

The many runs are written by a fast generator: run records created through
`RunRegistry.create` of the dashboard's own session (completed, failed and cancelled in
turn, all of the loop definition, started one second apart), not executed: executing
10,000 runs would take minutes and make the same records. The long run is executed for
real: the loop definition (vertex ``tick`` routes to itself until ``count == goal``)
started with ``workflow_run_start``, goal --revisions.

Each page is requested --requests times after two warm-up requests; the time is the
client's wall time around ``client.get`` (the ASGI app in-process: routing, the tool
calls, SQLite reads, the template), median and p99, and the ratio full / empty.

    python bench/dashboard_pages.py [--runs 10000] [--revisions 10000] [--requests 200]
    python bench/dashboard_pages.py --quick     # 2000 runs, 2000 revisions, 50 requests
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from starlette.testclient import TestClient

from flowledger import flow
from flowledger.web import Dashboard, Gate, SessionPool
from flowledger.web.sessions import Served
from flowledger.web.views import TIMELINE_PAGE
from flowledger.workflows import Catalog, Metadata, TypedDefinition, VertexMetadata
from flowledger.workflows.records.inputs import canonical_json
from flowledger.workflows.records.run import Run, RunStatus

SCHEMA = {
    "type": "object",
    "additionalProperties": False,
    "required": ["count", "goal"],
    "properties": {
        "count": {"type": "integer", "minimum": 0},
        "goal": {"type": "integer", "minimum": 0},
    },
}
BASE = "http://127.0.0.1"
STATUSES = (RunStatus.COMPLETED, RunStatus.FAILED, RunStatus.CANCELLED)


@dataclass
class Loop:
    count: int = 0
    goal: int = 0


async def tick(state: Loop) -> dict[str, int]:
    return {"count": state.count + 1}


async def stop(state: Loop) -> dict[str, int]:
    return {}


def catalog() -> Catalog:
    graph: flow.Graph[Loop] = flow.Graph("loop", state=Loop)
    graph.add_vertex("tick", tick)
    graph.add_vertex("stop", stop)
    graph.add_route(
        "tick", targets=["tick", "stop"], pick=lambda s: "tick" if s.count < s.goal else "stop"
    )
    runner = graph.compile(entry="tick", finish="stop", version="1")
    metadata = Metadata(
        "loop",
        "v1",
        description="counts to a goal",
        input_schema=SCHEMA,
        vertices=[VertexMetadata("tick", "tick"), VertexMetadata("stop", "stop")],
    )
    out = Catalog()
    out.register(TypedDefinition(metadata, runner, max_steps=10_000_000))
    return out


async def fill(served: Served, runs: int) -> None:
    session = served.session
    ref = await session.inputs.put(served.session_id, canonical_json({"count": 0, "goal": 1}))
    start = datetime(2026, 1, 1, tzinfo=UTC)
    for n in range(runs):
        moment = start + timedelta(seconds=n)
        graph_run_id = str(uuid.uuid4())
        await session.registry.create(
            Run(
                session_id=served.session_id,
                tool_execution_id=str(uuid.uuid4()),
                definition_name="loop",
                definition_version="v1",
                id=str(uuid.uuid4()),
                graph_run_id=graph_run_id,
                input=ref,
                ledger_locator=f"flow/runs/{graph_run_id}",
                created_at=moment,
                updated_at=moment,
                status=STATUSES[n % len(STATUSES)],
            )
        )


def build(db: Path, runs: int, revisions: int) -> str:
    """The database at ``db``; returns the long run's ID."""
    pool = SessionPool(f"sqlite:///{db}?synchronous=OFF", catalog(), read_only=False)
    app = Dashboard(pool, Gate({}, loopback=True), read_only=False).asgi_app()
    with TestClient(app, base_url=BASE) as client:
        try:
            served = client.portal.call(pool.get, None)  # type: ignore[union-attr]
            client.portal.call(fill, served, runs)  # type: ignore[union-attr]
            started = client.portal.call(  # type: ignore[union-attr]
                served.tools.call,
                "workflow_run_start",
                {
                    "definition_name": "loop",
                    "definition_version": "v1",
                    "input": {"count": 0, "goal": revisions},
                },
            )
            run_id = str(started["run_id"])
            deadline = time.monotonic() + 3600
            while time.monotonic() < deadline:
                run = client.portal.call(  # type: ignore[union-attr]
                    served.tools.call, "workflow_run_get", {"run_id": run_id}
                )
                if run["run_status"] == "completed":
                    return run_id
                time.sleep(0.5)
            raise TimeoutError("the long run did not complete")
        finally:
            client.portal.call(pool.close)  # type: ignore[union-attr]


async def last_page(served: Served, run_id: str) -> str:
    """The run page whose timeline is the history's last page (its cursor is the entry
    before the last `TIMELINE_PAGE`), found by paging the history tool."""
    entries: list[dict[str, object]] = []
    arguments: dict[str, object] = {"run_id": run_id, "limit": 100, "after_revision": 0}
    while True:
        page = await served.tools.call("workflow_run_history", arguments)
        entries.extend(page["entries"])
        if "next_revision" not in page or not page["entries"]:
            break
        last = page["entries"][-1]
        arguments = {
            "run_id": run_id,
            "limit": 100,
            "after_revision": last["revision"],
            "after_event_id": last["event_id"],
        }
    if len(entries) <= TIMELINE_PAGE:
        return f"/runs/{run_id}"
    before = entries[-TIMELINE_PAGE - 1]
    return f"/runs/{run_id}?after={before['revision']}:{before['event_id']}"


def measure(db: Path, run_id: str, requests: int) -> dict[str, list[float]]:
    pool = SessionPool(f"sqlite:///{db}", catalog(), read_only=False)
    app = Dashboard(pool, Gate({}, loopback=True), read_only=False).asgi_app()
    times: dict[str, list[float]] = {}
    with TestClient(app, base_url=BASE) as client:
        try:
            pages = {
                "runs page": "/runs",
                "runs page, status filter": "/runs?status=failed",
                "runs page, definition + status": "/runs?definition=loop&status=completed",
                "runs page, run ID search": f"/runs?q={run_id[:6]}",
                "run page (history first page)": f"/runs/{run_id}",
                "time page (durations, Gantt)": f"/runs/{run_id}/time",
                "run page, history last page": client.portal.call(  # type: ignore[union-attr]
                    last_page,
                    client.portal.call(pool.get, None),
                    run_id,  # type: ignore[union-attr]
                ),
                "data page (latest revision)": f"/runs/{run_id}/data",
                "data page, revision 1": f"/runs/{run_id}/data?revision=1",
            }
            for name, path in pages.items():
                for _ in range(2):
                    assert client.get(path).status_code == 200, path
                samples = []
                for _ in range(requests):
                    begin = time.perf_counter()
                    response = client.get(path)
                    samples.append(time.perf_counter() - begin)
                    assert response.status_code == 200, path
                times[name] = samples
        finally:
            client.portal.call(pool.close)  # type: ignore[union-attr]
    return times


def p99(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=10_000)
    parser.add_argument("--revisions", type=int, default=10_000)
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--small-runs", type=int, default=90)
    parser.add_argument("--small-revisions", type=int, default=150)
    parser.add_argument("--quick", action="store_true", help="2000 runs/revisions, 50 requests")
    args = parser.parse_args()
    if args.quick:
        args.runs, args.revisions, args.requests = 2000, 2000, 50
    with tempfile.TemporaryDirectory() as tmp:
        bare_db, small_db, full_db = (
            Path(tmp, "bare.db"),
            Path(tmp, "small.db"),
            Path(tmp, "full.db"),
        )
        begin = time.perf_counter()
        bare_run = build(bare_db, 0, 1)
        small_run = build(small_db, args.small_runs, args.small_revisions)
        full_run = build(full_db, args.runs, args.revisions)
        print(
            f"built: small {args.small_runs} runs + a {args.small_revisions}-step run; full "
            f"{args.runs} runs + a {args.revisions}-step run; in "
            f"{time.perf_counter() - begin:.0f} s; {args.requests} requests a page"
        )
        bare = measure(bare_db, bare_run, args.requests)
        small = measure(small_db, small_run, args.requests)
        full = measure(full_db, full_run, args.requests)
    print()
    print("| page | small median | small p99 | full median | full p99 | ratio median | ratio p99 |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for name in small:
        e, f = small[name], full[name]
        em, fm = statistics.median(e), statistics.median(f)
        ep, fp = p99(e), p99(f)
        print(
            f"| {name} | {em * 1e3:.2f} ms | {ep * 1e3:.2f} ms | {fm * 1e3:.2f} ms | "
            f"{fp * 1e3:.2f} ms | {fm / em:.2f}x | {fp / ep:.2f}x |"
        )
    print()
    print("database with one 1-step run only (what an empty page costs):")
    for name, values in bare.items():
        print(
            f"  {name}: median {statistics.median(values) * 1e3:.2f} ms, "
            f"p99 {p99(values) * 1e3:.2f} ms"
        )


if __name__ == "__main__":
    asyncio.set_event_loop_policy(None)
    main()
