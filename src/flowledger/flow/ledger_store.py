"""`LedgerCheckpointStore`: checkpoints on a storage `Ledger`, with de-duplicated state.

Layout: the checkpoints of run ``R`` form the ledger log ``<prefix>/<R>``;
revision ``n`` is sequence ``n + 1``. Each record is a small JSON envelope::

    {"revision": n, "state": "<digest>", "step_base": "<digest>", "same": [...],
     "checkpoint": {...everything but the two states...}}

Revision 0 also carries ``"schema_version": 1``, the format of the whole log.

De-duplication, so that bytes written per step grow with what changed:

* A state is split into its top-level fields. A field whose JSON is short is
  kept inline in the state's *manifest*; a longer one is stored once as a
  content-addressed attachment and the manifest names its digest. The
  manifest itself is an attachment, and the envelope names it. Attachments
  are written in the same transaction as the record, so a checkpoint is one
  atomic commit, and an unchanged field costs nothing.
* ``same`` lists parts (``state``, ``step_base``, ``vertices``) equal to the
  previous record's in the same append (the last vertex checkpoint of a step
  and the step's boundary), which are then not repeated. Only a record with
  no ``same`` can be referred to, so one look back always suffices.
* An attachment skipped because this store knows it is stored (it wrote or read it)
  is named in the append's ``refs``, so the log refers to it and a `sweep` keeps it.
  If a sweep deleted it meanwhile (its log was dropped), the append fails with
  `AttachmentNotFoundError` and writes nothing; the store then forgets it and
  appends once more with the bytes of everything it had skipped.
* The run record's fixed part (run id, graph id and version, creation times)
  is stored in revision 0; a later record that agrees with it leaves it out,
  and the store restores it on read (caching it per run). A record whose
  fixed part differs (only ever written by hand or by a foreign writer) keeps
  its own, so what is read is always what was appended.

Reading is strict: size and depth bounds before parsing, unknown fields
rejected, the envelope's revision must equal the ledger sequence - 1, the run
id must be the one asked for, and attachment bytes must hash to their digest.
Any such failure, a record or attachment that fails the backend's checksum
(`CorruptDataError`), and an attachment a record names that is not stored (renamed or
lost: `AttachmentNotFoundError`) is a `StoreError` wrapping a `CheckpointDecodeError`:
damaged or missing bytes never come back, so it is definite, never retried.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Final

from ..storage import (
    AttachmentNotFoundError,
    CorruptDataError,
    Ledger,
    LedgerConflictError,
    Record,
    digest_of,
    fence_arg,
)
from ..storage import StorageError as _StorageError
from .checkpoint import Checkpoint, from_document, to_document
from .codec import JsonObject, check_readable, dumps, dumps_ordered, loads
from .errors import (
    CheckpointDecodeError,
    CheckpointNotFoundError,
    FlowError,
    RevisionConflictError,
    StoreError,
)
from .ids import validate_run_id
from .store import check_batch

__all__ = ["LedgerCheckpointStore"]

SCHEMA_VERSION: Final = 1
MAX_RECORD_BYTES: Final = 1 << 20
MAX_HISTORY: Final = 100_000
INLINE_FIELD_BYTES: Final = 64  # a field this short lives in its manifest
_PAGE: Final = 1000
_CACHE: Final = 4096
# Run-record fields that never change after revision 0: written once, restored on read.
_FIXED: Final = ("graph_run_id", "graph_id", "graph_version", "created_at", "started_at")
_SHARABLE: Final = ("state", "step_base", "vertices")
_ENVELOPE_KEYS: Final = frozenset(
    {"schema_version", "revision", "state", "step_base", "same", "checkpoint"}
)


class _Lru(OrderedDict[str, Any]):
    """A bounded map of immutable things (digest -> bytes, run -> fixed fields)."""

    def __init__(self, size: int) -> None:
        super().__init__()
        self.size = size

    def remember(self, key: str, value: Any) -> None:
        self[key] = value
        self.move_to_end(key)
        while len(self) > self.size:
            self.popitem(last=False)


@dataclass(slots=True)
class _Parsed:
    """One record, parsed but not yet resolved into a `Checkpoint`."""

    seq: int
    body: dict[str, Any]
    parts: dict[str, Any]  # state ref, step_base ref, vertices (raw), after resolving "same"
    fixed: dict[str, Any] | None  # revision 0 only
    shares: bool  # refers to its predecessor, so it cannot be referred to


class LedgerCheckpointStore:
    def __init__(self, ledger: Ledger, *, prefix: str = "flow/runs") -> None:
        if ledger is None:
            raise TypeError("LedgerCheckpointStore needs a ledger")
        self.ledger = ledger
        self.prefix = prefix.rstrip("/")
        self._durable = _Lru(_CACHE)  # attachments known to be committed
        self._fixed = _Lru(_CACHE)
        self._strings: dict[int, tuple[str, str]] = {}

    def log_name(self, run_id: str) -> str:
        validate_run_id(run_id)
        return f"{self.prefix}/{run_id}"

    # -- writing ---------------------------------------------------------------------------

    async def append(self, checkpoints: Sequence[Checkpoint]) -> None:
        run_id, first = check_batch(checkpoints)
        attachments: dict[str, bytes] = {}
        skipped: dict[str, bytes] = {}  # known stored, so named in ``refs`` instead of sent
        seed_fixed = None
        if first > 0:
            try:
                seed_fixed = await self._run_fixed(run_id)
            except (FlowError, _StorageError, OSError, ValueError):
                seed_fixed = None  # the append below reports what is wrong
        try:
            name = self.log_name(run_id)
            memo: dict[int, str] = {}
            records = []
            previous: dict[str, Any] | None = None
            for cp in checkpoints:
                body = to_document(cp, states=False)
                run = body["run"]
                del run["revision"]
                if cp.run.revision == 0:
                    seed_fixed = {key: run[key] for key in _FIXED}
                elif seed_fixed is not None and all(run[k] == seed_fixed[k] for k in _FIXED):
                    for key in _FIXED:  # the usual case: the same as revision 0's
                        del run[key]
                parts = {
                    "state": self._manifest(cp.state, attachments, memo, skipped),
                    "step_base": self._manifest(cp.step_base, attachments, memo, skipped),
                    "vertices": body.pop("vertices"),
                }
                same = [k for k in _SHARABLE if previous is not None and previous[k] == parts[k]]
                envelope: dict[str, Any] = {"revision": cp.run.revision}
                if cp.run.revision == 0:  # the log's format is fixed when it begins
                    envelope["schema_version"] = SCHEMA_VERSION
                for key in ("state", "step_base"):
                    if key not in same:
                        envelope[key] = parts[key]
                if "vertices" not in same:
                    body["vertices"] = parts["vertices"]
                if same:
                    envelope["same"] = same
                envelope["checkpoint"] = body
                previous = None if same else parts
                data = dumps(envelope)
                check_readable(data, max_bytes=MAX_RECORD_BYTES)  # what a read would refuse
                records.append(data)
        except (FlowError, ValueError) as exc:
            raise StoreError("append", exc) from exc
        try:
            # An owner's append carries its lease fence (`storage.fencing`), if it set one.
            try:
                await self.ledger.append(
                    name,
                    records,
                    expected=first,
                    attachments=attachments,
                    refs=list(skipped),
                    **fence_arg(),
                )
            except AttachmentNotFoundError as gone:
                if gone.digest not in skipped:
                    raise
                # Swept since this store saw it stored (the append wrote nothing): send
                # the bytes of everything it skipped, once.
                self._durable.pop(gone.digest, None)
                attachments.update(skipped)
                await self.ledger.append(
                    name, records, expected=first, attachments=attachments, **fence_arg()
                )
        except LedgerConflictError as conflict:
            raise RevisionConflictError(run_id, conflict.actual, first) from conflict
        except (_StorageError, OSError, ValueError, TypeError) as exc:
            raise StoreError("append", exc) from exc
        for digest, data in attachments.items():
            self._durable.remember(digest, data)

    def _manifest(
        self,
        doc: JsonObject | None,
        attachments: dict[str, bytes],
        memo: dict[int, str],
        skipped: dict[str, bytes],
    ) -> str | None:
        """Store ``doc``'s fields and manifest (as needed); return the manifest's digest."""
        if doc is None:
            return None
        known = memo.get(id(doc))  # the same document object within one append
        if known is not None:
            return known
        manifest: dict[str, Any] = {}
        for name, value in doc.items():
            digest = self._big_string(value)
            if digest is None:
                data = dumps_ordered(value)  # a state keeps its key order
                if len(data) <= INLINE_FIELD_BYTES:
                    manifest[name] = [value]
                    continue
                check_readable(data)
                digest = self._attach(data, attachments, skipped)
            else:
                stored = self._durable.get(digest)
                if stored is None:
                    attachments[digest] = dumps(value)
                else:
                    skipped[digest] = stored
            manifest[name] = digest
        digest = self._attach(dumps_ordered(manifest), attachments, skipped)
        memo[id(doc)] = digest
        return digest

    def _attach(self, data: bytes, attachments: dict[str, bytes], skipped: dict[str, bytes]) -> str:
        digest = digest_of(data)
        if self._durable.get(digest) is None:
            attachments[digest] = data
        else:
            skipped[digest] = data
        return digest

    def _big_string(self, value: Any) -> str | None:
        """The digest of a long string field that is the very object seen before.

        Strings are immutable, so identity proves equality: an unchanged large text
        field is neither re-encoded nor re-hashed on every step."""
        if type(value) is not str or len(value) < 256:
            return None
        cached = self._strings.get(id(value))
        if cached is not None and cached[0] is value:
            return cached[1]
        digest = digest_of(dumps(value))
        self._strings[id(value)] = (value, digest)
        if len(self._strings) > _CACHE:
            self._strings.pop(next(iter(self._strings)))
        return digest

    # -- references of logs written before the ledger recorded them ----------------------

    async def backfill_refs(self) -> int:
        """Register, with `Ledger.add_refs`, the attachments every checkpoint log under
        this store's prefix refers to: its records' state manifests and the fields those
        name. For a database written before the ledger recorded references; it reads
        every record once and returns how many logs it registered. Idempotent, and safe
        while runs go on (their appends record their own references). A record that does
        not parse names nothing that could be read anyway and is passed over. It does
        not call `Ledger.mark_refs_complete`: other kinds of logs may need theirs too."""
        logs = 0
        for name in await self.ledger.names(self.prefix + "/"):
            manifests = await self._manifests_named(name)
            fields: set[str] = set()
            for digest, data in (await self._stored(manifests)).items():
                try:
                    doc = _manifest_doc(digest, data)
                except (FlowError, ValueError):
                    continue
                fields.update(v for v in doc.values() if isinstance(v, str))
            await self.ledger.add_refs(name, sorted(manifests | fields))
            logs += 1
        return logs

    async def _manifests_named(self, name: str) -> set[str]:
        """The state manifests the records of log ``name`` name."""
        manifests: set[str] = set()
        previous: _Parsed | None = None
        seq = 0
        while page := await self.ledger.read(name, after=seq, limit=_PAGE):
            for record in page:
                try:
                    previous = _parse(record, previous)
                except (FlowError, ValueError):
                    previous = None
                    continue
                for key in ("state", "step_base"):
                    if isinstance(ref := previous.parts[key], str):
                        manifests.add(ref)
            seq = page[-1].seq
        return manifests

    async def _stored(self, digests: Iterable[str]) -> dict[str, bytes]:
        """The attachments of ``digests`` that are stored (the missing ones left out)."""
        wanted = list(digests)
        found: dict[str, bytes] = {}
        while wanted:
            chunk, wanted = wanted[:_PAGE], wanted[_PAGE:]
            while chunk:
                try:
                    found.update(await self.ledger.attachments(chunk))
                    break
                except AttachmentNotFoundError as missing:
                    chunk = [d for d in chunk if d != missing.digest]
        return found

    # -- reading ---------------------------------------------------------------------------

    async def latest(self, run_id: str) -> Checkpoint:
        name = self._name_for_read(run_id, "latest")
        try:
            tip = await self.ledger.tip(name)
            if tip == 0:
                raise CheckpointNotFoundError(run_id)
            records = await self._read(name, tip - 1, 1)
            if len(records) != 1:
                raise CheckpointDecodeError("checkpoint", f"record {tip} is missing")
            return (await self._decode(run_id, records))[0]
        except (CheckpointNotFoundError, StoreError):
            raise
        except (FlowError, _StorageError, OSError) as exc:
            raise StoreError("latest", exc) from exc

    async def history(
        self, run_id: str, *, after: int = -1, limit: int | None = None
    ) -> list[Checkpoint]:
        name = self._name_for_read(run_id, "history")
        try:
            tip = await self.ledger.tip(name)
            if tip == 0:
                raise CheckpointNotFoundError(run_id)
            if tip > MAX_HISTORY:
                raise CheckpointDecodeError("checkpoint", f"history longer than {MAX_HISTORY}")
            seq = max(after + 1, 0)  # the ledger sequence to read after
            end = tip if limit is None else min(tip, seq + max(limit, 0))
            result: list[Checkpoint] = []
            while seq < end:
                page = await self._read(name, seq, min(_PAGE, end - seq))
                if not page:
                    raise CheckpointDecodeError("checkpoint", f"record {seq + 1} is missing")
                result.extend(await self._decode(run_id, page))
                seq += len(page)
            return result
        except (CheckpointNotFoundError, StoreError):
            raise
        except (FlowError, _StorageError, OSError) as exc:
            raise StoreError("history", exc) from exc

    def _name_for_read(self, run_id: str, op: str) -> str:
        try:
            return self.log_name(run_id)
        except ValueError:
            raise CheckpointNotFoundError(str(run_id)) from None  # no run has such an id

    async def _read(self, name: str, after: int, limit: int) -> list[Record]:
        try:
            return await self.ledger.read(name, after=after, limit=limit)
        except CorruptDataError as exc:  # damaged bytes never heal: a definite decode failure
            raise CheckpointDecodeError("record", str(exc)) from exc

    async def _run_fixed(self, run_id: str) -> dict[str, Any]:
        """The fixed part of the run record, from revision 0 (cached: it never changes)."""
        known: dict[str, Any] | None = self._fixed.get(run_id)
        if known is None:
            seed = await self._read(self.log_name(run_id), 0, 1)
            if not seed:
                raise CheckpointDecodeError("checkpoint", "revision 0 is missing")
            known = _parse(seed[0], None).fixed
            assert known is not None
            self._fixed.remember(run_id, known)
        return known

    async def _decode(self, run_id: str, records: Sequence[Record]) -> list[Checkpoint]:
        previous: _Parsed | None = None
        if records[0].seq > 1 and b'"same"' in records[0].payload:
            before = await self._read(self.log_name(run_id), records[0].seq - 2, 1)
            if not before:
                raise CheckpointDecodeError("checkpoint", "the referenced record is missing")
            previous = _parse(before[0], None)
        parsed: list[_Parsed] = []
        for index, record in enumerate(records):
            if record.seq != records[0].seq + index:
                raise CheckpointDecodeError("checkpoint", f"sequence gap at {record.seq}")
            item = _parse(record, previous)
            if item.fixed is not None:
                self._fixed.remember(run_id, item.fixed)
            parsed.append(item)
            previous = item
        fixed = parsed[0].fixed if records[0].seq == 1 else await self._run_fixed(run_id)
        refs = {p.parts[k] for p in parsed for k in ("state", "step_base")} - {None}
        manifests = {d: _manifest_doc(d, data) for d, data in (await self._blobs(refs)).items()}
        digests = (v for m in manifests.values() for v in m.values() if isinstance(v, str))
        fields = await self._blobs(digests)
        result = []
        for item in parsed:
            run = item.body["run"]
            if item.fixed is None:
                assert fixed is not None
                present = [key for key in _FIXED if key in run]
                if not present:
                    run.update(fixed)
                elif len(present) != len(_FIXED):
                    missing = sorted(set(_FIXED) - set(present))[0]
                    raise CheckpointDecodeError(f"checkpoint.run.{missing}", "missing")
            if "revision" in run:
                raise CheckpointDecodeError("checkpoint.run.revision", "unknown field")
            run["revision"] = item.seq - 1
            item.body["vertices"] = item.parts["vertices"]
            cp = from_document(item.body, path="checkpoint", states=False)
            if cp.run.graph_run_id != run_id:
                raise CheckpointDecodeError(
                    "checkpoint.run.graph_run_id", f"belongs to run {cp.run.graph_run_id}"
                )
            cp.state = _assemble(item.parts["state"], manifests, fields)
            cp.step_base = _assemble(item.parts["step_base"], manifests, fields)
            result.append(cp)
        return result

    async def _blobs(self, digests: Iterable[str]) -> dict[str, bytes]:
        found: dict[str, bytes] = {}
        missing = []
        for digest in dict.fromkeys(digests):
            data = self._durable.get(digest)
            if data is None:
                missing.append(digest)
            else:
                found[digest] = data
        if missing:
            try:
                stored = await self.ledger.attachments(missing)
            except AttachmentNotFoundError as exc:
                raise CheckpointDecodeError("state", f"attachment {exc.digest} is missing") from exc
            except CorruptDataError as exc:
                raise CheckpointDecodeError("state", str(exc)) from exc
            for digest in missing:
                if digest not in stored:
                    raise CheckpointDecodeError("state", f"attachment {digest} is missing")
            for digest, data in stored.items():
                if digest_of(data) != digest:
                    raise CheckpointDecodeError("state", f"attachment {digest} is corrupt")
                self._durable.remember(digest, data)
                found[digest] = data
        return found


def _parse(record: Record, previous: _Parsed | None) -> _Parsed:
    doc = loads(record.payload, max_bytes=MAX_RECORD_BYTES)
    if not isinstance(doc, dict):
        raise CheckpointDecodeError("envelope", "expected an object")
    unknown = set(doc) - _ENVELOPE_KEYS
    if unknown:
        raise CheckpointDecodeError(f"envelope.{sorted(unknown)[0]}", "unknown field")
    if record.seq == 1 and doc.get("schema_version") != SCHEMA_VERSION:
        raise CheckpointDecodeError(
            "envelope.schema_version", f"unsupported version {doc.get('schema_version')!r}"
        )
    if record.seq > 1 and "schema_version" in doc:
        raise CheckpointDecodeError("envelope.schema_version", "only revision 0 carries it")
    if doc.get("revision") != record.seq - 1:
        raise CheckpointDecodeError(
            "envelope.revision", f"record {record.seq} holds revision {doc.get('revision')!r}"
        )
    body = doc.get("checkpoint")
    if not isinstance(body, dict) or not isinstance(body.get("run"), dict):
        raise CheckpointDecodeError("checkpoint", "expected an object with a run")
    same = doc.get("same", [])
    if (
        not isinstance(same, list)
        or not all(isinstance(name, str) for name in same)  # set() of a list would raise
        or not set(same) <= set(_SHARABLE)
        or len(set(same)) != len(same)
    ):
        raise CheckpointDecodeError("envelope.same", f"invalid {same!r}")
    if same and (previous is None or previous.seq != record.seq - 1 or previous.shares):
        raise CheckpointDecodeError("envelope.same", "no previous record to refer to")
    parts: dict[str, Any] = {}
    for key in _SHARABLE:
        source = body if key == "vertices" else doc
        if key in same:
            if key in source:
                raise CheckpointDecodeError(f"envelope.{key}", "both given and shared")
            assert previous is not None
            parts[key] = previous.parts[key]
            continue
        value = source.pop(key, None) if key == "vertices" else source.get(key)
        if key != "vertices" and value is not None and not isinstance(value, str):
            raise CheckpointDecodeError(f"envelope.{key}", "expected a digest")
        parts[key] = [] if key == "vertices" and value is None else value
    fixed = None
    if record.seq == 1:
        fixed = {key: body["run"].get(key) for key in _FIXED}
    return _Parsed(record.seq, body, parts, fixed, bool(same))


def _manifest_doc(digest: str, data: bytes) -> dict[str, Any]:
    doc = loads(data)
    valid = isinstance(doc, dict) and all(
        isinstance(v, str) or (isinstance(v, list) and len(v) == 1) for v in doc.values()
    )
    if not valid:
        raise CheckpointDecodeError("state", f"manifest {digest} is malformed")
    return doc  # type: ignore[no-any-return]


def _assemble(
    ref: str | None, manifests: dict[str, dict[str, Any]], fields: dict[str, bytes]
) -> JsonObject | None:
    if ref is None:
        return None
    state: dict[str, Any] = {}
    for name, entry in manifests[ref].items():
        state[name] = loads(fields[entry]) if isinstance(entry, str) else _fresh(entry[0])
    return state


def _fresh(value: Any) -> Any:
    """An independent copy of inline JSON data (manifests are cached and shared)."""
    if isinstance(value, dict):
        return {k: _fresh(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_fresh(v) for v in value]
    return value
