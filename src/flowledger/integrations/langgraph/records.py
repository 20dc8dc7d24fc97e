"""The records of a thread's log: JSON documents, written by `dumps_record`, parsed strictly.

A log (one thread, one namespace, one generation; see `names`) holds, in order:

* a **header**, always its first record: ``{"lg": 1, "thread": T, "ns": N, "gen": g}``;
* **checkpoints**: ``{"c": id, "p": parent id, "ts": ts, "v": v, "m": metadata, "cv":
  channel versions, "vs": versions seen, "u": updated channels, "x": other checkpoint
  keys, "vals": {channel: value}, "top": seq}`` (``p``, ``u``, ``x`` and ``top`` left out
  when absent; ``top`` is the sequence of the log's checkpoint with the greatest id when
  that is not this one);
* **writes** of one task to one checkpoint: ``{"w": checkpoint id, "t": task id, "tp":
  task path, "ws": [[idx, channel, value], ...]}``;
* a **seal**, the last record of a generation that a rewrite replaced: ``{"seal": g}``;
* **carriers** ``{"carry": 1}``, which only bring attachments of the next record (an
  append may carry at most `MAX_ATTACHMENTS_PER_APPEND`).

A *value* is one of

* ``"<sha256 hex>"``: JSON text stored as an attachment;
* ``["<json text>"]``: short JSON text, inline;
* ``{"t": type, "d": "<sha256 hex>"}`` / ``{"t": type, "b": "<base64>"}``: bytes of
  another (JSON-based, never pickle) format, stored or inline;
* a **list** (a Python list, stored element by element, each element a value as above):
  ``{"l": [values]}`` whole and inline; ``{"l": "<sha256 hex>", "n": count}`` whole in
  an attachment (a JSON array of values); ``{"d": seq, "f": seq, "k": keep, "a":
  [values], "n": count}`` the first ``keep`` elements of the same channel's list in record
  ``d``, then ``a``; ``{"r": seq, "f": seq, "n": count}`` the same channel's list in record
  ``r``. ``f`` is the record where the chain reaching back from ``d`` / ``r`` starts (a
  whole list), so the records a list needs are one range, ``f`` to here.

Anything else is a `CorruptCheckpointError` naming the log and sequence.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Final

import orjson

from ...jsontext import decode_json
from .errors import CorruptCheckpointError

__all__ = [
    "FORMAT",
    "Carrier",
    "CheckpointRecord",
    "Header",
    "Record",
    "Seal",
    "WritesRecord",
    "check_scalar",
    "check_value",
    "dumps_record",
    "entry_digests",
    "is_digest",
    "is_list_entry",
    "parse_record",
    "trusted_record",
]

FORMAT: Final = 1
_HEX: Final = frozenset("0123456789abcdef")


def is_digest(value: object) -> bool:
    return isinstance(value, str) and len(value) == 64 and _HEX.issuperset(value)


# Records never change once parsed or built. They are not frozen dataclasses only because
# those cost four times as much to build, and every append builds one per record.


@dataclass(slots=True)
class Header:
    seq: int
    size: int
    thread_id: str
    checkpoint_ns: str
    generation: int


@dataclass(slots=True)
class CheckpointRecord:
    seq: int
    size: int
    id: str
    parent: str | None
    ts: str
    v: int
    metadata: dict[str, Any]
    versions: dict[str, Any]
    seen: dict[str, Any]
    updated: list[str] | None
    extra: dict[str, Any]
    values: dict[str, Any]
    top: int | None
    doc: dict[str, Any] = field(repr=False)


@dataclass(slots=True)
class WritesRecord:
    seq: int
    size: int
    checkpoint_id: str
    task_id: str
    task_path: str
    writes: list[tuple[int, str, Any]]
    doc: dict[str, Any] = field(repr=False)


@dataclass(slots=True)
class Seal:
    seq: int
    size: int
    generation: int


@dataclass(slots=True)
class Carrier:
    seq: int
    size: int


Record = Header | CheckpointRecord | WritesRecord | Seal | Carrier


class _Bad(Exception):
    pass


def _need(cond: bool, reason: str) -> None:
    if not cond:
        raise _Bad(reason)


def _str(doc: dict[str, Any], key: str) -> str:
    value = doc.get(key)
    _need(isinstance(value, str), f"{key!r} is not a string")
    return str(value)


def _int(doc: dict[str, Any], key: str) -> int:
    value = doc.get(key)
    if not isinstance(value, int) or isinstance(value, bool):
        raise _Bad(f"{key!r} is not an integer")
    return value


def _obj(doc: dict[str, Any], key: str) -> dict[str, Any]:
    value = doc.get(key)
    _need(isinstance(value, dict), f"{key!r} is not an object")
    return value  # type: ignore[return-value]


def _version(value: object) -> bool:
    return isinstance(value, str | int | float) and not isinstance(value, bool)


def check_scalar(value: Any) -> None:
    """A stored scalar value form (see the module documentation)."""
    if is_digest(value):
        return
    if isinstance(value, list):
        _need(len(value) == 1 and isinstance(value[0], str), "a malformed inline value")
        return
    _need(isinstance(value, dict), "a malformed value")
    _need(isinstance(value.get("t"), str), "a value without its type")
    if "d" in value:
        _need(is_digest(value["d"]) and len(value) == 2, "a malformed stored value")
    else:
        _need(isinstance(value.get("b"), str) and len(value) == 2, "a malformed inline value")


def is_list_entry(value: Any) -> bool:
    return (
        isinstance(value, dict)
        and ("l" in value or "d" in value or "r" in value)
        and "t" not in value
    )


def check_value(value: Any) -> None:
    """A stored value form: a scalar or a list node."""
    if not is_list_entry(value):
        check_scalar(value)
        return
    if "l" in value:
        whole = value["l"]
        if isinstance(whole, list):
            _need(len(value) == 1, "a malformed list")
            for item in whole:
                check_scalar(item)
        else:
            _need(is_digest(whole), "a malformed list")
            _need(set(value) == {"l", "n"}, "a malformed list")
            _need(_count(value.get("n")), "a malformed list count")
        return
    if "d" in value:
        _need(set(value) == {"d", "f", "k", "a", "n"}, "a malformed list delta")
        for key in ("d", "f", "k", "n"):
            _need(_count(value[key]), f"a malformed list delta ({key})")
        _need(isinstance(value["a"], list), "a malformed list delta (a)")
        for item in value["a"]:
            check_scalar(item)
        _need(value["f"] <= value["d"], "a list delta that starts after its base")
        _need(value["k"] + len(value["a"]) == value["n"], "a list delta of the wrong length")
        return
    _need(set(value) == {"r", "f", "n"}, "a malformed list reference")
    for key in ("r", "f", "n"):
        _need(_count(value[key]), f"a malformed list reference ({key})")
    _need(value["f"] <= value["r"], "a list reference that starts after its base")


def _count(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def entry_digests(value: Any) -> Iterator[str]:
    """The attachment digests a stored value names directly (not those of the elements
    inside a list stored whole in an attachment, nor of earlier records in a chain)."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        if "d" in value and isinstance(value["d"], str):
            yield value["d"]
        whole = value.get("l")
        if isinstance(whole, str):
            yield whole
        for items in (whole, value.get("a")):
            if isinstance(items, list):
                for item in items:
                    yield from entry_digests(item)


def trusted_record(seq: int, size: int, doc: dict[str, Any]) -> Record:
    """A record this saver just built and appended (its JSON is what `parse_record`
    would accept: not checked again)."""
    if "c" in doc:
        return CheckpointRecord(
            seq=seq,
            size=size,
            id=doc["c"],
            parent=doc.get("p"),
            ts=doc["ts"],
            v=doc["v"],
            metadata=doc["m"],
            versions=doc["cv"],
            seen=doc["vs"],
            updated=doc.get("u"),
            extra=doc.get("x", {}),
            values=doc["vals"],
            top=doc.get("top"),
            doc=doc,
        )
    if "w" in doc:
        writes = [(idx, channel, value) for idx, channel, value in doc["ws"]]
        return WritesRecord(seq, size, doc["w"], doc["t"], doc["tp"], writes, doc)
    if "lg" in doc:
        return Header(seq, size, doc["thread"], doc["ns"], doc["gen"])
    if "seal" in doc:
        return Seal(seq, size, doc["seal"])
    return Carrier(seq, size)


# Records are trees this saver builds (copied metadata, stored value forms): no cycles to
# look for, so the encoder does not keep the set of containers it is inside.
_RECORDS_JSON: Final = json.JSONEncoder(
    separators=(",", ":"), ensure_ascii=False, check_circular=False
)


def dumps_record(doc: Any) -> bytes:
    """A record's JSON (compact, UTF-8).

    orjson writes it about ten times faster than `json` (a step's records cost more in
    `json` than the rest of building them). For what records and stored lists hold - text,
    integers, booleans, null, lists and string-keyed objects - its bytes are those of
    `json` with these settings, so digests of stored lists do not change; a float (in
    metadata or a version) may be spelled differently (``1e-7`` for ``1e-07``) and reads
    back equal. Records never hold a non-finite float (the checks refuse one), which orjson
    would write as null. What orjson refuses (a lone surrogate, an integer beyond 64 bits,
    absurd nesting) goes through `json`."""
    try:
        return orjson.dumps(doc)
    except orjson.JSONEncodeError:
        pass
    try:
        return _RECORDS_JSON.encode(doc).encode()
    except UnicodeEncodeError:  # a lone surrogate in a name: escaped text still parses
        return json.dumps(doc, separators=(",", ":")).encode()


def parse_record(seq: int, payload: bytes, where: str) -> Record:
    """One record of a thread log; `CorruptCheckpointError` (naming ``where`` and the
    sequence) for anything malformed."""
    try:
        doc = decode_json(payload)
        _need(isinstance(doc, dict), "not a JSON object")
        return _parse(seq, len(payload), doc)
    except (_Bad, ValueError, RecursionError) as exc:
        raise CorruptCheckpointError(f"{where} record {seq}", str(exc)) from None


def _parse(seq: int, size: int, doc: dict[str, Any]) -> Record:
    if "c" in doc:
        return _checkpoint(seq, size, doc)
    if "w" in doc:
        ws = doc.get("ws")
        if not isinstance(ws, list):
            raise _Bad("'ws' is not a list")
        writes = []
        for item in ws:
            _need(
                isinstance(item, list)
                and len(item) == 3
                and isinstance(item[0], int)
                and not isinstance(item[0], bool)
                and isinstance(item[1], str),
                "a malformed write",
            )
            check_value(item[2])
            writes.append((item[0], item[1], item[2]))
        _need(set(doc) == {"w", "t", "tp", "ws"}, "unknown keys in a writes record")
        return WritesRecord(seq, size, _str(doc, "w"), _str(doc, "t"), _str(doc, "tp"), writes, doc)
    if "lg" in doc:
        _need(doc["lg"] == FORMAT, f"format {doc['lg']!r} is not {FORMAT}")
        _need(set(doc) == {"lg", "thread", "ns", "gen"}, "unknown keys in a header")
        return Header(seq, size, _str(doc, "thread"), _str(doc, "ns"), _int(doc, "gen"))
    if "seal" in doc:
        _need(set(doc) == {"seal"}, "unknown keys in a seal")
        return Seal(seq, size, _int(doc, "seal"))
    if "carry" in doc:
        _need(set(doc) == {"carry"}, "unknown keys in a carrier")
        return Carrier(seq, size)
    raise _Bad("not a record of a LangGraph thread log")


_CHECKPOINT_KEYS: Final = frozenset({"c", "p", "ts", "v", "m", "cv", "vs", "u", "x", "vals", "top"})


def _checkpoint(seq: int, size: int, doc: dict[str, Any]) -> CheckpointRecord:
    _need(_CHECKPOINT_KEYS.issuperset(doc), "unknown keys in a checkpoint")
    parent = doc.get("p")
    _need(parent is None or isinstance(parent, str), "'p' is not a string")
    versions = _obj(doc, "cv")
    _need(all(_version(v) for v in versions.values()), "a malformed channel version")
    seen = _obj(doc, "vs")
    for node_seen in seen.values():
        _need(isinstance(node_seen, dict), "a malformed versions_seen")
        _need(all(_version(v) for v in node_seen.values()), "a malformed versions_seen")
    updated = doc.get("u")
    _need(
        updated is None or (isinstance(updated, list) and all(isinstance(u, str) for u in updated)),
        "'u' is not a list of channel names",
    )
    values = _obj(doc, "vals")
    for value in values.values():
        check_value(value)
    top = doc.get("top")
    _need(top is None or (_count(top) and top < seq), "'top' is not an earlier record")
    extra = doc.get("x", {})
    _need(isinstance(extra, dict), "'x' is not an object")
    return CheckpointRecord(
        seq=seq,
        size=size,
        id=_str(doc, "c"),
        parent=parent,
        ts=_str(doc, "ts"),
        v=_int(doc, "v"),
        metadata=_obj(doc, "m"),
        versions=versions,
        seen=seen,
        updated=updated,
        extra=extra,
        values=values,
        top=top,
        doc=doc,
    )
