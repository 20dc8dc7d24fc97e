"""Documented size limits, enforced identically by every backend before anything is written."""

from __future__ import annotations

from typing import Final

from .errors import InvalidValueError, ValueTooLargeError

__all__ = [
    "MAX_ATTACHMENTS_PER_APPEND",
    "MAX_ATTACHMENT_BYTES",
    "MAX_BLOB_BYTES",
    "MAX_KV_VALUE_BYTES",
    "MAX_READ_LIMIT",
    "MAX_RECORDS_PER_APPEND",
    "MAX_RECORD_BYTES",
    "MAX_REFS_PER_APPEND",
]

MAX_KV_VALUE_BYTES: Final = 1 << 20  # 1 MiB
MAX_BLOB_BYTES: Final = 64 << 20  # 64 MiB
MAX_RECORD_BYTES: Final = 4 << 20  # 4 MiB per ledger record
MAX_RECORDS_PER_APPEND: Final = 64
MAX_ATTACHMENT_BYTES: Final = 16 << 20  # 16 MiB per attachment
MAX_ATTACHMENTS_PER_APPEND: Final = 4096
MAX_REFS_PER_APPEND: Final = 4096  # distinct digests in an append's refs
MAX_READ_LIMIT: Final = 10_000  # records per ledger read


def check_bytes(what: str, value: object, limit: int) -> bytes:
    if not isinstance(value, bytes):
        raise InvalidValueError(what, "bytes", value)
    if len(value) > limit:
        raise ValueTooLargeError(what, len(value), limit)
    return value


def check_revision(what: str, value: object) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise InvalidValueError(what, "a non-negative int", value)
    if value < 0:
        raise ValueError(f"{what} must be >= 0, not {value}")
    return value
