"""The parts of a schema-2 ledger record: compact vertex and route rows, and deltas.

A schema-2 log (see `ledger_store`) stores a checkpoint either *full* or as a *delta*
against the record just before it. This module holds the pure encoders and strict
decoders of the pieces; `ledger_store` decides which form a record takes.

Compact rows (both forms):

* A vertex record is the array ``[vertex, vertex_run_id, step, status, attempt,
  created_at, started_at, completed_at, interrupted_at, failed_at, error]`` with trailing
  nulls (and an empty error) left off, at least 5 long. A canonical UUID run id is the 22
  characters of its 16 bytes in unpadded base64url; any other id is ``[id]``. Times are
  integer microseconds: ``created_at`` after the ``created_at`` of the nearest earlier row
  that has one (the run's ``created_at`` for the first), the other times after the row's
  own ``created_at`` (after that same origin when it has none). A row therefore does not
  change while its vertex and the rows before it do not, which is what lets a delta name
  only changed rows.
* A route is ``[source, [targets...], conditional]``.

Deltas (only in delta records):

* A state part (``state`` or ``step_base``) is a *patch*: ``{"of": part, "set": {...},
  "del": [...]}`` - the manifest of the previous record's part ``of`` (default: the same
  part), with the entries of ``set`` replaced or added (added ones go last, in the order
  given) and the names in ``del`` removed. Entries are manifest entries: ``[inline JSON]``
  or a field attachment's digest. The encoder only writes a patch whose result has the
  state's exact key order.
* The vertex rows are either a list (all rows, replacing the previous record's) or a
  patch ``{"n": count, "set": [change, ...]}``: the previous rows cut or grown to
  ``count``, with each change applied in ascending index order: ``[index, row]`` replaces
  a row, ``[index, keep, tail]`` keeps the first ``keep`` values of the previous row and
  replaces the rest with ``tail`` (so a vertex that finished costs its status and end
  time, not its name and run id again). Every grown index must be given.

Every decoder raises `CheckpointDecodeError` naming the path of what is wrong.
"""

from __future__ import annotations

import base64
import binascii
import functools
import re
import uuid
from typing import Any, Final

from .errors import CheckpointDecodeError

__all__ = [
    "Manifest",
    "apply_rows_patch",
    "apply_state_patch",
    "route_to_row",
    "row_to_route",
    "rows_patch",
    "rows_to_vertices",
    "state_patch",
    "vertices_to_rows",
]

Manifest = dict[str, Any]  # field name -> [inline JSON] | digest of a field attachment

_TIMES: Final = ("created_at", "started_at", "completed_at", "interrupted_at", "failed_at")
_MIN_ROW: Final = 5
_MAX_ROW: Final = 11
_ID_CHARS: Final = 22
_CANONICAL_UUID: Final = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


# -- vertex rows -----------------------------------------------------------------------------


def vertices_to_rows(docs: list[dict[str, Any]], run_created: int) -> list[list[Any]]:
    """Vertex documents (`checkpoint.vertex_to_document`) as compact rows."""
    rows = []
    anchor = run_created
    for doc in docs:
        row = _row(doc, anchor)
        anchor = doc.get("created_at", anchor)
        rows.append(row)
    return rows


def _row(doc: dict[str, Any], anchor: int) -> list[Any]:
    created = doc.get("created_at")
    origin = anchor if created is None else created
    row: list[Any] = [doc["vertex"], _compact_id(doc["vertex_run_id"]), doc["step"]]
    row += [doc["status"], doc["attempt"], None if created is None else created - anchor]
    for key in _TIMES[1:]:
        value = doc.get(key)
        row.append(None if value is None else value - origin)
    row.append(doc.get("error") or None)
    while len(row) > _MIN_ROW and row[-1] is None:
        row.pop()
    return row


def rows_to_vertices(rows: Any, run_created: int, path: str) -> list[dict[str, Any]]:
    """Strictly decode compact rows back into vertex documents."""
    if not isinstance(rows, list):
        raise CheckpointDecodeError(path, "expected a list of rows")
    docs = []
    anchor = run_created
    for index, row in enumerate(rows):
        doc = _vertex(row, anchor, f"{path}[{index}]")
        anchor = doc.get("created_at", anchor)
        docs.append(doc)
    return docs


def _vertex(row: Any, anchor: int, path: str) -> dict[str, Any]:
    if not isinstance(row, list) or not _MIN_ROW <= len(row) <= _MAX_ROW:
        raise CheckpointDecodeError(path, f"expected a row of {_MIN_ROW} to {_MAX_ROW} values")
    full = [*row, *([None] * (_MAX_ROW - len(row)))]
    for index, kind in ((0, str), (2, int), (3, int), (4, int)):
        _check(full[index], kind, f"{path}[{index}]")
    doc: dict[str, Any] = {
        "vertex": full[0],
        "vertex_run_id": _expand_id(full[1], f"{path}[1]"),
        "step": full[2],
        "status": full[3],
        "attempt": full[4],
    }
    origin = anchor
    for offset, key in enumerate(_TIMES, 5):
        value = full[offset]
        if value is None:
            continue
        _check(value, int, f"{path}[{offset}]")
        doc[key] = value + origin
        if key == "created_at":
            origin = doc[key]
    if full[10] is not None:
        _check(full[10], str, f"{path}[10]")
        if not full[10]:
            raise CheckpointDecodeError(f"{path}[10]", "an empty error is left out")
        doc["error"] = full[10]
    return doc


def _compact_id(value: str) -> Any:
    """A canonical UUID as the 22 characters of its base64url bytes; anything else as
    ``[value]`` (so the two can never be confused)."""
    compact = _uuid_chars(value)
    return [value] if compact is None else compact


@functools.lru_cache(maxsize=4096)  # a step's ids are encoded again in each of its records
def _uuid_chars(value: str) -> str | None:
    if _CANONICAL_UUID.fullmatch(value) is None:  # what str(uuid.UUID(...)) gives
        return None
    raw = bytes.fromhex(value.replace("-", ""))
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def _expand_id(value: Any, path: str) -> str:
    if isinstance(value, list) and len(value) == 1 and isinstance(value[0], str):
        return value[0]
    if isinstance(value, str) and len(value) == _ID_CHARS:
        try:
            raw = base64.urlsafe_b64decode(value + "==")
        except (ValueError, binascii.Error):
            raw = b""
        if len(raw) == 16 and _compact_id(str(uuid.UUID(bytes=raw))) == value:
            return str(uuid.UUID(bytes=raw))
    raise CheckpointDecodeError(path, "expected a compact UUID or [id]")


def _check(value: Any, kind: type, path: str) -> None:
    if isinstance(value, bool) or not isinstance(value, kind):
        raise CheckpointDecodeError(path, f"expected {kind.__name__}")


# -- route rows ------------------------------------------------------------------------------


def route_to_row(doc: dict[str, Any]) -> list[Any]:
    return [doc["source"], doc["targets"], doc["conditional"]]


def row_to_route(row: Any, path: str) -> dict[str, Any]:
    if not isinstance(row, list) or len(row) != 3:
        raise CheckpointDecodeError(path, "expected [source, targets, conditional]")
    # The types are checked by `checkpoint.from_document`, on the document made here.
    return {"source": row[0], "targets": row[1], "conditional": row[2]}


# -- vertex row patches ----------------------------------------------------------------------


def rows_patch(rows: list[list[Any]], previous: list[list[Any]]) -> Any:
    """A patch of ``rows`` against ``previous``, or the plain list if that is no longer."""
    changed: list[list[Any]] = []
    for index, row in enumerate(rows):
        if index >= len(previous):
            changed.append([index, row])
            continue
        before = previous[index]
        if before == row:
            continue
        keep = 0
        while keep < min(len(row), len(before)) and _same_value(row[keep], before[keep]):
            keep += 1
        # A row whose vertex and run id are unchanged is given from where it differs.
        changed.append([index, keep, row[keep:]] if keep else [index, row])
    if len(changed) == len(rows) and all(len(c) == 2 or c[1] < 2 for c in changed):
        return rows  # every row new, or all but its name: the plain list is no longer
    return {"n": len(rows), "set": changed}


def _same_value(a: Any, b: Any) -> bool:
    """Exact equality of row values (``1 == True`` in Python, not in JSON)."""
    return type(a) is type(b) and a == b


def apply_rows_patch(patch: Any, previous: list[list[Any]], path: str) -> list[list[Any]]:
    if isinstance(patch, list):
        return patch
    if not isinstance(patch, dict) or set(patch) - {"n", "set"} or "n" not in patch:
        raise CheckpointDecodeError(path, "expected a list of rows or {n, set}")
    count, changes = patch["n"], patch.get("set", [])
    if isinstance(count, bool) or not isinstance(count, int) or count < 0:
        raise CheckpointDecodeError(f"{path}.n", "expected a count")
    if not isinstance(changes, list):
        raise CheckpointDecodeError(f"{path}.set", "expected a list")
    rows = previous[:count]
    given: dict[int, Any] = {}
    last = -1
    for position, change in enumerate(changes):
        where = f"{path}.set[{position}]"
        if not isinstance(change, list) or len(change) not in (2, 3):
            raise CheckpointDecodeError(where, "expected [index, row] or [index, keep, tail]")
        index = change[0]
        if isinstance(index, bool) or not isinstance(index, int) or not last < index < count:
            raise CheckpointDecodeError(where, "indices must ascend within the count")
        last = index
        if len(change) == 2:
            given[index] = change[1]
            continue
        keep, tail = change[1], change[2]
        if index >= len(rows) or not isinstance(rows[index], list):
            raise CheckpointDecodeError(where, "a row kept in part must exist")
        if (
            isinstance(keep, bool)
            or not isinstance(keep, int)
            or not 1 <= keep <= len(rows[index])
            or not isinstance(tail, list)
        ):
            raise CheckpointDecodeError(where, "expected [index, kept values, tail]")
        given[index] = [*rows[index][:keep], *tail]
    for index in range(len(rows), count):
        if index not in given:
            raise CheckpointDecodeError(path, f"grown row {index} is not given")
        rows.append(given.pop(index))
    for index, row in given.items():
        rows[index] = row
    return rows


# -- state patches ---------------------------------------------------------------------------


def state_patch(
    target: Manifest, base: Manifest | None, of: str, own: str
) -> dict[str, Any] | None:
    """A patch turning ``base`` into ``target`` (keys in order), or None if there is none."""
    if base is None:
        return None
    changes = {k: v for k, v in target.items() if k not in base or base[k] != v}
    removed = [k for k in base if k not in target]
    patch: dict[str, Any] = {} if of == own else {"of": of}
    if changes:
        patch["set"] = changes
    if removed:
        patch["del"] = removed
    if list(_patched(base, changes, removed)) != list(target):
        return None  # a key order a patch cannot express: the part is written whole
    return patch


def apply_state_patch(
    patch: Any, parts: dict[str, Manifest | None], own: str, path: str
) -> Manifest:
    """Strictly apply a patch to the previous record's resolved ``parts`` (the caller has
    checked and converted the entries of ``set``)."""
    if not isinstance(patch, dict) or set(patch) - {"of", "set", "del"}:
        raise CheckpointDecodeError(path, "expected a patch {of, set, del}")
    of = patch.get("of", own)
    if not isinstance(of, str) or of not in parts:
        raise CheckpointDecodeError(f"{path}.of", f"unknown part {of!r}")
    if "of" in patch and of == own:
        raise CheckpointDecodeError(f"{path}.of", "the default is left out")
    base = parts[of]
    if base is None:
        raise CheckpointDecodeError(f"{path}.of", f"the previous record has no {of}")
    changes = patch.get("set", {})
    if not isinstance(changes, dict):
        raise CheckpointDecodeError(f"{path}.set", "expected an object")
    removed = patch.get("del", [])
    if (
        not isinstance(removed, list)
        or not all(isinstance(name, str) and name in base for name in removed)
        or len(set(removed)) != len(removed)
        or set(removed) & set(changes)
    ):
        raise CheckpointDecodeError(f"{path}.del", "expected distinct names of the base")
    return _patched(base, changes, removed)


def _patched(base: Manifest, changes: Manifest, removed: list[str]) -> Manifest:
    result = {k: v for k, v in base.items() if k not in removed}
    result.update(changes)
    return result
