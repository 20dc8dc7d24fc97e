"""Workload g) of bench/compare.py: 100 runs of the a) loop started together in one process.

Each run is the 1-vertex loop of a) (one vertex routing to itself N times; state
``{count, payload: 1 KiB}``), and RUNS of them start at once:

* flowledger - ``asyncio.gather`` of ``Runner.run`` on ONE store (SQLite, or a
  ``postgresql://`` URL), so their ledger appends can share commits (group commit);
* LangGraph - RUNS threads each invoking the graph (``durability="sync"``) on one shared
  saver. On SQLite a ``SqliteSaver``: its connection is ``check_same_thread=False`` behind
  the saver's own lock, which LangGraph documents as thread-safe. One connection per
  thread instead would only add SQLite write-lock contention (each writer busy-waits on
  the others), not parallel commits: SQLite has one writer at a time either way. On
  PostgreSQL a ``PostgresSaver`` over a ``psycopg_pool.ConnectionPool`` (the how-to
  guide's set-up for concurrent use: ``autocommit=True``, ``prepare_threshold=0``,
  ``dict_row``; ``LG_POOL_MAX`` connections);
* DBOS - RUNS ``DBOS.start_workflow`` calls (its executor has a thread per workflow).

The backend is ``$FLOWLEDGER_BENCH_BACKEND`` (``sqlite`` or ``postgres``, set by
compare.py for its workers); on PostgreSQL ``db`` is the database's URL and the
durability setting read back is ``synchronous_commit``.

Measured: durable steps per second (RUNS * N / wall time) and the per-step latency, the
time between consecutive durable checkpoints of the same run: flowledger's
``on_checkpoint`` hook (fires once the append is durable; the first checkpoint of each step
counts, as one append may hold two of a step), the return of LangGraph's saver's ``put``
(which commits), and for DBOS the start of each step's body (one recorded step lies
between two starts). The same on both backends.

Each ``*_concurrent(job)`` takes the compare.py job (``db``: the database file, or
``url``: a store URL for flowledger) and returns ``seconds``, ``cpu``, ``steps`` and
``latencies_us``. By hand (flowledger only, e.g. against PostgreSQL):

    python bench/concurrent_runs.py --url 'postgresql://postgres@127.0.0.1:5432/test?schema=g1'
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import sqlite3
import statistics
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

RUNS = 100
QUICK_RUNS = 10
PAYLOAD = "x" * 1024
SYNC = os.environ.get("FLOWLEDGER_BENCH_SYNCHRONOUS", "FULL")
BACKEND = os.environ.get("FLOWLEDGER_BENCH_BACKEND", "sqlite")
# PostgresSaver runs every statement under its own lock even over a pool, so the pool's
# size does not change how many of its writes are in flight; 20 as in LangGraph's guide.
LG_POOL_MAX = 20


class Stamps:
    """Per-run timestamps of durable checkpoints (thread-safe: peers record from threads)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._times: dict[str, list[float]] = {}
        self._steps: dict[str, int] = {}

    def mark(self, run: str, step: int | None = None) -> None:
        """A durable checkpoint of ``run``; with ``step``, only the first one of each step
        counts (one append may carry several checkpoints of a step)."""
        now = time.perf_counter()
        with self._lock:
            if step is not None:
                if self._steps.get(run) == step:
                    return
                self._steps[run] = step
            self._times.setdefault(run, []).append(now)

    def latencies_us(self) -> list[float]:
        out: list[float] = []
        for times in self._times.values():
            out.extend((b - a) * 1e6 for a, b in itertools.pairwise(times))
        return out


def _pragmas(conn: Any) -> list[Any]:
    """The durability settings of a DBAPI connection: ``[synchronous, journal_mode]`` on
    SQLite, ``[synchronous_commit]`` on PostgreSQL."""
    if BACKEND == "postgres":
        row = conn.execute("SHOW synchronous_commit").fetchone()
        return [next(iter(row.values())) if isinstance(row, dict) else row[0]]
    return [conn.execute(f"PRAGMA {p}").fetchone()[0] for p in ("synchronous", "journal_mode")]


async def _store_settings(store: Any) -> list[Any]:
    """What flowledger's store really writes with, read back on its own connections."""
    db = store.ledger._db
    if hasattr(db, "run"):  # SQLite: calls run on the store's connection
        return db.run(_pragmas)  # type: ignore[no-any-return]
    async with db.connection() as conn:
        row = await (await conn.execute("SHOW synchronous_commit")).fetchone()
        return [row[0]]


def _state() -> dict[str, Any]:
    return {"count": 0, "payload": PAYLOAD}


def _runs(job: dict[str, Any]) -> int:
    return int(job.get("runs", RUNS))


def store_url(job: dict[str, Any]) -> str:
    """The flowledger store of ``job``: its ``url``, else the SQLite file ``db``."""
    if job.get("url"):
        return str(job["url"])
    return f"sqlite:///{job['db']}?synchronous={SYNC}"


# flowledger


def fl_concurrent(job: dict[str, Any]) -> dict[str, Any]:
    from flowledger import flow
    from flowledger.storage import open_store

    n, runs = job["n"], _runs(job)
    stamps = Stamps()
    graph = flow.Graph("loop", state=dict)

    async def bump(state: dict[str, Any]) -> dict[str, Any]:
        return {"count": state["count"] + 1}

    graph.add_vertex("tick", bump)
    graph.add_vertex("stop", bump)
    graph.add_route(
        "tick", targets=["tick", "stop"], pick=lambda s: "tick" if s["count"] < n else "stop"
    )
    hooks = flow.Hooks(on_checkpoint=lambda run_id, _revision, step: stamps.mark(run_id, step))

    async def main() -> dict[str, Any]:
        async with open_store(store_url(job)) as store:
            runner = graph.compile(
                entry="tick", finish="stop", store=flow.LedgerCheckpointStore(store.ledger)
            )
            started, cpu = time.perf_counter(), time.process_time()
            results = await asyncio.gather(
                *(runner.run(_state(), max_steps=n + 10, hooks=hooks) for _ in range(runs))
            )
            elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu
            for result in results:
                assert result.run.status is flow.RunStatus.COMPLETED, result.run
            sync = await _store_settings(store)
            return {"seconds": elapsed, "cpu": cpu, "synchronous": sync}

    out = asyncio.run(main())
    return {**out, "steps": runs * n, "latencies_us": stamps.latencies_us()}


# LangGraph


def _lg_shared_saver(db: str, stamps: Stamps) -> tuple[Any, list[Any], Callable[[], None]]:
    """One saver for every thread, whose ``put`` stamps the run; its settings; its close."""
    if BACKEND == "postgres":
        from langgraph.checkpoint.postgres import PostgresSaver
        from psycopg.rows import dict_row
        from psycopg_pool import ConnectionPool

        class TimedPostgresSaver(PostgresSaver):
            def put(self, config: Any, *args: Any, **kwargs: Any) -> Any:
                out = super().put(config, *args, **kwargs)  # autocommit: committed on return
                stamps.mark(config["configurable"]["thread_id"])
                return out

        pool: ConnectionPool[Any] = ConnectionPool(
            conninfo=db,
            max_size=LG_POOL_MAX,
            kwargs={"autocommit": True, "prepare_threshold": 0, "row_factory": dict_row},
            open=True,
        )
        with pool.connection() as conn:
            sync = _pragmas(conn)
        pg_saver = TimedPostgresSaver(pool)  # type: ignore[arg-type]
        pg_saver.setup()
        return pg_saver, sync, pool.close

    from langgraph.checkpoint.sqlite import SqliteSaver

    class TimedSaver(SqliteSaver):
        def put(self, config: Any, *args: Any, **kwargs: Any) -> Any:
            out = super().put(config, *args, **kwargs)  # committed when it returns
            stamps.mark(config["configurable"]["thread_id"])
            return out

    conn = sqlite3.connect(db, check_same_thread=False)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute(f"PRAGMA synchronous={SYNC}")
    sync = _pragmas(conn)
    saver = TimedSaver(conn)
    saver.setup()
    return saver, sync, conn.close


def lg_concurrent(job: dict[str, Any]) -> dict[str, Any]:
    from typing import TypedDict

    from langgraph.graph import END, START, StateGraph

    n, runs = job["n"], _runs(job)
    stamps = Stamps()

    class Plain(TypedDict):
        count: int
        payload: str

    def bump(state: dict[str, Any]) -> dict[str, Any]:
        return {"count": state["count"] + 1}

    saver, sync, close = _lg_shared_saver(job["db"], stamps)
    builder = StateGraph(Plain)
    builder.add_node("tick", bump)
    builder.add_edge(START, "tick")
    builder.add_conditional_edges(
        "tick", lambda s: "tick" if s["count"] < n else END, ["tick", END]
    )
    graph = builder.compile(checkpointer=saver)
    errors: list[BaseException] = []

    def one() -> None:
        config = {"configurable": {"thread_id": str(uuid.uuid4())}, "recursion_limit": n + 10}
        try:
            out = graph.invoke(_state(), config, durability="sync")
            assert out["count"] == n, out
        except BaseException as exc:  # reported by the main thread
            errors.append(exc)

    threads = [threading.Thread(target=one) for _ in range(runs)]
    try:
        started, cpu = time.perf_counter(), time.process_time()
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu
    finally:
        close()
    if errors:
        raise errors[0]
    return {
        "seconds": elapsed,
        "cpu": cpu,
        "synchronous": sync,
        "steps": runs * n,
        "latencies_us": stamps.latencies_us(),
    }


# DBOS


def dbos_concurrent(job: dict[str, Any], launch: Callable[[str], None]) -> dict[str, Any]:
    from dbos import DBOS, SetWorkflowID

    n, runs = job["n"], _runs(job)
    stamps = Stamps()

    def tick(run: str, state: dict[str, Any]) -> dict[str, Any]:
        stamps.mark(run)
        return {"count": state["count"] + 1}

    tick.__name__ = tick.__qualname__ = "tick"
    step = DBOS.step()(tick)

    @DBOS.workflow()
    def concurrent_loop(run: str, state: dict[str, Any]) -> dict[str, Any]:
        while state["count"] < n:
            state = {**state, **step(run, state)}
        return state

    launch(job["db"])
    DBOS.launch()
    try:
        from dbos._dbos import _get_dbos_instance

        engine = _get_dbos_instance()._sys_db.engine
        with engine.connect() as c:
            raw = c.connection.dbapi_connection
            sync = _pragmas(raw)
        ids = [str(uuid.uuid4()) for _ in range(runs)]
        started, cpu = time.perf_counter(), time.process_time()
        handles = []
        for run in ids:
            with SetWorkflowID(run):
                handles.append(DBOS.start_workflow(concurrent_loop, run, _state()))
        for handle in handles:
            assert handle.get_result(polling_interval_sec=0.01)["count"] == n
        elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu
    finally:
        DBOS.destroy()
    return {
        "seconds": elapsed,
        "cpu": cpu,
        "synchronous": sync,
        "steps": runs * n,
        "latencies_us": stamps.latencies_us(),
    }


# reporting


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    index = min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))
    return ordered[index]


def plot(latencies: dict[str, list[float]], path: str, title: str) -> bool:
    """A CDF of per-step latency per system (log x axis)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    fig, ax = plt.subplots(figsize=(7, 4))
    for system, values in latencies.items():
        if not values:
            continue
        ordered = sorted(v / 1000 for v in values)
        ys = [(i + 1) / len(ordered) for i in range(len(ordered))]
        ax.plot(ordered, ys, label=f"{system} (p50 {statistics.median(ordered):.1f} ms)")
    ax.set_xscale("log")
    ax.set_xlabel("time between consecutive durable checkpoints of one run (ms, log scale)")
    ax.set_ylabel("fraction of steps")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    ax.set_title(title)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def main() -> None:
    parser = argparse.ArgumentParser(description="flowledger's g) in this process")
    parser.add_argument("--url", required=True, help="the store URL (sqlite:/// or postgresql://)")
    parser.add_argument("--runs", type=int, default=RUNS)
    parser.add_argument("--n", type=int, default=100)
    args = parser.parse_args()
    out = fl_concurrent({"url": args.url, "n": args.n, "runs": args.runs})
    lat = out.pop("latencies_us")
    out["steps_per_s"] = out["steps"] / out["seconds"]
    out["p50_ms"] = percentile(lat, 50) / 1000
    out["p99_ms"] = percentile(lat, 99) / 1000
    out["cpu_us_per_step"] = out["cpu"] / out["steps"] * 1e6
    out["load"] = os.getloadavg()
    print(json.dumps(out))


if __name__ == "__main__":
    main()
