"""LangGraph checkpoints and writes into records, and the append that stores them.

`Writer.checkpoint_doc` builds a checkpoint record against the stored form of its parent
(or, failing that, of the log's last checkpoint this saver knows): a channel that is not
in ``new_versions`` and has the parent's version keeps the parent's stored value (nothing
is serialised again), a list is stored by what changed (`lists`), anything else through
the serde (`values`). A record is built for the tip it will be appended at; when the tip
moved, it is built again.

`Writer.commit` appends under the namespace's lock (one append at a time per log in a
saver); records of one namespace that are ready together share one append, and a task's
writes wait up to `GATHER` for the step's checkpoint to share theirs. When another writer
appended first (`LedgerConflictError`), the saver catches up
and builds again; with ``single_writer`` that is `ThreadConflictError` instead (the
thread changed since this saver read it), unless all that changed is that a rewrite
sealed the log (the thread moved to its next generation, unchanged).
"""

from __future__ import annotations

import asyncio
import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, NamedTuple, TypeGuard

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import WRITES_IDX_MAP, get_checkpoint_metadata

from ...storage import Fence, FencedWriteError, LedgerConflictError
from .errors import (
    InvalidConfigError,
    ThreadConflictError,
    ThreadLeaseLostError,
    UnserializableValueError,
)
from .leases import ThreadLeases
from .lists import build, reuse, whole
from .logs import Chan, CpState, ListNode, LogStore, ThreadLog
from .serde import JsonSerializer, plain_copy
from .values import Encoded, Encoder, scalar_digests

__all__ = ["GATHER", "Built", "Place", "Writer", "config_ids", "plain_metadata"]

_STANDARD = frozenset(
    {"v", "id", "ts", "channel_values", "channel_versions", "versions_seen", "updated_channels"}
)
_MAX_TRIES = 1000

Built = tuple[list[dict[str, Any]], Encoded, Any]
"""Records to append, what they need stored, and what to remember once appended."""

GATHER: Final = 0.002  # seconds a task's writes wait for more records to share their commit


class Place(NamedTuple):
    """Where records being built will go: the sequence of the first, and the log's
    greatest checkpoint id (and its sequence) before them."""

    seq: int
    latest: tuple[str, int] | None


_Item = tuple[Callable[[ThreadLog, Place], Built], "asyncio.Future[tuple[ThreadLog, Any]]"]


@dataclass
class _Batch:
    """Records of one namespace gathering for one append; `Writer._launch` starts it
    once a record that does not wait joins, or at `GATHER`."""

    items: list[_Item]
    timer: asyncio.TimerHandle | None = None


def config_ids(config: object, *, need_checkpoint: bool = False) -> tuple[str, str, str | None]:
    """(thread id, namespace, checkpoint id) of a config; `InvalidConfigError` otherwise."""
    if type(config) is dict:  # LangGraph's own configs, checked without the ABCs (every call)
        configurable = config.get("configurable")
        if type(configurable) is dict:
            thread_id = configurable.get("thread_id")
            checkpoint_ns = configurable.get("checkpoint_ns") or ""
            checkpoint_id = configurable.get("checkpoint_id") or None
            if (
                type(thread_id) is str
                and type(checkpoint_ns) is str
                and (type(checkpoint_id) is str or (checkpoint_id is None and not need_checkpoint))
            ):
                return thread_id, checkpoint_ns, checkpoint_id
    if not isinstance(config, Mapping):
        raise InvalidConfigError("config", f"a mapping, not {type(config).__name__}")
    configurable = config.get("configurable")
    if not isinstance(configurable, Mapping):
        raise InvalidConfigError("config['configurable']", "missing (it names the thread_id)")
    thread_id = configurable.get("thread_id")
    if thread_id is None or isinstance(thread_id, bool | dict | list):
        raise InvalidConfigError(
            "config['configurable']['thread_id']", f"not a thread id: {thread_id!r}"
        )
    checkpoint_ns = configurable.get("checkpoint_ns", "") or ""
    if not isinstance(checkpoint_ns, str):
        raise InvalidConfigError("config['configurable']['checkpoint_ns']", "not a string")
    checkpoint_id = configurable.get("checkpoint_id") or None
    if checkpoint_id is not None and not isinstance(checkpoint_id, str):
        raise InvalidConfigError("config['configurable']['checkpoint_id']", "not a string")
    if need_checkpoint and checkpoint_id is None:
        raise InvalidConfigError("config['configurable']['checkpoint_id']", "missing")
    return str(thread_id), checkpoint_ns, checkpoint_id


def plain_metadata(config: RunnableConfig, metadata: Mapping[str, Any]) -> dict[str, Any]:
    """The metadata LangGraph's savers store (config keys merged in), as plain JSON."""
    merged: dict[str, Any] = dict(get_checkpoint_metadata(config, metadata))  # type: ignore[arg-type]
    merged.pop("writes", None)
    copied = plain_copy(merged)
    if copied is not None:
        return copied
    try:
        plain = json.loads(json.dumps(merged, allow_nan=False))
    except (TypeError, ValueError) as exc:
        raise InvalidConfigError("metadata", f"not JSON ({exc})") from None
    if not isinstance(plain, dict):
        raise InvalidConfigError("metadata", "not an object")
    return plain


_NONE: Final = object()  # no version: not even None
_PAIR: Final = (tuple, list)  # built once: ``tuple | list`` makes a new union each time


def _is_mapping(value: object) -> bool:
    return type(value) is dict or isinstance(value, Mapping)  # a dict without the ABC


_TEXT: Final = frozenset({str})
_PLAIN_VERSIONS: Final = frozenset({int, str})


def _plain_versions(versions: object) -> TypeGuard[dict[str, Any]]:
    """The usual versions: a dict of text to integers or text (checked in C, every put)."""
    return (
        type(versions) is dict
        and _TEXT.issuperset(map(type, versions))
        and _PLAIN_VERSIONS.issuperset(map(type, versions.values()))
    )


def _check_versions(where: str, versions: object) -> dict[str, Any]:
    """A copy of channel versions (text, integers or finite floats by channel name)."""
    if _plain_versions(versions):
        return dict(versions)  # a copy: the caller may change its own
    if not isinstance(versions, Mapping):
        raise InvalidConfigError(where, "not a mapping")
    for key, value in versions.items():
        if (
            not isinstance(key, str)
            or isinstance(value, bool)
            or not isinstance(value, str | int | float)
            or (isinstance(value, float) and not math.isfinite(value))
        ):
            raise InvalidConfigError(f"{where}[{key!r}]", f"not a channel version: {value!r}")
    return dict(versions)


class Writer:
    def __init__(
        self,
        logs: LogStore,
        encoder: Encoder,
        leases: ThreadLeases | None,
    ) -> None:
        self.logs = logs
        self.encoder = encoder
        self.leases = leases
        self.extras = JsonSerializer()
        self._locks: dict[tuple[str, str], asyncio.Lock] = {}
        self._gathering: dict[tuple[str, str], _Batch] = {}
        self._running: set[asyncio.Future[None]] = set()

    # -- building ----------------------------------------------------------------------------

    def checkpoint_parts(
        self, config: RunnableConfig, checkpoint: Mapping[str, Any], metadata: Mapping[str, Any]
    ) -> dict[str, Any]:
        """Everything of a checkpoint but its values, checked, as record fields."""
        if not _is_mapping(checkpoint):
            raise InvalidConfigError("checkpoint", f"a mapping, not {type(checkpoint).__name__}")
        checkpoint_id = checkpoint.get("id")
        if not isinstance(checkpoint_id, str) or not checkpoint_id:
            raise InvalidConfigError("checkpoint['id']", f"not a checkpoint id: {checkpoint_id!r}")
        ts = checkpoint.get("ts")
        if not isinstance(ts, str):
            raise InvalidConfigError("checkpoint['ts']", "not a timestamp string")
        v = checkpoint.get("v", 1)
        if not isinstance(v, int) or isinstance(v, bool):
            raise InvalidConfigError("checkpoint['v']", "not an integer")
        versions = _check_versions(
            "checkpoint['channel_versions']", checkpoint.get("channel_versions", {})
        )
        seen_in = checkpoint.get("versions_seen", {})
        if not _is_mapping(seen_in):
            raise InvalidConfigError("checkpoint['versions_seen']", "not a mapping")
        if _TEXT.issuperset(map(type, seen_in)) and all(map(_plain_versions, seen_in.values())):
            seen = {node: dict(node_seen) for node, node_seen in seen_in.items()}
        else:
            seen = {
                str(node): _check_versions(f"checkpoint['versions_seen'][{node!r}]", node_seen)
                for node, node_seen in seen_in.items()
            }
        updated = checkpoint.get("updated_channels")
        if updated is not None and (
            not isinstance(updated, _PAIR)
            or not (
                _TEXT.issuperset(map(type, updated)) or all(isinstance(u, str) for u in updated)
            )
        ):
            raise InvalidConfigError(
                "checkpoint['updated_channels']", "not a list of channel names"
            )
        values = checkpoint.get("channel_values", {})
        if not _is_mapping(values):
            raise InvalidConfigError("checkpoint['channel_values']", "not a mapping")
        parts: dict[str, Any] = {
            "c": checkpoint_id,
            "ts": ts,
            "v": v,
            "m": plain_metadata(config, metadata),
            "cv": versions,
            "vs": seen,
        }
        if updated is not None:
            parts["u"] = list(updated)
        if checkpoint.keys() - _STANDARD:  # LangGraph's own keys only, usually (a set op in C)
            extra = {k: checkpoint[k] for k in checkpoint if k not in _STANDARD}
            try:
                parts["x"] = self.extras.encode(extra)
            except Exception as exc:
                raise UnserializableValueError(
                    f"checkpoint {checkpoint_id}", "value", str(exc)
                ) from None
        return parts

    def checkpoint_doc(
        self,
        log: ThreadLog,
        at: Place,
        parts: Mapping[str, Any],
        parent_id: str | None,
        values: Mapping[str, Any],
        new_versions: Mapping[str, Any],
    ) -> Built:
        seq = at.seq
        base = log.cps.get(parent_id) if parent_id else None
        same_parent = base is not None
        if base is None and log.cps:
            base = next(reversed(log.cps.values()))  # any earlier list of the log will do
        chans_before = base.chans if base is not None else {}
        versions = parts["cv"]
        out = Encoded()
        stored: dict[str, Any] = {}
        chans: dict[str, Chan] = {}
        where = f"{log.where} checkpoint {parts['c']} channel"
        for channel, value in values.items():
            version = versions.get(channel, _NONE)
            if version is _NONE:
                continue  # LangGraph's savers keep only channels that have a version
            before = chans_before.get(channel)
            entry: Any
            node: ListNode | None = None
            if (
                same_parent
                and before is not None
                and before.version == version
                and channel not in new_versions
            ):
                if before.node is not None:
                    entry, node = reuse(before.node, seq, log, out)
                else:
                    entry = before.entry
                    if type(entry) is not list:  # an inline scalar names no attachment
                        out.needed.update(scalar_digests([entry]))
            elif type(value) is list:
                elements = self.encoder.elements(
                    value, f"{where} {channel!r}", out, slot=(log.name, channel)
                )
                entry, node = build(elements, before.node if before else None, seq, log, out)
            else:
                entry = self.encoder.small(value) or self.encoder.scalar(
                    value, f"{where} {channel!r}", out
                )
            stored[channel] = entry
            chans[channel] = Chan(version, None if node is not None else entry, node)
        doc = dict(parts)
        if parent_id is not None:
            doc["p"] = parent_id
        doc["vals"] = stored
        if at.latest is not None and at.latest[0] > parts["c"]:
            doc["top"] = at.latest[1]
        return [doc], out, CpState(chans)

    def writes_doc(
        self,
        checkpoint_id: str,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str,
        log: ThreadLog,
    ) -> Built:
        out = Encoded()
        stored = []
        for index, item in enumerate(writes):
            if not isinstance(item, _PAIR) or len(item) != 2 or not isinstance(item[0], str):
                raise InvalidConfigError(f"writes[{index}]", "not a (channel, value) pair")
            channel, value = item
            entry: Any = self.encoder.small(value)
            if entry is None:
                where = f"{log.where} write {index} ({channel!r}) of task {task_id}"
                if type(value) is list:
                    entry, _ = whole(self.encoder.elements(value, where, out), 0, out)
                else:
                    entry = self.encoder.scalar(value, where, out)
            stored.append([WRITES_IDX_MAP.get(channel, index), channel, entry])
        doc = {"w": checkpoint_id, "t": task_id, "tp": task_path, "ws": stored}
        return [doc], out, None

    def build_batch(
        self, log: ThreadLog, builds: Sequence[Callable[[ThreadLog, Place], Built]]
    ) -> tuple[list[dict[str, Any]], Encoded, list[tuple[bool, Any]]]:
        """Build the records of ``builds`` for one append at the log's tip, each after the
        ones before it: the records, what they need stored, and per build (True, what to
        remember) or (False, the exception its bad input raised: the others go on)."""
        docs: list[dict[str, Any]] = []
        out = Encoded()
        outcomes: list[tuple[bool, Any]] = []
        seq, latest = self.logs.first_seq(log), log.latest
        for build_for in builds:
            try:
                mine, needs, keep = build_for(log, Place(seq, latest))
            except Exception as exc:
                outcomes.append((False, exc))
                continue
            for doc in mine:
                if "c" in doc and "top" not in doc:
                    latest = (doc["c"], seq)
                seq += 1
            docs.extend(mine)
            out.blobs.update(needs.blobs)
            out.needed.update(needs.needed)
            outcomes.append((True, keep))
        return docs, out, outcomes

    def idle(self, thread_id: str, checkpoint_ns: str) -> bool:
        """No append of the namespace is under way or gathering in this saver."""
        key = (thread_id, checkpoint_ns)
        lock = self._locks.get(key)
        return (lock is None or not lock.locked()) and key not in self._gathering

    # -- appending ---------------------------------------------------------------------------

    def lock(self, thread_id: str, checkpoint_ns: str) -> asyncio.Lock:
        key = (thread_id, checkpoint_ns)
        lock = self._locks.get(key)
        if lock is None:
            if len(self._locks) > 4096:
                for old in [k for k, v in self._locks.items() if not v.locked()]:
                    del self._locks[old]
            lock = self._locks[key] = asyncio.Lock()
        return lock

    async def commit(
        self,
        thread_id: str,
        checkpoint_ns: str,
        build_for: Callable[[ThreadLog, Place], Built],
        *,
        gather: bool = False,
    ) -> tuple[ThreadLog, Any]:
        """Build and append records to the namespace's current log (see the module docs);
        return the log and what the build gave to remember.

        Records of one namespace that are ready together go in one append (one
        transaction). With ``gather`` (writes: LangGraph does not wait for them) the
        records wait up to `GATHER` seconds for more to join: the checkpoint a step
        writes right after its tasks' writes then commits with them, in one transaction
        instead of two. A checkpoint never waits: it joins a gathering batch (and ends
        its wait) or is appended at once."""
        key = (thread_id, checkpoint_ns)
        loop = asyncio.get_running_loop()
        future: asyncio.Future[tuple[ThreadLog, Any]] = loop.create_future()
        waiting = self._gathering.get(key)
        if waiting is not None:
            waiting.items.append((build_for, future))
            if not gather:
                self._launch(key, waiting)
            return await future
        batch = _Batch([(build_for, future)])
        if gather:
            # A timer, not a wait in this caller: whoever ends the wait (the timer or the
            # checkpoint that joins) starts the batch, so this caller is not woken just to
            # start it, and a caller cancelled meanwhile does not strand the others.
            self._gathering[key] = batch
            batch.timer = loop.call_later(GATHER, self._launch, key, batch)
        else:
            self._launch(key, batch)
        return await future

    def _launch(self, key: tuple[str, str], batch: _Batch) -> None:
        """Start appending ``batch`` in a task of its own: a caller that is cancelled does
        not take the others' records with it."""
        if batch.timer is not None:
            batch.timer.cancel()
            batch.timer = None
        if self._gathering.get(key) is batch:
            del self._gathering[key]
        runner = asyncio.ensure_future(self._run(key[0], key[1], batch.items))
        self._running.add(runner)
        runner.add_done_callback(self._running.discard)

    async def _run(self, thread_id: str, checkpoint_ns: str, items: list[_Item]) -> None:
        try:
            async with self.lock(thread_id, checkpoint_ns):
                if self.leases is None:
                    await self._append_batch(thread_id, checkpoint_ns, items, None)
                else:
                    async with self.leases.hold(thread_id) as fence:
                        await self._append_batch(thread_id, checkpoint_ns, items, fence)
        except BaseException as exc:
            for _, future in items:
                if not future.done():
                    future.set_exception(exc)
            if not isinstance(exc, Exception):
                raise

    async def _append_batch(
        self, thread_id: str, checkpoint_ns: str, items: list[_Item], fence: Fence | None
    ) -> None:
        log = await self.logs.log(thread_id, checkpoint_ns)
        for _ in range(_MAX_TRIES):
            live = [(build_for, future) for build_for, future in items if not future.done()]
            docs, out, outcomes = self.build_batch(log, [build_for for build_for, _ in live])
            built: list[tuple[asyncio.Future[tuple[ThreadLog, Any]], Any]] = []
            for (_, future), (ok, keep) in zip(live, outcomes, strict=True):
                if ok:
                    built.append((future, keep))
                else:  # this caller's bad input: the others go on
                    future.set_exception(keep)
            if not built:
                return
            try:
                if await self.logs.append(log, docs, out, fence=fence):
                    for future, keep in built:
                        future.set_result((log, keep))
                    return
            except LedgerConflictError:
                log = await self._caught_up(log)
            except FencedWriteError as exc:
                raise ThreadLeaseLostError(thread_id, str(exc)) from None
        raise ThreadConflictError(thread_id, checkpoint_ns)  # pragma: no cover - a livelock

    async def _caught_up(self, log: ThreadLog) -> ThreadLog:
        current = await self.logs.refresh(log)
        if self.leases is None:
            return current
        if current is not log and log.sealed:
            return current  # a rewrite moved the thread to its next generation, unchanged
        raise ThreadConflictError(log.thread_id, log.checkpoint_ns)
