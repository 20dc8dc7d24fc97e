"""The checkpoint store contract, and the in-memory store.

A `CheckpointStore` keeps each run's checkpoints as an append-only history:

* `append` takes one or more consecutive checkpoints of one run and commits
  them atomically, only if the first one's revision is exactly the number of
  checkpoints already stored; otherwise `RevisionConflictError` (``expected``
  = the revision the store needed) and nothing changes. Two racers for the
  same revision: exactly one wins.
* `latest` returns the highest revision; `history` returns revisions in
  order. Both raise `CheckpointNotFoundError` for a run with none.
* Everything is copied in and out: mutating a checkpoint after `append`, or
  one returned by a read, never changes the stored history.
* Other failures (corrupt bytes, I/O) raise `StoreError` naming the operation.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from .checkpoint import Checkpoint, from_document, to_document
from .codec import check_readable, dumps_ordered, loads
from .errors import CheckpointNotFoundError, FlowError, RevisionConflictError, StoreError

__all__ = ["CheckpointStore", "MemoryCheckpointStore", "check_batch"]


@runtime_checkable
class CheckpointStore(Protocol):
    async def append(self, checkpoints: Sequence[Checkpoint]) -> None: ...

    async def latest(self, run_id: str) -> Checkpoint: ...

    async def history(
        self, run_id: str, *, after: int = -1, limit: int | None = None
    ) -> list[Checkpoint]:
        """Checkpoints with revision > ``after``, ascending, at most ``limit`` of them."""
        ...


def check_batch(checkpoints: Sequence[Checkpoint]) -> tuple[str, int]:
    """Validate an append batch (one run, consecutive revisions); return (run id, first)."""
    if not checkpoints:
        raise StoreError("append", ValueError("nothing to append"))
    for cp in checkpoints:
        if not isinstance(cp, Checkpoint):
            raise StoreError("append", TypeError(f"not a Checkpoint: {type(cp).__name__}"))
    run_id = checkpoints[0].run.graph_run_id
    first = checkpoints[0].run.revision
    for offset, cp in enumerate(checkpoints):
        if cp.run.graph_run_id != run_id:
            raise StoreError("append", ValueError("a batch must hold checkpoints of one run"))
        if cp.run.revision != first + offset:
            raise StoreError("append", ValueError("a batch must hold consecutive revisions"))
    return run_id, first


class MemoryCheckpointStore:
    """Checkpoints as encoded JSON documents in a dictionary (process-local, for tests)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._runs: dict[str, list[bytes]] = {}

    async def append(self, checkpoints: Sequence[Checkpoint]) -> None:
        run_id, first = check_batch(checkpoints)
        try:
            encoded = [dumps_ordered(to_document(cp)) for cp in checkpoints]  # keeps state order
            for data in encoded:  # refuse now what reading back would refuse later
                check_readable(data)
        except FlowError as exc:
            raise StoreError("append", exc) from exc
        with self._lock:
            stored = self._runs.get(run_id, [])
            if first != len(stored):
                raise RevisionConflictError(run_id, len(stored), first)
            self._runs[run_id] = [*stored, *encoded]

    async def latest(self, run_id: str) -> Checkpoint:
        with self._lock:
            stored = self._runs.get(run_id)
            last = stored[-1] if stored else None
        if last is None:
            raise CheckpointNotFoundError(run_id)
        return _decode(last, "latest")

    async def history(
        self, run_id: str, *, after: int = -1, limit: int | None = None
    ) -> list[Checkpoint]:
        with self._lock:
            stored = self._runs.get(run_id)
            if not stored:
                raise CheckpointNotFoundError(run_id)
            start = max(after + 1, 0)
            chunk = stored[start:] if limit is None else stored[start : start + max(limit, 0)]
        return [_decode(data, "history") for data in chunk]

    def corrupt(self, run_id: str, revision: int, data: bytes) -> None:
        """Replace stored bytes (for tests of corruption handling)."""
        with self._lock:
            self._runs[run_id][revision] = data


def _decode(data: bytes, op: str) -> Checkpoint:
    try:
        return from_document(loads(data))
    except FlowError as exc:
        raise StoreError(op, exc) from exc
