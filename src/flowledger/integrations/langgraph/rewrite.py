"""`Rewriter`: what changes a thread's history as a whole - delete it, delete some of its
checkpoints (prune, ``delete_for_runs``), copy it - and finding threads.

A ledger log only grows, so deleting some checkpoints of a namespace *rewrites* it: the
checkpoints kept (and the writes that name them) are written to the namespace's next
generation, lists chained afresh; then the old generation is sealed with a compare-and-
append at the tip that was read (`records.Seal`), so an append another process made
meanwhile is found, written to the new generation too, and the seal tried again; then
the old generation is dropped. Readers and writers use the lowest generation that is not
sealed, so they see the old history until the new one is complete, and the new one after.
Deleting a thread drops its logs, first recording the highest generation used (so no
later log of the thread reuses a dropped log's name). The attachments that only dropped
logs referred to stay until a sweep (`sweep`), which deletes them safely against
concurrent appends (docs/storage.md).

Each of these holds the thread's admin lease (`AdminLease`), so two never rewrite one
thread at once; a generation above the current one found under it is what a crashed
rewrite left, and is dropped.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, Final

from ...storage import LedgerConflictError
from ...workflows.retention import RetentionStorage
from ...workflows.retention.storage import Swept
from .errors import CorruptCheckpointError, InvalidConfigError, ThreadExistsError
from .leases import AdminLease
from .lists import build, whole_elements
from .logs import PAGE, Chan, ListNode, LogStore, ThreadLog
from .names import (
    decode_segment,
    log_name,
    parse_log_name,
    segment,
    segment_log_name,
    threads_prefix,
)
from .reading import Reader
from .records import (
    CheckpointRecord,
    Header,
    Record,
    WritesRecord,
    dumps_record,
    entry_digests,
    is_list_entry,
)
from .values import Encoded, scalar_digests

__all__ = ["Rewriter"]

_BATCH: Final = 48  # records per append of a rewrite
_DROP: Final = 64


class Rewriter:
    def __init__(self, logs: LogStore, reader: Reader, admin: AdminLease) -> None:
        self.logs = logs
        self.reader = reader
        self.admin = admin
        self.ledger = logs.ledger
        self.prefix = logs.prefix

    # -- finding threads ---------------------------------------------------------------------

    async def threads(self) -> list[str]:
        """Every thread id with a log."""
        found: dict[str, str] = {}
        for name in await self.ledger.names(threads_prefix(self.prefix)):
            parsed = parse_log_name(self.prefix, name)
            if parsed is None or parsed.thread_segment in found:
                continue
            thread_id = decode_segment(parsed.thread_segment)
            if thread_id is None:
                thread_id = await self._header_thread(name)
                if thread_id is None:
                    continue
            found[parsed.thread_segment] = thread_id
        return sorted(found.values())

    async def _header_thread(self, name: str) -> str | None:
        records = await self.ledger.read(name, after=0, limit=1)
        if not records:
            return None
        parsed = _parse_header(records[0].payload, name)
        return parsed.thread_id

    async def thread_logs(self, thread_id: str) -> list[ThreadLog]:
        """The current log of each namespace of a thread that has one."""
        result = []
        for ns_segment, gens in (await self.logs.generations(thread_id)).items():
            checkpoint_ns = decode_segment(ns_segment)
            if checkpoint_ns is None:
                name = segment_log_name(self.prefix, thread_id, ns_segment, gens[0])
                checkpoint_ns = await self._header_ns(name)
                if checkpoint_ns is None:
                    continue
            log = await self.logs.refresh(await self.logs.log(thread_id, checkpoint_ns))
            if log.tip:
                result.append(log)
        return result

    async def _header_ns(self, name: str) -> str | None:
        records = await self.ledger.read(name, after=0, limit=1)
        return _parse_header(records[0].payload, name).checkpoint_ns if records else None

    # -- deleting ----------------------------------------------------------------------------

    async def delete_thread(self, thread_id: str) -> None:
        async with self.admin.hold(thread_id):
            await self._drop_thread(thread_id)

    async def _drop_thread(self, thread_id: str) -> None:
        gens = await self.logs.generations(thread_id)
        names: list[str] = []
        for ns_segment, numbers in gens.items():
            await self.logs.record_dropped(thread_id, ns_segment, max(numbers))
            names.extend(segment_log_name(self.prefix, thread_id, ns_segment, n) for n in numbers)
        for start in range(0, len(names), _DROP):
            await self.ledger.drop(names[start : start + _DROP])
        self.logs.forget(thread_id)

    async def delete_for_runs(self, run_ids: Iterable[str]) -> None:
        wanted = set(run_ids)
        if not wanted:
            return
        for thread_id in await self.threads():
            for log in await self.thread_logs(thread_id):
                if any(r.metadata.get("run_id") in wanted for r in await self._checkpoints(log)):
                    await self.rewrite(
                        thread_id, log.checkpoint_ns, lambda r: r.metadata.get("run_id") in wanted
                    )

    async def keep_latest(self, thread_id: str, count: int) -> int:
        """Keep each namespace's newest ``count`` checkpoints; return how many went."""
        removed = 0
        for log in await self.thread_logs(thread_id):
            checkpoints = await self._checkpoints(log)
            if len(checkpoints) <= count:
                continue
            newest = sorted(checkpoints, key=lambda r: r.id, reverse=True)[:count]
            removed += await self.rewrite(
                thread_id, log.checkpoint_ns, _not_in({r.id for r in newest})
            )
        return removed

    async def _checkpoints(self, log: ThreadLog) -> list[CheckpointRecord]:
        return [r for r in await self.logs.read_all(log) if isinstance(r, CheckpointRecord)]

    async def rewrite(
        self, thread_id: str, checkpoint_ns: str, doomed: Callable[[CheckpointRecord], bool]
    ) -> int:
        """Remove the checkpoints ``doomed`` picks (with their writes) from one namespace;
        return how many went. The predicate is decided on the records read first; records
        appended during the rewrite are kept."""
        async with self.admin.hold(thread_id):
            source = await self.logs.refresh(await self.logs.log(thread_id, checkpoint_ns))
            if source.tip == 0:
                return 0
            records = await self.logs.read_all(source)
            gone = {r.id for r in records if isinstance(r, CheckpointRecord) and doomed(r)}
            if not gone:
                return 0
            kept = [r for r in records if isinstance(r, CheckpointRecord) and r.id not in gone]
            seg = segment(checkpoint_ns, namespace=True)
            if not kept:
                await self.logs.record_dropped(thread_id, seg, await self._clear_above(source))
                await self.ledger.drop([source.name])
                self.logs.forget(thread_id, checkpoint_ns)
                return len(gone)
            target = await self._new_generation(source, thread_id)
            copier = _Copier(self, source, target, gone)
            await copier.copy(records)
            await self._seal(source, target, copier)
            await self.ledger.drop([source.name])
            self.logs.logs.remember((thread_id, checkpoint_ns), target)
            return len(gone)

    async def _clear_above(self, source: ThreadLog) -> int:
        """Drop generations above ``source`` (a crashed rewrite's); the highest used."""
        gens = (await self.logs.generations(source.thread_id)).get(
            segment(source.checkpoint_ns, namespace=True), []
        )
        above = [g for g in gens if g > source.generation]
        if above:
            await self.logs.record_dropped(
                source.thread_id, segment(source.checkpoint_ns, namespace=True), max(above)
            )
            await self.ledger.drop(
                [log_name(self.prefix, source.thread_id, source.checkpoint_ns, g) for g in above]
            )
        return max([source.generation, *above])

    async def _new_generation(self, source: ThreadLog, thread_id: str) -> ThreadLog:
        highest = await self._clear_above(source)
        dropped = await self.logs.dropped_generation(
            thread_id, segment(source.checkpoint_ns, namespace=True)
        )
        return ThreadLog(self.prefix, thread_id, source.checkpoint_ns, max(highest, dropped) + 1, 0)

    async def _seal(self, source: ThreadLog, target: ThreadLog, copier: _Copier) -> None:
        while True:
            try:
                await self.ledger.append(
                    source.name, [dumps_record({"seal": target.generation})], expected=source.tip
                )
                return
            except LedgerConflictError:
                late = await self.logs.read(source, source.tip, PAGE)
                for record in late:
                    source.advance(record)
                await copier.copy(late)

    # -- copying -----------------------------------------------------------------------------

    async def copy_thread(self, source_id: str, target_id: str) -> None:
        if source_id == target_id:
            raise InvalidConfigError("target_thread_id", "the same thread as the source")
        first, second = sorted((source_id, target_id))
        async with self.admin.hold(first), self.admin.hold(second):
            if await self.logs.generations(target_id):
                raise ThreadExistsError(target_id)
            for source in await self.thread_logs(source_id):
                records = await self.logs.read_all(source)
                gen = await self.logs.dropped_generation(
                    target_id, segment(source.checkpoint_ns, namespace=True)
                )
                target = ThreadLog(self.prefix, target_id, source.checkpoint_ns, gen + 1, 0)
                await _Copier(self, source, target, set()).copy(records)
                self.logs.logs.remember((target_id, source.checkpoint_ns), target)

    async def sweep(self) -> Swept | None:
        """Delete the attachments no log refers to (None where the store's references are
        incomplete: see docs/storage.md)."""
        return await RetentionStorage(self.logs.store).sweep(dry_run=False)


class _Copier:
    """Writes records of a source log to a new log, without the ``gone`` checkpoints."""

    def __init__(self, rewriter: Rewriter, source: ThreadLog, target: ThreadLog, gone: set[str]):
        self.rewriter = rewriter
        self.logs = rewriter.logs
        self.source = source
        self.target = target
        self.gone = gone
        self.bases: dict[str, ListNode] = {}

    async def copy(self, records: Iterable[Record]) -> None:
        batch: list[tuple[Record, dict[str, Any], list[ListNode]]] = []
        for record in records:
            if isinstance(record, CheckpointRecord) and record.id not in self.gone:
                chans = await self.rewriter.reader.chans(self.source, record)
                batch.append((record, {c: chan for c, chan in chans.items()}, []))
            elif isinstance(record, WritesRecord) and record.checkpoint_id not in self.gone:
                batch.append((record, {}, await self._write_lists(record)))
            if len(batch) >= _BATCH:
                await self._append(batch)
                batch = []
        if batch:
            await self._append(batch)

    async def _write_lists(self, record: WritesRecord) -> list[ListNode]:
        nodes = []
        for _, _, entry in record.writes:
            if is_list_entry(entry):
                if "l" not in entry:
                    raise CorruptCheckpointError(
                        f"log {self.source.name} record {record.seq}", "a write holds a list delta"
                    )
                items = await whole_elements(
                    self.logs, entry, f"log {self.source.name} record {record.seq}"
                )
                nodes.append(ListNode(0, 0, tuple(items)))
        return nodes

    async def _append(self, batch: list[tuple[Record, dict[str, Any], list[ListNode]]]) -> None:
        while True:
            bases = dict(self.bases)
            docs, out, latest = [], Encoded(), self.target.latest
            seq = self.logs.first_seq(self.target)
            for offset, (record, chans, write_lists) in enumerate(batch):
                if isinstance(record, CheckpointRecord):
                    doc = self._checkpoint(record, chans, seq + offset, bases, out)
                    if latest is not None and latest[0] > record.id:
                        doc["top"] = latest[1]
                    else:
                        latest = (record.id, seq + offset)
                else:
                    assert isinstance(record, WritesRecord)
                    doc = dict(record.doc)
                    for _, _, entry in record.writes:
                        out.needed.update(entry_digests(entry))
                    for node in write_lists:
                        out.needed.update(scalar_digests(node.elements))
                docs.append(doc)
            if await self.logs.append(self.target, docs, out):
                self.bases = bases
                return

    def _checkpoint(
        self,
        record: CheckpointRecord,
        chans: dict[str, Chan],
        seq: int,
        bases: dict[str, ListNode],
        out: Encoded,
    ) -> dict[str, Any]:
        doc = {k: v for k, v in record.doc.items() if k not in ("vals", "top")}
        values: dict[str, Any] = {}
        for channel, chan in chans.items():
            if chan.node is not None:
                entry, node = build(
                    list(chan.node.elements), bases.get(channel), seq, self.target, out
                )
                bases[channel] = node
                values[channel] = entry
            else:
                out.needed.update(scalar_digests([chan.entry]))
                values[channel] = chan.entry
        doc["vals"] = values
        return doc


def _parse_header(payload: bytes, name: str) -> Header:
    from .records import parse_record

    header = parse_record(1, payload, f"log {name}")
    if not isinstance(header, Header):
        raise CorruptCheckpointError(f"log {name} record 1", "not a header")
    return header


def _not_in(keep: set[str]) -> Callable[[CheckpointRecord], bool]:
    def doomed(record: CheckpointRecord) -> bool:
        return record.id not in keep

    return doomed
