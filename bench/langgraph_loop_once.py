"""One run of `langgraph_saver.py`'s loop in this process, for instruction counts.

``python bench/langgraph_loop_once.py SAVER N`` builds the loop graph (one vertex routing
to itself N times over ``{count, payload}``, a 1 KiB payload), runs 5 steps of it on a
warm-up thread, then one ``graph.invoke(..., durability="sync")`` of N steps, and prints
the CPU time per step. SAVER is ``sqlite-saver:PATH`` (LangGraph's ``SqliteSaver`` over a
``sqlite3`` connection in WAL mode with ``synchronous=FULL``, as the bench opens it) or a
flowledger store URL (``FlowledgerSaver.from_url``).

Under ``valgrind --tool=callgrind`` the count for N=600 less the count for N=200, over
400, is the instructions per step with the start-up (imports, opening) taken out; the
count does not depend on the machine's load (docs/benchmarks.md, "LangGraph savers")::

    valgrind --tool=callgrind python bench/langgraph_loop_once.py \
        "sqlite:///a.db?synchronous=FULL" 200 --gather 10

``--gather S`` lets a step's writes wait up to S seconds for the step's checkpoint on the
synchronous lane (2 ms by default). At full speed they always share its commit; under
valgrind, about 50 times slower, the 2 ms sometimes runs out first and the step commits
twice, more often the busier the machine, so counts are compared with ``--gather 10``.
"""

from __future__ import annotations

import contextlib
import sqlite3
import sys
import time
import uuid
from collections.abc import Iterator
from typing import Any

from langgraph_saver import KIB, loop_graph


@contextlib.contextmanager
def opened(saver: str) -> Iterator[Any]:
    if saver.startswith("sqlite-saver:"):
        from langgraph.checkpoint.sqlite import SqliteSaver

        conn = sqlite3.connect(saver.split(":", 1)[1], check_same_thread=False)
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=FULL")
        lite = SqliteSaver(conn)
        lite.setup()
        try:
            yield lite
        finally:
            conn.close()
        return
    from flowledger.integrations.langgraph import FlowledgerSaver

    with FlowledgerSaver.from_url(saver) as flowledger:
        yield flowledger


def main(argv: list[str]) -> int:
    saver, n = argv[0], int(argv[1])
    if argv[2:4] and argv[2] == "--gather":
        from flowledger.integrations.langgraph import lane

        lane.GATHER = float(argv[3])  # read when the saver's lane is made
    with opened(saver) as checkpointer:
        graph = loop_graph(checkpointer, n)
        warm = {"configurable": {"thread_id": "warm-up"}, "recursion_limit": n + 10}
        graph.invoke({"count": n - 5, "payload": "x" * KIB}, warm, durability="sync")
        config = {"configurable": {"thread_id": str(uuid.uuid4())}, "recursion_limit": n + 10}
        cpu = time.process_time()
        out = graph.invoke({"count": 0, "payload": "x" * KIB}, config, durability="sync")
        cpu = time.process_time() - cpu
    assert out["count"] == n, out
    print(f"{(cpu / n) * 1e6:.0f} CPU µs per step ({n} steps)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
