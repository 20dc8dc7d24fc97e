"""One process of the single-writer test: runs a counting loop on a thread with
``single_writer=True`` once the start file exists, and prints one JSON line: ``{"ok":
true, "count": n}`` or ``{"error": "<class name>"}``.

``python _writer.py URL THREAD STEPS START_FILE``
"""

from __future__ import annotations

import json
import os
import sys
import time
from typing import Any, TypedDict

from langgraph.graph import END, START, StateGraph


class Count(TypedDict):
    count: int
    writer: str


def build(checkpointer: Any, steps: int) -> Any:
    def tick(state: Count) -> dict[str, Any]:
        return {"count": state["count"] + 1}

    graph = StateGraph(Count)
    graph.add_node("tick", tick)
    graph.add_edge(START, "tick")
    graph.add_conditional_edges(
        "tick", lambda s: "tick" if s["count"] < steps else END, ["tick", END]
    )
    return graph.compile(checkpointer=checkpointer)


def main(url: str, thread_id: str, steps: int, start_file: str) -> None:
    from flowledger.integrations.langgraph import FlowledgerSaver, SaverError

    with FlowledgerSaver.from_url(url, single_writer=True) as saver:
        graph = build(saver, steps)
        print(json.dumps({"ready": os.getpid()}), flush=True)
        while not os.path.exists(start_file):
            time.sleep(0.005)
        config = {"configurable": {"thread_id": thread_id}, "recursion_limit": steps + 10}
        try:
            out = graph.invoke({"count": 0, "writer": str(os.getpid())}, config, durability="sync")
        except SaverError as exc:
            print(json.dumps({"error": type(exc).__name__, "message": str(exc)}), flush=True)
            return
        print(json.dumps({"ok": True, "count": out["count"], "writer": out["writer"]}), flush=True)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4])
