"""`ThreadLog` and `LogStore`: what a saver knows of a thread's log, and its reads and
appends.

A `ThreadLog` is one namespace of one thread at its current generation. It remembers the
log's tip, an index of the records it has seen (checkpoint id -> sequence, the writes
records of each checkpoint, record sizes) over a contiguous range that ends at the tip,
the checkpoint with the greatest id, the digests the log is known to refer to, and the
stored form of the last few checkpoints (what the next checkpoint's list deltas and
unchanged values are taken from). Records never change once appended and log names are
never reused (`names`: a rewritten or deleted log's generation is never written again),
so what it remembers stays true until the log is dropped or sealed, which a read or an
append notices: a read of the tip record finds nothing, an append finds another tip.

The current generation of a namespace is the lowest existing one whose last record is
not a seal (a rewrite seals the old generation only once the new one is complete). When
none exists, the next is one more than every generation used before: the highest
existing one, or the number a drop recorded in KV (``<prefix>/gens/<t>/<n>``).

Appends name every attachment their records need that the log does not refer to yet:
those not known to be stored are sent, the others named in ``refs``; one swept meanwhile
(`AttachmentNotFoundError`) is sent with the bytes instead. An append that would carry
more attachments or refs than one append may first appends *carrier* records with them.
"""

from __future__ import annotations

import asyncio
import json
from collections import OrderedDict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Generic, TypeVar

from ...storage import (
    MAX_ATTACHMENTS_PER_APPEND,
    MAX_READ_LIMIT,
    MAX_REFS_PER_APPEND,
    AttachmentNotFoundError,
    BlockingAppend,
    ConflictError,
    CorruptDataError,
    Fence,
    KeyNotFoundError,
    Store,
    validate_name,
)
from .errors import CorruptCheckpointError
from .names import log_name, parse_log_name, segment, thread_prefix
from .records import (
    FORMAT,
    CheckpointRecord,
    Header,
    Record,
    Seal,
    WritesRecord,
    dumps_record,
    parse_record,
    trusted_record,
)
from .values import Encoded, check_blob

__all__ = [
    "PAGE",
    "Chan",
    "CpState",
    "ListNode",
    "LogStore",
    "ThreadLog",
]

K = TypeVar("K")
V = TypeVar("V")

PAGE: Final = 512  # records per read
TAIL: Final = 64  # records read from the end when a log is first opened
_LOGS: Final = 256  # thread logs remembered per saver
_RECORDS: Final = 512  # parsed records remembered per saver (each is a few JSON containers)
_BLOB_BYTES: Final = 64 << 20  # attachment bytes remembered per saver
_CHECKPOINTS: Final = 8  # stored forms of recent checkpoints remembered per log
_FETCH: Final = 1000  # attachments per read


class Lru(OrderedDict[K, V], Generic[K, V]):
    """A bounded map: the least recently remembered entry goes first."""

    def __init__(self, size: int) -> None:
        super().__init__()
        self.size = size

    def remember(self, key: K, value: V) -> None:
        if key in self:
            self.move_to_end(key)
        self[key] = value
        if len(self) > self.size:  # one entry was added at most
            self.popitem(last=False)


@dataclass(frozen=True)
class ListNode:
    """A stored list: defined (whole or as a delta) in record ``def_seq``, its chain
    reaching back to record ``from_seq``; ``elements`` are the element value forms."""

    def_seq: int
    from_seq: int
    elements: tuple[Any, ...]


@dataclass(slots=True)
class Chan:
    """One channel as stored in one checkpoint: its version, and its value form (``entry``
    for a scalar, ``node`` for a list). Never changed once built (not frozen: a frozen
    dataclass costs four times as much to build, and a step builds one per channel)."""

    version: Any
    entry: Any
    node: ListNode | None


@dataclass
class CpState:
    """The stored form of one checkpoint, kept so a child can reuse and extend it."""

    chans: dict[str, Chan]


class ThreadLog:
    """What this saver knows of one namespace of one thread (see the module docs)."""

    def __init__(
        self, prefix: str, thread_id: str, checkpoint_ns: str, generation: int, tip: int
    ) -> None:
        self.prefix = prefix
        self.thread_id = thread_id
        self.checkpoint_ns = checkpoint_ns
        self.generation = generation
        self.name = log_name(prefix, thread_id, checkpoint_ns, generation)
        self.tip = tip
        self.low = tip + 1  # records low..tip are indexed
        self.ids: dict[str, int] = {}
        self.writes_at: dict[str, list[int]] = {}
        self.sizes: dict[int, int] = {}
        self.latest: tuple[str, int] | None = None
        self.referenced: set[str] = set()
        self.cps: Lru[str, CpState] = Lru(_CHECKPOINTS)
        self.lock = asyncio.Lock()
        self.sealed = False
        self.where = f"thread {thread_id!r}" + (
            f" namespace {checkpoint_ns!r}" if checkpoint_ns else ""
        )

    def index(self, record: Record) -> None:
        self.sizes[record.seq] = record.size
        if isinstance(record, CheckpointRecord):
            self.ids[record.id] = record.seq
        elif isinstance(record, WritesRecord):
            seqs = self.writes_at.setdefault(record.checkpoint_id, [])
            if record.seq not in seqs:
                seqs.append(record.seq)
                seqs.sort()
        elif isinstance(record, Seal):
            self.sealed = True

    def advance(self, record: Record) -> None:
        """Index a record just after the tip (read or appended by this saver)."""
        self.index(record)
        self.tip = record.seq
        if isinstance(record, CheckpointRecord):
            if record.top is None:
                self.latest = (record.id, record.seq)
            elif self.latest is None or self.latest[1] != record.top:
                self.latest = None  # reload through the record the writer named

    def bytes_from(self, seq: int) -> int | None:
        """The bytes of records ``seq`` to the tip, if they are indexed (0 for records not
        appended yet)."""
        if seq > self.tip:
            return 0
        if seq < self.low:
            return None
        return sum(self.sizes[s] for s in range(seq, self.tip + 1))

    def pending_seqs(self, checkpoint_id: str, after: int) -> list[int]:
        return [s for s in self.writes_at.get(checkpoint_id, ()) if s > after]


class _Blobs:
    """Attachment bytes known to be stored (read, or sent by an append that committed),
    bounded by their total size."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.total = 0
        self.items: OrderedDict[str, bytes] = OrderedDict()

    def get(self, digest: str) -> bytes | None:
        data = self.items.get(digest)
        if data is not None:
            self.items.move_to_end(digest)
        return data

    def put(self, digest: str, data: bytes) -> None:
        if digest in self.items:
            self.items.move_to_end(digest)
            return
        self.items[digest] = data
        self.total += len(data)
        while self.total > self.limit and self.items:
            _, old = self.items.popitem(last=False)
            self.total -= len(old)

    def forget(self, digest: str) -> None:
        data = self.items.pop(digest, None)
        if data is not None:
            self.total -= len(data)


class LogStore:
    """Reads and appends of thread logs on one flowledger store, with the caches."""

    def __init__(self, store: Store, prefix: str) -> None:
        self.store = store
        self.ledger = store.ledger
        self.prefix = prefix
        self.logs: Lru[tuple[str, str], ThreadLog] = Lru(_LOGS)
        self.records: Lru[tuple[str, int], Record] = Lru(_RECORDS)
        self.blob_cache = _Blobs(_BLOB_BYTES)

    # -- finding a thread's log ----------------------------------------------------------

    async def log(self, thread_id: str, checkpoint_ns: str) -> ThreadLog:
        """The current log of a namespace (remembered, or found; maybe not written yet)."""
        known = self.logs.get((thread_id, checkpoint_ns))
        if known is not None:
            self.logs.move_to_end((thread_id, checkpoint_ns))
            return known
        return await self.discover(thread_id, checkpoint_ns)

    async def generations(self, thread_id: str) -> dict[str, list[int]]:
        """The existing generations of every namespace segment of a thread."""
        found: dict[str, list[int]] = {}
        for name in await self.ledger.names(thread_prefix(self.prefix, thread_id)):
            parsed = parse_log_name(self.prefix, name)
            if parsed is not None:
                found.setdefault(parsed.ns_segment, []).append(parsed.generation)
        for gens in found.values():
            gens.sort()
        return found

    async def discover(self, thread_id: str, checkpoint_ns: str) -> ThreadLog:
        gens = (await self.generations(thread_id)).get(segment(checkpoint_ns, namespace=True), [])
        for generation in gens:
            log = ThreadLog(self.prefix, thread_id, checkpoint_ns, generation, 0)
            log.tip = await self.ledger.tip(log.name)
            if log.tip == 0:
                continue  # dropped since it was listed
            log.low = log.tip + 1
            await self.read_tail(log)
            if log.sealed:
                continue
            self.logs.remember((thread_id, checkpoint_ns), log)
            return log
        dropped = await self.dropped_generation(thread_id, segment(checkpoint_ns, namespace=True))
        used = max([*gens, dropped])
        log = ThreadLog(self.prefix, thread_id, checkpoint_ns, used + 1, 0)
        self.logs.remember((thread_id, checkpoint_ns), log)
        return log

    def forget(self, thread_id: str, checkpoint_ns: str | None = None) -> None:
        for key in [k for k in self.logs if k[0] == thread_id]:
            if checkpoint_ns is None or key[1] == checkpoint_ns:
                del self.logs[key]

    # -- generations a drop leaves behind ------------------------------------------------

    def _gens_key(self, thread_id: str, ns_segment: str) -> str:
        return validate_name(f"{self.prefix}/gens/{segment(thread_id)}/{ns_segment}")

    async def dropped_generation(self, thread_id: str, ns_segment: str) -> int:
        """The highest generation of a namespace (by its segment) that a drop recorded."""
        key = self._gens_key(thread_id, ns_segment)
        try:
            entry = await self.store.kv.get(key)
        except KeyNotFoundError:
            return 0
        try:
            value = json.loads(entry.value)["gen"]
            if not isinstance(value, int) or isinstance(value, bool):
                raise TypeError("not an integer")
        except (ValueError, KeyError, TypeError):
            raise CorruptCheckpointError(f"key {key}", "not a generation record") from None
        return value

    async def record_dropped(self, thread_id: str, ns_segment: str, generation: int) -> None:
        """Remember that generations up to ``generation`` were used (before dropping them),
        so a new log of the namespace never takes a dropped log's name."""
        key = self._gens_key(thread_id, ns_segment)
        body = json.dumps({"gen": generation}).encode()
        while True:
            try:
                entry = await self.store.kv.get(key)
            except KeyNotFoundError:
                try:
                    await self.store.kv.put(key, body, expected=0)
                    return
                except ConflictError:
                    continue
            if await self.dropped_generation(thread_id, ns_segment) >= generation:
                return
            try:
                await self.store.kv.put(key, body, expected=entry.revision)
                return
            except ConflictError:
                continue

    # -- reading ---------------------------------------------------------------------------

    async def read(self, log: ThreadLog, after: int, limit: int) -> list[Record]:
        """Records ``after + 1 ...`` (at most ``limit``), parsed and remembered."""
        try:
            raw = await self.ledger.read(log.name, after=after, limit=min(limit, MAX_READ_LIMIT))
        except CorruptDataError as exc:
            raise CorruptCheckpointError(f"{log.where} log {log.name}", str(exc)) from None
        records = []
        for item in raw:
            cached = self.records.get((log.name, item.seq))
            record = cached or parse_record(item.seq, item.payload, f"log {log.name}")
            if cached is None:
                self.records.remember((log.name, item.seq), record)
            records.append(record)
            if item.seq == 1 and not isinstance(record, Header):
                raise CorruptCheckpointError(f"log {log.name} record 1", "not a header")
        return records

    async def read_tail(self, log: ThreadLog) -> None:
        """Index the end of a log just found, back to its newest checkpoint."""
        after = max(0, log.tip - TAIL)
        records = await self.read(log, after, log.tip - after)
        for record in records:
            log.index(record)
        log.low = after + 1
        await self._find_latest(log)

    async def _find_latest(self, log: ThreadLog) -> None:
        seq = log.tip
        while seq >= 1:
            if seq < log.low:
                await self.extend_to(log, max(1, log.low - PAGE))
            record = await self.record(log, seq)
            if isinstance(record, CheckpointRecord):
                if record.top is None:
                    log.latest = (record.id, record.seq)
                else:
                    top = await self.record(log, record.top)
                    if not isinstance(top, CheckpointRecord):
                        raise CorruptCheckpointError(
                            f"log {log.name} record {record.seq}", "'top' names no checkpoint"
                        )
                    log.latest = (top.id, top.seq)
                return
            seq -= 1
        log.latest = None

    async def extend_to(self, log: ThreadLog, seq: int) -> None:
        """Index back to record ``seq`` (at least)."""
        seq = max(seq, 1)
        while log.low > seq:
            after = max(seq - 1, log.low - 1 - PAGE)
            records = await self.read(log, after, log.low - 1 - after)
            if len(records) != log.low - 1 - after:
                raise CorruptCheckpointError(
                    f"log {log.name}", f"records {after + 1}.. are missing"
                )
            for record in records:
                log.index(record)
            log.low = after + 1

    async def record(self, log: ThreadLog, seq: int) -> Record:
        cached = self.records.get((log.name, seq))
        if cached is not None:
            return cached
        found = await self.read(log, seq - 1, 1)
        if not found or found[0].seq != seq:
            raise CorruptCheckpointError(f"log {log.name}", f"record {seq} is missing")
        return found[0]

    async def records_between(self, log: ThreadLog, first: int, last: int) -> dict[int, Record]:
        """Records ``first..last`` (one range read for those not remembered)."""
        out: dict[int, Record] = {}
        missing = [s for s in range(first, last + 1) if (log.name, s) not in self.records]
        if missing:
            start = missing[0]
            while start <= missing[-1]:
                page = await self.read(log, start - 1, missing[-1] - start + 1)
                if not page:
                    raise CorruptCheckpointError(f"log {log.name}", f"record {start} is missing")
                start = page[-1].seq + 1
        for seq in range(first, last + 1):
            out[seq] = await self.record(log, seq)
        return out

    async def refresh(self, log: ThreadLog) -> ThreadLog:
        """Catch up with records others appended; the current log (another object when this
        one was dropped or sealed meanwhile)."""
        if log.tip == 0:
            self.logs.pop((log.thread_id, log.checkpoint_ns), None)
            fresh = await self.discover(log.thread_id, log.checkpoint_ns)
            return fresh
        while True:
            page = await self.read(log, log.tip - 1, PAGE)
            if not page or page[0].seq != log.tip:
                self.logs.pop((log.thread_id, log.checkpoint_ns), None)
                return await self.discover(log.thread_id, log.checkpoint_ns)
            for record in page[1:]:
                log.advance(record)
            if log.latest is None and log.tip > 0:
                await self._find_latest(log)
            if log.sealed:
                self.logs.pop((log.thread_id, log.checkpoint_ns), None)
                return await self.discover(log.thread_id, log.checkpoint_ns)
            if len(page) < PAGE:
                return log

    async def read_all(self, log: ThreadLog) -> list[Record]:
        """Every record of the log (and index it whole)."""
        if log.tip == 0:
            return []
        await self.extend_to(log, 1)
        return list((await self.records_between(log, 1, log.tip)).values())

    # -- attachments -----------------------------------------------------------------------

    async def blobs(self, digests: Iterable[str], where: str) -> dict[str, bytes]:
        found: dict[str, bytes] = {}
        missing = []
        for digest in dict.fromkeys(digests):
            data = self.blob_cache.get(digest)
            if data is None:
                missing.append(digest)
            else:
                found[digest] = data
        for start in range(0, len(missing), _FETCH):
            chunk = missing[start : start + _FETCH]
            try:
                stored = await self.ledger.attachments(chunk)
            except AttachmentNotFoundError as exc:
                raise CorruptCheckpointError(where, f"attachment {exc.digest} is missing") from None
            except CorruptDataError as exc:
                raise CorruptCheckpointError(where, str(exc)) from None
            for digest in chunk:
                data = stored.get(digest)
                if data is None:
                    raise CorruptCheckpointError(where, f"attachment {digest} is missing")
                found[digest] = check_blob(digest, data, where)
                self.blob_cache.put(digest, data)
        return found

    # -- appending -------------------------------------------------------------------------

    def header(self, log: ThreadLog) -> dict[str, Any]:
        return {
            "lg": FORMAT,
            "thread": log.thread_id,
            "ns": log.checkpoint_ns,
            "gen": log.generation,
        }

    def first_seq(self, log: ThreadLog) -> int:
        """The sequence the next record appended to ``log`` will have."""
        return log.tip + (2 if log.tip == 0 else 1)

    async def append(
        self,
        log: ThreadLog,
        docs: Sequence[dict[str, Any]],
        encoded: Encoded,
        *,
        fence: Fence | None = None,
    ) -> bool:
        """Append ``docs`` (after a header when the log is new) at the known tip, naming
        what they need; True once appended. False when carriers had to go first (the
        records must be built again at the new tip). `LedgerConflictError` when the tip
        moved, `FencedWriteError` for a stale fence."""
        sent, refs = self._plan(log, encoded)
        if len(sent) > MAX_ATTACHMENTS_PER_APPEND or len(refs) > MAX_REFS_PER_APPEND:
            await self._carry(log, sent, refs, fence)
            return False
        docs, payloads = self._payloads(log, docs)
        while True:
            try:
                await self.ledger.append(
                    log.name, payloads, expected=log.tip, attachments=sent, refs=refs, fence=fence
                )
                break
            except AttachmentNotFoundError as gone:
                self._resend(log, gone.digest, encoded, sent, refs)
        self._committed(log, docs, payloads, encoded.needed, sent)
        return True

    def append_blocking(
        self,
        log: ThreadLog,
        docs: Sequence[dict[str, Any]],
        encoded: Encoded,
        ledger: BlockingAppend,
    ) -> bool:
        """`append` (no fence) from a thread that runs no event loop, through ``ledger``
        (this store's, when it can append without one): True once appended; False, with
        nothing written, when carriers would have to go first (then `append` must). The
        same errors as `append`."""
        sent, refs = self._plan(log, encoded)
        if len(sent) > MAX_ATTACHMENTS_PER_APPEND or len(refs) > MAX_REFS_PER_APPEND:
            return False
        docs, payloads = self._payloads(log, docs)
        while True:
            try:
                ledger.append_blocking(
                    log.name, payloads, expected=log.tip, attachments=sent, refs=refs
                )
                break
            except AttachmentNotFoundError as gone:
                self._resend(log, gone.digest, encoded, sent, refs)
        self._committed(log, docs, payloads, encoded.needed, sent)
        return True

    def _payloads(
        self, log: ThreadLog, docs: Sequence[dict[str, Any]]
    ) -> tuple[list[dict[str, Any]], list[bytes]]:
        """The records an append of ``docs`` writes (the log's header first when the log
        is new), and their bytes."""
        written = list(docs)
        if log.tip == 0:
            written.insert(0, self.header(log))
        return written, [dumps_record(doc) for doc in written]

    def _resend(
        self,
        log: ThreadLog,
        digest: str,
        encoded: Encoded,
        sent: dict[str, bytes],
        refs: list[str],
    ) -> None:
        """An attachment named by reference was swept meanwhile: send its bytes instead."""
        data = encoded.blobs.get(digest) or self.blob_cache.get(digest)
        if digest not in refs or data is None:
            raise CorruptCheckpointError(log.where, f"attachment {digest} is missing") from None
        self.blob_cache.forget(digest)
        refs.remove(digest)
        sent[digest] = data

    def _plan(self, log: ThreadLog, encoded: Encoded) -> tuple[dict[str, bytes], list[str]]:
        sent: dict[str, bytes] = {}
        refs: list[str] = []
        for digest in sorted(encoded.needed - log.referenced):
            data = encoded.blobs.get(digest)
            if data is not None and self.blob_cache.get(digest) is None:
                sent[digest] = data
            else:
                refs.append(digest)
        return sent, refs

    async def _carry(
        self, log: ThreadLog, sent: Mapping[str, bytes], refs: list[str], fence: Fence | None
    ) -> None:
        """Store attachments and references in carrier records, a chunk per append."""
        items = list(sent.items())
        limit = min(MAX_ATTACHMENTS_PER_APPEND, MAX_REFS_PER_APPEND)
        while items or refs:
            chunk, items = dict(items[:limit]), items[limit:]
            named, refs = refs[:limit], refs[limit:]
            docs: list[dict[str, Any]] = [{"carry": 1}]
            if log.tip == 0:
                docs.insert(0, self.header(log))
            payloads = [dumps_record(doc) for doc in docs]
            await self.ledger.append(
                log.name, payloads, expected=log.tip, attachments=chunk, refs=named, fence=fence
            )
            self._committed(log, docs, payloads, set(chunk) | set(named), chunk)

    def _committed(
        self,
        log: ThreadLog,
        docs: list[dict[str, Any]],
        payloads: list[bytes],
        needed: Iterable[str],
        sent: Mapping[str, bytes],
    ) -> None:
        seq = log.tip + 1
        if log.low > log.tip:  # nothing indexed yet: the index starts here
            log.low = seq
        remember, name = self.records.remember, log.name
        for doc, payload in zip(docs, payloads, strict=True):
            record = trusted_record(seq, len(payload), doc)
            remember((name, seq), record)
            log.advance(record)
            seq += 1
        log.referenced.update(needed)
        for digest, data in sent.items():
            self.blob_cache.put(digest, data)
