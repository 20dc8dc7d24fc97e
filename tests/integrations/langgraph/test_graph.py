"""A real LangGraph graph on the checkpointer: a tool-calling loop whose tool pauses with
``interrupt()``, started here and resumed by a new process, on SQLite and PostgreSQL,
through the synchronous API (``graph.invoke``, as ``SqliteSaver`` users call it) and the
asynchronous one (``graph.ainvoke``)."""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

from flowledger.integrations.langgraph import FlowledgerSaver

from ..._postgres import postgres_url
from . import _agent as agent

SCRIPT = Path(agent.__file__).resolve()
ROOT = Path(__file__).resolve().parents[3]


def resume_in_new_process(url: str, thread_id: str) -> dict[str, Any]:
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), url, thread_id],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stderr
    result: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


EXPECTED = [
    ["HumanMessage", "pay ada 5"],
    ["AIMessage", ""],
    ["ToolMessage", "sent 5 to ada"],
    ["AIMessage", "done: sent 5 to ada"],
]


def check_history(saver: FlowledgerSaver, thread_id: str) -> None:
    """The thread's checkpoints form one chain, newest first, each the child of the next."""
    history = list(saver.list(agent.config(thread_id)))
    # the input, then one checkpoint per step: model, tools (paused, then resumed), model
    assert [h.metadata["step"] for h in history] == [3, 2, 1, 0, -1]
    for newer, older in itertools.pairwise(history):
        assert newer.parent_config is not None
        assert (
            newer.parent_config["configurable"]["checkpoint_id"]
            == older.config["configurable"]["checkpoint_id"]
        )
    assert history[-1].parent_config is None


def test_tool_loop_pauses_and_a_new_process_resumes_it(durable_url: str) -> None:
    thread_id = f"pay-{uuid.uuid4()}"
    with FlowledgerSaver.from_url(durable_url) as saver:
        graph = agent.build(saver)
        out = graph.invoke(
            {"messages": [HumanMessage("pay ada 5")]}, agent.config(thread_id), durability="sync"
        )
        (pause,) = out["__interrupt__"]
        assert pause.value == {"question": "send 5 to ada?", "amount": 5}
        state = graph.get_state(agent.config(thread_id))
        assert state.next == ("tools",)
        call = state.values["messages"][-1]
        assert isinstance(call, AIMessage) and call.tool_calls[0]["args"] == {
            "amount": 5,
            "to": "ada",
        }

    resumed = resume_in_new_process(durable_url, thread_id)
    assert resumed["next_before"] == ["tools"]
    assert resumed["messages"] == EXPECTED

    with FlowledgerSaver.from_url(durable_url) as saver:
        state = agent.build(saver).get_state(agent.config(thread_id))
        assert state.next == ()
        assert [[type(m).__name__, m.content] for m in state.values["messages"]] == EXPECTED
        tool_message = state.values["messages"][2]
        assert isinstance(tool_message, ToolMessage) and tool_message.tool_call_id == "call-1"
        check_history(saver, thread_id)


async def test_the_same_loop_through_the_async_api() -> None:
    """As ``AsyncPostgresSaver`` users run it (one backend: the API is the point)."""
    with postgres_url() as url:
        await _async_loop(url)


async def _async_loop(durable_url: str) -> None:
    thread_id = f"pay-{uuid.uuid4()}"
    async with FlowledgerSaver.from_url(durable_url) as saver:
        graph = agent.build(saver)
        out = await graph.ainvoke(
            {"messages": [HumanMessage("pay ada 5")]}, agent.config(thread_id), durability="sync"
        )
        assert out["__interrupt__"][0].value["amount"] == 5
        snapshot = await graph.aget_state(agent.config(thread_id))
        assert snapshot.next == ("tools",)
    resumed = resume_in_new_process(durable_url, thread_id)
    assert resumed["messages"] == EXPECTED
    async with FlowledgerSaver.from_url(durable_url) as saver:
        final = await agent.build(saver).aget_state(agent.config(thread_id))
        assert [m.content for m in final.values["messages"]][-1] == "done: sent 5 to ada"
        history = [item async for item in saver.alist(agent.config(thread_id))]
        assert [h.metadata["step"] for h in history] == sorted(
            (h.metadata["step"] for h in history), reverse=True
        )
