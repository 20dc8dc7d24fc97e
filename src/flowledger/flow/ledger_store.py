"""`LedgerCheckpointStore`: checkpoints on a storage `Ledger`, with de-duplicated state.

Layout: the checkpoints of run ``R`` form the ledger log ``<prefix>/<R>``;
revision ``n`` is sequence ``n + 1``. Each record is a small JSON envelope. Revision
0 carries ``"schema_version"``, the format of the whole log: new logs are written in
schema 2; a log begun in schema 1 (by an earlier version) is read and continued in
schema 1, so what an older reader could read stays readable to it.

Common to both schemas:

* A state is split into its top-level fields. A field whose JSON is short is
  kept inline in the state's *manifest* (as ``[value]``); a longer one is stored once as
  a content-addressed attachment and the manifest names its digest. A manifest stored
  whole is an attachment too, named by its digest. Attachments are written in the same
  transaction as the records, so a checkpoint is one atomic commit, and an unchanged
  field costs nothing.
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

Schema 1 (``{"revision", "state": digest, "step_base": digest, "same": [...],
"checkpoint": {...}}``): every record names whole manifests; ``same`` lists parts
(``state``, ``step_base``, ``vertices``) equal to the previous record's in the same
append, which are then not repeated; only a record with no ``same`` can be referred to.
A step of ``W`` per-vertex checkpoints therefore wrote ``W`` vertex lists of ``W`` records
and ``W`` manifests: bytes grew with the square of the width.

Schema 2 (``{"revision", "depth", "state", "step_base", "vertices", "checkpoint"}``):
vertex records and routes are compact rows (`ledger_delta`; records are parsed and
resolved in `ledger_records`), and a record is either

* *full* (no ``depth``): ``state`` / ``step_base`` name whole manifests (absent: None),
  ``vertices`` lists every row (absent: none); or
* a *delta* (``depth`` = d >= 1) against the record just before it, whose chain reaches a
  full record exactly d records back: a part left out is the previous record's; a
  state part is null (None), a manifest digest, or a patch of the fields that changed
  against the previous record's state or step base; ``vertices`` is a patch naming only
  the rows that changed. The ``checkpoint`` body is always given whole (it is small:
  run record, phase, frontier, routes, interrupts, halt).

So a per-vertex checkpoint costs about the one vertex row and the fields it changed,
and bytes per super-step grow linearly with the number of vertices that ran. The writer
starts a new chain (writes a full record) when it does not know the previous record
(a new store object, another writer), when the chain would exceed `MAX_DEPTH` records,
or when its deltas would exceed ``CHAIN_FACTOR`` times its full record's bytes (at least
`CHAIN_MIN_BYTES`, at most `CHAIN_MAX_BYTES`);
so reading any revision reads that record and then at most the d records before it, in
ONE range read, and those bytes stay within a constant factor of a full record. The last
record written or read of each run is cached (records never change), which is what the
next append's delta is taken against.

Reading is strict: size and depth bounds before parsing, unknown fields
rejected, the envelope's revision must equal the ledger sequence - 1, the run
id must be the one asked for, attachment bytes must hash to their digest, a delta's
depth must continue its predecessor's, and a patch must apply to what it names.
Any such failure, a record or attachment that fails the backend's checksum
(`CorruptDataError`), and an attachment a record names that is not stored (renamed or
lost: `AttachmentNotFoundError`) is a `StoreError` wrapping a `CheckpointDecodeError`:
damaged or missing bytes never come back, so it is definite, never retried.
"""

from __future__ import annotations

import itertools
from collections import OrderedDict
from collections.abc import Iterable, Sequence
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
from .checkpoint import Checkpoint, micros, to_document
from .codec import JsonObject, check_readable, dumps, dumps_ordered, loads
from .errors import (
    CheckpointDecodeError,
    CheckpointNotFoundError,
    FlowError,
    RevisionConflictError,
    StoreError,
)
from .ids import validate_run_id
from .ledger_delta import (
    route_to_row,
    rows_patch,
    state_patch,
    vertices_to_rows,
)
from .ledger_records import (
    FIXED,
    MAX_DEPTH,
    MAX_RECORD_BYTES,
    READABLE_SCHEMAS,
    SCHEMA_VERSION,
    SHARABLE,
    STATES,
    Manifest,
    Meta,
    Parsed1,
    Parsed2,
    Tail,
    assemble,
    manifest_doc,
    manifest_entries,
    parse_v1,
    parse_v2,
    raw_entry,
    resolve,
    same_manifest,
    seed_meta,
    to_checkpoint,
)
from .store import check_batch

__all__ = ["MAX_DEPTH", "READABLE_SCHEMAS", "SCHEMA_VERSION", "LedgerCheckpointStore"]

MAX_HISTORY: Final = 100_000
INLINE_FIELD_BYTES: Final = 64  # a field this short lives in its manifest
# A chain's deltas may reach CHAIN_FACTOR times its full record's bytes (so re-writing
# whole records costs a fixed small fraction at any width), within these bounds:
CHAIN_FACTOR: Final = 64
CHAIN_MIN_BYTES: Final = 16 << 10
CHAIN_MAX_BYTES: Final = 4 << 20
_PAGE: Final = 1000
_CACHE: Final = 4096


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


class LedgerCheckpointStore:
    def __init__(self, ledger: Ledger, *, prefix: str = "flow/runs") -> None:
        if ledger is None:
            raise TypeError("LedgerCheckpointStore needs a ledger")
        self.ledger = ledger
        self.prefix = prefix.rstrip("/")
        self._durable = _Lru(_CACHE)  # attachments known to be committed
        self._meta = _Lru(_CACHE)
        self._tails = _Lru(_CACHE)  # run -> Tail of its newest record known here
        self._strings: dict[int, tuple[str, str]] = {}

    def log_name(self, run_id: str) -> str:
        validate_run_id(run_id)
        return f"{self.prefix}/{run_id}"

    # -- writing ---------------------------------------------------------------------------

    async def append(self, checkpoints: Sequence[Checkpoint]) -> None:
        run_id, first = check_batch(checkpoints)
        attachments: dict[str, bytes] = {}
        skipped: dict[str, bytes] = {}  # known stored, so named in ``refs`` instead of sent
        meta = None
        if first > 0:
            try:
                meta = await self._run_meta(run_id)
            except (FlowError, _StorageError, OSError, ValueError):
                meta = None  # the append below reports what is wrong
        schema = SCHEMA_VERSION if meta is None else meta.schema
        seed_fixed = None if meta is None else meta.fixed
        tail: Tail | None = self._tails.get(run_id) if schema == 2 else None
        if tail is not None and tail.revision != first - 1:
            tail = None  # not the record this batch follows: start a new chain
        try:
            name = self.log_name(run_id)
            memo: dict[int, Any] = {}
            records = []
            previous: dict[str, Any] | None = None
            for cp in checkpoints:
                body = to_document(cp, states=False)
                run = body["run"]
                del run["revision"]
                if cp.run.revision == 0:
                    seed_fixed = {key: run[key] for key in FIXED}
                elif seed_fixed is not None and all(run[k] == seed_fixed[k] for k in FIXED):
                    for key in FIXED:  # the usual case: the same as revision 0's
                        del run[key]
                if schema == 1:
                    data, previous = self._record_v1(cp, body, previous, attachments, memo, skipped)
                else:
                    data, tail = self._record_v2(cp, body, tail, attachments, memo, skipped)
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
        if tail is not None:
            self._tails.remember(run_id, tail)

    def _record_v1(
        self,
        cp: Checkpoint,
        body: dict[str, Any],
        previous: dict[str, Any] | None,
        attachments: dict[str, bytes],
        memo: dict[int, Any],
        skipped: dict[str, bytes],
    ) -> tuple[bytes, dict[str, Any] | None]:
        """A schema-1 record; returns it and what the next record may share with."""
        parts = {
            "state": self._manifest_ref(
                self._fields(cp.state, attachments, memo, skipped), attachments, memo, skipped
            ),
            "step_base": self._manifest_ref(
                self._fields(cp.step_base, attachments, memo, skipped), attachments, memo, skipped
            ),
            "vertices": body.pop("vertices"),
        }
        same = [k for k in SHARABLE if previous is not None and previous[k] == parts[k]]
        envelope: dict[str, Any] = {"revision": cp.run.revision}
        if cp.run.revision == 0:
            envelope["schema_version"] = 1
        for key in STATES:
            if key not in same:
                envelope[key] = parts[key]
        if "vertices" not in same:
            body["vertices"] = parts["vertices"]
        if same:
            envelope["same"] = same
        envelope["checkpoint"] = body
        return dumps(envelope), (None if same else parts)

    def _record_v2(
        self,
        cp: Checkpoint,
        body: dict[str, Any],
        previous: Tail | None,
        attachments: dict[str, bytes],
        memo: dict[int, Any],
        skipped: dict[str, bytes],
    ) -> tuple[bytes, Tail]:
        """A schema-2 record (a delta on ``previous`` if that is worth it); its `Tail`."""
        origin = _micros(cp)
        rows = vertices_to_rows(body.pop("vertices"), origin)
        if "routes" in body:
            body["routes"] = [route_to_row(r) for r in body["routes"]]
        parts: dict[str, Any] = {
            "state": self._fields(cp.state, attachments, memo, skipped),
            "step_base": self._fields(cp.step_base, attachments, memo, skipped),
            "vertices": rows,
        }
        revision = cp.run.revision
        if previous is not None and previous.depth < MAX_DEPTH:
            envelope: dict[str, Any] = {"revision": revision, "depth": previous.depth + 1}
            for key in STATES:
                mine, theirs = parts[key], previous.parts[key]
                if same_manifest(mine, theirs):
                    continue
                if mine is None:
                    envelope[key] = None
                    continue
                envelope[key] = self._state_delta(
                    key, mine, previous.parts, attachments, memo, skipped
                )
            if rows != previous.parts["vertices"]:
                envelope["vertices"] = rows_patch(rows, previous.parts["vertices"])
            envelope["checkpoint"] = body
            data = dumps_ordered(envelope)
            budget = CHAIN_FACTOR * previous.full_bytes
            budget = min(CHAIN_MAX_BYTES, max(CHAIN_MIN_BYTES, budget))
            if previous.chain_bytes + len(data) <= budget:
                chain = previous.chain_bytes + len(data)
                return data, Tail(revision, parts, previous.depth + 1, chain, previous.full_bytes)
        envelope = {"revision": revision}
        if revision == 0:  # the log's format is fixed when it begins
            envelope["schema_version"] = SCHEMA_VERSION
        for key in STATES:
            if parts[key] is not None:
                envelope[key] = self._manifest_ref(parts[key], attachments, memo, skipped)
        if rows:
            envelope["vertices"] = rows
        envelope["checkpoint"] = body
        data = dumps_ordered(envelope)
        return data, Tail(revision, parts, 0, 0, len(data))

    def _state_delta(
        self,
        key: str,
        mine: Manifest,
        parts: dict[str, Any],
        attachments: dict[str, bytes],
        memo: dict[int, Any],
        skipped: dict[str, bytes],
    ) -> Any:
        """The smallest patch of ``mine`` against the previous record's parts, else a digest."""
        best: dict[str, Any] | None = None
        # A step base is most often the state before it (a step's first checkpoint), a
        # state most often its own predecessor with a field or two changed.
        for of in STATES:
            patch = state_patch(mine, parts[of], of, key)
            if patch is not None and (best is None or _changes(patch) < _changes(best)):
                best = patch
            if best is not None and _changes(best) <= (1 if of == key else 0):
                break  # good enough: trying the other part costs more than it can save
        if best is None:
            return self._manifest_ref(mine, attachments, memo, skipped)
        if "set" in best:
            best["set"] = {name: raw_entry(entry) for name, entry in best["set"].items()}
        return best

    def _fields(
        self,
        doc: JsonObject | None,
        attachments: dict[str, bytes],
        memo: dict[int, Any],
        skipped: dict[str, bytes],
    ) -> Manifest | None:
        """``doc``'s manifest, storing its long fields as attachments (as needed)."""
        if doc is None:
            return None
        known = memo.get(id(doc))  # the same document object within one append
        if known is not None:
            return known  # type: ignore[no-any-return]
        manifest: Manifest = {}
        for name, value in doc.items():
            digest = self._big_string(value)
            if digest is None:
                data = dumps_ordered(value)  # a state keeps its key order
                if len(data) <= INLINE_FIELD_BYTES:
                    manifest[name] = (data, value)
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
        memo[id(doc)] = manifest
        return manifest

    def _manifest_ref(
        self,
        manifest: Manifest | None,
        attachments: dict[str, bytes],
        memo: dict[int, Any],
        skipped: dict[str, bytes],
    ) -> str | None:
        """Store ``manifest`` whole (as needed); return its digest."""
        if manifest is None:
            return None
        known = memo.get(id(manifest))
        if known is None:
            raw = {name: raw_entry(entry) for name, entry in manifest.items()}
            known = memo[id(manifest)] = self._attach(dumps_ordered(raw), attachments, skipped)
        return known

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
            named = await self._digests_named(name)
            fields: set[str] = set()
            for digest, data in (await self._stored(named)).items():
                try:
                    doc = manifest_doc(digest, data)
                except (FlowError, ValueError):
                    continue  # a field, not a manifest
                _collect_digests(doc, fields)
            await self.ledger.add_refs(name, sorted(named | fields))
            logs += 1
        return logs

    async def _digests_named(self, name: str) -> set[str]:
        """Every digest the records of log ``name`` name, in either schema: any string of
        64 lowercase hex characters anywhere in a record (state and step base manifests,
        patched fields). Reading more than that as a reference only keeps an attachment
        longer, never deletes one."""
        found: set[str] = set()
        seq = 0
        while page := await self.ledger.read(name, after=seq, limit=_PAGE):
            for record in page:
                try:
                    doc = loads(record.payload)
                except (FlowError, ValueError):
                    continue
                _collect_digests(doc, found)
            seq = page[-1].seq
        return found

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

    async def _run_meta(self, run_id: str) -> Meta:
        """The log's schema and the run record's fixed part, from revision 0 (cached)."""
        known: Meta | None = self._meta.get(run_id)
        if known is None:
            seed = await self._read(self.log_name(run_id), 0, 1)
            if not seed:
                raise CheckpointDecodeError("checkpoint", "revision 0 is missing")
            known = seed_meta(seed[0])
            self._meta.remember(run_id, known)
        return known

    async def _decode(self, run_id: str, records: Sequence[Record]) -> list[Checkpoint]:
        for index, record in enumerate(records):
            if record.seq != records[0].seq + index:
                raise CheckpointDecodeError("checkpoint", f"sequence gap at {record.seq}")
        if records[0].seq == 1:
            meta = seed_meta(records[0])
            self._meta.remember(run_id, meta)
        else:
            meta = await self._run_meta(run_id)
        if meta.schema == 1:
            return await self._decode_v1(run_id, records, meta)
        return await self._decode_v2(run_id, records, meta)

    async def _decode_v1(
        self, run_id: str, records: Sequence[Record], meta: Meta
    ) -> list[Checkpoint]:
        previous: Parsed1 | None = None
        if records[0].seq > 1 and b'"same"' in records[0].payload:
            before = await self._read(self.log_name(run_id), records[0].seq - 2, 1)
            if not before:
                raise CheckpointDecodeError("checkpoint", "the referenced record is missing")
            previous = parse_v1(before[0], None)
        parsed: list[Parsed1] = []
        for record in records:
            item = parse_v1(record, previous)
            parsed.append(item)
            previous = item
        refs = {p.parts[k] for p in parsed for k in STATES} - {None}
        manifests = {d: manifest_doc(d, data) for d, data in (await self._blobs(refs)).items()}
        digests = (v for m in manifests.values() for v in m.values() if isinstance(v, str))
        fields = await self._blobs(digests)
        result = []
        for item in parsed:
            item.body["vertices"] = item.parts["vertices"]
            cp = to_checkpoint(item.body, item.seq, run_id, meta)
            for key in STATES:
                ref = item.parts[key]
                setattr(cp, key, None if ref is None else assemble(manifests[ref], fields))
            result.append(cp)
        return result

    async def _decode_v2(
        self, run_id: str, records: Sequence[Record], meta: Meta
    ) -> list[Checkpoint]:
        items = [parse_v2(record) for record in records]
        head = items[0]
        chain: list[Parsed2] = []
        if head.depth:
            if head.depth >= head.seq:
                raise CheckpointDecodeError("envelope.depth", "reaches before revision 0")
            # The chain back to its full record, in one range read.
            start = head.seq - 1 - head.depth
            before = await self._read(self.log_name(run_id), start, head.depth)
            if len(before) != head.depth or before[0].seq != start + 1:
                raise CheckpointDecodeError("envelope.depth", "the chain's records are missing")
            chain = [parse_v2(record) for record in before]
        everything = [*chain, *items]
        if everything[0].depth:
            raise CheckpointDecodeError("envelope.depth", "the chain has no full record")
        for prior, item in itertools.pairwise(everything):
            if item.seq != prior.seq + 1:
                raise CheckpointDecodeError("checkpoint", f"sequence gap at {item.seq}")
            if item.depth not in (0, prior.depth + 1):
                raise CheckpointDecodeError(
                    "envelope.depth", f"record {item.seq} does not continue its chain"
                )
        refs = {
            ref
            for item in everything
            for key in STATES
            if isinstance(ref := item.doc.get(key), str)
        }
        manifests = {
            d: manifest_entries(manifest_doc(d, data))
            for d, data in (await self._blobs(refs)).items()
        }
        tail: Tail | None = None
        resolved = []
        for item in everything:
            tail = resolve(item, tail, manifests, meta)
            resolved.append(tail)
        assert tail is not None
        known: Tail | None = self._tails.get(run_id)
        if known is None or known.revision < tail.revision:
            self._tails.remember(run_id, tail)
        mine = resolved[len(chain) :]
        digests = (
            entry
            for t in mine
            for key in STATES
            if t.parts[key] is not None
            for entry in t.parts[key].values()
            if isinstance(entry, str)
        )
        fields = await self._blobs(digests)
        result = []
        for item, state in zip(items, mine, strict=True):
            cp = to_checkpoint(item.body, item.seq, run_id, meta, rows=state.parts["vertices"])
            for key in STATES:
                manifest = state.parts[key]
                setattr(cp, key, None if manifest is None else assemble(manifest, fields))
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


# -- helpers ---------------------------------------------------------------------------------


def _micros(cp: Checkpoint) -> int:
    """The run's creation time in microseconds: the origin of a vertex row's times."""
    return micros(cp.run.created_at)


def _changes(patch: dict[str, Any]) -> int:
    """How much a state patch names (the fewer, the smaller the record)."""
    return len(patch.get("set", ())) + len(patch.get("del", ()))


_HEX_DIGITS: Final = frozenset("0123456789abcdef")


def _collect_digests(doc: Any, into: set[str]) -> None:
    """Add every 64-lowercase-hex string in ``doc`` (any depth) to ``into``."""
    stack = [doc]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            if len(item) == 64 and _HEX_DIGITS.issuperset(item):
                into.add(item)
        elif isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
