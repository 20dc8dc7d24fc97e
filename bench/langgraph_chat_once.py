"""One run of `langgraph_saver.py`'s chat in this process, for instruction counts.

``python bench/langgraph_chat_once.py SAVER T`` builds the chat graph (a MessagesState
conversation: each turn adds a question and the bot's answer), runs 5 turns of it on a
warm-up thread, then T turns on a fresh thread, each one ``graph.invoke(...,
durability="sync")`` as the bench runs them, and prints the CPU time per turn. SAVER is
``sqlite-saver:PATH`` (LangGraph's ``SqliteSaver`` over a ``sqlite3`` connection in WAL mode
with ``synchronous=FULL``, as the bench opens it) or a flowledger store URL
(``FlowledgerSaver.from_url``).

Under ``valgrind --tool=callgrind`` the count for T=300 less the count for T=100, over
200, is the instructions per turn with the start-up (imports, opening) taken out; the
count does not depend on the machine's load::

    valgrind --tool=callgrind python bench/langgraph_chat_once.py \
        "sqlite:///a.db?synchronous=FULL" 100
"""

from __future__ import annotations

import sys
import time
import uuid

from langchain_core.messages import HumanMessage

from langgraph_loop_once import opened
from langgraph_saver import QUESTION_WORDS, chat_graph, text


def main(argv: list[str]) -> int:
    saver, turns = argv[0], int(argv[1])
    with opened(saver) as checkpointer:
        graph = chat_graph(checkpointer)
        warm = {"configurable": {"thread_id": "warm-up"}}
        for turn in range(5):
            question = HumanMessage(content=text(turn, "question", QUESTION_WORDS))
            graph.invoke({"messages": [question]}, warm, durability="sync")
        config = {"configurable": {"thread_id": str(uuid.uuid4())}}
        cpu = time.process_time()
        for turn in range(turns):
            question = HumanMessage(content=text(turn, "question", QUESTION_WORDS))
            out = graph.invoke({"messages": [question]}, config, durability="sync")
        cpu = time.process_time() - cpu
    assert len(out["messages"]) == 2 * turns, len(out["messages"])
    print(f"{(cpu / turns) * 1e6:.0f} CPU µs per turn ({turns} turns)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
