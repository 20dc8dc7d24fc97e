"""Bytes that grow with what changed: an appended message costs its message, not the
conversation; an unchanged value costs nothing; lists are read back whole from a cold
saver, on every branch of a forked thread, with a bounded chain."""

from __future__ import annotations

import json
from typing import Any

from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.graph import START, MessagesState, StateGraph

from flowledger.integrations.langgraph import FlowledgerSaver
from flowledger.integrations.langgraph.lists import CHAIN_FACTOR, CHAIN_MIN_BYTES, ENTRY_BYTES
from flowledger.integrations.langgraph.names import log_name
from flowledger.storage import open_store

TURNS = 60


def chat_graph(saver: FlowledgerSaver) -> Any:
    def bot(state: MessagesState) -> dict[str, Any]:
        n = len(state["messages"])
        return {"messages": [AIMessage(content=f"answer {n}: " + "words of a reply " * 6)]}

    graph = StateGraph(MessagesState)
    graph.add_node("bot", bot)
    graph.add_edge(START, "bot")
    return graph.compile(checkpointer=saver)


async def stored_bytes(saver: FlowledgerSaver) -> int:
    usage = await saver.store.ledger.usage(await saver.store.ledger.names("langgraph/"))
    return usage.bytes + usage.exclusive_attachment_bytes


async def last_checkpoint_doc(saver: FlowledgerSaver, thread_id: str) -> dict[str, Any]:
    name = log_name("langgraph", thread_id, "", 1)
    records = await saver.store.ledger.read(name, after=0, limit=10_000)
    docs = [json.loads(r.payload) for r in records]
    return [d for d in docs if "c" in d][-1]


async def test_a_growing_conversation_costs_each_message_once(tmp_path: Any) -> None:
    url = f"sqlite:///{tmp_path / 'chat.db'}?synchronous=OFF"  # bytes, not durability
    config = {"configurable": {"thread_id": "chat"}}
    sizes = []
    async with FlowledgerSaver.from_url(url) as saver:
        graph = chat_graph(saver)
        for turn in range(TURNS):
            question = HumanMessage(content=f"question {turn}: " + "words of a question " * 4)
            await graph.ainvoke({"messages": [question]}, config, durability="sync")
            if (turn + 1) % 20 == 0:
                sizes.append(await stored_bytes(saver))
        doc = await last_checkpoint_doc(saver, "chat")
        assert set(doc["vals"]["messages"]) == {"d", "f", "k", "a", "n"}  # a delta ...
        assert doc["vals"]["messages"]["k"] == 2 * TURNS - 1  # ... keeping all but the answer
        assert len(doc["vals"]["messages"]["a"]) == 1
    first, second, third = sizes[0], sizes[1] - sizes[0], sizes[2] - sizes[1]
    # Whole lists each step would make the last 20 turns cost ~5x the first 20.
    assert third <= 1.3 * first and second <= 1.3 * first, sizes

    async with FlowledgerSaver.from_url(url) as cold:  # a new saver: nothing cached
        state = await chat_graph(cold).aget_state(config)
        messages = state.values["messages"]
        assert len(messages) == 2 * TURNS
        assert [type(m).__name__ for m in messages[:2]] == ["HumanMessage", "AIMessage"]
        assert messages[-1].content.startswith(f"answer {2 * TURNS - 1}:")
        history = [h async for h in cold.alist(config)]
        assert len(history) == 3 * TURNS
        for item in history:  # every checkpoint reads back its own list
            step_messages = item.checkpoint["channel_values"].get("messages", [])
            assert [m.content for m in step_messages] == [
                m.content for m in messages[: len(step_messages)]
            ]


def checkpoint(values: dict[str, Any], versions: dict[str, Any]) -> dict[str, Any]:
    cp: dict[str, Any] = dict(empty_checkpoint())
    cp["channel_values"] = values
    cp["channel_versions"] = versions
    return cp


async def test_forked_branches_read_back_their_own_lists(store_url: str) -> None:
    config = {"configurable": {"thread_id": "fork", "checkpoint_ns": ""}}
    meta = {"source": "loop", "step": 0}
    async with open_store(store_url) as store:
        saver = FlowledgerSaver(store)
        root = await saver.aput(
            config, checkpoint({"items": ["a", "b"]}, {"items": 1}), meta, {"items": 1}
        )
        left = await saver.aput(
            root, checkpoint({"items": ["a", "b", "c"]}, {"items": 2}), meta, {"items": 2}
        )
        right = await saver.aput(
            root, checkpoint({"items": ["a", "b", "d", "e"]}, {"items": 2}), meta, {"items": 2}
        )
        rewritten = await saver.aput(
            right, checkpoint({"items": ["z"]}, {"items": 3}), meta, {"items": 3}
        )
        cold = FlowledgerSaver(store)  # nothing cached
        for where, expected in (
            (root, ["a", "b"]),
            (left, ["a", "b", "c"]),
            (right, ["a", "b", "d", "e"]),
            (rewritten, ["z"]),
        ):
            found = await cold.aget_tuple(where)
            assert found is not None and found.checkpoint["channel_values"]["items"] == expected


async def test_an_unchanged_list_costs_nothing_and_its_chain_stays_bounded() -> None:
    config = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}
    docs = [f"document {i}: " + "text " * 40 for i in range(50)]
    async with FlowledgerSaver.from_url("memory://") as saver:
        current = await saver.aput(
            config, checkpoint({"docs": docs, "n": 0}, {"docs": 1, "n": 1}), {}, {"docs": 1, "n": 1}
        )
        one_step = None
        for n in range(1, 400):
            before = await stored_bytes(saver)
            cp = checkpoint({"docs": docs, "n": n}, {"docs": 1, "n": n + 1})
            current = await saver.aput(current, cp, {"step": n}, {"n": n + 1})
            if n == 1:
                one_step = await stored_bytes(saver) - before
        doc = await last_checkpoint_doc(saver, "t")
        entry = doc["vals"]["docs"]
        assert set(entry) == {"r", "f", "n"}  # a reference, not the list again
        assert one_step is not None and one_step < 400  # the documents are ~11 KB
        assert entry["f"] > 1  # a long chain was cut and started again
        log = await saver.logs.log("t", "")
        span = log.bytes_from(entry["f"])
        assert span is not None and span <= max(CHAIN_MIN_BYTES, CHAIN_FACTOR * ENTRY_BYTES * 50)
        found = await FlowledgerSaver(saver.store).aget_tuple(config)  # a saver with no cache
        assert found is not None and found.checkpoint["channel_values"] == {"docs": docs, "n": 399}


async def test_a_cold_saver_reads_a_long_chain(tmp_path: Any) -> None:
    url = f"sqlite:///{tmp_path / 'chain.db'}?synchronous=OFF"
    config = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}
    async with FlowledgerSaver.from_url(url) as saver:
        current = await saver.aput(config, checkpoint({"log": []}, {"log": 1}), {}, {"log": 1})
        items: list[str] = []
        for n in range(300):
            items = [*items, f"entry {n}"]
            current = await saver.aput(
                current, checkpoint({"log": items}, {"log": n + 2}), {"step": n}, {"log": n + 2}
            )
    async with FlowledgerSaver.from_url(url) as cold:
        found = await cold.aget_tuple(config)
        assert found is not None and found.checkpoint["channel_values"]["log"] == items
        middle = [h async for h in cold.alist(config, limit=151)][-1]
        assert middle.checkpoint["channel_values"]["log"] == items[:150]


async def test_a_message_changed_in_place_is_stored_again() -> None:
    """Elements are remembered by identity between checkpoints (not serialised again);
    one changed in place (LangGraph does not forbid it) must not come back stale."""
    config = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}
    first, second = HumanMessage(content="first", id="m1"), AIMessage(content="second", id="m2")
    async with open_store("memory://") as store:
        saver = FlowledgerSaver(store)
        current = await saver.aput(
            config, checkpoint({"messages": [first, second]}, {"messages": 1}), {}, {"messages": 1}
        )
        first.content = "first, edited in place"
        second.additional_kwargs["note"] = "added in place"
        third = AIMessage(content="third", id="m3")
        await saver.aput(
            current,
            checkpoint({"messages": [first, second, third]}, {"messages": 2}),
            {},
            {"messages": 2},
        )
        found = await FlowledgerSaver(store).aget_tuple(config)
        assert found is not None
        stored = found.checkpoint["channel_values"]["messages"]
        assert [m.content for m in stored] == ["first, edited in place", "second", "third"]
        assert stored[1].additional_kwargs == {"note": "added in place"}
        old = await FlowledgerSaver(store).aget_tuple(current)
        assert old is not None and [
            m.content for m in old.checkpoint["channel_values"]["messages"]
        ] == ["first", "second"]
