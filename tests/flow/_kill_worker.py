"""Child process of ``test_kill.py``: a 6-vertex chain on SQLite with logged side effects.

    python _kill_worker.py run    DB LOG RUN_ID GRANULARITY
    python _kill_worker.py resume DB LOG RUN_ID GRANULARITY

Each task appends ``{"event": "start"|"end", "vertex", "key", "pid"}`` lines to LOG (the
key is the vertex's idempotency key), sleeps briefly, and appends its name to ``vals``.
Every durable checkpoint is announced on stdout as ``{"revision": n}`` (hooks fire only
after the checkpoint is durable); the final line is ``{"status": ..., "state": ...}``.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import sys
import time
from typing import Any

from flowledger import flow
from flowledger.storage import open_store

VERTICES = ("s1", "s2", "s3", "s4", "s5", "s6")
TASK_SECONDS = 0.1  # long enough that a kill lands mid-task


def build(store: Any, log_path: str) -> flow.Runner[dict[str, Any]]:
    graph: flow.Graph[dict[str, Any]] = flow.Graph("kill-chain")

    def write(event: str, vertex: str, key: str) -> None:
        line = json.dumps({"event": event, "vertex": vertex, "key": key, "pid": os.getpid()})
        with open(log_path, "a", encoding="utf-8") as log:
            log.write(line + "\n")

    for vertex in VERTICES:

        def task(state: dict[str, Any], vertex: str = vertex) -> dict[str, Any]:
            key = flow.run_info().idempotency_key
            write("start", vertex, key)
            time.sleep(TASK_SECONDS)
            write("end", vertex, key)
            return {"vals": [*state["vals"], vertex]}

        graph.add_vertex(vertex, task)
    for source, target in itertools.pairwise(VERTICES):
        graph.add_edge(source, target)
    return graph.compile(entry=VERTICES[0], finish=VERTICES[-1], store=store)


def announce(run_id: str, revision: int, step: int) -> None:
    print(json.dumps({"revision": revision, "step": step}), flush=True)


async def main(mode: str, db: str, log_path: str, run_id: str, granularity: str) -> None:
    async with open_store(f"sqlite:///{db}") as storage:
        runner = build(flow.LedgerCheckpointStore(storage.ledger), log_path)
        hooks = flow.Hooks(on_checkpoint=announce)
        checkpoint = flow.Granularity(granularity)
        if mode == "run":
            result = await runner.run(
                {"vals": []}, run_id=run_id, hooks=hooks, checkpoint=checkpoint
            )
        elif mode == "resume":
            result = await runner.resume(run_id, None, hooks=hooks, checkpoint=checkpoint)
        else:
            raise SystemExit(f"unknown mode {mode!r}")
        print(json.dumps({"status": str(result.run.status), "state": result.state}), flush=True)


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:]))
