"""The CRC-32 that the durable backends store beside every KV value, blob and ledger
record, and check on every read.

A checksum turns silent damage (a flipped bit on disk, a hand edit, a bad restore) into a
`CorruptDataError` naming what is damaged, instead of a value that decodes to something
else. CRC-32 detects every error burst of up to 32 bits, so every single flipped byte.
It is not an authenticity check: whoever can write the database can write a matching
checksum. Attachments need none: they are addressed by their SHA-256, and their reader
verifies that.

The value is stored as a signed 32-bit integer, which fits SQLite's 4-byte integer
encoding and Postgres's ``integer``.
"""

from __future__ import annotations

import zlib

from .errors import CorruptDataError

__all__ = ["checksum", "verified"]


def checksum(data: bytes) -> int:
    """CRC-32 of ``data`` as a signed 32-bit integer."""
    crc = zlib.crc32(data)
    return crc - (1 << 32) if crc >= 1 << 31 else crc


def verified(data: bytes, stored: int, what: str) -> bytes:
    """``data`` if it matches its ``stored`` checksum; otherwise `CorruptDataError`."""
    if zlib.crc32(data) != stored & 0xFFFFFFFF:
        raise CorruptDataError(what)
    return data
