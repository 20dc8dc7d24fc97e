"""The CRC-32 that the durable backends store beside every KV value, blob and ledger
record, and check on every read.

A checksum turns silent damage (a flipped bit on disk, a hand edit, a bad restore) into a
`CorruptDataError` naming what is damaged, instead of a value that decodes to something
else. CRC-32 detects every error burst of up to 32 bits, so every single flipped byte.

Since schema version 3 the checksum is *bound to the value's place*: it covers the place
(``kv`` + key + revision, ``blob`` + key, ``record`` + log name + sequence number) before
the bytes. So an intact value copied, with its checksum, to another key, revision, blob
key, log or sequence number fails its check where it lands: a record is only ever read
back where it was written. Names are ASCII without NUL bytes, so a NUL separates the
parts of a place unambiguously.

It is not an authenticity check: whoever can write the database can write a matching
checksum. Attachments need none: they are addressed by their SHA-256, and their reader
verifies that.

The value is stored as a signed 32-bit integer, which fits SQLite's 4-byte integer
encoding and Postgres's ``integer``.
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence

from .errors import CorruptDataError

__all__ = [
    "blob_place",
    "bound_checksum",
    "checksum",
    "kv_place",
    "rebound",
    "record_checksums",
    "record_place",
    "verified",
]


def _signed(crc: int) -> int:
    return crc - (1 << 32) if crc >= 1 << 31 else crc


def checksum(data: bytes) -> int:
    """CRC-32 of ``data`` alone as a signed 32-bit integer (schema version 2's checksum)."""
    return _signed(zlib.crc32(data))


def kv_place(key: str, revision: int) -> bytes:
    return b"kv\0%s\0%d" % (key.encode(), revision)


def blob_place(key: str) -> bytes:
    return b"blob\0%s" % key.encode()


def _record_head(log: str) -> bytes:
    return b"record\0%s\0" % log.encode()


def record_place(log: str, seq: int) -> bytes:
    return _record_head(log) + b"%d" % seq


def bound_checksum(place: bytes, data: bytes) -> int:
    """CRC-32 of ``place``, a NUL, then ``data``, as a signed 32-bit integer."""
    return _signed(zlib.crc32(data, zlib.crc32(place + b"\0")))


def record_checksums(log: str, after: int, payloads: Sequence[bytes]) -> list[int]:
    """The bound checksums of ``payloads`` as records ``after + 1``, ``after + 2``, ... of
    ``log``: each is ``bound_checksum(record_place(log, seq), payload)``, computed with the
    log's part of the place hashed once (a CRC continues from the CRC of what precedes)."""
    head = zlib.crc32(_record_head(log))
    return [
        _signed(zlib.crc32(payload, zlib.crc32(b"%d\0" % seq, head)))
        for seq, payload in enumerate(payloads, after + 1)
    ]


def rebound(place: bytes, data: bytes, stored: int) -> int:
    """The bound checksum that replaces a version-2 checksum ``stored`` of ``data``.

    A CRC is linear, so carrying over the difference between ``stored`` and the true
    unbound checksum keeps any damage visible: a value that was intact stays intact, and a
    value that was already damaged before the upgrade still fails its check after it.
    """
    return bound_checksum(place, data) ^ checksum(data) ^ stored


def verified(data: bytes, stored: int, place: bytes, what: str) -> bytes:
    """``data`` if it matches its ``stored`` checksum at ``place``; else `CorruptDataError`."""
    if bound_checksum(place, data) != stored:
        raise CorruptDataError(what)
    return data
