"""The saver's synchronous and asynchronous faces: one store, one home event loop, called
from synchronous code, from the home loop, and from another loop."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from flowledger.integrations.langgraph import FlowledgerSaver, SaverUsageError
from flowledger.storage import open_store

from ._checkpoints import CONFIG, checkpoint


def test_synchronous_calls_run_on_the_savers_own_loop(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 's.db'}"
    with FlowledgerSaver.from_url(url) as saver:
        first = saver.put(CONFIG, checkpoint(1), {"source": "input", "step": -1}, {"items": 2})
        second = saver.put(first, checkpoint(2), {"source": "loop", "step": 0}, {"items": 3})
        saver.put_writes(second, [("items", [9])], "task")
        latest = saver.get_tuple(CONFIG)
        assert latest is not None and latest.checkpoint["channel_values"] == {"items": [0, 1]}
        assert latest.pending_writes == [("task", "items", [9])]
        assert [t.metadata["step"] for t in saver.list(CONFIG)] == [0, -1]
        assert [t.metadata["step"] for t in saver.list(None, filter={"step": -1})] == [-1]
        # an async call from another loop (this thread's) is handed to the saver's loop
        found = asyncio.run(saver.aget_tuple(first))
        assert found is not None and found.checkpoint["channel_values"] == {"items": [0]}
        saver.copy_thread("t", "u")
        saver.prune(["u"])
        assert [t.metadata["step"] for t in saver.list({"configurable": {"thread_id": "u"}})] == [0]
        saver.delete_thread("t")
        assert saver.get_tuple(CONFIG) is None
        assert saver.get_next_version(None, None) == 1
        assert saver.get_next_version(7, None) == 8
        assert str(saver.get_next_version("00000000000000000000000000000003.0.5", None)).startswith(  # type: ignore[arg-type]
            "00000000000000000000000000000004."
        )


async def test_a_synchronous_call_on_the_savers_loop_is_refused(tmp_path: Path) -> None:
    async with FlowledgerSaver.from_url(f"sqlite:///{tmp_path / 's.db'}") as saver:
        with pytest.raises(SaverUsageError, match="await aget_tuple instead"):
            saver.get_tuple(CONFIG)
        with pytest.raises(SaverUsageError, match="use alist instead"):
            list(saver.list(CONFIG))
        assert await saver.aget_tuple(CONFIG) is None


def test_a_saver_needs_the_loop_of_its_store() -> None:
    async def opened() -> Any:
        return await open_store("memory://")

    store = asyncio.run(opened())
    with pytest.raises(SaverUsageError, match="from_url"):
        FlowledgerSaver(store)


def test_a_synchronous_call_from_a_thread_that_runs_another_loop(tmp_path: Path) -> None:
    """As in a notebook: ``graph.get_state`` called where an event loop already runs."""
    with FlowledgerSaver.from_url(f"sqlite:///{tmp_path / 's.db'}") as saver:
        saver.put(CONFIG, checkpoint(3), {"source": "input", "step": -1}, {"items": 4})

        async def inside_a_running_loop() -> Any:
            return saver.get_tuple(CONFIG)

        found = asyncio.run(inside_a_running_loop())
        assert found is not None and found.checkpoint["channel_values"] == {"items": [0, 1, 2]}


async def test_writes_and_the_next_checkpoint_share_one_commit(tmp_path: Path) -> None:
    """LangGraph does not wait for a task's writes before it saves the step's checkpoint:
    when both are under way together they are one append (one transaction)."""
    async with open_store(f"sqlite:///{tmp_path / 's.db'}") as store:
        saver = FlowledgerSaver(store)
        first = await saver.aput(
            CONFIG, checkpoint(1), {"source": "input", "step": -1}, {"items": 2}
        )
        appends: list[int] = []
        append = store.ledger.append

        async def counted(name: str, records: Any, **options: Any) -> int:
            appends.append(len(records))
            return await append(name, records, **options)

        store.ledger.append = counted  # type: ignore[method-assign]
        await asyncio.gather(
            saver.aput_writes(first, [("items", [5])], "task-1"),
            saver.aput_writes(first, [("items", [6])], "task-2"),
            saver.aput(first, checkpoint(2), {"source": "loop", "step": 0}, {"items": 3}),
        )
        assert appends == [3]
        await saver.aput_writes(first, [("items", [7])], "task-3")  # alone: after a short wait
        assert appends == [3, 1]
        before = await saver.aget_tuple(first)
        assert before is not None and [w[0] for w in before.pending_writes or []] == [
            "task-1",
            "task-2",
            "task-3",
        ]
        latest = await saver.aget_tuple(CONFIG)
        assert latest is not None and latest.checkpoint["channel_values"] == {"items": [0, 1]}


async def test_a_checkpoint_that_joined_cancelled_writes_is_still_saved() -> None:
    """A task's writes wait for the step's checkpoint to share their append. When the
    writes' caller is cancelled after the checkpoint joined them, the checkpoint (and the
    append) must go on without it; it used to wait forever for a batch nobody started."""
    async with open_store("memory://") as store:
        saver = FlowledgerSaver(store)
        first = await saver.aput(
            CONFIG, checkpoint(1), {"source": "input", "step": -1}, {"items": 2}
        )
        writes = asyncio.create_task(saver.aput_writes(first, [("items", [5])], "task-1"))
        await asyncio.sleep(0)  # the writes wait for company
        put = asyncio.create_task(
            saver.aput(first, checkpoint(2), {"source": "loop", "step": 0}, {"items": 3})
        )
        await asyncio.sleep(0)  # the checkpoint joins them and ends their wait
        writes.cancel()
        saved = await asyncio.wait_for(put, 30)  # a bound that only catches the hang
        latest = await saver.aget_tuple(CONFIG)
        assert latest is not None
        assert (
            latest.config["configurable"]["checkpoint_id"] == saved["configurable"]["checkpoint_id"]
        )
        with pytest.raises(asyncio.CancelledError):
            await writes


def test_a_synchronous_write_left_waiting_is_driven_by_the_next_call(tmp_path: Path) -> None:
    """graph.invoke saves a task's writes and the step's checkpoint from two executor
    threads: the writes wait for the checkpoint's thread, which commits both at once."""
    import functools
    import threading
    import time

    with FlowledgerSaver.from_url(f"sqlite:///{tmp_path / 's.db'}") as saver:
        first = saver.put(CONFIG, checkpoint(1), {"source": "input", "step": -1}, {"items": 2})
        appends: list[int] = []
        append = saver.store.ledger.append

        async def counted(name: str, records: Any, **options: Any) -> int:
            appends.append(len(records))
            return await append(name, records, **options)

        saver.store.ledger.append = counted  # type: ignore[method-assign]
        write = functools.partial(saver._put_writes, first, [("items", [5])], "task-1", "")
        # a wait long enough to catch a hang only: the put below ends it
        writer = threading.Thread(
            target=saver.bridge.call, args=(write, "put_writes"), kwargs={"defer": 60}
        )
        writer.start()
        while not saver.bridge._waiting:  # the write is waiting for a driver
            time.sleep(0.001)
        saver.put(first, checkpoint(2), {"source": "loop", "step": 0}, {"items": 3})
        writer.join(60)
        assert not writer.is_alive()
        assert appends == [2]  # one transaction for both
        found = saver.get_tuple(first)
        assert found is not None and found.pending_writes == [("task-1", "items", [5])]
