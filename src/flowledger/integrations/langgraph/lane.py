"""`SyncLane`: the synchronous ``put`` and ``put_writes`` of a saver on a driven loop
whose store can append without an event loop (SQLite: `BlockingAppend`), without
running the loop.

A step of ``graph.invoke`` (``durability="sync"``) calls ``put_writes`` for its tasks
and then ``put`` for its checkpoint, each from one of LangGraph's threads. On the lane:

* ``put_writes`` leaves its writes with the lane for up to `GATHER` seconds (LangGraph
  does not wait for them), for the step's checkpoint to take; if none comes, it appends
  them itself.
* ``put`` takes the writes left for its namespace and appends them and its checkpoint
  in one transaction (one fsync'd commit), as the loop's path does (`Writer.commit`).

Both build their records with the same code as the loop's path (`Writer.build_batch`,
`checkpoint_doc`, `writes_doc`) and append through `LogStore.append_blocking` on the
calling thread. They work on the saver's state only as the driven loop's *host*
(`LoopBridge.try_host`): no coroutine of the saver runs meanwhile, and calls from other
threads that arrive become guests, run once the lane is done. The lane is taken only when
nothing else is under way: this thread runs no event loop, no other thread hosts the
loop, no append of the namespace is in progress or gathering on the loop, and the
namespace's log is known (read or written before). Otherwise - and when the append finds
that another writer appended first, or needs carrier records - the call goes the loop's
way (as host, the lane drives the loop itself), which catches up and retries.

Outcomes are those of the loop's path: a write whose input is bad fails alone; a failed
append (a database error, a closed store) fails every caller whose records it held, and
nothing of them is written.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass, field
from typing import Any

from langchain_core.runnables import RunnableConfig

from ...storage import BlockingAppend, LedgerConflictError
from .bridge import LoopBridge, Outcome
from .errors import InvalidConfigError
from .logs import LogStore, ThreadLog
from .writing import GATHER, Built, Place, Writer, config_ids

__all__ = ["SyncLane"]

Key = tuple[str, str]
Checkpoint = tuple[
    Callable[[ThreadLog, Place], Built],
    Callable[[ThreadLog, Any], RunnableConfig],
    Callable[[], Coroutine[Any, Any, RunnableConfig]],
]
"""A checkpoint to append: its build, what follows its append (given the log and what
the build gave to remember), and the loop's path for it (a coroutine)."""


@dataclass(eq=False)
class _Writes:
    """A task's writes left for the step's checkpoint."""

    config: RunnableConfig
    checkpoint_id: str
    writes: Sequence[tuple[str, Any]]
    task_id: str
    task_path: str
    done: Outcome[None] = field(default_factory=Outcome)


class SyncLane:
    def __init__(
        self,
        bridge: LoopBridge,
        logs: LogStore,
        writer: Writer,
        ledger: BlockingAppend,
        slow_writes: Callable[..., Coroutine[Any, Any, None]],
    ) -> None:
        self.bridge = bridge
        self.logs = logs
        self.writer = writer
        self.ledger = ledger
        self._slow_writes = slow_writes  # the loop's path for writes (the saver's)
        self._mutex = threading.Lock()  # guards `_left`
        self._left: dict[Key, list[_Writes]] = {}
        self.gather = GATHER  # seconds writes wait for their checkpoint

    # -- the calls -----------------------------------------------------------------------------

    def put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str,
    ) -> bool:
        """Store a task's writes (see the module docs); False when the lane is not to be
        taken (the caller goes the loop's way, without waiting again)."""
        thread_id, checkpoint_ns, checkpoint_id = config_ids(config, need_checkpoint=True)
        assert checkpoint_id is not None
        if not isinstance(task_id, str) or not isinstance(task_path, str):
            raise InvalidConfigError("task_id", "task id and task path must be strings")
        if not writes:
            return True
        key = (thread_id, checkpoint_ns)
        item = _Writes(config, checkpoint_id, writes, task_id, task_path)
        with self._mutex:
            self._left.setdefault(key, []).append(item)
        try:
            item.done.result(timeout=self.gather)
            return True
        except TimeoutError:
            pass
        with self._mutex:
            left = self._left.get(key, [])
            mine = item in left
            if mine:
                left.remove(item)
                if not left:
                    del self._left[key]
        if not mine:  # a checkpoint took them: its outcome is theirs
            item.done.result()
            return True
        if not self.bridge.try_host():
            return False
        try:
            self._append(key, [item], None)
        finally:
            self.bridge.end_host()
        item.done.result()
        return True

    def put(self, key: Key, checkpoint: Checkpoint) -> RunnableConfig | None:
        """Append a checkpoint of namespace ``key`` with the writes left for it; None
        when the lane is not to be taken (the caller goes the loop's way)."""
        if not self.bridge.try_host():
            return None
        try:
            result: RunnableConfig = self._append(key, self._take(key), checkpoint)
            return result
        finally:
            self.bridge.end_host()

    def _take(self, key: Key) -> list[_Writes]:
        with self._mutex:
            return self._left.pop(key, [])

    # -- as host ---------------------------------------------------------------------------------

    def _append(
        self,
        key: Key,
        items: list[_Writes],
        checkpoint: Checkpoint | None,
    ) -> Any:
        """Append ``items`` and ``checkpoint`` in one transaction, or the loop's way (see
        the module docs); settle each item; return the checkpoint's outcome (or raise its
        error)."""
        log = self.logs.logs.get(key)
        fast = log is not None and log.tip > 0 and not log.sealed and self.writer.idle(*key)
        if fast:
            assert log is not None
            try:
                done = self._append_here(log, items, checkpoint)
            except LedgerConflictError:
                done = None  # another writer appended first: the loop's way catches up
            except BaseException as exc:
                for item in items:
                    item.done.set_exception(exc)
                raise
            if done is not None:
                return done[0]
        return self._the_loops_way(items, checkpoint)

    def _append_here(
        self,
        log: ThreadLog,
        items: list[_Writes],
        checkpoint: Checkpoint | None,
    ) -> tuple[RunnableConfig | None] | None:
        """One append on this thread; None, with nothing written or settled, when it
        must go the loop's way."""
        builds = [self._writes_build(item) for item in items]
        if checkpoint is not None:
            builds.append(checkpoint[0])
        docs, out, outcomes = self.writer.build_batch(log, builds)
        if not docs:
            for item, (_, error) in zip(items, outcomes, strict=False):
                item.done.set_exception(error)
            if checkpoint is not None:
                raise outcomes[-1][1]
            return (None,)
        if not self.logs.append_blocking(log, docs, out, self.ledger):
            return None
        for item, (ok, value) in zip(items, outcomes, strict=False):
            if ok:
                item.done.set_result(None)
            else:
                item.done.set_exception(value)
        if checkpoint is None:
            return (None,)
        ok, value = outcomes[-1]
        if not ok:
            raise value
        return (checkpoint[1](log, value),)

    def _writes_build(self, item: _Writes) -> Callable[[ThreadLog, Place], Built]:
        def build(log: ThreadLog, at: Place) -> Built:
            return self.writer.writes_doc(
                item.checkpoint_id, item.writes, item.task_id, item.task_path, log
            )

        return build

    def _the_loops_way(
        self,
        items: list[_Writes],
        checkpoint: Checkpoint | None,
    ) -> Any:
        """As host, drive the loop through the saver's coroutines: each item's writes,
        then the checkpoint."""
        loop = self.bridge.loop
        for item in items:
            try:
                loop.run_until_complete(
                    self._slow_writes(item.config, item.writes, item.task_id, item.task_path)
                )
            except BaseException as exc:
                item.done.set_exception(exc)
            else:
                item.done.set_result(None)
        if checkpoint is None:
            return None
        return loop.run_until_complete(checkpoint[2]())
