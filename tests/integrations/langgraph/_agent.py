"""A LangGraph tool-calling loop for the checkpointer's tests, also run as a process.

The "model" is scripted (no network): asked to pay, it calls the ``transfer`` tool; given
the tool's answer, it replies with it. The tool asks a person first, with LangGraph's
``interrupt()``. As a script (``python _agent.py URL THREAD``) it resumes the thread with
``Command(resume={"approved": true})`` on a saver of its own (a new process) and prints
the final messages as one JSON line.
"""

from __future__ import annotations

import json
import sys
from typing import Any

from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition
from langgraph.types import Command, interrupt


@tool
def transfer(amount: int, to: str) -> str:
    """Send money, once a person approved it."""
    answer = interrupt({"question": f"send {amount} to {to}?", "amount": amount})
    return f"sent {amount} to {to}" if answer.get("approved") else "refused"


def model(state: MessagesState) -> dict[str, Any]:
    last = state["messages"][-1]
    if isinstance(last, HumanMessage):
        call = {"name": "transfer", "args": {"amount": 5, "to": "ada"}, "id": "call-1"}
        return {"messages": [AIMessage(content="", tool_calls=[call])]}
    assert isinstance(last, ToolMessage), last
    return {"messages": [AIMessage(content=f"done: {last.content}")]}


def build(checkpointer: Any) -> Any:
    graph = StateGraph(MessagesState)
    graph.add_node("model", model)
    graph.add_node("tools", ToolNode([transfer]))
    graph.add_edge(START, "model")
    graph.add_conditional_edges("model", tools_condition)
    graph.add_edge("tools", "model")
    return graph.compile(checkpointer=checkpointer)


def config(thread_id: str) -> dict[str, Any]:
    return {"configurable": {"thread_id": thread_id}}


def main(url: str, thread_id: str) -> None:
    from flowledger.integrations.langgraph import FlowledgerSaver

    with FlowledgerSaver.from_url(url) as saver:
        graph = build(saver)
        pending = graph.get_state(config(thread_id))
        out = graph.invoke(Command(resume={"approved": True}), config(thread_id), durability="sync")
        print(
            json.dumps(
                {
                    "next_before": list(pending.next),
                    "messages": [[type(m).__name__, m.content] for m in out["messages"]],
                }
            ),
            flush=True,
        )


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
