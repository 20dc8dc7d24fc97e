"""The append's binary array parameters (`storage/postgres/arrays.py`): the same bytes as
psycopg's own dumper of the same list, and the same values back from the server."""

from __future__ import annotations

import struct
from typing import Any

import pytest

psycopg = pytest.importorskip("psycopg")

from psycopg.adapt import PyFormat, Transformer  # noqa: E402
from psycopg.types.numeric import Int4  # noqa: E402

from flowledger.storage.postgres import arrays  # noqa: E402

from .._postgres import require_postgres  # noqa: E402

BYTEA_OID, INT4_OID = 17, 23
BYTEA_CASES: list[list[bytes]] = [
    [],
    [b""],
    [b"x"],
    [b"\x00\xff" * 40, b"", b"{}", bytes(range(256))],
    [b"y" * 70_000, b"z"],
]
INTEGER_CASES: list[list[int]] = [[], [0], [1, -1], [2**31 - 1, -(2**31), 123456789, -42]]


def dumped(value: object) -> bytes:
    transformer = Transformer()
    arrays.register(transformer)
    dumper = transformer.get_dumper(value, PyFormat.BINARY)
    out = dumper.dump(value)
    assert out is not None
    return bytes(out)


def psycopg_dumped(value: list[Any], element_oid: int) -> bytes:
    """What psycopg's generic list dumper sends for ``value``."""
    if not value:  # an empty list has no element to type it by: its header, by hand
        return struct.pack("!iii", 0, 0, element_oid)
    if element_oid == INT4_OID:  # psycopg picks the smallest integer type: ask for int4
        value = [Int4(v) for v in value]
    dumper = Transformer().get_dumper(value, PyFormat.BINARY)
    out = dumper.dump(value)
    assert out is not None
    return bytes(out)


@pytest.mark.parametrize("items", BYTEA_CASES, ids=lambda c: f"{len(c)} items")
def test_bytea_array_is_dumped_as_psycopg_dumps_it(items: list[bytes]) -> None:
    assert dumped(arrays.ByteaArray(items)) == psycopg_dumped(items, BYTEA_OID)


@pytest.mark.parametrize("items", INTEGER_CASES, ids=lambda c: f"{len(c)} items")
def test_integer_array_is_dumped_as_psycopg_dumps_it(items: list[int]) -> None:
    assert dumped(arrays.IntegerArray(items)) == psycopg_dumped(items, INT4_OID)


def test_integer_array_refuses_values_outside_32_bits() -> None:
    with pytest.raises(Exception, match="format requires"):
        dumped(arrays.IntegerArray([2**31]))


def test_the_server_reads_back_the_same_values() -> None:
    url = require_postgres()
    with psycopg.connect(url, autocommit=True) as conn:
        arrays.register(conn)
        for blobs in BYTEA_CASES:
            for ints in INTEGER_CASES:
                row = conn.execute(
                    "SELECT %b::bytea[], %b::integer[], cardinality(%b::bytea[])",
                    (arrays.ByteaArray(blobs), arrays.IntegerArray(ints), arrays.ByteaArray(blobs)),
                    binary=True,
                ).fetchone()
                assert row is not None
                assert row[0] == blobs
                assert row[1] == ints
                assert row[2] == len(blobs)
