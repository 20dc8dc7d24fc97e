"""The records of a checkpoint log, as `LedgerCheckpointStore` stores them (both schemas).

Pure functions, no I/O: checking envelopes, resolving schema-1 ``same`` sharing and
schema-2 deltas (`ledger_delta`) against the record before, and turning a resolved
record back into a `Checkpoint`. The format itself is described in `ledger_store`.
Every failure is a `CheckpointDecodeError` naming the path of what is wrong.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

from ..storage import Record
from .checkpoint import Checkpoint, from_document
from .codec import JsonObject, dumps_ordered, loads
from .errors import CheckpointDecodeError
from .ledger_delta import apply_rows_patch, apply_state_patch, row_to_route, rows_to_vertices

__all__ = [
    "FIXED",
    "MAX_DEPTH",
    "MAX_RECORD_BYTES",
    "READABLE_SCHEMAS",
    "SCHEMA_VERSION",
    "SHARABLE",
    "STATES",
    "Manifest",
    "Meta",
    "Parsed1",
    "Parsed2",
    "Tail",
    "assemble",
    "manifest_doc",
    "manifest_entries",
    "parse_v1",
    "parse_v2",
    "raw_entry",
    "resolve",
    "same_manifest",
    "seed_meta",
    "to_checkpoint",
]

SCHEMA_VERSION: Final = 2  # the format new logs are written in
READABLE_SCHEMAS: Final = (1, 2)
MAX_RECORD_BYTES: Final = 1 << 20
MAX_DEPTH: Final = 1000  # records in one delta chain after its full record
# Run-record fields that never change after revision 0: written once, restored on read.
FIXED: Final = ("graph_run_id", "graph_id", "graph_version", "created_at", "started_at")
SHARABLE: Final = ("state", "step_base", "vertices")
STATES: Final = ("state", "step_base")
V1_KEYS: Final = frozenset(
    {"schema_version", "revision", "state", "step_base", "same", "checkpoint"}
)
V2_KEYS: Final = frozenset(
    {"schema_version", "revision", "depth", "state", "step_base", "vertices", "checkpoint"}
)

# A manifest as held in memory: name -> digest, or (inline JSON text, value). The text
# makes comparison exact (JSON ``1``, ``1.0`` and ``true`` are equal in Python).
Manifest = dict[str, Any]


@dataclass(frozen=True, slots=True)
class Meta:
    """What revision 0 fixes for a whole log."""

    schema: int
    fixed: dict[str, Any]


@dataclass(frozen=True, slots=True)
class Tail:
    """A schema-2 record as resolved: what the next record's delta is taken against."""

    revision: int
    parts: dict[str, Any]  # state / step_base: Manifest | None; vertices: rows
    depth: int  # records after the chain's full record (0: this one is full)
    chain_bytes: int  # bytes of the chain's deltas so far
    full_bytes: int  # bytes of the chain's full record


@dataclass(slots=True)
class Parsed1:
    """One schema-1 record, parsed but not yet resolved into a `Checkpoint`."""

    seq: int
    body: dict[str, Any]
    parts: dict[str, Any]  # state ref, step_base ref, vertices (raw), after resolving "same"
    fixed: dict[str, Any] | None  # revision 0 only
    shares: bool  # refers to its predecessor, so it cannot be referred to


@dataclass(slots=True)
class Parsed2:
    """One schema-2 envelope, checked but not yet resolved."""

    seq: int
    size: int
    doc: dict[str, Any]
    body: dict[str, Any]
    depth: int


def raw_entry(entry: Any) -> Any:
    """A manifest entry as stored: a digest, or ``[value]``."""
    return entry if isinstance(entry, str) else [entry[1]]


def same_manifest(a: Manifest | None, b: Manifest | None) -> bool:
    if a is None or b is None:
        return a is b
    return a is b or (a == b and list(a) == list(b))


def entry(raw: Any, path: str) -> Any:
    """A stored manifest entry as held in memory (see `Manifest`)."""
    if isinstance(raw, str):
        return raw
    if isinstance(raw, list) and len(raw) == 1:
        return (dumps_ordered(raw[0]), raw[0])
    raise CheckpointDecodeError(path, "expected [value] or a digest")


def manifest_entries(doc: dict[str, Any]) -> Manifest:
    return {name: entry(raw, f"state.{name}") for name, raw in doc.items()}


def seed_meta(record: Record) -> Meta:
    doc = load_envelope(record)
    schema = doc.get("schema_version")
    if schema not in READABLE_SCHEMAS:
        raise CheckpointDecodeError("envelope.schema_version", f"unsupported version {schema!r}")
    body = doc.get("checkpoint")
    if not isinstance(body, dict) or not isinstance(body.get("run"), dict):
        raise CheckpointDecodeError("checkpoint", "expected an object with a run")
    return Meta(int(schema), {key: body["run"].get(key) for key in FIXED})


def load_envelope(record: Record) -> dict[str, Any]:
    doc = loads(record.payload, max_bytes=MAX_RECORD_BYTES)
    if not isinstance(doc, dict):
        raise CheckpointDecodeError("envelope", "expected an object")
    return doc


def check_envelope(doc: dict[str, Any], record: Record, keys: frozenset[str]) -> dict[str, Any]:
    """Checks common to both schemas; returns the checkpoint body."""
    unknown = set(doc) - keys
    if unknown:
        raise CheckpointDecodeError(f"envelope.{sorted(unknown)[0]}", "unknown field")
    if record.seq > 1 and "schema_version" in doc:
        raise CheckpointDecodeError("envelope.schema_version", "only revision 0 carries it")
    if doc.get("revision") != record.seq - 1:
        raise CheckpointDecodeError(
            "envelope.revision", f"record {record.seq} holds revision {doc.get('revision')!r}"
        )
    body = doc.get("checkpoint")
    if not isinstance(body, dict) or not isinstance(body.get("run"), dict):
        raise CheckpointDecodeError("checkpoint", "expected an object with a run")
    return body


def to_checkpoint(
    body: dict[str, Any],
    seq: int,
    run_id: str,
    meta: Meta,
    *,
    rows: list[Any] | None = None,
) -> Checkpoint:
    """The checkpoint of a record's body: the fixed run fields restored, rows expanded."""
    run = body["run"]
    present = [key for key in FIXED if key in run]
    if not present:
        run.update(meta.fixed)
    elif len(present) != len(FIXED):
        missing = sorted(set(FIXED) - set(present))[0]
        raise CheckpointDecodeError(f"checkpoint.run.{missing}", "missing")
    if "revision" in run:
        raise CheckpointDecodeError("checkpoint.run.revision", "unknown field")
    run["revision"] = seq - 1
    if rows is not None:  # schema 2: rows in the envelope, routes as rows in the body
        if "vertices" in body:
            raise CheckpointDecodeError("checkpoint.vertices", "unknown field")
        if "routes" in body:
            routes = body["routes"]
            if not isinstance(routes, list):
                raise CheckpointDecodeError("checkpoint.routes", "expected a list")
            body["routes"] = [
                row_to_route(row, f"checkpoint.routes[{i}]") for i, row in enumerate(routes)
            ]
        origin = run.get("created_at")
        if isinstance(origin, bool) or not isinstance(origin, int):
            raise CheckpointDecodeError("checkpoint.run.created_at", "expected int")
        body["vertices"] = rows_to_vertices(rows, origin, "envelope.vertices")
    cp = from_document(body, path="checkpoint", states=False)
    if cp.run.graph_run_id != run_id:
        raise CheckpointDecodeError(
            "checkpoint.run.graph_run_id", f"belongs to run {cp.run.graph_run_id}"
        )
    return cp


def parse_v1(record: Record, previous: Parsed1 | None) -> Parsed1:
    """A schema-1 record."""
    doc = load_envelope(record)
    body = check_envelope(doc, record, V1_KEYS)
    if record.seq == 1 and doc.get("schema_version") != 1:
        raise CheckpointDecodeError(
            "envelope.schema_version", f"unsupported version {doc.get('schema_version')!r}"
        )
    same = doc.get("same", [])
    if (
        not isinstance(same, list)
        or not all(isinstance(name, str) for name in same)  # set() of a list would raise
        or not set(same) <= set(SHARABLE)
        or len(set(same)) != len(same)
    ):
        raise CheckpointDecodeError("envelope.same", f"invalid {same!r}")
    if same and (previous is None or previous.seq != record.seq - 1 or previous.shares):
        raise CheckpointDecodeError("envelope.same", "no previous record to refer to")
    parts: dict[str, Any] = {}
    for key in SHARABLE:
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
        fixed = {key: body["run"].get(key) for key in FIXED}
    return Parsed1(record.seq, body, parts, fixed, bool(same))


def parse_v2(record: Record) -> Parsed2:
    """A schema-2 envelope: its keys and depth checked, nothing resolved."""
    doc = load_envelope(record)
    body = check_envelope(doc, record, V2_KEYS)
    if record.seq == 1 and doc.get("schema_version") != 2:
        raise CheckpointDecodeError(
            "envelope.schema_version", f"unsupported version {doc.get('schema_version')!r}"
        )
    depth = doc.get("depth", 0)
    if "depth" in doc and (
        isinstance(depth, bool) or not isinstance(depth, int) or not 1 <= depth <= MAX_DEPTH
    ):
        raise CheckpointDecodeError("envelope.depth", f"invalid {depth!r}")
    return Parsed2(record.seq, len(record.payload), doc, body, depth)


def resolve(
    item: Parsed2, previous: Tail | None, manifests: dict[str, Manifest], meta: Meta
) -> Tail:
    """What a schema-2 record stands for, given what its predecessor stood for."""
    doc = item.doc
    parts: dict[str, Any] = {}
    if item.depth == 0:
        for key in STATES:
            ref = doc.get(key)
            if ref is not None and not isinstance(ref, str):
                raise CheckpointDecodeError(f"envelope.{key}", "expected a digest")
            parts[key] = None if ref is None else manifests[ref]
        rows = doc.get("vertices", [])
        if not isinstance(rows, list):
            raise CheckpointDecodeError("envelope.vertices", "expected a list of rows")
        parts["vertices"] = rows
        return Tail(item.seq - 1, parts, 0, 0, item.size)
    assert previous is not None
    for key in STATES:
        if key not in doc:
            parts[key] = previous.parts[key]
            continue
        ref = doc[key]
        if ref is None or isinstance(ref, str):
            parts[key] = None if ref is None else manifests[ref]
            continue
        patch = ref
        if isinstance(patch, dict) and isinstance(patch.get("set"), dict):
            path = f"envelope.{key}.set"
            patch = {**patch, "set": {n: entry(e, f"{path}.{n}") for n, e in patch["set"].items()}}
        parts[key] = apply_state_patch(patch, previous.parts, key, f"envelope.{key}")
    if "vertices" in doc:
        parts["vertices"] = apply_rows_patch(
            doc["vertices"], previous.parts["vertices"], "envelope.vertices"
        )
    else:
        parts["vertices"] = previous.parts["vertices"]
    chain = previous.chain_bytes + item.size
    return Tail(item.seq - 1, parts, item.depth, chain, previous.full_bytes)


def manifest_doc(digest: str, data: bytes) -> dict[str, Any]:
    doc = loads(data)
    valid = isinstance(doc, dict) and all(
        isinstance(v, str) or (isinstance(v, list) and len(v) == 1) for v in doc.values()
    )
    if not valid:
        raise CheckpointDecodeError("state", f"manifest {digest} is malformed")
    return doc  # type: ignore[no-any-return]


def assemble(manifest: dict[str, Any], fields: dict[str, bytes]) -> JsonObject:
    state: dict[str, Any] = {}
    for name, entry in manifest.items():
        if isinstance(entry, str):
            state[name] = loads(fields[entry])
        elif isinstance(entry, tuple):
            state[name] = _fresh(entry[1])
        else:
            state[name] = _fresh(entry[0])
    return state


def _fresh(value: Any) -> Any:
    """An independent copy of inline JSON data (manifests are cached and shared)."""
    if isinstance(value, dict):
        return {k: _fresh(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_fresh(v) for v in value]
    return value
