"""Records back into LangGraph's `CheckpointTuple`: values, pending writes, listing.

A checkpoint's pending writes are the writes records that name it, after it in its log,
merged as LangGraph's savers do: a write is keyed by (task id, index); an ordinary write
(index >= 0) keeps the first one stored, a special one (error, interrupt, resume,
scheduled: negative indexes) the last; they come back in ``writes_sort_key`` order. Every
returned object is fresh: nothing a caller changes reaches the saver's caches.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import CheckpointTuple, PendingWrite, writes_sort_key
from langgraph.checkpoint.serde.base import SerializerProtocol

from .errors import CorruptCheckpointError, SaverError
from .lists import resolve, whole_elements
from .logs import Chan, CpState, LogStore, ThreadLog
from .records import CheckpointRecord, WritesRecord, is_list_entry
from .serde import JsonSerializer
from .values import Encoder, load_scalar, scalar_digests

__all__ = ["Reader", "copy_json", "matches"]

_STANDARD = (
    "v",
    "id",
    "ts",
    "channel_values",
    "channel_versions",
    "versions_seen",
    "updated_channels",
)


def copy_json(value: Any) -> Any:
    """A deep copy of plain JSON data."""
    if isinstance(value, dict):
        return {k: copy_json(v) for k, v in value.items()}
    if isinstance(value, list):
        return [copy_json(v) for v in value]
    return value


def matches(metadata: Mapping[str, Any], wanted: Mapping[str, Any] | None) -> bool:
    return not wanted or all(metadata.get(k) == v for k, v in wanted.items())


class Reader:
    def __init__(
        self, logs: LogStore, serde: SerializerProtocol, encoder: Encoder | None = None
    ) -> None:
        self.logs = logs
        self.serde = serde
        self.encoder = encoder  # told the list elements a read returns (`Encoder.remember`)
        self.extras = JsonSerializer()  # other checkpoint keys are LangGraph's own types

    async def find(self, log: ThreadLog, checkpoint_id: str) -> int | None:
        """The sequence of a checkpoint of the log (indexing back as far as needed)."""
        while True:
            seq = log.ids.get(checkpoint_id)
            if seq is not None or log.low <= 1:
                return seq
            await self.logs.extend_to(log, log.low - 512)

    async def chans(self, log: ThreadLog, record: CheckpointRecord) -> dict[str, Chan]:
        chans: dict[str, Chan] = {}
        for channel, entry in record.values.items():
            version = record.versions.get(channel)
            if is_list_entry(entry):
                node = await resolve(self.logs, log, record.seq, channel, entry)
                chans[channel] = Chan(version, None, node)
            else:
                chans[channel] = Chan(version, entry, None)
        return chans

    async def values(
        self, log: ThreadLog, record: CheckpointRecord
    ) -> tuple[dict[str, Any], dict[str, Chan]]:
        cached = log.cps.get(record.id)
        chans = cached.chans if cached is not None else await self.chans(log, record)
        where = f"{log.where} checkpoint {record.id}"
        digests: set[str] = set()
        for chan in chans.values():
            digests.update(scalar_digests(chan.node.elements if chan.node else [chan.entry]))
        blobs = await self.logs.blobs(digests, where)
        values: dict[str, Any] = {}
        for channel, chan in chans.items():
            at = f"{where} channel {channel!r}"
            if chan.node is not None:
                items = self._elements(chan.node.elements, blobs, at)
                if self.encoder is not None:
                    self.encoder.remember((log.name, channel), items, chan.node.elements, blobs)
                values[channel] = items
            else:
                values[channel] = load_scalar(self.serde, chan.entry, blobs, at)
        return values, chans

    def _elements(
        self, entries: tuple[Any, ...], blobs: Mapping[str, bytes], where: str
    ) -> list[Any]:
        """A list's elements. With the JSON serde, all of them are parsed as one JSON array
        (one pass of the C parser, instead of one call per element); anything wrong is
        found again element by element, to say which."""
        if isinstance(self.serde, JsonSerializer) and entries:
            parts = []
            for entry in entries:
                if isinstance(entry, str):
                    parts.append(blobs[entry])
                elif isinstance(entry, list):
                    parts.append(entry[0].encode())
                else:
                    break
            else:
                try:
                    decoded = self.serde.loads(b"[" + b",".join(parts) + b"]")
                except SaverError:
                    pass
                else:
                    if isinstance(decoded, list) and len(decoded) == len(entries):
                        return decoded
        return [load_scalar(self.serde, e, blobs, f"{where}[{i}]") for i, e in enumerate(entries)]

    async def pending(self, log: ThreadLog, record: CheckpointRecord) -> list[PendingWrite]:
        if log.low > record.seq:
            await self.logs.extend_to(log, record.seq)
        merged: dict[tuple[str, int], tuple[str, str, Any]] = {}
        for seq in log.pending_seqs(record.id, record.seq):
            writes = await self.logs.record(log, seq)
            if not isinstance(writes, WritesRecord):
                raise CorruptCheckpointError(f"{log.where} record {seq}", "not a writes record")
            for idx, channel, entry in writes.writes:
                key = (writes.task_id, idx)
                if idx >= 0 and key in merged:
                    continue
                merged[key] = (writes.task_path, channel, entry)
        ordered = sorted(merged.items(), key=lambda item: writes_sort_key(item[1][0], *item[0]))
        where = f"{log.where} writes to checkpoint {record.id}"
        wholes: dict[int, list[Any]] = {}
        digests: set[str] = set()
        for index, (_, (_, _, entry)) in enumerate(ordered):
            if is_list_entry(entry):
                if "l" not in entry:
                    raise CorruptCheckpointError(where, "a write holds a list delta")
                wholes[index] = await whole_elements(self.logs, entry, where)
                digests.update(scalar_digests(wholes[index]))
            else:
                digests.update(scalar_digests([entry]))
        blobs = await self.logs.blobs(digests, where)
        result: list[PendingWrite] = []
        for index, ((task_id, _), (_, channel, entry)) in enumerate(ordered):
            at = f"{where} task {task_id} channel {channel!r}"
            if index in wholes:
                value: Any = [
                    load_scalar(self.serde, e, blobs, f"{at}[{i}]")
                    for i, e in enumerate(wholes[index])
                ]
            else:
                value = load_scalar(self.serde, entry, blobs, at)
            result.append((task_id, channel, value))
        return result

    async def tuple_of(
        self, log: ThreadLog, record: CheckpointRecord, config: RunnableConfig | None
    ) -> CheckpointTuple:
        values, chans = await self.values(log, record)
        log.cps.remember(record.id, CpState(chans))
        checkpoint: dict[str, Any] = {
            "v": record.v,
            "id": record.id,
            "ts": record.ts,
            "channel_values": values,
            "channel_versions": dict(record.versions),
            "versions_seen": {node: dict(seen) for node, seen in record.seen.items()},
            "updated_channels": list(record.updated) if record.updated is not None else None,
        }
        if record.extra:
            extra = self.extras.decode(copy_json(record.extra))
            for key, value in extra.items():
                if key not in _STANDARD:
                    checkpoint[key] = value
        own = {
            "configurable": {
                "thread_id": log.thread_id,
                "checkpoint_ns": log.checkpoint_ns,
                "checkpoint_id": record.id,
            }
        }
        parent = (
            {
                "configurable": {
                    "thread_id": log.thread_id,
                    "checkpoint_ns": log.checkpoint_ns,
                    "checkpoint_id": record.parent,
                }
            }
            if record.parent
            else None
        )
        return CheckpointTuple(
            config=config if config is not None else own,  # type: ignore[arg-type]
            checkpoint=checkpoint,  # type: ignore[arg-type]
            metadata=copy_json(record.metadata),
            parent_config=parent,  # type: ignore[arg-type]
            pending_writes=await self.pending(log, record),
        )

    async def listing(
        self,
        log: ThreadLog,
        *,
        checkpoint_id: str | None,
        before: str | None,
        wanted: Mapping[str, Any] | None,
    ) -> list[CheckpointRecord]:
        """The log's checkpoints that pass the filters, newest (greatest id) first."""
        records = [r for r in await self.logs.read_all(log) if isinstance(r, CheckpointRecord)]
        chosen = [
            r
            for r in records
            if (checkpoint_id is None or r.id == checkpoint_id)
            and (before is None or r.id < before)
            and matches(r.metadata, wanted)
        ]
        chosen.sort(key=lambda r: r.id, reverse=True)
        return chosen

    async def tuples(
        self, items: list[tuple[ThreadLog, CheckpointRecord]], limit: int | None
    ) -> AsyncIterator[CheckpointTuple]:
        for count, (log, record) in enumerate(items):
            if limit is not None and count >= limit:
                return
            yield await self.tuple_of(log, record, None)
