"""`FlowledgerSaver`: LangGraph's checkpointer over any flowledger store.

Switching an application is one line::

    with FlowledgerSaver.from_url("sqlite:///checkpoints.db") as checkpointer:  # was SqliteSaver
        graph = builder.compile(checkpointer=checkpointer)
        graph.invoke(inputs, {"configurable": {"thread_id": "t1"}})

    async with FlowledgerSaver.from_url("postgresql://...") as checkpointer:  # AsyncPostgresSaver
        ...

It implements the whole ``BaseCheckpointSaver`` contract, synchronous and asynchronous
(`bridge`: all work runs on one event loop; on SQLite, synchronous ``put`` and
``put_writes`` append on the calling thread without it, `lane`), including ``delete_thread``,
``delete_for_runs``, ``copy_thread`` and ``prune``. What it stores (`records`, `lists`,
`values`): one ledger log per thread and namespace, a checkpoint record of what changed,
values through the serde (JSON only; never pickle) as content-addressed attachments, and
lists by what was added. Options:

* ``serde``: LangGraph's serializer protocol; default `JsonSerializer` (JSON only).
* ``single_writer``: one writer per thread (`leases`): a second process writing a thread
  gets a typed error instead of forking its history.
* ``prefix``: where in the store the threads live (default ``langgraph``).
"""

from __future__ import annotations

import asyncio
import builtins
import functools
from collections.abc import AsyncIterator, Callable, Collection, Iterator, Sequence
from datetime import datetime
from types import TracebackType
from typing import Any, Final, TypeVar

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    BaseCheckpointSaver,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
)
from langgraph.checkpoint.serde.base import SerializerProtocol

from ...storage import BlockingAppend, Store, open_store
from .bridge import LoopBridge
from .errors import InvalidConfigError, SaverUsageError
from .lane import SyncLane
from .leases import AdminLease, ThreadLeases
from .logs import LogStore, ThreadLog
from .names import DEFAULT_PREFIX, check_prefix
from .reading import Reader
from .records import CheckpointRecord
from .retention import ThreadPruneReport, ThreadRetention, run_retention
from .rewrite import Rewriter
from .serde import JsonSerializer
from .values import Encoder
from .writing import GATHER, Place, Writer, config_ids

__all__ = ["FlowledgerSaver", "SaverOpener"]

T = TypeVar("T")
STRATEGIES: Final = ("keep_latest", "delete")


class FlowledgerSaver(BaseCheckpointSaver[int]):
    """LangGraph's checkpointer on a flowledger `Store` (see the module documentation).

    Construct it inside the event loop that opened ``store`` (or use `from_url`, which
    opens and closes the store too). ``single_writer`` takes a lease per thread while
    writing it (``lease_ttl`` seconds, renewed while held; given back after
    ``lease_idle`` seconds without a write)."""

    def __init__(
        self,
        store: Store,
        *,
        serde: SerializerProtocol | None = None,
        single_writer: bool = False,
        lease_ttl: float = 15.0,
        lease_idle: float = 5.0,
        prefix: str = DEFAULT_PREFIX,
        bridge: LoopBridge | None = None,
        leases_on: tuple[Store, LoopBridge] | None = None,
    ) -> None:
        super().__init__(serde=serde if serde is not None else JsonSerializer())
        if not isinstance(store, Store):
            raise InvalidConfigError("store", f"a flowledger Store, not {type(store).__name__}")
        if bridge is None:
            try:
                bridge = LoopBridge.here()
            except RuntimeError:
                raise SaverUsageError(
                    "create FlowledgerSaver(store) inside the event loop that opened the store, "
                    "or open it with FlowledgerSaver.from_url(url)"
                ) from None
        if not 0.05 <= lease_idle <= 3600:
            raise InvalidConfigError("lease_idle", "must be between 0.05 and 3600 seconds")
        self.store = store
        self.prefix = check_prefix(prefix)
        self.single_writer = single_writer
        self.bridge = bridge
        self.logs = LogStore(store, self.prefix)
        # The leases renew on a loop that always runs: the home loop, unless it is driven
        # by the calls (`bridge`), when `from_url` gives them a loop (and store) of their own.
        lease_store, lease_home = leases_on if leases_on is not None else (store, bridge)
        self.leases = (
            ThreadLeases(lease_store, self.prefix, ttl=lease_ttl, idle=lease_idle, home=lease_home)
            if single_writer
            else None
        )
        encoder = Encoder(self.serde)
        self.reader = Reader(self.logs, self.serde, encoder)
        self.writer = Writer(self.logs, encoder, self.leases)
        self.rewriter = Rewriter(self.logs, self.reader, AdminLease(store, self.prefix))
        # Synchronous puts on a driven loop skip the loop where the store can append
        # without one (`lane`); leases renew on a loop, so a single writer keeps to it.
        self.lane = (
            SyncLane(bridge, self.logs, self.writer, store.ledger, self._put_writes)
            if bridge.driven and self.leases is None and isinstance(store.ledger, BlockingAppend)
            else None
        )
        self._owns_store = False
        self._closed = False

    # -- opening and closing ---------------------------------------------------------------

    @classmethod
    def from_url(cls, url: str, **options: Any) -> SaverOpener:
        """Open a store and a saver on it: ``with FlowledgerSaver.from_url(url) as saver``
        (a home loop on a thread of its own) or ``async with ...`` (the running loop)."""
        return SaverOpener(url, options)

    async def aclose(self) -> None:
        """Give back the thread leases; close the store if the saver opened it."""
        await self.bridge.run(self._close)

    def close(self) -> None:
        self.bridge.call(self._close, "close")

    async def _close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self.leases is not None:
            await self.leases.close()
        if self._owns_store:
            await self.store.close()

    def with_allowlist(self, extra_allowlist: Collection[tuple[str, ...]]) -> FlowledgerSaver:
        """LangGraph's strict mode names the classes a graph's state may hold: they are
        allowed to be rebuilt by this saver's `JsonSerializer`."""
        if isinstance(self.serde, JsonSerializer):
            self.serde.allow(extra_allowlist)
        return self

    def get_next_version(self, current: int | str | None, channel: None) -> int:
        """Versions are integers (1, 2, 3, ...): values are stored by content, not by
        version, so the random suffix other savers add is not needed; a text version
        (a thread another saver began) continues in its own form."""
        if isinstance(current, str):
            number = int(current.split(".")[0]) + 1
            return f"{number:032}.{0.0:016}"  # type: ignore[return-value]
        return 1 if current is None else int(current) + 1

    # -- reading ---------------------------------------------------------------------------

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        return await self.bridge.run(functools.partial(self._get_tuple, config))

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        return self.bridge.call(functools.partial(self._get_tuple, config), "get_tuple")

    async def _get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        thread_id, checkpoint_ns, checkpoint_id = config_ids(config)
        log = await self.logs.refresh(await self.logs.log(thread_id, checkpoint_ns))
        if log.tip == 0:
            return None
        if checkpoint_id is None:
            if log.latest is None:
                return None
            seq = log.latest[1]
        else:
            found = await self.reader.find(log, checkpoint_id)
            if found is None:
                return None
            seq = found
        record = await self.logs.record(log, seq)
        assert isinstance(record, CheckpointRecord)
        return await self.reader.tuple_of(log, record, config if checkpoint_id else None)

    async def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        make = functools.partial(self._list, config, filter, before, limit)
        async for item in self.bridge.iterate(make):
            yield item

    def list(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointTuple]:
        make = functools.partial(self._list, config, filter, before, limit)
        return self.bridge.iterate_sync(make, "list")

    async def _list(
        self,
        config: RunnableConfig | None,
        wanted: dict[str, Any] | None,
        before: RunnableConfig | None,
        limit: int | None,
    ) -> AsyncIterator[CheckpointTuple]:
        if limit is not None and limit <= 0:
            return
        before_id = config_ids(before)[2] if before else None
        logs = await self._logs_of(config)
        checkpoint_id = config_ids(config)[2] if config else None
        items: builtins.list[tuple[ThreadLog, CheckpointRecord]] = []
        for log in logs:
            for record in await self.reader.listing(
                log, checkpoint_id=checkpoint_id, before=before_id, wanted=wanted
            ):
                items.append((log, record))
        items.sort(key=lambda item: item[1].id, reverse=True)
        async for item in self.reader.tuples(items, limit):
            yield item

    async def _logs_of(self, config: RunnableConfig | None) -> builtins.list[ThreadLog]:
        """The current logs a listing reads: one namespace, every namespace of a thread,
        or every thread."""
        if config:
            thread_id, _, _ = config_ids(config)
            checkpoint_ns = config["configurable"].get("checkpoint_ns")
            if checkpoint_ns is not None:
                log = await self.logs.refresh(await self.logs.log(thread_id, checkpoint_ns))
                return [log] if log.tip else []
            return await self.rewriter.thread_logs(thread_id)
        return [
            log
            for thread in await self.rewriter.threads()
            for log in await self.rewriter.thread_logs(thread)
        ]

    # -- writing ---------------------------------------------------------------------------

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        return await self.bridge.run(
            functools.partial(self._put, config, checkpoint, metadata, new_versions)
        )

    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        slow = functools.partial(self._put, config, checkpoint, metadata, new_versions)
        if self.lane is not None and not self.bridge.on_home():
            thread_id, checkpoint_ns, build, finish = self._prepare_put(
                config, checkpoint, metadata, new_versions
            )
            done = self.lane.put((thread_id, checkpoint_ns), (build, finish, slow))
            if done is not None:
                return done
        return self.bridge.call(slow, "put")

    def _prepare_put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> tuple[
        str,
        str,
        Callable[[ThreadLog, Place], Any],
        Callable[[ThreadLog, Any], RunnableConfig],
    ]:
        """A checkpoint, checked: its namespace, the build of its record, and what
        follows its append (remember its stored form; the config naming it)."""
        thread_id, checkpoint_ns, parent_id = config_ids(config)
        parts = self.writer.checkpoint_parts(config, checkpoint, metadata)
        values = parts_values(checkpoint)
        versions = dict(new_versions or {})

        def build(log: ThreadLog, at: Place) -> Any:
            return self.writer.checkpoint_doc(log, at, parts, parent_id, values, versions)

        def finish(log: ThreadLog, state: Any) -> RunnableConfig:
            log.cps.remember(parts["c"], state)
            return {
                "configurable": {
                    "thread_id": thread_id,
                    "checkpoint_ns": checkpoint_ns,
                    "checkpoint_id": parts["c"],
                }
            }

        return thread_id, checkpoint_ns, build, finish

    async def _put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        thread_id, checkpoint_ns, build, finish = self._prepare_put(
            config, checkpoint, metadata, new_versions
        )
        log, state = await self.writer.commit(thread_id, checkpoint_ns, build)
        return finish(log, state)

    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        await self.bridge.run(
            functools.partial(self._put_writes, config, writes, task_id, task_path)
        )

    def put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        if self.lane is not None and not self.bridge.on_home():
            if self.lane.put_writes(config, writes, task_id, task_path):
                return
            defer = 0.0  # the lane waited already
        else:
            defer = GATHER
        self.bridge.call(
            functools.partial(self._put_writes, config, writes, task_id, task_path),
            "put_writes",
            defer=defer,
        )

    async def _put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str,
    ) -> None:
        thread_id, checkpoint_ns, checkpoint_id = config_ids(config, need_checkpoint=True)
        assert checkpoint_id is not None
        if not isinstance(task_id, str) or not isinstance(task_path, str):
            raise InvalidConfigError("task_id", "task id and task path must be strings")
        if not writes:
            return

        def build(log: ThreadLog, at: Place) -> Any:
            return self.writer.writes_doc(checkpoint_id, writes, task_id, task_path, log)

        await self.writer.commit(thread_id, checkpoint_ns, build, gather=True)

    # -- deleting, copying, pruning ------------------------------------------------------------

    async def adelete_thread(self, thread_id: str) -> None:
        await self.bridge.run(functools.partial(self.rewriter.delete_thread, str(thread_id)))

    def delete_thread(self, thread_id: str) -> None:
        self.bridge.call(
            functools.partial(self.rewriter.delete_thread, str(thread_id)), "delete_thread"
        )

    async def adelete_for_runs(self, run_ids: Sequence[str]) -> None:
        await self.bridge.run(functools.partial(self.rewriter.delete_for_runs, _ids(run_ids)))

    def delete_for_runs(self, run_ids: Sequence[str]) -> None:
        self.bridge.call(
            functools.partial(self.rewriter.delete_for_runs, _ids(run_ids)), "delete_for_runs"
        )

    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        await self.bridge.run(
            functools.partial(
                self.rewriter.copy_thread, str(source_thread_id), str(target_thread_id)
            )
        )

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        self.bridge.call(
            functools.partial(
                self.rewriter.copy_thread, str(source_thread_id), str(target_thread_id)
            ),
            "copy_thread",
        )

    async def aprune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        await self.bridge.run(functools.partial(self._prune, _ids(thread_ids), strategy))

    def prune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        self.bridge.call(functools.partial(self._prune, _ids(thread_ids), strategy), "prune")

    async def _prune(self, thread_ids: builtins.list[str], strategy: str) -> None:
        """``keep_latest``: each namespace of each thread keeps its newest checkpoint (and
        its pending writes); ``delete``: the threads go. Then the attachments no log refers
        to any more are swept."""
        if strategy not in STRATEGIES:
            raise InvalidConfigError(
                "strategy", f"{strategy!r} is not one of {', '.join(STRATEGIES)}"
            )
        for thread_id in thread_ids:
            if strategy == "delete":
                await self.rewriter.delete_thread(thread_id)
            else:
                await self.rewriter.keep_latest(thread_id, 1)
        if thread_ids:
            await self.rewriter.sweep()

    async def aprune_threads(
        self, policy: ThreadRetention, *, dry_run: bool = False, now: datetime | None = None
    ) -> ThreadPruneReport:
        """One retention pass over every thread of the store (`retention`)."""
        return await self.bridge.run(
            functools.partial(run_retention, self.rewriter, policy, dry_run=dry_run, now=now)
        )

    def prune_threads(
        self, policy: ThreadRetention, *, dry_run: bool = False, now: datetime | None = None
    ) -> ThreadPruneReport:
        return self.bridge.call(
            functools.partial(run_retention, self.rewriter, policy, dry_run=dry_run, now=now),
            "prune_threads",
        )

    async def arelease_thread(self, thread_id: str) -> None:
        """Give back this saver's lease of a thread now (``single_writer``)."""
        if self.leases is not None:
            await self.bridge.run(functools.partial(self.leases.release, str(thread_id)))

    # -- context manager (a saver made by hand) ---------------------------------------------------

    async def __aenter__(self) -> FlowledgerSaver:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()


def parts_values(checkpoint: Any) -> dict[str, Any]:
    values = checkpoint.get("channel_values", {})
    return dict(values) if isinstance(values, dict) else {}


def _ids(items: Sequence[str]) -> list[str]:
    if isinstance(items, str | bytes):
        raise InvalidConfigError("ids", "a sequence of ids, not one string")
    return [str(item) for item in items]


class SaverOpener:
    """What `FlowledgerSaver.from_url` returns: ``with`` it (synchronous code: the saver's
    loop is driven by its calls, in the calling thread) or ``async with`` it (on the
    running loop)."""

    def __init__(self, url: str, options: dict[str, Any]) -> None:
        self.url = url
        self.options = options
        self.saver: FlowledgerSaver | None = None
        self._keeper: LoopBridge | None = None
        self._keeper_store: Store | None = None

    async def _open(self, bridge: LoopBridge, keeper: LoopBridge | None = None) -> FlowledgerSaver:
        store = await open_store(self.url)
        try:
            leases_on = None
            if keeper is not None:
                leases_on = (self._keeper_store or store, keeper)
            saver = FlowledgerSaver(store, bridge=bridge, leases_on=leases_on, **self.options)
        except BaseException:
            await store.close()
            raise
        saver._owns_store = True
        return saver

    def __enter__(self) -> FlowledgerSaver:
        bridge = LoopBridge.driven_loop()
        try:
            if self.options.get("single_writer"):
                # Leases must renew between calls: they get a running loop of their own,
                # with a store of its own where the store is bound to its loop (PostgreSQL).
                self._keeper = LoopBridge.start()
                if self.url.startswith(("postgres://", "postgresql://")):
                    self._keeper_store = asyncio.run_coroutine_threadsafe(
                        _opened(self.url), self._keeper.loop
                    ).result()
            self.saver = bridge.call(functools.partial(self._open, bridge, self._keeper), "open")
        except BaseException:
            self._stop_keeper()
            bridge.stop()
            raise
        return self.saver

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self.saver is not None:
            try:
                self.saver.close()
            finally:
                self._stop_keeper()
                self.saver.bridge.stop()

    def _stop_keeper(self) -> None:
        if self._keeper is None:
            return
        if self._keeper_store is not None:
            asyncio.run_coroutine_threadsafe(self._keeper_store.close(), self._keeper.loop).result()
        self._keeper.stop()

    async def __aenter__(self) -> FlowledgerSaver:
        self.saver = await self._open(LoopBridge.here())
        return self.saver

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self.saver is not None:
            await self.saver.aclose()


async def _opened(url: str) -> Store:
    return await open_store(url)
