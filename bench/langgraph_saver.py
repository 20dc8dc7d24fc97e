"""LangGraph on its own savers and on FlowledgerSaver, side by side in one run.

The same LangGraph graphs, ``durability="sync"`` for both systems:

* on SQLite: ``SqliteSaver`` (langgraph-checkpoint-sqlite) against ``FlowledgerSaver`` over
  ``sqlite:///...``, both in WAL mode with ``synchronous=FULL`` (read back on the
  connection each one writes through);
* on PostgreSQL: ``PostgresSaver`` (langgraph-checkpoint-postgres) against
  ``FlowledgerSaver`` over ``postgresql://...`` (``--postgres-url``; skipped with one line
  when the server cannot be reached), each measurement on a database of its own with
  ``synchronous_commit=on``.

Workloads:

a) loop - one vertex routing to itself N times (state ``{count, payload}``, a 1 KiB payload
   that never changes): µs and database bytes per step;
b) chat - a conversation of T turns: each turn adds a question (~20 words) and the bot's
   answer (~70 words) to a ``MessagesState`` (``add_messages``), so the message list grows
   every turn: µs and bytes
   per turn, the database's total size, its growth per 100 turns, and the growth of the
   last 100 turns over the first 100 (1.0: linear; a store that writes the whole list each
   step grows with the square of the conversation).

Every measurement runs in a fresh process on a fresh database; systems alternate (the
order rotates every repetition); medians, min-max and ratios (FlowledgerSaver over the
LangGraph saver) come from the same run. Database bytes are measured the same way for
both: SQLite ``db + db-wal`` after a ``wal_checkpoint(TRUNCATE)``, PostgreSQL the sum of
``pg_total_relation_size`` over the tables outside the catalogs; the clock is stopped
while a size is taken.

``--baseline-src DIR`` adds a third system, "baseline": FlowledgerSaver imported from
another checkout's ``src`` (say, ``main``'s before a change), alternated with the others in
the same run, so old and new code are measured side by side. ``--workloads loop`` runs the
loop alone.

``python bench/langgraph_saver.py [--quick] [--reps N] [--workloads loop chat]
[--baseline-src DIR] [--out docs/benchmarks.md]`` (``bash bench/run.sh langgraph ...``
runs it with the project's interpreter).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Sequence
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import itertools

from compare import _cell, _ratio, _version, db_bytes, postgres_unreachable, write_out

SYSTEMS = ("flowledger", "langgraph")
PEER = {"sqlite": "SqliteSaver", "postgres": "PostgresSaver"}
KIB = 1024
LOOP_N, QUICK_LOOP_N = 1000, 20
CHAT_TURNS, QUICK_CHAT_TURNS = 500, 20
MARK = 100  # the chat's size is taken every MARK turns (QUICK: every 5)
# Message text is drawn from a fixed vocabulary by a seeded generator: it varies like
# prose, so a database that compresses text (PostgreSQL's TOAST) compresses it as it
# would a real conversation, not 100 copies of one sentence.
_VOCABULARY = (
    "the a of to and in is it that for on with as was this be by are from at or an have "
    "not but what all were when we there can more if out so about which their time would "
    "up other into has its two than then first some could them these may people only new "
    "state graph node step tool call message answer question result error value thread "
    "store check model agent reply request order report update change system user data "
    "because while after before under over between through during without within along"
)
WORDS = _VOCABULARY.split()
QUESTION_WORDS, ANSWER_WORDS = 20, 70


def text(turn: int, role: str, words: int) -> str:
    import random

    pick = random.Random(f"{role}-{turn}")
    return " ".join(pick.choice(WORDS) for _ in range(words))


SIZE_SQL = (
    "SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0) FROM pg_class c "
    "JOIN pg_namespace n ON n.oid = c.relnamespace WHERE c.relkind IN ('r', 'm') "
    "AND n.nspname NOT IN ('pg_catalog', 'information_schema') "
    "AND n.nspname NOT LIKE 'pg_toast%'"
)


# --- the worker: one measurement in its own process ------------------------------------------


def size_of(backend: str, db: str) -> int:
    if backend == "postgres":
        import psycopg

        with psycopg.connect(db, autocommit=True) as conn:
            row = conn.execute(SIZE_SQL).fetchone()  # type: ignore[arg-type]
        return int(row[0]) if row else 0
    return db_bytes(db)


def loop_graph(saver: Any, n: int) -> Any:
    from typing import TypedDict

    from langgraph.graph import END, START, StateGraph

    class Plain(TypedDict):
        count: int
        payload: str

    def tick(state: Plain) -> dict[str, Any]:
        return {"count": state["count"] + 1}

    builder = StateGraph(Plain)
    builder.add_node("tick", tick)
    builder.add_edge(START, "tick")
    builder.add_conditional_edges(
        "tick", lambda s: "tick" if s["count"] < n else END, ["tick", END]
    )
    return builder.compile(checkpointer=saver)


def chat_graph(saver: Any) -> Any:
    from langchain_core.messages import AIMessage
    from langgraph.graph import START, MessagesState, StateGraph

    def bot(state: MessagesState) -> dict[str, Any]:
        turn = len(state["messages"]) // 2
        return {"messages": [AIMessage(content=text(turn, "answer", ANSWER_WORDS))]}

    builder = StateGraph(MessagesState)
    builder.add_node("bot", bot)
    builder.add_edge(START, "bot")
    return builder.compile(checkpointer=saver)


def open_saver(system: str, backend: str, db: str) -> tuple[Any, Callable[[], None], list[Any]]:
    """The saver, how to close it, and the durability settings read back on its connection."""
    if system in ("flowledger", "baseline"):
        from flowledger.integrations.langgraph import FlowledgerSaver

        url = db if backend == "postgres" else f"sqlite:///{db}?synchronous=FULL"
        opener = FlowledgerSaver.from_url(url)
        saver = opener.__enter__()
        settings = saver.bridge.call(lambda: _fl_settings(saver.store, backend), "settings")
        return saver, lambda: opener.__exit__(None, None, None), settings
    if backend == "postgres":
        import psycopg
        from langgraph.checkpoint.postgres import PostgresSaver
        from psycopg.rows import dict_row

        # the connection PostgresSaver.from_conn_string makes
        conn = psycopg.connect(db, autocommit=True, prepare_threshold=0, row_factory=dict_row)
        pg_saver = PostgresSaver(conn)  # type: ignore[arg-type]
        pg_saver.setup()
        row = conn.execute("SHOW synchronous_commit").fetchone()
        return pg_saver, conn.close, [row["synchronous_commit"] if row else "?"]
    from langgraph.checkpoint.sqlite import SqliteSaver

    lite = sqlite3.connect(db, check_same_thread=False)
    # SqliteSaver.setup() switches to WAL; synchronous is set to what flowledger uses
    lite.execute("PRAGMA journal_mode=WAL")
    lite.execute("PRAGMA synchronous=FULL")
    lite_saver = SqliteSaver(lite)
    lite_saver.setup()
    settings = [lite.execute(f"PRAGMA {p}").fetchone()[0] for p in ("synchronous", "journal_mode")]
    return lite_saver, lite.close, settings


async def _fl_settings(store: Any, backend: str) -> list[Any]:
    if backend == "postgres":
        async with store.ledger._db.connection() as conn:
            row = await (await conn.execute("SHOW synchronous_commit")).fetchone()
            return [row[0]]

    def read(conn: Any) -> list[Any]:
        return [conn.execute(f"PRAGMA {p}").fetchone()[0] for p in ("synchronous", "journal_mode")]

    return store.ledger._db.run(read)  # type: ignore[no-any-return]


def worker(job: dict[str, Any]) -> dict[str, Any]:
    system, backend, db, n = job["system"], job["backend"], job["db"], job["n"]
    saver, close, settings = open_saver(system, backend, db)
    empty = size_of(backend, db)
    marks: list[list[int]] = []
    paused = 0.0
    try:
        if job["workload"] == "loop":
            graph = loop_graph(saver, n)
            config = {"configurable": {"thread_id": str(uuid.uuid4())}, "recursion_limit": n + 10}
            started, cpu = time.perf_counter(), time.process_time()
            out = graph.invoke({"count": 0, "payload": "x" * KIB}, config, durability="sync")
            assert out["count"] == n, out
        else:
            from langchain_core.messages import HumanMessage

            graph = chat_graph(saver)
            config = {"configurable": {"thread_id": str(uuid.uuid4())}}
            every = job["mark"]
            started, cpu = time.perf_counter(), time.process_time()
            for turn in range(n):
                question = HumanMessage(content=text(turn, "question", QUESTION_WORDS))
                out = graph.invoke({"messages": [question]}, config, durability="sync")
                if (turn + 1) % every == 0:
                    stopped = time.perf_counter()
                    marks.append([turn + 1, size_of(backend, db)])
                    paused += time.perf_counter() - stopped
            assert len(out["messages"]) == 2 * n, len(out["messages"])
        seconds = time.perf_counter() - started - paused
        cpu = time.process_time() - cpu
    finally:
        close()
    return {
        "seconds": seconds,
        "cpu": cpu,
        "empty": empty,
        "final": size_of(backend, db),
        "marks": marks,
        "settings": settings,
    }


# --- the parent: databases, alternation, the report -------------------------------------------


class Databases:
    """A fresh database per measurement: an SQLite file in a temporary folder, or a
    PostgreSQL database (``synchronous_commit`` set on it, dropped afterwards)."""

    def __init__(self, backend: str, root: str, pg_url: str) -> None:
        self.backend = backend
        self.root = root
        self.pg_url = pg_url
        self.prefix = f"bench_lg_{uuid.uuid4().hex[:8]}"
        self.count = 0

    def _admin(self, statement: str) -> None:
        import psycopg

        with psycopg.connect(self.pg_url, autocommit=True) as conn:
            conn.execute(statement)  # type: ignore[arg-type]

    def fresh(self, system: str) -> str:
        self.count += 1
        if self.backend == "sqlite":
            folder = tempfile.mkdtemp(dir=self.root)
            return os.path.join(folder, "bench.db")
        from urllib.parse import urlsplit, urlunsplit

        name = f"{self.prefix}_{system}_{self.count}"
        self._admin(f'CREATE DATABASE "{name}"')
        self._admin(f"ALTER DATABASE \"{name}\" SET synchronous_commit = 'on'")
        return urlunsplit(urlsplit(self.pg_url)._replace(path=f"/{name}", query=""))

    def discard(self, db: str) -> None:
        if self.backend == "sqlite":
            shutil.rmtree(os.path.dirname(db), ignore_errors=True)
            return
        from urllib.parse import urlsplit

        name = urlsplit(db).path.lstrip("/")
        self._admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def spawn(job: dict[str, Any]) -> dict[str, Any]:
    argv = [sys.executable, os.path.abspath(__file__), "--worker", json.dumps(job)]
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "LANGSMITH_TRACING": "false"}
    if job["system"] == "baseline":
        env["PYTHONPATH"] = os.pathsep.join(filter(None, (job["src"], env.get("PYTHONPATH"))))
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=3600, env=env)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    if proc.returncode != 0 or not lines:
        raise RuntimeError(
            f"worker {job['system']}/{job['backend']}/{job['workload']} failed "
            f"(exit {proc.returncode}):\n{proc.stdout[-2000:]}\n{proc.stderr[-4000:]}"
        )
    result: dict[str, Any] = json.loads(lines[-1])
    return result


def _setting(values: list[Any]) -> str:
    if len(values) == 1:
        return f"synchronous_commit={values[0]}"
    names = {0: "OFF", 1: "NORMAL", 2: "FULL", 3: "EXTRA"}
    return f"synchronous={names.get(values[0], values[0])} journal_mode={values[1]}"


Samples = dict[tuple[str, str, str, str], list[float]]  # (backend, system, workload, metric)


def measure(
    args: argparse.Namespace,
    backend: str,
    root: str,
    samples: Samples,
    settings: dict[str, set[str]],
) -> None:
    databases = Databases(backend, root, args.postgres_url)
    loop_n = QUICK_LOOP_N if args.quick else LOOP_N
    turns = QUICK_CHAT_TURNS if args.quick else CHAT_TURNS
    mark = 5 if args.quick else MARK
    systems = SYSTEMS + (("baseline",) if args.baseline_src else ())
    for rep in range(args.reps):
        for index, workload in enumerate(args.workloads):
            shift = (rep + index) % len(systems)
            for system in systems[shift:] + systems[:shift]:
                db = databases.fresh(system)
                try:
                    n = loop_n if workload == "loop" else turns
                    job = {
                        "system": system,
                        "backend": backend,
                        "workload": workload,
                        "db": db,
                        "n": n,
                        "mark": mark,
                        "src": args.baseline_src,
                    }
                    out = spawn(job)
                finally:
                    databases.discard(db)
                grown = out["final"] - out["empty"]
                key = (backend, system, workload)
                samples.setdefault((*key, "us"), []).append(out["seconds"] / n * 1e6)
                samples.setdefault((*key, "cpu"), []).append(out["cpu"] / n * 1e6)
                samples.setdefault((*key, "bytes"), []).append(grown / n)
                settings.setdefault(f"{backend}/{system}", set()).add(_setting(out["settings"]))
                if workload == "chat":
                    sizes = [out["empty"]] + [size for _, size in out["marks"]]
                    steps = [b - a for a, b in itertools.pairwise(sizes)]
                    samples.setdefault((*key, "total_mb"), []).append(out["final"] / 1e6)
                    samples.setdefault((*key, "linearity"), []).append(
                        steps[-1] / steps[0] if steps and steps[0] else 0.0
                    )
                    for (at, _), step in zip(out["marks"], steps, strict=False):
                        samples.setdefault((*key, f"grow@{at}"), []).append(step / mark)
                if not args.quiet:
                    print(
                        f"  {backend:8s} {system:10s} {workload:4s} n={n:<5d} "
                        f"{out['seconds'] / n * 1e6:9.0f} µs {grown / n:10.0f} bytes per step/turn",
                        file=sys.stderr,
                        flush=True,
                    )


ROWS = (
    ("loop", "us", "µs/step", ".0f"),
    ("loop", "cpu", "CPU µs/step", ".0f"),
    ("loop", "bytes", "bytes/step", ".0f"),
    ("chat", "us", "µs/turn", ".0f"),
    ("chat", "cpu", "CPU µs/turn", ".0f"),
    ("chat", "bytes", "bytes/turn", ".0f"),
    ("chat", "total_mb", "database MB at the end", ".2f"),
    ("chat", "linearity", "growth of the last turns / the first", ".2f"),
)


def table(backend: str, samples: Samples, quick: bool) -> list[str]:
    peer = PEER[backend]
    loop_n = QUICK_LOOP_N if quick else LOOP_N
    turns = QUICK_CHAT_TURNS if quick else CHAT_TURNS
    baseline = any(k[0] == backend and k[1] == "baseline" for k in samples)
    extra = " baseline | baseline / " + peer + " |" if baseline else ""
    lines = [
        f"| workload | metric | FlowledgerSaver | {peer} | FlowledgerSaver / {peer} |{extra}",
        "|---|---|--:|--:|--:|" + ("--:|--:|" if baseline else ""),
    ]
    titles = {"loop": f"a) 1-vertex loop, N={loop_n}", "chat": f"b) growing chat, T={turns} turns"}
    for workload, metric, unit, fmt in ROWS:
        mine = samples.get((backend, "flowledger", workload, metric), [])
        theirs = samples.get((backend, "langgraph", workload, metric), [])
        if not mine and not theirs:
            continue
        row = (
            f"| {titles[workload]} | {unit} | {_cell(mine, fmt)} | {_cell(theirs, fmt)} "
            f"| {_ratio(mine, theirs)} |"
        )
        if baseline:
            old = samples.get((backend, "baseline", workload, metric), [])
            row += f" {_cell(old, fmt)} | {_ratio(old, theirs)} |"
        lines.append(row)
    marks = sorted(
        {int(k[3].split("@")[1]) for k in samples if k[0] == backend and k[3].startswith("grow@")}
    )
    if marks:
        lines += [
            "",
            f"Growth of the database per turn, by stretch of the conversation ({backend}):",
            "",
            f"| turns | FlowledgerSaver bytes/turn | {peer} bytes/turn |",
            "|--:|--:|--:|",
        ]
        step = marks[0]
        for at in marks:
            mine = samples.get((backend, "flowledger", "chat", f"grow@{at}"), [])
            theirs = samples.get((backend, "langgraph", "chat", f"grow@{at}"), [])
            lines.append(
                f"| {at - step + 1}-{at} | {_cell(mine, '.0f')} | {_cell(theirs, '.0f')} |"
            )
    return lines


def _commit(src: str) -> str:
    try:
        out = subprocess.run(
            ["git", "-C", src, "log", "-1", "--format=%h %s"], capture_output=True, text=True
        )
    except OSError:
        return "commit unknown"
    return out.stdout.strip() or "commit unknown"


def report(
    args: argparse.Namespace,
    command: str,
    samples: Samples,
    settings: dict[str, set[str]],
    skipped: dict[str, str],
    load: tuple[float, ...],
) -> str:
    import platform

    end = os.getloadavg()
    lines = [
        f"Command: `{command}` ({args.reps} repetition(s), systems alternated).",
        "",
        f"- {os.cpu_count()} cores; load average at start: {', '.join(f'{x:.2f}' for x in load)}, "
        f"at the end: {', '.join(f'{x:.2f}' for x in end)}",
        f"- Python {platform.python_version()}; SQLite {sqlite3.sqlite_version}",
        "- packages: "
        + ", ".join(
            f"{d} {_version(d)}"
            for d in (
                "flowledger",
                "langgraph",
                "langgraph-checkpoint",
                "langgraph-checkpoint-sqlite",
                "langgraph-checkpoint-postgres",
                "langchain-core",
            )
        ),
        "- read back on the connection each saver writes through: "
        + "; ".join(f"{k}: {', '.join(sorted(v))}" for k, v in sorted(settings.items())),
        "",
        "Medians (min-max); ratios are FlowledgerSaver's median over the LangGraph saver's "
        "(below 1: FlowledgerSaver is faster or smaller).",
    ]
    if args.baseline_src:
        lines.append(
            f"Baseline: FlowledgerSaver from `{args.baseline_src}` ({_commit(args.baseline_src)})."
        )
    for backend in args.backends:
        lines += ["", f"**{'SQLite' if backend == 'sqlite' else 'PostgreSQL'}**", ""]
        if backend in skipped:
            lines.append(
                f"Not measured: PostgreSQL at {args.postgres_url} is unreachable "
                f"({skipped[backend]})."
            )
            continue
        lines += table(backend, samples, args.quick)
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--quick", action="store_true", help="tiny N (a smoke test)")
    parser.add_argument("--reps", type=int, default=None, help="repetitions (default 3, quick 1)")
    parser.add_argument(
        "--backends", nargs="+", choices=("sqlite", "postgres"), default=["sqlite", "postgres"]
    )
    parser.add_argument(
        "--postgres-url",
        default=os.environ.get(
            "FLOWLEDGER_BENCH_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test"
        ),
    )
    parser.add_argument(
        "--workloads", nargs="+", choices=("loop", "chat"), default=["loop", "chat"]
    )
    parser.add_argument(
        "--baseline-src",
        help="also measure FlowledgerSaver imported from this src folder (old code)",
    )
    parser.add_argument("--dir", help="where the SQLite databases go (default a temporary folder)")
    parser.add_argument(
        "--out", help="write the report into this Markdown file's results-langgraph block"
    )
    parser.add_argument("--quiet", action="store_true")
    args = parser.parse_args(argv)
    if args.worker:
        print(json.dumps(worker(json.loads(args.worker))), flush=True)
        return 0
    if args.reps is None:
        args.reps = 1 if args.quick else 3
    load = os.getloadavg()
    root = tempfile.mkdtemp(prefix="bench-lg-", dir=args.dir)
    samples: Samples = {}
    settings: dict[str, set[str]] = {}
    skipped: dict[str, str] = {}
    try:
        for backend in args.backends:
            if backend == "postgres":
                reason = postgres_unreachable(args.postgres_url)
                if reason is not None:
                    skipped[backend] = reason
                    print(
                        f"PostgreSQL at {args.postgres_url} is unreachable ({reason}): "
                        "not measured",
                        file=sys.stderr,
                    )
                    continue
            measure(args, backend, root, samples, settings)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    command = "python bench/langgraph_saver.py " + " ".join(
        a for a in (argv if argv is not None else sys.argv[1:])
    )
    text = report(args, command.strip(), samples, settings, skipped, load)
    print(text)
    if args.out:
        write_out(args.out, text, name="results-langgraph", heading="LangGraph savers")
    return 0


if __name__ == "__main__":
    sys.exit(main())
