"""The synchronous lane (`lane`): ``put`` and ``put_writes`` of ``with
FlowledgerSaver.from_url("sqlite:///...")`` append on the calling thread, without the
saver's event loop, with the outcomes and the single transaction of the loop's path."""

from __future__ import annotations

import itertools
import operator
import sqlite3
import threading
import time
from pathlib import Path
from typing import Annotated, Any, TypedDict

import pytest
from langgraph.graph import END, START, StateGraph

from flowledger.integrations.langgraph import FlowledgerSaver
from flowledger.storage.sqlite.database import Database

from ._checkpoints import CONFIG, checkpoint


def spy(saver: FlowledgerSaver) -> dict[str, list[int]]:
    """Count the store's appends: blocking (the lane) and awaited (the loop's path)."""
    calls: dict[str, list[int]] = {"blocking": [], "awaited": []}
    ledger: Any = saver.store.ledger
    blocking, awaited = ledger.append_blocking, ledger.append

    def counted_blocking(name: str, records: Any, **options: Any) -> int:
        calls["blocking"].append(len(records))
        return int(blocking(name, records, **options))

    async def counted(name: str, records: Any, **options: Any) -> int:
        calls["awaited"].append(len(records))
        return int(await awaited(name, records, **options))

    ledger.append_blocking = counted_blocking
    ledger.append = counted
    return calls


def left_waiting(saver: FlowledgerSaver, config: Any, writes: Any, task: str) -> Any:
    """put_writes on a thread of its own, back once its writes wait for a checkpoint."""
    assert saver.lane is not None
    errors: list[BaseException] = []

    def run() -> None:
        try:
            saver.put_writes(config, writes, task)
        except BaseException as exc:
            errors.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    while not saver.lane._left and thread.is_alive():
        time.sleep(0.001)
    return thread, errors


def test_a_step_is_one_blocking_append_without_the_loop(tmp_path: Path) -> None:
    with FlowledgerSaver.from_url(f"sqlite:///{tmp_path / 's.db'}") as saver:
        assert saver.lane is not None
        first = saver.put(CONFIG, checkpoint(1), {"source": "input", "step": -1}, {"items": 2})
        calls = spy(saver)
        saver.lane.gather = 60.0  # a wait that only catches a hang: the put below ends it
        thread, errors = left_waiting(saver, first, [("items", [5])], "task-1")
        second = saver.put(first, checkpoint(2), {"source": "loop", "step": 0}, {"items": 3})
        thread.join(60)
        assert not thread.is_alive() and not errors
        assert calls == {"blocking": [2], "awaited": []}  # writes and checkpoint together
        saver.lane.gather = 0.001
        saver.put_writes(second, [("items", [6])], "task-2")  # alone, after its wait
        assert calls == {"blocking": [2, 1], "awaited": []}
        assert saver.bridge._hosting is False
        found = saver.get_tuple(first)
        assert found is not None and found.pending_writes == [("task-1", "items", [5])]
        latest = saver.get_tuple(CONFIG)
        assert latest is not None and latest.checkpoint["channel_values"] == {"items": [0, 1]}
        assert latest.pending_writes == [("task-2", "items", [6])]
        assert latest.parent_config == first


def test_a_failed_commit_leaves_nothing_of_the_step(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with FlowledgerSaver.from_url(f"sqlite:///{tmp_path / 's.db'}") as saver:
        assert saver.lane is not None
        first = saver.put(CONFIG, checkpoint(1), {"source": "input", "step": -1}, {"items": 2})
        real = Database.commit
        failures = [sqlite3.OperationalError("disk I/O error")]

        def commit(self: Database) -> None:
            if failures:
                raise failures.pop()
            real(self)

        monkeypatch.setattr(Database, "commit", commit)
        saver.lane.gather = 60.0
        thread, errors = left_waiting(saver, first, [("items", [5])], "task-1")
        with pytest.raises(sqlite3.OperationalError, match="disk I/O error"):
            saver.put(first, checkpoint(2), {"source": "loop", "step": 0}, {"items": 3})
        thread.join(60)
        assert not thread.is_alive()
        assert len(errors) == 1 and "disk I/O error" in str(errors[0])
        latest = saver.get_tuple(CONFIG)
        assert latest is not None and latest.config == first
        assert not latest.pending_writes
        # the saver goes on from what is stored
        second = saver.put(first, checkpoint(2), {"source": "loop", "step": 0}, {"items": 3})
        latest = saver.get_tuple(CONFIG)
        assert latest is not None and latest.config == second
    with FlowledgerSaver.from_url(f"sqlite:///{tmp_path / 's.db'}") as reopened:
        assert [t.metadata["step"] for t in reopened.list(CONFIG)] == [0, -1]


def test_bad_writes_fail_alone_and_the_checkpoint_goes_on(tmp_path: Path) -> None:
    with FlowledgerSaver.from_url(f"sqlite:///{tmp_path / 's.db'}") as saver:
        assert saver.lane is not None
        first = saver.put(CONFIG, checkpoint(1), {"source": "input", "step": -1}, {"items": 2})
        saver.lane.gather = 60.0
        thread, errors = left_waiting(saver, first, [("items",)], "task-1")  # not a pair
        saver.put(first, checkpoint(2), {"source": "loop", "step": 0}, {"items": 3})
        thread.join(60)
        assert len(errors) == 1
        found = saver.get_tuple(first)
        assert found is not None and not found.pending_writes
        assert [t.metadata["step"] for t in saver.list(CONFIG)] == [0, -1]


def test_another_writer_first_goes_the_loops_way_and_catches_up(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 's.db'}"
    with FlowledgerSaver.from_url(url) as one, FlowledgerSaver.from_url(url) as other:
        first = one.put(CONFIG, checkpoint(1), {"source": "input", "step": -1}, {"items": 2})
        second = one.put(first, checkpoint(2), {"source": "loop", "step": 0}, {"items": 3})
        other.put(second, checkpoint(3), {"source": "loop", "step": 1}, {"items": 4})
        calls = spy(one)
        # one's log ends at `second`: its blocking append finds another tip
        one.put(second, checkpoint(4), {"source": "loop", "step": 2}, {"items": 5})
        assert calls["blocking"] == [1]  # refused: nothing written
        assert calls["awaited"]  # the loop's way: a conflict too, then caught up
        assert [t.metadata["step"] for t in other.list(CONFIG)] == [2, 1, 0, -1]


class Count(TypedDict):
    count: int
    seen: Annotated[list[int], operator.add]


def test_threads_running_graphs_on_one_saver(tmp_path: Path) -> None:
    """Several threads invoke graphs on one saver at once (and read it meanwhile): each
    thread's history is whole and linear, and the steps took the lane."""
    steps, threads = 15, 4

    def step(state: Count) -> dict[str, Any]:
        return {"count": state["count"] + 1, "seen": [state["count"]]}

    builder = StateGraph(Count)
    builder.add_node("step", step)
    builder.add_edge(START, "step")
    builder.add_conditional_edges("step", lambda s: "step" if s["count"] < steps else END)
    with FlowledgerSaver.from_url(f"sqlite:///{tmp_path / 's.db'}") as saver:
        calls = spy(saver)
        graph = builder.compile(checkpointer=saver)
        alone = graph.invoke({"count": 0, "seen": []}, {"configurable": {"thread_id": "alone"}})
        assert alone["count"] == steps
        assert calls["blocking"], "no step took the lane"  # (threads below mostly queue)
        errors: list[BaseException] = []
        barrier = threading.Barrier(threads + 1)

        def run(me: int) -> None:
            try:
                barrier.wait(60)
                for round_ in range(2):
                    config = {"configurable": {"thread_id": f"t{me}-{round_}"}}
                    out = graph.invoke({"count": 0, "seen": []}, config, durability="sync")
                    assert out == {"count": steps, "seen": list(range(steps))}
            except BaseException as exc:
                errors.append(exc)

        def read() -> None:
            try:
                barrier.wait(60)
                for _ in range(20):
                    for me in range(threads):
                        saver.get_tuple({"configurable": {"thread_id": f"t{me}-0"}})
            except BaseException as exc:
                errors.append(exc)

        workers = [threading.Thread(target=run, args=(me,)) for me in range(threads)]
        reader = threading.Thread(target=read)
        for worker in [*workers, reader]:
            worker.start()
        for worker in [*workers, reader]:
            worker.join(120)
        assert not any(w.is_alive() for w in [*workers, reader]), "a thread hung"
        assert not errors, errors
        for me in range(threads):
            for round_ in range(2):
                config = {"configurable": {"thread_id": f"t{me}-{round_}"}}
                history = list(saver.list(config))
                assert [t.metadata["step"] for t in history] == list(range(steps, -2, -1))
                for child, parent in itertools.pairwise(history):
                    assert child.parent_config is not None
                    assert (
                        child.parent_config["configurable"]["checkpoint_id"]
                        == parent.config["configurable"]["checkpoint_id"]
                    )
                assert history[0].checkpoint["channel_values"]["count"] == steps
