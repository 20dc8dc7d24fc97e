"""The append's array parameters, sent in PostgreSQL's binary array format by one
``struct`` pass each: `ByteaArray` (``bytea[]``) and `IntegerArray` (``integer[]``).

psycopg dumps a plain ``list`` generically: per call it scans the elements for their
type, builds an element dumper and an array dumper, measures the nesting and dumps every
element through the element dumper, which for an append's seven arrays cost more client
CPU than the rest of sending it (docs/benchmarks.md, "LangGraph savers"). These wrappers
state the type up front, so the dumper (registered on each pooled connection by
`register`) only packs the header and the elements. The bytes sent are the ones
psycopg's own binary dumper would send for the same list.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import Final

from psycopg.abc import AdaptContext, Buffer
from psycopg.adapt import Dumper
from psycopg.pq import Format

__all__ = ["ByteaArray", "IntegerArray", "register"]

_BYTEA_OID: Final = 17
_BYTEA_ARRAY_OID: Final = 1001
_INT4_OID: Final = 23
_INT4_ARRAY_OID: Final = 1007

# A one-dimensional array's header: dimensions, has-nulls flag, element type, then the
# dimension's length and lower bound (1); an empty array has no dimension.
_HEAD: Final = struct.Struct("!iiiii")
_EMPTY: Final = struct.Struct("!iii")
_LENGTH: Final = struct.Struct("!i")


class ByteaArray:
    """A ``bytea[]`` parameter (no NULL elements)."""

    __slots__ = ("items",)

    def __init__(self, items: Sequence[bytes]) -> None:
        self.items = items


class IntegerArray:
    """An ``integer[]`` parameter (32-bit signed, no NULL elements)."""

    __slots__ = ("items",)

    def __init__(self, items: Sequence[int]) -> None:
        self.items = items


class _ByteaArrayDumper(Dumper):
    format = Format.BINARY
    oid = _BYTEA_ARRAY_OID

    def dump(self, obj: ByteaArray) -> Buffer:
        items = obj.items
        if not items:
            return _EMPTY.pack(0, 0, _BYTEA_OID)
        parts: list[bytes] = [_HEAD.pack(1, 0, _BYTEA_OID, len(items), 1)]
        pack = _LENGTH.pack
        for item in items:
            parts.append(pack(len(item)))
            parts.append(item)
        return b"".join(parts)


class _IntegerArrayDumper(Dumper):
    format = Format.BINARY
    oid = _INT4_ARRAY_OID

    def dump(self, obj: IntegerArray) -> Buffer:
        items = obj.items
        if not items:
            return _EMPTY.pack(0, 0, _INT4_OID)
        n = len(items)
        # Each element: its length (4), then its value.
        fields = [4] * (2 * n)
        fields[1::2] = items
        return struct.pack(f"!5i{2 * n}i", 1, 0, _INT4_OID, n, 1, *fields)


def register(context: AdaptContext) -> None:
    """Dump `ByteaArray` and `IntegerArray` on ``context`` (a connection)."""
    context.adapters.register_dumper(ByteaArray, _ByteaArrayDumper)
    context.adapters.register_dumper(IntegerArray, _IntegerArrayDumper)
