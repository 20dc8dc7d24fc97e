"""Rewriting a thread's history: prune (keep the latest), delete some runs, copy, delete -
on every backend, read back by a saver with nothing cached, with writes that land while
a rewrite runs kept, a crashed rewrite's leftovers ignored and then removed, and log
names never reused."""

from __future__ import annotations

import json
from typing import Any

import pytest
from langgraph.checkpoint.base import empty_checkpoint

from flowledger.integrations.langgraph import FlowledgerSaver, JsonSerializer, ThreadExistsError
from flowledger.integrations.langgraph.names import log_name
from flowledger.integrations.langgraph.rewrite import Rewriter
from flowledger.storage import AttachmentNotFoundError, Store, digest_of, open_store


def config(thread_id: str, checkpoint_ns: str = "") -> dict[str, Any]:
    return {"configurable": {"thread_id": thread_id, "checkpoint_ns": checkpoint_ns}}


def checkpoint(n: int, run_id: str = "run-1") -> tuple[dict[str, Any], dict[str, Any]]:
    cp: dict[str, Any] = dict(empty_checkpoint())
    cp["channel_values"] = {
        "log": [f"entry {i} " + "x" * 80 for i in range(n)],
        "n": n,
        "note": note(n),
    }
    cp["channel_versions"] = {"log": n + 1, "n": n + 1, "note": n + 1}
    return cp, {"source": "loop", "step": n, "run_id": run_id}


def note(n: int) -> str:
    return f"note {n}: " + "z" * 100  # long enough to be an attachment of its own


def note_digest(n: int) -> str:
    return digest_of(JsonSerializer().dumps(note(n)))


async def grow(
    saver: FlowledgerSaver, cfg: dict[str, Any], steps: int, run_id: str = "run-1"
) -> dict[str, Any]:
    current = cfg
    for n in range(1, steps + 1):
        cp, meta = checkpoint(n, run_id)
        current = await saver.aput(current, cp, meta, {"log": n + 1, "n": n + 1, "note": n + 1})
    return current


async def names(store: Store, thread_id: str) -> list[str]:
    return await store.ledger.names(f"langgraph/threads/{thread_id}/")


async def test_keep_latest_rewrites_each_namespace_and_sweeps(store_url: str) -> None:
    async with open_store(store_url) as store:
        saver = FlowledgerSaver(store)
        latest = await grow(saver, config("t"), 12)
        await saver.aput_writes(
            latest, [("log", ["pending " + "y" * 80]), ("n", 99)], "task-1", "p"
        )
        child = await grow(saver, config("t", "sub:1"), 3)
        other = await grow(saver, config("u"), 4)
        await saver.aprune(["t"], strategy="keep_latest")

        cold = FlowledgerSaver(store)
        kept = [h async for h in cold.alist(config("t"))]
        assert [h.metadata["step"] for h in kept] == [12]
        assert kept[0].checkpoint["channel_values"] == checkpoint(12)[0]["channel_values"]
        assert [(w[0], w[1]) for w in kept[0].pending_writes or []] == [
            ("task-1", "log"),
            ("task-1", "n"),
        ]
        assert kept[0].pending_writes[0][2] == ["pending " + "y" * 80]  # type: ignore[index]
        sub = [h async for h in cold.alist(config("t", "sub:1"))]
        assert [h.config["configurable"]["checkpoint_id"] for h in sub] == [
            child["configurable"]["checkpoint_id"]
        ]
        assert len([h async for h in cold.alist(config("u"))]) == 4  # other threads untouched
        assert (await cold.aget_tuple(other)) is not None
        # the next generation of each namespace replaced the first
        assert sorted(n.rsplit("/", 2)[-1] for n in await names(store, "t")) == ["2", "2"]
        # what only the removed checkpoints held was swept; what is kept or shared stays
        with pytest.raises(AttachmentNotFoundError):
            await store.ledger.attachments([note_digest(5)])
        assert len(await store.ledger.attachments([note_digest(12), note_digest(4)])) == 2


async def test_a_write_that_lands_during_a_rewrite_is_kept(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    url = f"sqlite:///{tmp_path / 'r.db'}?synchronous=OFF"
    async with open_store(url) as store:
        saver = FlowledgerSaver(store)
        other = FlowledgerSaver(store)  # another writer of the same thread
        latest = await grow(saver, config("t"), 5)
        original = Rewriter._seal
        late: dict[str, Any] = {}

        async def seal_after_a_late_write(self: Rewriter, *args: Any) -> None:
            if not late:
                await other.aget_tuple(config("t"))
                cp, meta = checkpoint(6)
                late.update(await other.aput(latest, cp, meta, {"log": 7, "n": 7, "note": 7}))
                await other.aput_writes(late, [("n", 7)], "late-task")
            await original(self, *args)

        monkeypatch.setattr(Rewriter, "_seal", seal_after_a_late_write)
        await saver.aprune(["t"], strategy="keep_latest")
        cold = FlowledgerSaver(store)
        history = [h async for h in cold.alist(config("t"))]
        assert [h.metadata["step"] for h in history] == [6, 5]
        assert history[0].checkpoint["channel_values"] == checkpoint(6)[0]["channel_values"]
        assert history[0].pending_writes == [("late-task", "n", 7)]
        # both writers carry on in the new generation
        for writer in (saver, other):
            found = await writer.aget_tuple(config("t"))
            assert found is not None and found.metadata["step"] == 6
        cp, meta = checkpoint(7)
        await other.aput(late, cp, meta, {"log": 8, "n": 8, "note": 8})
        assert [h.metadata["step"] async for h in cold.alist(config("t"))] == [7, 6, 5]


async def test_a_crashed_rewrite_is_ignored_then_removed_and_names_are_never_reused(
    store_url: str,
) -> None:
    async with open_store(store_url) as store:
        saver = FlowledgerSaver(store)
        await grow(saver, config("t"), 3)
        # what a rewrite that died before sealing leaves: a partial next generation
        partial = log_name("langgraph", "t", "", 2)
        header = {"lg": 1, "thread": "t", "ns": "", "gen": 2}
        await store.ledger.append(partial, [json.dumps(header).encode()], expected=0)
        cold = FlowledgerSaver(store)
        assert [h.metadata["step"] async for h in cold.alist(config("t"))] == [3, 2, 1]
        await cold.aprune(["t"], strategy="keep_latest")
        assert [n.rsplit("/", 1)[-1] for n in await names(store, "t")] == ["3"]
        assert [h.metadata["step"] async for h in FlowledgerSaver(store).alist(config("t"))] == [3]
        # deleting and writing the thread again takes a name no log had before
        await cold.adelete_thread("t")
        assert await names(store, "t") == []
        await grow(FlowledgerSaver(store), config("t"), 1)
        assert [n.rsplit("/", 1)[-1] for n in await names(store, "t")] == ["4"]
        assert [h.metadata["step"] async for h in FlowledgerSaver(store).alist(config("t"))] == [1]


async def test_copy_thread_copies_every_namespace_and_refuses_an_existing_target(
    store_url: str,
) -> None:
    async with open_store(store_url) as store:
        saver = FlowledgerSaver(store)
        latest = await grow(saver, config("src"), 6)
        await saver.aput_writes(latest, [("n", 1)], "task")
        await grow(saver, config("src", "sub:9"), 2)
        await saver.acopy_thread("src", "dst")
        cold = FlowledgerSaver(store)
        for ns in ("", "sub:9"):
            source = [h async for h in cold.alist(config("src", ns))]
            copied = [h async for h in cold.alist(config("dst", ns))]
            assert [h.checkpoint for h in copied] == [h.checkpoint for h in source]
            assert [h.pending_writes for h in copied] == [h.pending_writes for h in source]
            assert all(h.config["configurable"]["thread_id"] == "dst" for h in copied)
        with pytest.raises(ThreadExistsError, match="'dst'"):
            await saver.acopy_thread("src", "dst")


async def test_delete_for_runs_removes_only_those_runs(store_url: str) -> None:
    async with open_store(store_url) as store:
        saver = FlowledgerSaver(store)
        first = await grow(saver, config("a"), 3, run_id="r1")
        current = first
        for n in range(4, 7):
            cp, meta = checkpoint(n, "r2")
            current = await saver.aput(current, cp, meta, {"log": n + 1, "n": n + 1, "note": n + 1})
        await saver.aput_writes(first, [("n", 1)], "task-of-r1")
        await grow(saver, config("b"), 2, run_id="r1")
        await saver.adelete_for_runs(["r1"])
        cold = FlowledgerSaver(store)
        left = [h async for h in cold.alist(config("a"))]
        assert [h.metadata["run_id"] for h in left] == ["r2"] * 3
        assert left[0].checkpoint["channel_values"] == checkpoint(6)[0]["channel_values"]
        assert [h async for h in cold.alist(config("b"))] == []
        assert await cold.aget_tuple(first) is None


async def test_any_thread_id_and_namespace(store_url: str) -> None:
    """Thread ids and namespaces are any text: the plain ones name logs as they are, the
    others encoded (long ones hashed, the true id in the log's header)."""
    ids = ["plain-id", "Mixed Case / slash", "ünïcödé ✓", "x" * 300, ""]
    async with open_store(store_url) as store:
        saver = FlowledgerSaver(store)
        for thread_id in ids:
            for ns in ("", "tools:3f2a|inner:9", "n" * 250):
                await grow(saver, config(thread_id, ns), 2)
        cold = FlowledgerSaver(store)
        everything = [h async for h in cold.alist(None)]
        assert len(everything) == len(ids) * 3 * 2
        assert {h.config["configurable"]["thread_id"] for h in everything} == set(ids)
        for thread_id in ids:
            namespaces = {
                h.config["configurable"]["checkpoint_ns"]
                async for h in cold.alist({"configurable": {"thread_id": thread_id}})
            }
            assert namespaces == {"", "tools:3f2a|inner:9", "n" * 250}
        await cold.adelete_thread("x" * 300)
        assert len([h async for h in cold.alist(None)]) == (len(ids) - 1) * 3 * 2
