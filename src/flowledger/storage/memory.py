"""The in-memory backend: the reference oracle every other backend is compared with.

Everything lives in dictionaries guarded by one lock, so each call is atomic
even when several threads (each with its own event loop) share the store.
KV revisions count 1, 2, 3, ... per key and restart at 1 after a delete.
Leases use the monotonic clock and honour TTLs like the durable backends (never
`flowledger.clock`: a test driving a ManualClock must not expire leases under a live
owner; the backends' lease clocks are the ones their holders share).
The four primitives of one store share a `MemoryGate`: once the store is
closed, every call raises `StoreClosedError`, as with the durable backends.
They also share the lease backend, whose lock a fenced write holds from its
fence check to its last change, so no grant can change in between.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from .errors import (
    AttachmentNotFoundError,
    BlobConflictError,
    BlobNotFoundError,
    ConflictError,
    FencedWriteError,
    KeyNotFoundError,
    LeaseHeldError,
    LedgerConflictError,
    StoreClosedError,
)
from .fence import Fence, check_fence, refused
from .kv import Entry, KVPut, KVWrite, check_page, check_writes
from .lease import LeaseStatus, RenewStatus
from .ledger import (
    LedgerUsage,
    Record,
    SweepReport,
    check_append,
    check_digests,
    check_names,
    check_read,
    check_refs,
)
from .limits import MAX_BLOB_BYTES, MAX_KV_VALUE_BYTES, check_bytes, check_revision
from .names import validate_name
from .wakeups import LocalWakeups, pending_wakes

__all__ = ["MemoryBlobs", "MemoryGate", "MemoryKV", "MemoryLeaseBackend", "MemoryLedger"]


class MemoryGate:
    """Whether a memory store is still open; shared by its four primitives."""

    def __init__(self) -> None:
        self.closed = False
        # Listeners of this store (and only this one) are woken: `waking` KV writes.
        self.wakeups = LocalWakeups(self, "in-process: listeners of this memory store")

    def check(self) -> None:
        if self.closed:
            raise StoreClosedError()

    async def close(self) -> None:
        self.closed = True
        await self.wakeups.close()


@dataclass(slots=True)
class _LeaseRow:
    epoch: int
    holder: str | None
    expires_at: float


class MemoryKV:
    def __init__(
        self, gate: MemoryGate | None = None, leases: MemoryLeaseBackend | None = None
    ) -> None:
        self._gate = MemoryGate() if gate is None else gate
        self._leases = MemoryLeaseBackend(self._gate) if leases is None else leases
        self._lock = threading.Lock()
        self._kv: dict[str, Entry] = {}

    async def get(self, key: str) -> Entry:
        validate_name(key)
        self._gate.check()
        with self._lock:
            entry = self._kv.get(key)
        if entry is None:
            raise KeyNotFoundError(key)
        return entry

    async def put(
        self, key: str, value: bytes, *, expected: int, fence: Fence | None = None
    ) -> int:
        validate_name(key)
        check_revision("expected", expected)
        check_bytes("value", value, MAX_KV_VALUE_BYTES)
        check_fence(fence)
        self._gate.check()
        with self._lock, self._leases.holding(fence):
            current = self._kv.get(key)
            actual = 0 if current is None else current.revision
            if actual != expected:
                raise ConflictError(key, expected, actual)
            self._kv[key] = Entry(bytes(value), actual + 1)
        self._gate.wakeups.wake_committed(pending_wakes())
        return actual + 1

    async def delete(self, key: str, *, fence: Fence | None = None) -> None:
        validate_name(key)
        check_fence(fence)
        self._gate.check()
        with self._lock, self._leases.holding(fence):
            self._kv.pop(key, None)

    async def write_many(
        self, writes: Sequence[KVWrite], *, fence: Fence | None = None
    ) -> list[int]:
        batch = check_writes(writes)
        check_fence(fence)
        self._gate.check()
        with self._lock, self._leases.holding(fence):
            revisions: list[int] = []
            for write in batch:  # every compare first: a conflict changes nothing
                current = self._kv.get(write.key)
                actual = 0 if current is None else current.revision
                if isinstance(write, KVPut):
                    if actual != write.expected:
                        raise ConflictError(write.key, write.expected, actual)
                    revisions.append(actual + 1)
                else:
                    revisions.append(0)
            for write, revision in zip(batch, revisions, strict=True):
                if isinstance(write, KVPut):
                    self._kv[write.key] = Entry(bytes(write.value), revision)
                else:
                    self._kv.pop(write.key, None)
        self._gate.wakeups.wake_committed(pending_wakes())
        return revisions

    async def keys(self, prefix: str = "") -> list[str]:
        self._gate.check()
        with self._lock:
            return sorted(k for k in self._kv if k.startswith(prefix))

    async def keys_page(
        self, prefix: str = "", *, start: str = "", limit: int = 100, descending: bool = False
    ) -> list[str]:
        check_page(start, limit)
        keys = await self.keys(prefix)
        if descending:
            chosen = [k for k in keys if not start or k < start]
            return chosen[::-1][:limit]
        return [k for k in keys if k > start][:limit]


class MemoryBlobs:
    def __init__(
        self, gate: MemoryGate | None = None, leases: MemoryLeaseBackend | None = None
    ) -> None:
        self._gate = MemoryGate() if gate is None else gate
        self._leases = MemoryLeaseBackend(self._gate) if leases is None else leases
        self._lock = threading.Lock()
        self._blobs: dict[str, bytes] = {}

    async def put(self, key: str, data: bytes, *, fence: Fence | None = None) -> None:
        validate_name(key)
        check_bytes("blob", data, MAX_BLOB_BYTES)
        check_fence(fence)
        self._gate.check()
        with self._lock, self._leases.holding(fence):
            existing = self._blobs.get(key)
            if existing is None:
                self._blobs[key] = bytes(data)
            elif existing != data:
                raise BlobConflictError(key)

    async def get(self, key: str) -> bytes:
        validate_name(key)
        self._gate.check()
        with self._lock:
            data = self._blobs.get(key)
        if data is None:
            raise BlobNotFoundError(key)
        return data

    async def delete(self, key: str, *, fence: Fence | None = None) -> None:
        validate_name(key)
        check_fence(fence)
        self._gate.check()
        with self._lock, self._leases.holding(fence):
            self._blobs.pop(key, None)

    async def list(self, prefix: str = "") -> list[str]:
        self._gate.check()
        with self._lock:
            return sorted(k for k in self._blobs if k.startswith(prefix))


class MemoryLedger:
    def __init__(
        self, gate: MemoryGate | None = None, leases: MemoryLeaseBackend | None = None
    ) -> None:
        self._gate = MemoryGate() if gate is None else gate
        self._leases = MemoryLeaseBackend(self._gate) if leases is None else leases
        self._lock = threading.Lock()
        self._logs: dict[str, list[bytes]] = {}
        self._attachments: dict[str, bytes] = {}
        self._refs: dict[str, set[str]] = {}  # log -> the digests it refers to

    async def append(
        self,
        name: str,
        records: Sequence[bytes],
        *,
        expected: int,
        attachments: Mapping[str, bytes] | None = None,
        refs: Iterable[str] = (),
        fence: Fence | None = None,
    ) -> int:
        validate_name(name)
        payloads, blobs = check_append(records, expected, attachments)
        needed = check_refs(refs, blobs)
        check_fence(fence)
        self._gate.check()
        with self._lock, self._leases.holding(fence):
            log = self._logs.get(name, [])
            if len(log) != expected:
                raise LedgerConflictError(name, expected, len(log))
            for digest in needed:
                if digest not in self._attachments:
                    raise AttachmentNotFoundError(digest)
            for digest, data in blobs.items():
                self._attachments.setdefault(digest, data)
            self._refs.setdefault(name, set()).update(blobs, needed)
            log.extend(payloads)
            self._logs[name] = log
            return len(log)

    async def read(self, name: str, *, after: int = 0, limit: int = 100) -> list[Record]:
        validate_name(name)
        check_read(after, limit)
        self._gate.check()
        with self._lock:
            log = self._logs.get(name, [])
            chunk = log[after : after + limit]
        return [Record(after + i + 1, payload) for i, payload in enumerate(chunk)]

    async def tip(self, name: str) -> int:
        validate_name(name)
        self._gate.check()
        with self._lock:
            return len(self._logs.get(name, ()))

    async def names(self, prefix: str = "") -> list[str]:
        self._gate.check()
        with self._lock:
            return sorted(n for n in self._logs if n.startswith(prefix))

    async def attachments(self, digests: Iterable[str]) -> dict[str, bytes]:
        wanted = check_digests(digests)
        found: dict[str, bytes] = {}
        self._gate.check()
        with self._lock:
            for digest in wanted:
                data = self._attachments.get(digest)
                if data is None:
                    raise AttachmentNotFoundError(digest)
                found[digest] = data
        return found

    async def drop(self, names: Iterable[str]) -> int:
        wanted = check_names(names)
        self._gate.check()
        dropped = 0
        with self._lock:
            for name in wanted:
                self._refs.pop(name, None)
                if self._logs.pop(name, None) is not None:
                    dropped += 1
        return dropped

    async def sweep(self, *, dry_run: bool = False) -> SweepReport:
        self._gate.check()
        with self._lock:
            needed = set().union(*self._refs.values())
            garbage = [d for d in self._attachments if d not in needed]
            size = sum(len(self._attachments[d]) for d in garbage)
            if not dry_run:
                for digest in garbage:
                    del self._attachments[digest]
        return SweepReport(len(garbage), size)

    async def usage(self, names: Iterable[str]) -> LedgerUsage:
        wanted = set(check_names(names))
        self._gate.check()
        with self._lock:
            logs = [self._logs.get(name, []) for name in wanted]
            inside = set().union(*(self._refs.get(name, ()) for name in wanted))
            outside = set().union(*(d for n, d in self._refs.items() if n not in wanted))
            exclusive = (d for d in inside - outside if d in self._attachments)
            return LedgerUsage(
                sum(map(len, logs)),
                sum(len(p) for log in logs for p in log),
                sum(len(self._attachments[d]) for d in exclusive),
            )

    async def vacuum(self) -> None:
        self._gate.check()  # nothing to give back: freed values are garbage-collected

    async def add_refs(self, name: str, digests: Iterable[str]) -> int:
        validate_name(name)
        wanted = check_digests(digests)
        self._gate.check()
        with self._lock:
            if name not in self._logs:
                return 0
            stored = {d for d in wanted if d in self._attachments}
            self._refs.setdefault(name, set()).update(stored)
            return len(stored)

    async def refs_complete(self) -> bool:
        self._gate.check()
        return True  # a memory store is never older than references

    async def mark_refs_complete(self) -> None:
        self._gate.check()


class MemoryLeaseBackend:
    def __init__(self, gate: MemoryGate | None = None) -> None:
        self._gate = MemoryGate() if gate is None else gate
        self._lock = threading.Lock()
        self._leases: dict[str, _LeaseRow] = {}

    async def try_acquire(self, name: str, holder: str, ttl: float) -> int:
        now = time.monotonic()
        self._gate.check()
        with self._lock:
            row = self._leases.get(name)
            if row is None:
                row = self._leases[name] = _LeaseRow(0, None, 0.0)
            elif row.holder is not None and row.expires_at > now:
                raise LeaseHeldError(name, row.epoch)
            row.epoch += 1
            row.holder = holder
            row.expires_at = now + ttl
            return row.epoch

    async def renew(self, name: str, epoch: int, holder: str, ttl: float) -> RenewStatus:
        now = time.monotonic()
        self._gate.check()
        with self._lock:
            row = self._leases.get(name)
            if row is None or row.epoch != epoch or row.holder != holder:
                return "taken over"
            if row.expires_at <= now:
                return "expired"
            row.expires_at = now + ttl
            return "renewed"

    @contextlib.contextmanager
    def holding(self, fence: Fence | None) -> Iterator[None]:
        """Hold the lease table for a write fenced by ``fence`` (nothing for ``None``):
        `FencedWriteError` unless its grant is current, and no grant changes until the
        write is done."""
        if fence is None:
            yield
            return
        with self._lock:
            row = self._leases.get(fence.lease)
            live = row is not None and row.holder is not None and row.expires_at > time.monotonic()
            if row is None or row.epoch != fence.epoch or not live:
                current = 0 if row is None else row.epoch
                raise refused(FencedWriteError(fence.lease, fence.epoch, current, live))
            yield

    async def release(self, name: str, epoch: int, holder: str) -> None:
        self._gate.check()
        with self._lock:
            row = self._leases.get(name)
            if row is not None and row.epoch == epoch and row.holder == holder:
                row.holder = None
                row.expires_at = time.monotonic()  # when it ended, for `status`

    async def status(self, name: str) -> LeaseStatus:
        self._gate.check()
        with self._lock:
            row = self._leases.get(name)
            if row is None:
                return LeaseStatus(0, False, None)
            now = time.monotonic()
            # The monotonic expiry, as wall-clock time (what readers compare with).
            until = datetime.fromtimestamp(time.time() + (row.expires_at - now), UTC)
            return LeaseStatus(row.epoch, row.holder is not None and row.expires_at > now, until)
