"""`LedgerCheckpointStore`: checkpoints on a storage `Ledger`, with de-duplicated state.

Layout: the checkpoints of run ``R`` form the ledger log ``<prefix>/<R>``;
revision ``n`` is sequence ``n + 1``. Each record is a small JSON envelope::

    {"schema_version": 1, "revision": n, "state": "<digest>", "step_base": "<digest>",
     "checkpoint": {...everything but the two states...}}

A state is split into its top-level fields. Each field's JSON is stored once
as a content-addressed attachment; a *manifest* attachment maps field names
to field digests, and the envelope names the manifest. Attachments are
written in the same transaction as the record, so a checkpoint is one atomic
commit, and a field that did not change costs nothing: bytes written per step
grow with what changed, not with the size of the state.

Reading is strict: size and depth bounds before parsing, unknown fields
rejected, the envelope's revision must equal both the ledger sequence - 1
and the embedded run record's, and the run id must be the one asked for.
Any such failure is a `StoreError` wrapping a `CheckpointDecodeError`.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable, Sequence
from typing import Any, Final

from ..storage import Ledger, LedgerConflictError, Record, digest_of
from ..storage import StorageError as _StorageError
from .checkpoint import Checkpoint, from_document, to_document
from .codec import JsonObject, dumps, loads
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
_PAGE: Final = 1000
_CACHE: Final = 4096


class _Lru:
    """A small bounded map of immutable things (digest -> bytes) known to be durable."""

    def __init__(self, size: int) -> None:
        self._size = size
        self._items: OrderedDict[str, bytes] = OrderedDict()

    def get(self, key: str) -> bytes | None:
        value = self._items.get(key)
        if value is not None:
            self._items.move_to_end(key)
        return value

    def put(self, key: str, value: bytes) -> None:
        self._items[key] = value
        self._items.move_to_end(key)
        while len(self._items) > self._size:
            self._items.popitem(last=False)


class LedgerCheckpointStore:
    def __init__(self, ledger: Ledger, *, prefix: str = "flow/runs") -> None:
        if ledger is None:
            raise TypeError("LedgerCheckpointStore needs a ledger")
        self.ledger = ledger
        self.prefix = prefix.rstrip("/")
        self._known = _Lru(_CACHE)

    def _log(self, run_id: str) -> str:
        validate_run_id(run_id)
        return f"{self.prefix}/{run_id}"

    # -- writing ---------------------------------------------------------------------------

    def _state_ref(self, doc: JsonObject | None, attachments: dict[str, bytes]) -> str | None:
        if doc is None:
            return None
        manifest = {}
        for name, value in doc.items():
            data = dumps(value)
            digest = digest_of(data)
            manifest[name] = digest
            if self._known.get(digest) is None:
                attachments[digest] = data
        data = dumps(manifest)
        digest = digest_of(data)
        if self._known.get(digest) is None:
            attachments[digest] = data
        return digest

    async def append(self, checkpoints: Sequence[Checkpoint]) -> None:
        run_id, first = check_batch(checkpoints)
        try:
            name = self._log(run_id)
            attachments: dict[str, bytes] = {}
            records = []
            for cp in checkpoints:
                envelope = {
                    "schema_version": SCHEMA_VERSION,
                    "revision": cp.run.revision,
                    "state": self._state_ref(cp.state, attachments),
                    "step_base": self._state_ref(cp.step_base, attachments),
                    "checkpoint": to_document(cp, states=False),
                }
                data = dumps(envelope)
                if len(data) > MAX_RECORD_BYTES:
                    raise CheckpointDecodeError(
                        "checkpoint", f"record is {len(data)} bytes; limit {MAX_RECORD_BYTES}"
                    )
                records.append(data)
        except (FlowError, ValueError) as exc:
            raise StoreError("append", exc) from exc
        try:
            await self.ledger.append(name, records, expected=first, attachments=attachments)
        except LedgerConflictError as conflict:
            raise RevisionConflictError(run_id, conflict.actual, first) from conflict
        except (_StorageError, OSError) as exc:
            raise StoreError("append", exc) from exc
        for digest, data in attachments.items():
            self._known.put(digest, data)

    # -- reading ---------------------------------------------------------------------------

    async def latest(self, run_id: str) -> Checkpoint:
        name = self._name_for_read(run_id, "latest")
        try:
            tip = await self.ledger.tip(name)
            if tip == 0:
                raise CheckpointNotFoundError(run_id)
            records = await self.ledger.read(name, after=tip - 1, limit=1)
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
            seq = max(after + 1, 0)  # ledger sequence after which to read
            end = tip if limit is None else min(tip, seq + max(limit, 0))
            result: list[Checkpoint] = []
            while seq < end:
                page = await self.ledger.read(name, after=seq, limit=min(_PAGE, end - seq))
                if not page:
                    raise CheckpointDecodeError("checkpoint", f"record {seq + 1} is missing")
                result.extend(await self._decode(run_id, page, first=seq + 1))
                seq += len(page)
            return result
        except (CheckpointNotFoundError, StoreError):
            raise
        except (FlowError, _StorageError, OSError) as exc:
            raise StoreError("history", exc) from exc

    def _name_for_read(self, run_id: str, op: str) -> str:
        try:
            return self._log(run_id)
        except ValueError as exc:
            raise StoreError(op, exc) from exc

    async def _blobs(self, digests: Iterable[str]) -> dict[str, bytes]:
        found: dict[str, bytes] = {}
        missing = []
        for digest in dict.fromkeys(digests):
            data = self._known.get(digest)
            if data is None:
                missing.append(digest)
            else:
                found[digest] = data
        if missing:
            fetched = await self.ledger.attachments(missing)
            for digest, data in fetched.items():
                if digest_of(data) != digest:
                    raise CheckpointDecodeError("state", f"attachment {digest} is corrupt")
                self._known.put(digest, data)
                found[digest] = data
        return found

    async def _decode(
        self, run_id: str, records: Sequence[Record], first: int | None = None
    ) -> list[Checkpoint]:
        envelopes = []
        for index, record in enumerate(records):
            if first is not None and record.seq != first + index:
                raise CheckpointDecodeError("checkpoint", f"sequence gap at {record.seq}")
            envelopes.append(_envelope(run_id, record))
        refs = {ref for _, s, b in envelopes for ref in (s, b) if ref is not None}
        manifests = {d: _manifest(d, data) for d, data in (await self._blobs(refs)).items()}
        fields = await self._blobs(d for m in manifests.values() for d in m.values())
        result = []
        for cp, state_ref, base_ref in envelopes:
            cp.state = _assemble(state_ref, manifests, fields)
            cp.step_base = _assemble(base_ref, manifests, fields)
            result.append(cp)
        return result


def _envelope(run_id: str, record: Record) -> tuple[Checkpoint, str | None, str | None]:
    doc = loads(record.payload, max_bytes=MAX_RECORD_BYTES)
    if not isinstance(doc, dict):
        raise CheckpointDecodeError("envelope", "expected an object")
    unknown = set(doc) - {"schema_version", "revision", "state", "step_base", "checkpoint"}
    if unknown:
        raise CheckpointDecodeError(f"envelope.{sorted(unknown)[0]}", "unknown field")
    if doc.get("schema_version") != SCHEMA_VERSION:
        raise CheckpointDecodeError(
            "envelope.schema_version", f"unsupported version {doc.get('schema_version')!r}"
        )
    refs = []
    for key in ("state", "step_base"):
        ref = doc.get(key)
        if ref is not None and not isinstance(ref, str):
            raise CheckpointDecodeError(f"envelope.{key}", "expected a digest")
        refs.append(ref)
    cp = from_document(doc.get("checkpoint"), path="checkpoint", states=False)
    revision = doc.get("revision")
    if revision != record.seq - 1 or cp.run.revision != revision:
        raise CheckpointDecodeError(
            "envelope.revision",
            f"record {record.seq} holds revision {revision!r} (run record: {cp.run.revision})",
        )
    if cp.run.graph_run_id != run_id:
        raise CheckpointDecodeError(
            "checkpoint.run.graph_run_id", f"belongs to run {cp.run.graph_run_id}"
        )
    return cp, refs[0], refs[1]


def _manifest(digest: str, data: bytes) -> dict[str, str]:
    doc = loads(data)
    if not isinstance(doc, dict) or not all(isinstance(v, str) for v in doc.values()):
        raise CheckpointDecodeError("state", f"manifest {digest} is malformed")
    return doc


def _assemble(
    ref: str | None, manifests: dict[str, dict[str, str]], fields: dict[str, bytes]
) -> JsonObject | None:
    if ref is None:
        return None
    state: dict[str, Any] = {}
    for name, digest in manifests[ref].items():
        state[name] = loads(fields[digest])
    return state
