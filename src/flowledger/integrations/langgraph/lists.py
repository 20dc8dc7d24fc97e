"""Lists stored by what changed: whole, as a delta on an earlier record, or by reference.

A channel whose value is a Python list (LangGraph's message list, the pending ``Send``
packets, any list a reducer grows) is stored as the value forms of its elements (see
`records`). Against the same channel's list in an earlier record of the log (the parent
checkpoint's, as this saver stored or read it), a new list is stored as

* a *reference* ``{"r": seq, ...}`` when it is the same list;
* a *delta* ``{"d": seq, "k": keep, "a": [...], ...}`` when it keeps a prefix of it and
  adds at most as many elements as it keeps (an appended message costs its element,
  whatever the length of the conversation);
* otherwise *whole*: inline up to `INLINE_LIST` elements, else one attachment holding the
  JSON array of element forms.

Reading a list reads its chain: the records from ``f`` (where the chain's whole list is)
to its own, in one range read. A delta or reference is only written while that range
stays within `CHAIN_FACTOR` times the bytes of the list stored whole (at least
`CHAIN_MIN_BYTES`) and within `CHAIN_MAX_RECORDS` records; past that the list is stored
whole again and starts a new chain. A whole list of ``n`` elements costs about
``ENTRY_BYTES * n`` bytes and the range it allows grows with ``n``, so the whole copies
of a list that grows by a constant each step are written at geometrically spaced steps:
bytes per step stay constant, and reading any checkpoint reads a bounded multiple of its
list.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Final

from .errors import CorruptCheckpointError
from .logs import ListNode, LogStore, ThreadLog
from .records import CheckpointRecord, check_scalar, dumps_record
from .values import Encoded, scalar_digests

__all__ = [
    "CHAIN_FACTOR",
    "CHAIN_MAX_RECORDS",
    "CHAIN_MIN_BYTES",
    "ENTRY_BYTES",
    "INLINE_LIST",
    "build",
    "resolve",
    "reuse",
    "whole",
    "whole_elements",
]

INLINE_LIST: Final = 16
ENTRY_BYTES: Final = 68  # one element of a list stored whole: a quoted digest and a comma
CHAIN_FACTOR: Final = 4
CHAIN_MIN_BYTES: Final = 64 << 10
CHAIN_MAX_RECORDS: Final = 2048


def whole(elements: list[Any], seq: int, out: Encoded) -> tuple[dict[str, Any], ListNode]:
    """A list stored whole in record ``seq`` (naming every element it needs)."""
    out.needed.update(scalar_digests(elements))
    node = ListNode(seq, seq, tuple(elements))
    if len(elements) <= INLINE_LIST:
        return {"l": list(elements)}, node
    digest = out.attach(dumps_record(elements))
    return {"l": digest, "n": len(elements)}, node


def _chain_fits(log: ThreadLog, from_seq: int, count: int) -> bool:
    if log.tip + 1 - from_seq > CHAIN_MAX_RECORDS:
        return False
    span = log.bytes_from(from_seq)
    return span is not None and span <= max(CHAIN_MIN_BYTES, CHAIN_FACTOR * ENTRY_BYTES * count)


def build(
    elements: list[Any], base: ListNode | None, seq: int, log: ThreadLog, out: Encoded
) -> tuple[dict[str, Any], ListNode]:
    """The stored form of a list in record ``seq`` of ``log``, against ``base`` (the same
    channel's list in an earlier record of the log, if known)."""
    if base is not None and _chain_fits(log, base.from_seq, len(elements)):
        old = base.elements
        n = len(elements)
        if n == len(old) and tuple(elements) == old:
            return {"r": base.def_seq, "f": base.from_seq, "n": n}, base
        if n >= len(old) and tuple(elements[: len(old)]) == old:
            keep = len(old)  # a list that grew: one comparison in C (of the same objects)
        else:
            keep = 0
            for mine, theirs in zip(elements, old, strict=False):
                if mine != theirs:
                    break
                keep += 1
        added = elements[keep:]
        if keep and len(added) <= keep:
            out.needed.update(scalar_digests(added))
            entry = {"d": base.def_seq, "f": base.from_seq, "k": keep, "a": added, "n": n}
            return entry, ListNode(seq, base.from_seq, tuple(elements))
    return whole(elements, seq, out)


def reuse(
    base: ListNode, seq: int, log: ThreadLog, out: Encoded
) -> tuple[dict[str, Any], ListNode]:
    """An unchanged list: a reference to ``base`` while its chain stays short, else whole."""
    if _chain_fits(log, base.from_seq, len(base.elements)):
        return {"r": base.def_seq, "f": base.from_seq, "n": len(base.elements)}, base
    return whole(list(base.elements), seq, out)


def _elements(value: Any, where: str) -> list[Any]:
    if not isinstance(value, list):
        raise CorruptCheckpointError(where, "a list stored whole is not a JSON array")
    for item in value:
        try:
            check_scalar(item)
        except Exception as exc:
            raise CorruptCheckpointError(where, str(exc)) from None
    return value


async def whole_elements(logs: LogStore, entry: Mapping[str, Any], where: str) -> list[Any]:
    """The element forms of a list stored whole (inline, or in its attachment)."""
    stored = entry["l"]
    if isinstance(stored, list):
        return stored
    data = (await logs.blobs([stored], where))[stored]
    try:
        value = json.loads(data)
    except ValueError as exc:
        raise CorruptCheckpointError(where, f"a list attachment is not JSON ({exc})") from None
    items = _elements(value, where)
    if len(items) != entry["n"]:
        raise CorruptCheckpointError(where, f"a list of {len(items)} elements, not {entry['n']}")
    return items


async def resolve(
    logs: LogStore, log: ThreadLog, seq: int, channel: str, entry: Mapping[str, Any]
) -> ListNode:
    """The list a record's channel holds (following its chain back to a whole list)."""
    where = f"{log.where} record {seq} channel {channel!r}"
    if "l" in entry:
        return ListNode(seq, seq, tuple(await whole_elements(logs, entry, where)))
    first = entry["f"]
    if not 1 <= first < seq:
        raise CorruptCheckpointError(where, f"its chain starts at record {first}")
    await logs.extend_to(log, first)
    records = await logs.records_between(log, first, seq - 1)
    steps: list[tuple[int, Mapping[str, Any]]] = [(seq, entry)]
    current_seq, current = seq, entry
    while "l" not in current:
        target = current["r"] if "r" in current else current["d"]
        if not (first <= target < current_seq) or current["f"] != first:
            raise CorruptCheckpointError(where, f"a chain step to record {target} leaves its range")
        record = records[target]
        if not isinstance(record, CheckpointRecord) or channel not in record.values:
            raise CorruptCheckpointError(where, f"record {target} has no list of this channel")
        current_seq, current = target, record.values[channel]
        if not isinstance(current, dict) or not (
            "l" in current or "d" in current or "r" in current
        ):
            raise CorruptCheckpointError(where, f"record {target} holds no list for this channel")
        steps.append((current_seq, current))
    if current_seq != first:
        raise CorruptCheckpointError(
            where, f"its chain starts at record {current_seq}, not {first}"
        )
    elements = list(await whole_elements(logs, current, where))
    defined = current_seq
    for step_seq, step in reversed(steps[:-1]):
        if "d" in step:
            if step["k"] > len(elements):
                raise CorruptCheckpointError(
                    where, f"record {step_seq} keeps more than its base has"
                )
            elements = elements[: step["k"]] + list(step["a"])
            defined = step_seq
        if len(elements) != step["n"]:
            raise CorruptCheckpointError(where, f"record {step_seq} names {step['n']} elements")
    return ListNode(defined, first, tuple(elements))
