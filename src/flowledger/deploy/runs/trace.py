"""`RunTrace`: what each executed node of a deployed run did, for the session that owns it.

One ledger log per graph run (``deploy/traces/<graph run id>``), one record per node
execution, appended when the node finishes (or pauses): node id and kind, the flow
vertex and step, status (``ok``, ``error``, ``paused``, ``reused``), start and end time,
the dependency and tool of a tool node, bounded previews of its arguments and result
(`MAX_PREVIEW_BYTES` of JSON text each, cut with ``…``), and an error (type and bounded
message, and for a tool call's failure its kind: deploy/artifacts/failures.py). A tool
node with ``retry`` writes one entry per attempt, each with its ``attempt`` number
(1-based); an attempt found interrupted by a stopped owner gets its entry from the
owner that continues the run, and so does a failed attempt the stopped owner recorded
but had not traced yet (`RunTrace.has_attempt`). Previews are cut, never parsed back:
they are for people and models reading a trace, and a secret a deployment injects
(through a source's environment) never passes through a node's arguments or results,
so it cannot reach a trace.

Ordering and atomicity: entries of one run are appended under a per-run lock, so their
sequence numbers follow the order nodes finished in this process. An entry is written
before the checkpoint of its step commits; after a crash, the re-executed node appends
another entry (one per execution), so a trace is a log of executions, not of committed
steps. The trace is debug data of the owning session: it never enters activity history
or run listings.

`read` returns a ranged slice, ``start`` and ``limit`` (1..`MAX_TRACE_PAGE`), with the
total count. One base throughout: an entry's ``seq`` is its 0-based position in the
trace (the ledger's record number minus one), so the page read with ``start`` N begins
with the entry whose ``seq`` is N, and the next page starts at the last ``seq`` + 1.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Final

from ... import storage
from ...workflows.authoring.metadata import bound_text

__all__ = [
    "MAX_PREVIEW_BYTES",
    "MAX_TRACE_PAGE",
    "RunTrace",
    "TraceEntry",
    "TracePage",
    "preview",
]

MAX_PREVIEW_BYTES: Final = 1024
MAX_ERROR_BYTES: Final = 512
MAX_TRACE_PAGE: Final = 100
_VERSION: Final = 1
_SCAN_PAGE: Final = 1000


def preview(value: Any) -> str:
    """``value`` as compact JSON text of at most `MAX_PREVIEW_BYTES` bytes."""
    try:
        text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)
    except (TypeError, ValueError):
        text = repr(value)
    return bound_text(text, MAX_PREVIEW_BYTES)


def _time(value: datetime) -> str:
    return f"{value.astimezone(UTC):%Y-%m-%dT%H:%M:%S}.{value.microsecond:06d}Z"


@dataclass(frozen=True, slots=True)
class TraceEntry:
    node: str
    kind: str
    vertex: str
    step: int
    status: str
    started_at: datetime
    ended_at: datetime
    dependency: str = ""
    tool: str = ""
    arguments: str = ""
    result: str = ""
    error_type: str = ""
    error_message: str = ""
    attempt: int = 0
    failure: str = ""
    seq: int = field(default=0, compare=False)  # 0-based position in the trace

    def to_json(self) -> dict[str, Any]:
        document: dict[str, Any] = {
            "seq": self.seq,
            "node": self.node,
            "kind": self.kind,
            "vertex": self.vertex,
            "step": self.step,
            "status": self.status,
            "started_at": _time(self.started_at),
            "ended_at": _time(self.ended_at),
        }
        if self.dependency:
            document["dependency"] = self.dependency
            document["tool"] = self.tool
        if self.arguments:
            document["arguments"] = self.arguments
        if self.result:
            document["result"] = self.result
        if self.attempt:
            document["attempt"] = self.attempt
        if self.error_type:
            document["error"] = {"type": self.error_type, "message": self.error_message}
            if self.failure:
                document["error"]["kind"] = self.failure
        return document


@dataclass(frozen=True, slots=True)
class TracePage:
    entries: tuple[TraceEntry, ...]
    total: int
    start: int

    def to_json(self) -> dict[str, Any]:
        return {
            "start": self.start,
            "total": self.total,
            "entries": [entry.to_json() for entry in self.entries],
        }


def trace_log(graph_run_id: str) -> str:
    return storage.validate_name(f"deploy/traces/{graph_run_id}")


def _encode(entry: TraceEntry) -> bytes:
    body = entry.to_json()
    del body["seq"]
    body["version"] = _VERSION
    return json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode()


def _parse_time(text: Any) -> datetime:
    if not isinstance(text, str) or not text.endswith("Z"):
        raise ValueError("bad time")
    return datetime.fromisoformat(text[:-1]).replace(tzinfo=UTC)


def _decode(record: storage.Record) -> TraceEntry:
    doc = json.loads(record.payload)
    if not isinstance(doc, Mapping) or doc.get("version") != _VERSION:
        raise ValueError("not a version 1 trace entry")
    error = doc.get("error") or {}
    return TraceEntry(
        node=str(doc["node"]),
        kind=str(doc["kind"]),
        vertex=str(doc["vertex"]),
        step=int(doc["step"]),
        status=str(doc["status"]),
        started_at=_parse_time(doc["started_at"]),
        ended_at=_parse_time(doc["ended_at"]),
        dependency=str(doc.get("dependency", "")),
        tool=str(doc.get("tool", "")),
        arguments=str(doc.get("arguments", "")),
        result=str(doc.get("result", "")),
        error_type=str(error.get("type", "")),
        error_message=str(error.get("message", "")),
        attempt=int(doc.get("attempt", 0)),
        failure=str(error.get("kind", "")),
        seq=record.seq - 1,  # ledger records count from 1; `start` counts from 0
    )


class RunTrace:
    """The traces of a store's deployed runs (one log per graph run)."""

    def __init__(self, ledger: storage.Ledger) -> None:
        self._ledger = ledger
        self._locks: dict[str, asyncio.Lock] = {}

    def _lock(self, graph_run_id: str) -> asyncio.Lock:
        lock = self._locks.get(graph_run_id)
        if lock is None:
            lock = self._locks[graph_run_id] = asyncio.Lock()
        return lock

    async def append(self, graph_run_id: str, entry: TraceEntry) -> None:
        name = trace_log(graph_run_id)
        data = _encode(entry)
        async with self._lock(graph_run_id):
            for _ in range(8):  # another process appending to the same log: read and retry
                tip = await self._ledger.tip(name)
                try:
                    await self._ledger.append(name, [data], expected=tip, **storage.fence_arg())
                    return
                except storage.LedgerConflictError:
                    continue
            raise RuntimeError(f"trace of run {graph_run_id}: the log kept moving")

    async def has_attempt(self, graph_run_id: str, node: str, step: int, attempt: int) -> bool:
        """Whether the trace holds an entry of attempt ``attempt`` of ``node`` at ``step``
        (an owner that stopped between recording an attempt's failure and tracing it left
        none: the owner that continues writes it). Reads the whole log: only a restarted
        owner asks, once per failed attempt it finds recorded."""
        name = trace_log(graph_run_id)
        after = 0
        while True:
            records = await self._ledger.read(name, after=after, limit=_SCAN_PAGE)
            for record in records:
                try:
                    entry = _decode(record)
                except (ValueError, KeyError, TypeError) as exc:
                    raise storage.CorruptDataError(f"trace entry {record.seq} of {name}") from exc
                if (entry.node, entry.step, entry.attempt) == (node, step, attempt):
                    return True
            if len(records) < _SCAN_PAGE:
                return False
            after = records[-1].seq

    async def read(self, graph_run_id: str, *, start: int = 0, limit: int = 50) -> TracePage:
        if isinstance(start, bool) or not isinstance(start, int) or start < 0:
            raise ValueError("start must be a non-negative integer")
        if isinstance(limit, bool) or not isinstance(limit, int) or not 0 < limit <= MAX_TRACE_PAGE:
            raise ValueError(f"limit must be in 1..{MAX_TRACE_PAGE}")
        name = trace_log(graph_run_id)
        total = await self._ledger.tip(name)
        records = await self._ledger.read(name, after=start, limit=limit) if start < total else []
        entries = []
        for record in records:
            try:
                entries.append(_decode(record))
            except (ValueError, KeyError, TypeError) as exc:
                raise storage.CorruptDataError(f"trace entry {record.seq} of {name}") from exc
        return TracePage(tuple(entries), total, start)


def trace_error(error: BaseException) -> tuple[str, str]:
    """An exception as ``(type, bounded message)`` for a trace entry."""
    return type(error).__name__, bound_text(str(error) or type(error).__name__, MAX_ERROR_BYTES)
