"""flowledger side by side with LangGraph (SqliteSaver) and DBOS, on SQLite, in one run.

Run it through ``bash bench/run.sh [options]``: that script keeps the peers in their own
virtual environment (``bench/.venv``), so the product never depends on them.

Workloads (state ``{count, payload}`` unless said otherwise):

a) loop     - one vertex routing to itself N times (1 KiB payload): us per durable step;
b) chain    - N distinct vertices in a line (1 KiB payload): us and database bytes per step;
c) fanout   - W parallel vertices (each looping on itself) per super-step for N super-steps,
              W = 8, 16, 32 (--widths): us and database bytes per super-step;
d) big      - the loop with a 100 KiB payload that never changes: bytes per step;
e) resume   - a run pauses for input in one process; a NEW process resumes it: that
              process's wall time, import time and time to its first line;
f) floor    - raw sqlite3, one 1.2 KiB row per transaction: us per transaction;
g) concurrent - 100 runs of the a) loop (N=100) started together in one process: durable
              steps/s, p50/p99 time between a run's durable checkpoints (concurrent_runs.py),
              on SQLite and on PostgreSQL.

bench/all.py (``bash bench/run.sh all``) runs this script on both backends, then the
workers and scale benches.

Every system uses SQLite in WAL mode with synchronous=FULL (read back on the connection
each system actually writes through; ``--synchronous OFF`` exists only to separate CPU from
fsync waits). Each measurement runs in a fresh subprocess; systems are
alternated (the order rotates every repetition), and medians, min/max and ratios
(flowledger / peer) come from the same run. Database bytes are measured the same way for
all: after the run's process has exited, a checkpoint folds the WAL into the main file, and
the growth of ``db + db-wal`` over an empty database of that system is divided by the steps.

``--backend postgres`` runs a), b), the floor f) and g) on a PostgreSQL server instead
(``--postgres-url``, default the local test server): flowledger through
``open_store("postgresql://.../DB?schema=bench")``, LangGraph through ``PostgresSaver``
(``durability="sync"``; in g) one saver over a ``ConnectionPool`` shared by the threads),
DBOS with that database as its ``system_database_url``, the floor with psycopg (one 1.2
KiB row per transaction). Each measurement gets a fresh database,
copied from an empty one of its system and dropped after it (`PostgresDatabases`);
``synchronous_commit`` (``--synchronous-commit``, default on) is set on the database, so
every connection of every system inherits it, and it is read back with ``SHOW
synchronous_commit`` on the connection each system writes through. Bytes per step are the
growth of ``pg_total_relation_size`` summed over the database's tables outside the
catalogs. When the server cannot be reached the bench says so and measures nothing.
`system_url` gives each system what it opens for a measurement on either backend.
"""

from __future__ import annotations

import time

_STARTED = time.time()  # the first thing this process does: the base of "import time"

import argparse  # noqa: E402
import contextlib  # noqa: E402
import importlib.util  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import platform  # noqa: E402
import shutil  # noqa: E402
import sqlite3  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import uuid  # noqa: E402
from collections.abc import Callable, Sequence  # noqa: E402
from dataclasses import dataclass, field, replace  # noqa: E402
from typing import Any  # noqa: E402

import concurrent_runs as concurrent  # noqa: E402  (workload g; "concurrent" would shadow the stdlib)

SYSTEMS = ("flowledger", "langgraph", "dbos")
FLOOR = "sqlite"
FAN = 8  # the default fan-out width
FAN_WIDTHS = (8, 16, 32)
KIB = 1024
SMALL = 1 * KIB
BIG = 100 * KIB
FLOOR_ROW = 1229  # 1.2 KiB
CHAIN_PLOT_NS = (100, 300, 1000)
QUICK_CHAIN_PLOT_NS = (5, 10, 20)
# FULL for every comparison; --synchronous OFF exists only to separate CPU from fsync.
SYNC_ENV = "FLOWLEDGER_BENCH_SYNCHRONOUS"
SYNC = os.environ.get(SYNC_ENV, "FULL")
# --backend: where every system keeps its state. On PostgreSQL each measurement gets a
# database of its own (copied from an empty one of its system) with synchronous_commit set
# on the database, so every connection of every system inherits the same setting.
BACKEND_ENV = "FLOWLEDGER_BENCH_BACKEND"
BACKEND = os.environ.get(BACKEND_ENV, "sqlite")
PG_URL_ENV = "FLOWLEDGER_BENCH_POSTGRES_URL"
PG_URL = os.environ.get(PG_URL_ENV, "postgresql://postgres@127.0.0.1:5432/test")
PG_SYNC_ENV = "FLOWLEDGER_BENCH_SYNCHRONOUS_COMMIT"
PG_SYNC = os.environ.get(PG_SYNC_ENV, "on")
PG_PREFIX_ENV = "FLOWLEDGER_BENCH_DATABASE_PREFIX"  # of the databases made (default random)
POSTGRES_WORKLOADS = ("loop", "floor", "chain", "concurrent")
# taken when main() starts measuring: the report is written after the run, when the
# run's own load would be in the figure
LOAD_AT_START: tuple[float, ...] = ()


@dataclass(frozen=True)
class Workload:
    key: str  # a..f
    name: str
    title: str
    n: int
    quick_n: int
    payload: int
    metrics: tuple[tuple[str, str, str], ...]  # (metric, unit, format)
    width: int = 0  # c) only: vertices per super-step


US = ("us", "µs/step", ".0f")
CPU = ("cpu", "CPU µs/step", ".0f")
BYTES = ("bytes", "bytes/step", ".0f")

WORKLOADS = {
    w.name: w
    for w in (
        Workload("a", "loop", "1-vertex loop", 1000, 20, SMALL, (US, CPU)),
        Workload("b", "chain", "chain of distinct vertices", 1000, 20, SMALL, (US, CPU, BYTES)),
        Workload(
            "c",
            "fanout",
            f"fan-out of {FAN}",
            100,
            5,
            SMALL,
            (
                ("us", "µs/super-step", ".0f"),
                ("cpu", "CPU µs/super-step", ".0f"),
                ("bytes", "bytes/super-step", ".0f"),
            ),
        ),
        Workload("d", "big", "100 KiB unchanged payload", 200, 10, BIG, (BYTES, US, CPU)),
        Workload(
            "e",
            "resume",
            "resume in a new process",
            1,
            1,
            SMALL,
            (
                ("wall_ms", "ms wall", ".0f"),
                ("import_ms", "ms import", ".0f"),
                ("first_line_ms", "ms to first line", ".0f"),
            ),
        ),
        Workload(
            "f",
            "floor",
            "raw SQLite, 1.2 KiB row per txn",
            1000,
            20,
            FLOOR_ROW,
            (("us", "µs/txn", ".0f"), ("cpu", "CPU µs/txn", ".0f")),
        ),
        Workload(
            "g",
            "concurrent",
            f"{concurrent.RUNS} concurrent runs of the loop",
            100,
            10,
            SMALL,
            (
                ("steps_s", "durable steps/s", ".0f"),
                ("p50_ms", "p50 ms/step", ".1f"),
                ("p99_ms", "p99 ms/step", ".1f"),
                ("cpu", "CPU µs/step", ".0f"),
            ),
        ),
    )
}


def _state(payload: int) -> dict[str, Any]:
    return {"count": 0, "payload": "x" * payload}


def _fan_state(width: int = FAN) -> dict[str, Any]:
    return {"count": 0, "payload": "x" * SMALL, **{f"f{i}": 0 for i in range(width)}}


def fan_workload(width: int) -> Workload:
    """Workload c) at fan-out ``width``; its samples are kept under ``fanout@<width>``."""
    return replace(WORKLOADS["fanout"], title=f"fan-out of {width}", width=width)


def _vertex(i: int) -> str:
    return f"v{i:05d}"


# --- workers: one measurement, in its own process ------------------------------------------
#
# A worker gets a JSON job on the command line and prints one JSON line as its last line.
# It opens the database it is given (a copy of an empty database of its system), runs the
# workload, closes everything and exits; the parent measures the file.


def _sqlite_url(path: str) -> str:
    return f"sqlite:///{path}"


def _with_query(url: str, **options: str) -> str:
    from urllib.parse import urlencode, urlsplit, urlunsplit

    parts = urlsplit(url)
    extra = urlencode(options)
    return urlunsplit(parts._replace(query=f"{parts.query}&{extra}" if parts.query else extra))


def system_url(system: str, db: str) -> str:
    """What ``system`` opens to measure on ``db``, a SQLite file or a PostgreSQL database URL.

    flowledger gets a store URL (``sqlite:///...?synchronous=`` or the database with
    ``?schema=``), DBOS its ``system_database_url``, LangGraph and the raw floor what their
    driver connects to (a file path, or the libpq URL).
    """
    if BACKEND == "postgres":
        return _with_query(db, schema="bench") if system == "flowledger" else db
    if system == "flowledger":
        return f"{_sqlite_url(db)}?synchronous={SYNC}"
    return _sqlite_url(db) if system == "dbos" else db


def _pragmas(conn: Any) -> list[Any]:
    """The durability settings read back from a DBAPI connection: ``[synchronous,
    journal_mode]`` on SQLite, ``[synchronous_commit]`` on PostgreSQL."""
    if BACKEND == "postgres":
        row = conn.execute("SHOW synchronous_commit").fetchone()
        return [next(iter(row.values())) if isinstance(row, dict) else row[0]]
    return [
        conn.execute("PRAGMA synchronous").fetchone()[0],
        conn.execute("PRAGMA journal_mode").fetchone()[0],
    ]


async def _fl_settings(store: Any) -> list[Any]:
    if BACKEND == "postgres":
        async with store.ledger._db.connection() as conn:
            row = await (await conn.execute("SHOW synchronous_commit")).fetchone()
            return [row[0]]
    return store.ledger._db.run(_pragmas)  # type: ignore[no-any-return]


# flowledger


def _fl_graph(shape: str, n: int, width: int = FAN) -> Any:
    from flowledger import flow

    graph = flow.Graph(shape, state=dict)

    async def bump(state: dict[str, Any]) -> dict[str, Any]:
        return {"count": state["count"] + 1}

    if shape in ("loop", "big"):
        graph.add_vertex("tick", bump)
        graph.add_vertex("stop", bump)
        graph.add_route(
            "tick", targets=["tick", "stop"], pick=lambda s: "tick" if s["count"] < n else "stop"
        )
        return graph, "tick", "stop"
    if shape == "chain":
        for i in range(n):
            graph.add_vertex(_vertex(i), bump)
            if i:
                graph.add_edge(_vertex(i - 1), _vertex(i))
        return graph, _vertex(0), _vertex(n - 1)
    if shape == "fanout":

        async def fan(state: dict[str, Any]) -> None:
            return None

        graph.add_vertex("fan", fan)
        graph.add_vertex("stop", bump)
        for i in range(width):
            key, name = f"f{i}", f"w{i}"

            async def work(state: dict[str, Any], key: str = key) -> dict[str, Any]:
                return {key: state[key] + 1}

            graph.add_vertex(name, work)
            graph.add_edge("fan", name)
            graph.add_route(
                name,
                targets=[name, "stop"],
                pick=lambda s, key=key, name=name: name if s[key] < n else "stop",
            )
        return graph, "fan", "stop"
    if shape == "resume":

        async def ask(state: dict[str, Any]) -> dict[str, Any]:
            answer = flow.interrupt({"question": "approve?"})
            return {"approved": answer["approved"]}

        graph.add_vertex("prepare", bump)
        graph.add_vertex("ask", ask)
        graph.add_vertex("done", bump)
        graph.add_edge("prepare", "ask")
        graph.add_edge("ask", "done")
        return graph, "prepare", "done"
    raise ValueError(shape)


def _fl_setup(path: str) -> None:
    import asyncio

    from flowledger.storage import open_store

    async def main() -> None:
        async with open_store(system_url("flowledger", path)):
            pass

    asyncio.run(main())


def _fl_run(job: dict[str, Any]) -> dict[str, Any]:
    import asyncio

    from flowledger import flow
    from flowledger.storage import open_store

    imported = time.time()
    shape, n, path = job["workload"], job["n"], job["db"]
    width = job.get("width", FAN)
    graph, entry, finish = _fl_graph(shape, n, width)

    async def main() -> dict[str, Any]:
        async with open_store(system_url("flowledger", path)) as store:
            sync = await _fl_settings(store)
            runner = graph.compile(
                entry=entry, finish=finish, store=flow.LedgerCheckpointStore(store.ledger)
            )
            if shape == "resume":
                if job["phase"] == "start":
                    result = await runner.run(_state(SMALL), run_id=job["run_id"])
                    assert result.run.status is flow.RunStatus.INTERRUPTED, result.run
                    return {"synchronous": sync}
                result = await runner.resume(job["run_id"], {"approved": True})
                assert result.run.status is flow.RunStatus.COMPLETED, result.run
                assert result.state["approved"] is True
                return {"synchronous": sync}
            state = _fan_state(width) if shape == "fanout" else _state(job["payload"])
            started, cpu = time.perf_counter(), time.process_time()
            result = await runner.run(state, max_steps=n + 10, concurrency=width)
            elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu
            assert result.run.status is flow.RunStatus.COMPLETED, result.run
            return {"seconds": elapsed, "cpu": cpu, "synchronous": sync}

    out = asyncio.run(main())
    out["imported"] = imported
    return out


# LangGraph


def _lg_saver(path: str) -> Any:
    if BACKEND == "postgres":
        import psycopg
        from langgraph.checkpoint.postgres import PostgresSaver
        from psycopg.rows import dict_row

        # The connection PostgresSaver.from_conn_string makes, kept open by the bench.
        pg = psycopg.connect(
            system_url("langgraph", path),
            autocommit=True,
            prepare_threshold=0,
            row_factory=dict_row,
        )
        saver = PostgresSaver(pg)
        saver.setup()
        return saver, pg
    from langgraph.checkpoint.sqlite import SqliteSaver

    conn = sqlite3.connect(path, check_same_thread=False)
    # SqliteSaver.setup() switches to WAL itself; synchronous is left at the connection
    # default, so it is set here explicitly to the setting flowledger uses.
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute(f"PRAGMA synchronous={SYNC}")
    saver = SqliteSaver(conn)
    saver.setup()
    return saver, conn


def _lg_graph(shape: str, n: int, saver: Any, width: int = FAN) -> Any:
    from typing import TypedDict

    from langgraph.graph import END, START, StateGraph
    from langgraph.types import interrupt

    class Plain(TypedDict):
        count: int
        payload: str

    def bump(state: dict[str, Any]) -> dict[str, Any]:
        return {"count": state["count"] + 1}

    if shape in ("loop", "big"):
        builder = StateGraph(Plain)
        builder.add_node("tick", bump)
        builder.add_edge(START, "tick")
        builder.add_conditional_edges(
            "tick", lambda s: "tick" if s["count"] < n else END, ["tick", END]
        )
    elif shape == "chain":
        builder = StateGraph(Plain)
        for i in range(n):
            builder.add_node(_vertex(i), bump)
            builder.add_edge(_vertex(i - 1) if i else START, _vertex(i))
        builder.add_edge(_vertex(n - 1), END)
    elif shape == "fanout":
        fields = {"count": int, "payload": str, **{f"f{i}": int for i in range(width)}}
        state_type = TypedDict("FanState", fields)  # type: ignore[operator]
        builder = StateGraph(state_type)
        for i in range(width):
            key, name = f"f{i}", f"w{i}"

            def work(state: dict[str, Any], key: str = key) -> dict[str, Any]:
                return {key: state[key] + 1}

            builder.add_node(name, work)
            builder.add_edge(START, name)
            builder.add_conditional_edges(
                name, lambda s, key=key, name=name: name if s[key] < n else END, [name, END]
            )
    elif shape == "resume":

        class Ask(Plain):
            approved: bool

        def ask(state: dict[str, Any]) -> dict[str, Any]:
            answer = interrupt({"question": "approve?"})
            return {"approved": answer["approved"]}

        builder = StateGraph(Ask)
        builder.add_node("prepare", bump)
        builder.add_node("ask", ask)
        builder.add_node("done", bump)
        builder.add_edge(START, "prepare")
        builder.add_edge("prepare", "ask")
        builder.add_edge("ask", "done")
        builder.add_edge("done", END)
    else:
        raise ValueError(shape)
    return builder.compile(checkpointer=saver)


def _lg_setup(path: str) -> None:
    _saver, conn = _lg_saver(path)
    conn.close()


def _lg_run(job: dict[str, Any]) -> dict[str, Any]:
    import langgraph.graph  # noqa: F401
    from langgraph.types import Command

    if BACKEND == "postgres":
        from langgraph.checkpoint.postgres import PostgresSaver  # noqa: F401
    else:
        from langgraph.checkpoint.sqlite import SqliteSaver  # noqa: F401

    imported = time.time()
    shape, n = job["workload"], job["n"]
    saver, conn = _lg_saver(job["db"])
    sync = _pragmas(conn)
    try:
        width = job.get("width", FAN)
        graph = _lg_graph(shape, n, saver, width)
        thread = job.get("run_id") or str(uuid.uuid4())
        config = {"configurable": {"thread_id": thread}, "recursion_limit": n + 10}
        if shape == "resume":
            if job["phase"] == "start":
                out = graph.invoke(_state(SMALL), config, durability="sync")
                assert "__interrupt__" in out, out
            else:
                out = graph.invoke(Command(resume={"approved": True}), config, durability="sync")
                assert out["approved"] is True and out["count"] == 2, out
            return {"synchronous": sync, "imported": imported}
        state = _fan_state(width) if shape == "fanout" else _state(job["payload"])
        started, cpu = time.perf_counter(), time.process_time()
        out = graph.invoke(state, config, durability="sync")
        elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu
        done = out["f0"] if shape == "fanout" else out["count"]
        assert done == n, out
        return {"seconds": elapsed, "cpu": cpu, "synchronous": sync, "imported": imported}
    finally:
        conn.close()


# DBOS


def _dbos_launch(path: str, resume: bool = False) -> Any:
    import sqlalchemy
    from dbos import DBOS

    # DBOS creates its own SQLAlchemy engine for a sqlite:// system database and sets only
    # busy_timeout and foreign_keys on each connection (rollback journal, default
    # synchronous). Every new DBAPI connection gets WAL and synchronous=FULL here.
    # On PostgreSQL its connections inherit synchronous_commit from the bench's database.
    def pragmas(dbapi_conn: Any, _record: Any) -> None:
        dbapi_conn.execute("PRAGMA journal_mode=WAL")
        dbapi_conn.execute(f"PRAGMA synchronous={SYNC}")

    if BACKEND == "sqlite":
        sqlalchemy.event.listen(sqlalchemy.engine.Engine, "connect", pragmas)
    config: dict[str, Any] = {
        "name": "bench",
        "system_database_url": system_url("dbos", path),
        "application_version": "bench",  # the same in the pausing and the resuming process
        "log_level": "WARNING",
    }
    if resume and BACKEND == "sqlite":
        # SQLite has no LISTEN/NOTIFY: DBOS polls for messages, by default every second.
        config["notification_listener_polling_interval_sec"] = 0.01
    DBOS(config=config)  # type: ignore[arg-type]


def _dbos_sync() -> list[Any]:
    from dbos._dbos import _get_dbos_instance

    engine = _get_dbos_instance()._sys_db.engine
    with engine.connect() as conn:
        return _pragmas(conn.connection.dbapi_connection)


def _dbos_setup(path: str) -> None:
    from dbos import DBOS

    _dbos_launch(path)
    DBOS.launch()
    DBOS.destroy()


def _dbos_register(shape: str, n: int, width: int = FAN) -> Callable[..., Any]:
    from dbos import DBOS

    def named(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        fn.__name__ = fn.__qualname__ = name
        return fn

    def bump(state: dict[str, Any]) -> dict[str, Any]:
        return {"count": state["count"] + 1}

    if shape in ("loop", "big"):
        tick = DBOS.step()(named("tick", bump))

        @DBOS.workflow()
        def loop_workflow(state: dict[str, Any]) -> dict[str, Any]:
            while state["count"] < n:
                state = {**state, **tick(state)}
            return state

        return loop_workflow
    if shape == "chain":
        steps = [DBOS.step()(named(_vertex(i), bump)) for i in range(n)]

        @DBOS.workflow()
        def chain_workflow(state: dict[str, Any]) -> dict[str, Any]:
            for step in steps:
                state = {**state, **step(state)}
            return state

        return chain_workflow
    if shape == "fanout":
        import asyncio

        def worker(key: str) -> Callable[..., Any]:
            async def work(state: dict[str, Any]) -> dict[str, Any]:
                return {key: state[key] + 1}

            return work

        workers = [DBOS.step()(named(f"w{i}", worker(f"f{i}"))) for i in range(width)]

        @DBOS.workflow()
        async def fan_workflow(state: dict[str, Any]) -> dict[str, Any]:
            while state["f0"] < n:
                # DBOS numbers steps when they are created, so a gather replays in order.
                updates = await asyncio.gather(*(w(state) for w in workers))
                for update in updates:
                    state = {**state, **update}
            return state

        return fan_workflow
    if shape == "resume":
        prepare = DBOS.step()(named("prepare", bump))
        done = DBOS.step()(named("done", bump))

        @DBOS.workflow()
        def ask_workflow(state: dict[str, Any]) -> dict[str, Any]:
            state = {**state, **prepare(state)}
            answer = DBOS.recv("approval", timeout_seconds=3600)
            state = {**state, "approved": answer["approved"]}
            return {**state, **done(state)}

        return ask_workflow
    raise ValueError(shape)


def _dbos_run(job: dict[str, Any]) -> dict[str, Any]:
    from dbos import DBOS, SetWorkflowID

    shape, n = job["workload"], job["n"]
    width = job.get("width", FAN)
    workflow = _dbos_register(shape, n, width)
    imported = time.time()
    _dbos_launch(job["db"], resume=shape == "resume")
    DBOS.launch()
    try:
        sync = _dbos_sync()
        if shape == "resume":
            run_id = job["run_id"]
            if job["phase"] == "start":
                with SetWorkflowID(run_id):
                    DBOS.start_workflow(workflow, _state(SMALL))
                while not DBOS.list_workflow_steps(run_id):
                    time.sleep(0.005)
                time.sleep(0.05)  # let it reach DBOS.recv
                # The process dies with the workflow waiting, as a crash or a restart would.
                print(json.dumps({"synchronous": sync, "imported": imported}), flush=True)
                os._exit(0)
            # Launch recovered the PENDING workflow of executor "local"; deliver the answer.
            DBOS.send(run_id, {"approved": True}, topic="approval")
            out = DBOS.retrieve_workflow(run_id).get_result(polling_interval_sec=0.01)
            assert out["approved"] is True and out["count"] == 2, out
            return {"synchronous": sync, "imported": imported}
        state = _fan_state(width) if shape == "fanout" else _state(job["payload"])
        started, cpu = time.perf_counter(), time.process_time()
        if shape == "fanout":
            import asyncio

            out = asyncio.run(workflow(state))
        else:
            out = workflow(state)
        elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu
        assert (out["f0"] if shape == "fanout" else out["count"]) == n, out
        return {"seconds": elapsed, "cpu": cpu, "synchronous": sync, "imported": imported}
    finally:
        DBOS.destroy()


# the raw floor


def _floor_run(job: dict[str, Any]) -> dict[str, Any]:
    if BACKEND == "postgres":
        return _pg_floor_run(job)
    conn = sqlite3.connect(job["db"], isolation_level=None)
    try:
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute(f"PRAGMA synchronous={SYNC}")
        sync = _pragmas(conn)
        row = os.urandom(job["payload"])
        started, cpu = time.perf_counter(), time.process_time()
        for _ in range(job["n"]):
            conn.execute("BEGIN IMMEDIATE")
            conn.execute("INSERT INTO rows (data) VALUES (?)", (row,))
            conn.execute("COMMIT")
        elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu
        return {"seconds": elapsed, "cpu": cpu, "synchronous": sync, "imported": time.time()}
    finally:
        conn.close()


def _pg_floor_run(job: dict[str, Any]) -> dict[str, Any]:
    import psycopg

    with psycopg.connect(system_url(FLOOR, job["db"]), autocommit=True) as conn:
        sync = _pragmas(conn)
        row = os.urandom(job["payload"])
        started, cpu = time.perf_counter(), time.process_time()
        for _ in range(job["n"]):
            with conn.transaction():
                conn.execute("INSERT INTO rows (data) VALUES (%s)", (row,))
        elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu
    return {"seconds": elapsed, "cpu": cpu, "synchronous": sync, "imported": time.time()}


def _floor_setup(path: str) -> None:
    if BACKEND == "postgres":
        import psycopg

        with psycopg.connect(system_url(FLOOR, path), autocommit=True) as conn:
            conn.execute("CREATE TABLE rows (id bigserial PRIMARY KEY, data bytea NOT NULL)")
        return
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("CREATE TABLE rows (id INTEGER PRIMARY KEY, data BLOB NOT NULL)")
    conn.close()


SETUP: dict[str, Callable[[str], None]] = {
    "flowledger": _fl_setup,
    "langgraph": _lg_setup,
    "dbos": _dbos_setup,
    FLOOR: _floor_setup,
}
RUN: dict[str, Callable[[dict[str, Any]], dict[str, Any]]] = {
    "flowledger": _fl_run,
    "langgraph": _lg_run,
    "dbos": _dbos_run,
    FLOOR: _floor_run,
}


CONCURRENT: dict[str, Callable[[dict[str, Any]], dict[str, Any]]] = {
    "flowledger": concurrent.fl_concurrent,
    "langgraph": concurrent.lg_concurrent,
    "dbos": lambda job: concurrent.dbos_concurrent(job, _dbos_launch),
}


def worker(job: dict[str, Any]) -> None:
    if job["workload"] == "concurrent":
        out: dict[str, Any] = CONCURRENT[job["system"]](job)
    elif job["workload"] == "setup":
        SETUP[job["system"]](job["db"])
        out = {}
    else:
        out = RUN[job["system"]](job)
    out["started"] = _STARTED
    print(json.dumps(out), flush=True)


# --- the parent: alternate systems, measure, summarise ------------------------------------


def _size(path: str) -> int:
    return os.path.getsize(path) if os.path.exists(path) else 0


def db_bytes(path: str) -> int:
    """``db + db-wal`` after folding the WAL into the database (the same for every system)."""
    conn = sqlite3.connect(path)
    try:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        conn.close()
    return _size(path) + _size(path + "-wal")


class WorkerError(RuntimeError):
    pass


def spawn(job: dict[str, Any], timeout: float = 900) -> tuple[dict[str, Any], float, float]:
    """Run one worker; return its JSON line, the spawn time (epoch) and its wall seconds."""
    argv = [sys.executable, os.path.abspath(__file__), "--worker", json.dumps(job)]
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "LANGSMITH_TRACING": "false"}
    spawned = time.time()
    started = time.perf_counter()
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, env=env)
    wall = time.perf_counter() - started
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    if proc.returncode != 0 or not lines:
        raise WorkerError(
            f"worker {job['system']}/{job['workload']} failed (exit {proc.returncode}):\n"
            f"{proc.stdout[-2000:]}\n{proc.stderr[-4000:]}"
        )
    return json.loads(lines[-1]), spawned, wall


@dataclass
class Samples:
    values: dict[tuple[str, str, str], list[float]] = field(default_factory=dict)
    pragmas: dict[str, set[tuple[Any, ...]]] = field(default_factory=dict)

    def add(self, system: str, workload: str, metric: str, value: float) -> None:
        self.values.setdefault((system, workload, metric), []).append(value)

    def get(self, system: str, workload: str, metric: str) -> list[float]:
        return self.values.get((system, workload, metric), [])


class PostgresDatabases:
    """The measurements' databases on the PostgreSQL server at ``url``.

    Per system one empty database (its setup run once) is the template of a fresh database
    per measurement, dropped after it. Every one has ``synchronous_commit`` set on the
    database, so all connections of every system start with it. Bytes are the sum of
    ``pg_total_relation_size`` (heap, indexes, TOAST, free-space and visibility maps) of
    every table outside the catalogs, the same query for every system.
    """

    SIZE = (
        "SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0) FROM pg_class c "
        "JOIN pg_namespace n ON n.oid = c.relnamespace WHERE c.relkind IN ('r', 'm') "
        "AND n.nspname NOT IN ('pg_catalog', 'information_schema') "
        "AND n.nspname NOT LIKE 'pg_toast%'"
    )

    def __init__(self, url: str) -> None:
        self.url = url
        self.prefix = os.environ.get(PG_PREFIX_ENV) or f"bench_{uuid.uuid4().hex[:8]}"
        self.count = 0
        self.templates: dict[str, str] = {}
        self.made: list[str] = []

    def _url(self, name: str) -> str:
        from urllib.parse import urlsplit, urlunsplit

        return urlunsplit(urlsplit(self.url)._replace(path=f"/{name}"))

    def _admin(self, *statements: str) -> None:
        import psycopg

        with psycopg.connect(self.url, autocommit=True) as conn:
            for statement in statements:
                conn.execute(statement)  # type: ignore[arg-type]

    def _create(self, name: str, template: str | None = None) -> str:
        evict = (
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            f"WHERE datname = '{template}' AND pid <> pg_backend_pid()"
        )
        self._admin(
            *([evict] if template else []),
            f'CREATE DATABASE "{name}"' + (f' TEMPLATE "{template}"' if template else ""),
            f"ALTER DATABASE \"{name}\" SET synchronous_commit = '{PG_SYNC}'",
        )
        self.made.append(name)
        return self._url(name)

    def fresh(self, system: str) -> tuple[str, int]:
        if system not in self.templates:
            name = f"{self.prefix}_{system}_empty"
            spawn({"system": system, "workload": "setup", "db": self._create(name)})
            self.templates[system] = name
        self.count += 1
        url = self._create(f"{self.prefix}_{system}_{self.count}", self.templates[system])
        return url, self.size(url)

    def size(self, url: str) -> int:
        import psycopg

        with psycopg.connect(url, autocommit=True) as conn:
            row = conn.execute(self.SIZE).fetchone()  # type: ignore[arg-type]
        return int(row[0]) if row else 0

    def discard(self, url: str) -> None:
        from urllib.parse import urlsplit

        name = urlsplit(url).path.lstrip("/")
        self._admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        self.made.remove(name)

    def close(self) -> None:
        for name in list(self.made):
            self.discard(self._url(name))


def postgres_unreachable(url: str) -> str | None:
    """Why the PostgreSQL server at ``url`` cannot be used (None if it can)."""
    try:
        import psycopg
    except ImportError as exc:
        return f"psycopg is not installed ({exc})"
    try:
        with psycopg.connect(url, connect_timeout=3, autocommit=True) as conn:
            conn.execute("SELECT 1")
    except psycopg.Error as exc:
        text = str(exc).strip()
        return text.splitlines()[0] if text else type(exc).__name__
    return None


class Bench:
    def __init__(self, args: argparse.Namespace, systems: Sequence[str], root: str) -> None:
        self.args = args
        self.systems = list(systems)
        self.root = root
        self.samples = Samples()
        self.empty: dict[str, tuple[str, int]] = {}
        self.postgres = PostgresDatabases(PG_URL) if BACKEND == "postgres" else None
        self.latencies: dict[str, list[float]] = {}  # g): per-step latencies, all repetitions

    def log(self, message: str) -> None:
        if not self.args.quiet:
            print(message, file=sys.stderr, flush=True)

    def template(self, system: str) -> tuple[str, int]:
        """An empty database of ``system`` (made once per run) and its size."""
        if system not in self.empty:
            path = os.path.join(self.root, f"empty-{system}.db")
            spawn({"system": system, "workload": "setup", "db": path})
            self.empty[system] = (path, db_bytes(path))
        return self.empty[system]

    def fresh_db(self, system: str) -> tuple[str, int]:
        """A database for one measurement (see `system_url`) and its size when empty."""
        if self.postgres:
            return self.postgres.fresh(system)
        empty, size = self.template(system)
        folder = tempfile.mkdtemp(dir=self.root)
        path = os.path.join(folder, "bench.db")
        shutil.copyfile(empty, path)
        return path, size

    def measure(self, system: str, workload: Workload, n: int, tag: str = "") -> None:
        path, empty = self.fresh_db(system)
        job = {
            "system": system,
            "workload": workload.name,
            "n": n,
            "payload": workload.payload,
            "db": path,
        }
        if workload.width:
            job["width"] = workload.width
        name = workload.name + tag
        if workload.name == "resume":
            job["run_id"] = str(uuid.uuid4())
            spawn({**job, "phase": "start"})
            out, spawned, wall = spawn({**job, "phase": "finish"})
            self.samples.add(system, name, "wall_ms", wall * 1e3)
            self.samples.add(system, name, "import_ms", (out["imported"] - out["started"]) * 1e3)
            self.samples.add(system, name, "first_line_ms", (out["imported"] - spawned) * 1e3)
            self.log(f"  {system:10s} {name:10s} resume {wall * 1e3:7.0f} ms")
        elif workload.name == "concurrent":
            job["runs"] = self.concurrent_runs()
            if system == "flowledger":
                job["url"] = system_url(system, path)
            out, _, _ = spawn(job)
            latencies = out["latencies_us"]
            self.latencies.setdefault(system, []).extend(latencies)
            self.samples.add(system, name, "steps_s", out["steps"] / out["seconds"])
            self.samples.add(system, name, "p50_ms", concurrent.percentile(latencies, 50) / 1e3)
            self.samples.add(system, name, "p99_ms", concurrent.percentile(latencies, 99) / 1e3)
            self.samples.add(system, name, "cpu", out["cpu"] / out["steps"] * 1e6)
            self.log(
                f"  {system:10s} {name:10s} {out['steps'] / out['seconds']:8.0f} steps/s "
                f"p99 {concurrent.percentile(latencies, 99) / 1e3:7.1f} ms"
            )
        else:
            out, _, _ = spawn(job)
            grown = (self.postgres.size(path) if self.postgres else db_bytes(path)) - empty
            self.samples.add(system, name, "us", out["seconds"] / n * 1e6)
            self.samples.add(system, name, "cpu", out["cpu"] / n * 1e6)
            self.samples.add(system, name, "bytes", grown / n)
            shown = floor_name() if system == FLOOR else system
            self.log(
                f"  {shown:10s} {name:10s} n={n:<5d} {out['seconds'] / n * 1e6:8.0f} µs/step "
                f"{grown / n:9.0f} bytes/step"
            )
        self.samples.pragmas.setdefault(system, set()).add(tuple(out["synchronous"]))
        if self.postgres:
            self.postgres.discard(path)
        else:
            shutil.rmtree(os.path.dirname(path), ignore_errors=True)

    def n(self, workload: Workload) -> int:
        return workload.quick_n if self.args.quick else workload.n

    def concurrent_runs(self) -> int:
        return concurrent.QUICK_RUNS if self.args.quick else concurrent.RUNS

    def run(self) -> None:
        systems = self.systems
        order = ["loop", "floor", "chain", "fanout", "big", "resume", "concurrent"]
        if self.postgres:
            order = [name for name in order if name in POSTGRES_WORKLOADS]
        if self.args.workload:
            order = [name for name in order if name in self.args.workload]
        for rep in range(self.args.reps):
            self.log(f"repetition {rep + 1}/{self.args.reps}")
            for index, name in enumerate(order):
                workload = WORKLOADS[name]
                if name == "floor":
                    self.measure(FLOOR, workload, self.n(workload))
                    continue
                if name == "fanout":
                    for offset, width in enumerate(self.args.widths):
                        shift = (rep + index + offset) % len(systems)
                        for system in systems[shift:] + systems[:shift]:
                            fan = fan_workload(width)
                            self.measure(system, fan, self.n(workload), tag=f"@{width}")
                    continue
                shift = (rep + index) % len(systems)
                for system in systems[shift:] + systems[:shift]:
                    self.measure(system, workload, self.n(workload))
            if self.args.plot and "chain" in order:
                ns = QUICK_CHAIN_PLOT_NS if self.args.quick else CHAIN_PLOT_NS
                for index, n in enumerate(ns):
                    if n == self.n(WORKLOADS["chain"]):
                        continue  # measured above
                    shift = (rep + index) % len(systems)
                    for system in systems[shift:] + systems[:shift]:
                        self.measure(system, WORKLOADS["chain"], n, tag=f"@{n}")


# --- reporting -------------------------------------------------------------------------------


def floor_name() -> str:
    return "postgres" if BACKEND == "postgres" else FLOOR


def floor_title() -> str:
    return "PostgreSQL" if BACKEND == "postgres" else "SQLite"


def _median(values: list[float]) -> float:
    return statistics.median(values)


def _cell(values: list[float], fmt: str) -> str:
    if not values:
        return "-"
    text = format(_median(values), fmt)
    if len(values) > 1:
        text += f" ({format(min(values), fmt)}-{format(max(values), fmt)})"
    return text


def _ratio(a: list[float], b: list[float]) -> str:
    if not a or not b or _median(b) == 0:
        return "-"
    return f"{_median(a) / _median(b):.2f}"


def table(bench: Bench) -> list[str]:
    samples = bench.samples
    systems = bench.systems
    floor_column = floor_name()
    head = ["workload", "metric", *systems, floor_column]
    ratios = [f"flowledger / {p}" for p in systems if p != "flowledger"]
    if "flowledger" in systems:
        head += [*ratios, f"flowledger / {floor_column}"]
    lines = [
        "| " + " | ".join(head) + " |",
        "|" + "|".join(["---"] * 2 + ["--:"] * (len(head) - 2)) + "|",
    ]
    for workload, key in _table_workloads(bench):
        if not any(k[1] == key for k in samples.values):
            continue  # not measured (on this backend, or not chosen)
        if bench.args.workload and workload.name not in bench.args.workload:
            continue
        n = bench.n(workload)
        title = workload.title.replace("SQLite", floor_title())
        if workload.name == "concurrent":
            title = f"{bench.concurrent_runs()} concurrent runs of the loop"
        label = f"{workload.key}) {title}"
        if workload.name != "resume":
            label += f", N={n}"
        for metric, unit, fmt in workload.metrics:
            if workload.name == "floor":
                cells = ["-"] * len(systems) + [_cell(samples.get(FLOOR, "floor", metric), fmt)]
            else:
                cells = [_cell(samples.get(s, key, metric), fmt) for s in systems] + ["-"]
            row = [label, unit, *cells]
            if "flowledger" in systems:
                mine = samples.get("flowledger", key, metric)
                row += [
                    _ratio(mine, samples.get(p, key, metric)) for p in systems if p != "flowledger"
                ]
                floor = samples.get(FLOOR, "floor", metric) if workload.name == "loop" else []
                row.append(_ratio(mine, floor))
            lines.append("| " + " | ".join(row) + " |")
    return lines


def _table_workloads(bench: Bench) -> list[tuple[Workload, str]]:
    """Each workload with the name its samples are kept under (c) once per width)."""
    rows = []
    for workload in WORKLOADS.values():
        if workload.name == "fanout":
            rows += [(fan_workload(w), f"fanout@{w}") for w in bench.args.widths]
        else:
            rows.append((workload, workload.name))
    return rows


def fanout_table(bench: Bench) -> list[str]:
    """Bytes and µs per super-step against the fan-out width (the fan-out plot's data)."""
    systems = bench.systems
    lines = [
        "| width W | "
        + " | ".join(f"{s} bytes/super-step | {s} µs/super-step" for s in systems)
        + " |",
        "|--:|" + "--:|" * (2 * len(systems)),
    ]
    for width in bench.args.widths:
        cells = []
        for s in systems:
            cells.append(_cell(bench.samples.get(s, f"fanout@{width}", "bytes"), ".0f"))
            cells.append(_cell(bench.samples.get(s, f"fanout@{width}", "us"), ".0f"))
        lines.append(f"| {width} | " + " | ".join(cells) + " |")
    return lines


def fanout_plot(bench: Bench, path: str) -> bool:
    """Bytes and µs per super-step against the fan-out width, one line per system."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed: no plot (use bash bench/run.sh)", file=sys.stderr)
        return False
    widths = list(bench.args.widths)
    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    for ax, metric, label in (
        (axes[0], "bytes", "database bytes per super-step (median, min-max)"),
        (axes[1], "us", "µs per super-step (median, min-max; log scale)"),
    ):
        for system in bench.systems:
            xs, ys, spread = [], [], [[], []]
            for width in widths:
                values = bench.samples.get(system, f"fanout@{width}", metric)
                if values:
                    mid = _median(values)
                    xs.append(width)
                    ys.append(mid)
                    spread[0].append(mid - min(values))
                    spread[1].append(max(values) - mid)
            ax.errorbar(xs, ys, yerr=spread, marker="o", capsize=3, label=system)
        ax.set_xticks(widths, [str(w) for w in widths])
        ax.set_xlim(left=0)
        if metric == "us":
            ax.set_yscale("log")  # DBOS's steps are two orders of magnitude apart
        else:
            ax.set_ylim(bottom=0)
        ax.set_xlabel("fan-out width W (parallel vertices per super-step)")
        ax.set_ylabel(label)
        ax.grid(True, alpha=0.3)
        ax.legend()
    n = bench.n(WORKLOADS["fanout"])
    fig.suptitle(
        f"Fan-out of W self-looping vertices, N={n} super-steps, SQLite (WAL, "
        f"synchronous={SYNC}), per-vertex checkpoints"
    )
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def chain_series(
    bench: Bench, system: str, metric: str
) -> tuple[list[int], list[float], list[list[float]]]:
    """N, medians, and [below, above] distances to min and max (for error bars)."""
    ns = QUICK_CHAIN_PLOT_NS if bench.args.quick else CHAIN_PLOT_NS
    xs: list[int] = []
    ys: list[float] = []
    spread: list[list[float]] = [[], []]
    for n in ns:
        tag = "chain" if n == bench.n(WORKLOADS["chain"]) else f"chain@{n}"
        values = bench.samples.get(system, tag, metric)
        if values:
            mid = _median(values)
            xs.append(n)
            ys.append(mid)
            spread[0].append(mid - min(values))
            spread[1].append(max(values) - mid)
    return xs, ys, spread


def chain_table(bench: Bench) -> list[str]:
    systems = bench.systems
    ns = QUICK_CHAIN_PLOT_NS if bench.args.quick else CHAIN_PLOT_NS
    lines = [
        "| chain N | " + " | ".join(f"{s} µs/step | {s} bytes/step" for s in systems) + " |",
        "|--:|" + "--:|" * (2 * len(systems)),
    ]
    for n in ns:
        tag = "chain" if n == bench.n(WORKLOADS["chain"]) else f"chain@{n}"
        cells = []
        for s in systems:
            cells.append(_cell(bench.samples.get(s, tag, "us"), ".0f"))
            cells.append(_cell(bench.samples.get(s, tag, "bytes"), ".0f"))
        lines.append(f"| {n} | " + " | ".join(cells) + " |")
    return lines


def plot(bench: Bench, path: str) -> bool:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed: no plot (use bash bench/run.sh)", file=sys.stderr)
        return False
    systems = bench.systems
    ns = QUICK_CHAIN_PLOT_NS if bench.args.quick else CHAIN_PLOT_NS
    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    for ax, metric, label in (
        (axes[0], "us", "µs per durable step (median, min-max)"),
        (axes[1], "bytes", "database bytes per step (log scale)"),
    ):
        for system in systems:
            xs, ys, spread = chain_series(bench, system, metric)
            ax.errorbar(xs, ys, yerr=spread, marker="o", capsize=3, label=system)
        ax.set_xscale("log")
        ax.set_xticks(list(ns), [str(n) for n in ns])
        ax.minorticks_off()
        if metric == "bytes":
            ax.set_yscale("log")
        else:
            ax.set_ylim(bottom=0)
        ax.set_xlabel("chain length N (distinct vertices)")
        ax.set_ylabel(label)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend()
    durability = (
        f"synchronous_commit={PG_SYNC}" if BACKEND == "postgres" else f"WAL, synchronous={SYNC}"
    )
    fig.suptitle(f"Chain of N vertices on {floor_title()} ({durability}), medians")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def _version(dist: str) -> str:
    from importlib import metadata

    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return "not installed"


def machine() -> list[str]:
    model = "unknown"
    with contextlib.suppress(OSError), open("/proc/cpuinfo") as info:
        for line in info:
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    load = ", ".join(f"{x:.2f}" for x in LOAD_AT_START or os.getloadavg())
    end = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    dists = (
        "flowledger",
        "langgraph",
        "langgraph-checkpoint",
        "langgraph-checkpoint-postgres" if BACKEND == "postgres" else "langgraph-checkpoint-sqlite",
        "dbos",
        "sqlalchemy",
        *(("psycopg", "psycopg-pool") if BACKEND == "postgres" else ()),
    )
    database = f"SQLite {sqlite3.sqlite_version}"
    if BACKEND == "postgres":
        import psycopg

        with psycopg.connect(PG_URL, autocommit=True) as conn:
            row = conn.execute("SHOW server_version").fetchone()
        database = f"PostgreSQL {row[0] if row else '?'} on the same machine"
    return [
        f"- CPU: {model}, {os.cpu_count()} cores; load average at start: {load}, at the end: {end}",
        f"- OS: {platform.system()} {platform.release()}; "
        f"Python {platform.python_version()}; {database}",
        "- packages: " + ", ".join(f"{d} {_version(d)}" for d in dists),
    ]


def _setting(values: tuple[Any, ...]) -> str:
    if len(values) == 1:
        return f"synchronous_commit={values[0]}"
    sync_names = {0: "OFF", 1: "NORMAL", 2: "FULL", 3: "EXTRA"}
    return f"synchronous={sync_names.get(values[0], values[0])} journal_mode={values[1]}"


def report(
    bench: Bench,
    command: str,
    plotted: str | None,
    fan_plotted: str | None = None,
    concurrent_plotted: str | None = None,
) -> str:
    sync = "; ".join(
        f"{s if s != FLOOR else floor_name()} " + ", ".join(_setting(v) for v in sorted(vs))
        for s, vs in bench.samples.pragmas.items()
    )
    lines = [
        f"Command: `{command}` ({bench.args.reps} repetition(s), systems alternated).",
        "",
        *machine(),
        f"- read back on the connection each system writes through: {sync}",
        *(
            [
                f"- measured on databases `{bench.postgres.prefix}_<system>_<n>` of that server, "
                f"one per measurement, copied from `{bench.postgres.prefix}_<system>_empty` and "
                "dropped after; bytes per step: growth of the sum of `pg_total_relation_size` "
                "over the tables outside the catalogs (heap, indexes, TOAST), divided by N"
            ]
            if bench.postgres
            else []
        ),
        "",
        "Medians (min-max); ratios are flowledger's median over the peer's (below 1: "
        "flowledger is faster or smaller).",
        "",
        *table(bench),
    ]
    if any(key[1].startswith("fanout@") for key in bench.samples.values):
        lines += ["", "Fan-out of W vertices per super-step:", "", *fanout_table(bench)]
    if concurrent_plotted:
        lines += [
            "",
            f"![g) per-step latency CDF]({os.path.basename(concurrent_plotted)})",
        ]
    if fan_plotted:
        lines += ["", f"![bytes and µs per super-step against W]({os.path.basename(fan_plotted)})"]
    if bench.args.plot:
        lines += ["", "Chain of N distinct vertices (the plot's data):", "", *chain_table(bench)]
        if plotted:
            lines += ["", f"![µs and bytes per step against N]({os.path.basename(plotted)})"]
    return "\n".join(lines) + "\n"


def markers(name: str) -> tuple[str, str]:
    """The comments around the generated block ``name`` of a Markdown file."""
    return f"<!-- {name}:begin -->", f"<!-- {name}:end -->"


BEGIN, END = markers("results")


def write_out(path: str, text: str, name: str = "results", heading: str = "Results") -> None:
    """Replace the generated block ``name`` of ``path`` (between its markers); a file without
    that block gets it appended under ``## heading``, a missing file is created with it."""
    begin, end = markers(name)
    block = f"{begin}\n{text}{end}"
    old: str | None = None
    with contextlib.suppress(FileNotFoundError), open(path) as f:
        old = f.read()
    if old is None:
        new = f"# Benchmarks\n\n{block}\n"
    elif begin in old and end in old:
        head, _, rest = old.partition(begin)
        _, _, tail = rest.partition(end)
        new = head + block + tail
    else:
        new = old.rstrip("\n") + f"\n\n## {heading}\n\n{block}\n"
    with open(path, "w") as f:
        f.write(new)


def profile(name: str, quick: bool, where: str | None) -> int:
    """Run flowledger's worker in this process under pyinstrument; print the hot spots."""
    try:
        from pyinstrument import Profiler
    except ImportError:
        print("pyinstrument is not installed (use bash bench/run.sh)", file=sys.stderr)
        return 2
    workload = WORKLOADS[name]
    n = workload.quick_n if quick else workload.n
    postgres = PostgresDatabases(PG_URL) if BACKEND == "postgres" else None
    with tempfile.TemporaryDirectory(prefix="flowledger-profile-", dir=where) as root:
        job = {"system": "flowledger", "workload": name, "n": n, "payload": workload.payload}
        if postgres:
            warm, path = (postgres.fresh("flowledger")[0] for _ in range(2))
        else:
            warm, path = os.path.join(root, "warm.db"), os.path.join(root, "bench.db")
            for db in (warm, path):
                _fl_setup(db)
        try:
            _fl_run({**job, "db": warm})  # imports and first-use costs stay out of the profile
            profiler = Profiler(interval=0.001, async_mode="enabled")
            profiler.start()
            out = _fl_run({**job, "db": path})
            profiler.stop()
        finally:
            if postgres:
                postgres.close()
    print(
        f"flowledger {name}, N={n}: {out['seconds'] / n * 1e6:.0f} µs/step wall, "
        f"{out['cpu'] / n * 1e6:.0f} µs/step CPU (under the profiler)\n"
    )
    print("Self time (seconds), top 25:\n")
    flat = profiler.output_text(unicode=True, flat=True, flat_time="self")
    print("\n".join(_no_banner(flat)[:25]))
    print("\nCall tree (frames over 2% of the run):\n")
    tree = profiler.output_text(
        unicode=True, processor_options={"filter_threshold": 0.02, "hide_regex": "asyncio.*"}
    )
    print("\n".join(_no_banner(tree)))
    return 0


def _no_banner(text: str) -> list[str]:
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if line.startswith("Profile at"):
            return [x for x in lines[i + 1 :] if x.strip()]
    return lines


def available(system: str) -> bool:
    modules = {
        "flowledger": ("flowledger",),
        "langgraph": (
            "langgraph",
            "langgraph.checkpoint.postgres"
            if BACKEND == "postgres"
            else "langgraph.checkpoint.sqlite",
        ),
        "dbos": ("dbos",),
    }[system]
    try:
        return all(importlib.util.find_spec(m) is not None for m in modules)
    except ModuleNotFoundError:
        return False


def _widths(text: str) -> tuple[int, ...]:
    try:
        widths = tuple(int(part) for part in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"not comma-separated integers: {text!r}") from None
    if not widths or min(widths) < 1:
        raise argparse.ArgumentTypeError("widths must be at least 1")
    return widths


def main(argv: Sequence[str] | None = None) -> int:
    global SYNC, BACKEND, PG_URL, PG_SYNC, LOAD_AT_START
    parser = argparse.ArgumentParser(
        description="flowledger vs LangGraph (SqliteSaver) vs DBOS on SQLite; "
        "run it with bash bench/run.sh"
    )
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument(
        "--quick", action="store_true", help="tiny N, 1 repetition, skip missing peers"
    )
    parser.add_argument(
        "--only",
        action="append",
        choices=SYSTEMS,
        help="run only this system (repeatable); the raw SQLite floor always runs",
    )
    parser.add_argument("--reps", type=int, default=None, help="repetitions (default 5)")
    parser.add_argument("--out", help="write the results into this Markdown file")
    parser.add_argument(
        "--out-block",
        default=None,
        help="the name of --out's generated block (default: results on SQLite, "
        "results-postgres with --backend postgres)",
    )
    parser.add_argument("--plot", help="write a PNG of the chain at N = 100, 300, 1000")
    parser.add_argument(
        "--workload",
        action="append",
        choices=[w.name for w in WORKLOADS.values()],
        help="run only this workload (repeatable; default: all)",
    )
    parser.add_argument("--concurrent-plot", help="write a PNG of g)'s per-step latency CDF")
    parser.add_argument(
        "--widths",
        type=_widths,
        default=FAN_WIDTHS,
        help="fan-out widths of workload c), comma-separated (default 8,16,32)",
    )
    parser.add_argument(
        "--fanout-plot", help="write a PNG of bytes and µs per super-step against the width"
    )
    parser.add_argument("--dir", help="where the databases go (default: a temporary folder)")
    parser.add_argument("--quiet", action="store_true", help="no progress on stderr")
    parser.add_argument(
        "--synchronous",
        choices=("FULL", "NORMAL", "OFF"),
        default="FULL",
        help="SQLite synchronous for every system (default FULL; OFF isolates CPU from fsync)",
    )
    parser.add_argument(
        "--backend",
        choices=("sqlite", "postgres"),
        default="sqlite",
        help="where every system keeps its state (default sqlite); postgres measures "
        f"{', '.join(POSTGRES_WORKLOADS)}, each on a fresh database of --postgres-url's server",
    )
    parser.add_argument(
        "--postgres-url",
        default=PG_URL,
        help=f"a database of the server to use with --backend postgres (default {PG_URL}; "
        f"${PG_URL_ENV}); the bench creates and drops databases there",
    )
    parser.add_argument(
        "--synchronous-commit",
        choices=("on", "remote_apply", "remote_write", "local", "off"),
        default="on",
        help="PostgreSQL synchronous_commit for every system (default on)",
    )
    parser.add_argument(
        "--profile",
        choices=[w.name for w in WORKLOADS.values() if w.name not in ("resume", "floor")],
        help="profile flowledger on this workload with pyinstrument instead of comparing "
        "(on --backend's database)",
    )
    args = parser.parse_args(argv)
    if args.worker:
        worker(json.loads(args.worker))
        return 0
    SYNC = os.environ[SYNC_ENV] = args.synchronous
    BACKEND = os.environ[BACKEND_ENV] = args.backend
    PG_URL = os.environ[PG_URL_ENV] = args.postgres_url
    PG_SYNC = os.environ[PG_SYNC_ENV] = args.synchronous_commit
    if BACKEND == "postgres":
        reason = postgres_unreachable(PG_URL)
        if reason is not None:
            print(
                f"PostgreSQL at {PG_URL} is unreachable ({reason}): "
                "skipping the PostgreSQL measurements",
                file=sys.stderr,
            )
            return 0
    if args.profile:
        return profile(args.profile, args.quick, args.dir)
    if args.reps is None:
        args.reps = 1 if args.quick else 5
    if args.reps < 1:
        parser.error("--reps must be at least 1")
    systems = list(dict.fromkeys(args.only or SYSTEMS))
    missing = [s for s in systems if not available(s)]
    if missing and not args.quick:
        parser.error(f"not importable: {', '.join(missing)} (use bash bench/run.sh)")
    if missing:
        print(f"skipping (not importable): {', '.join(missing)}", file=sys.stderr)
        systems = [s for s in systems if s not in missing]
    if not systems:
        parser.error("no system to run")

    LOAD_AT_START = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="flowledger-bench-", dir=args.dir) as root:
        bench = Bench(args, systems, root)
        try:
            bench.run()
        finally:
            if bench.postgres:
                bench.postgres.close()
    plotted = args.plot if args.plot and plot(bench, args.plot) else None
    concurrent_plotted = None
    if args.concurrent_plot and bench.latencies:
        durability = (
            f"PostgreSQL synchronous_commit={PG_SYNC}"
            if BACKEND == "postgres"
            else f"SQLite synchronous={SYNC}"
        )
        title = f"g) {bench.concurrent_runs()} concurrent runs, {durability}"
        if concurrent.plot(bench.latencies, args.concurrent_plot, title):
            concurrent_plotted = args.concurrent_plot
    fan_plotted = (
        args.fanout_plot if args.fanout_plot and fanout_plot(bench, args.fanout_plot) else None
    )
    command = "bash bench/run.sh " + " ".join(argv if argv is not None else sys.argv[1:])
    text = report(bench, command.strip(), plotted, fan_plotted, concurrent_plotted)
    print(text)
    if args.out:
        if BACKEND == "postgres":
            write_out(args.out, text, args.out_block or "results-postgres", "Results on PostgreSQL")
        else:
            write_out(args.out, text, args.out_block or "results")
    return 0


if __name__ == "__main__":
    sys.exit(main())
