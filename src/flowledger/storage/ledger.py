"""`Ledger`: named append-only record logs with compare-and-append on the tip.

* Sequence numbers start at 1 and are contiguous per log; the tip of an empty
  (or never written) log is 0.
* ``append(name, records, expected=tip)`` appends one or more records in one
  transaction, only if the log's tip is still ``expected``; otherwise it raises
  `LedgerConflictError` and writes nothing. It returns the new tip.
* An append may carry *attachments*: content-addressed blobs keyed by the
  lowercase hex SHA-256 of their bytes. They are inserted if absent, in the
  same transaction as the records, and shared by every log. A failed append
  writes no attachment. Digests are verified, so an attachment's bytes always
  hash to its key.
* ``read(name, after=s, limit=n)`` returns up to ``n`` records with
  ``seq > s`` in ascending order.
* ``drop(names)`` (every bundled backend; not yet part of the `Ledger` protocol)
  deletes whole logs: their records go, their tip is 0 again and ``names`` no longer
  lists them; attachments stay (collecting unreferenced ones is a separate sweep). A log
  never written, or dropped already, is no error.
* ``append`` takes an optional ``fence=`` (see `fence`): checked in the same
  transaction, a grant that is no longer current raises `FencedWriteError`
  and writes nothing.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from .errors import InvalidValueError
from .fence import Fence
from .limits import (
    MAX_ATTACHMENT_BYTES,
    MAX_ATTACHMENTS_PER_APPEND,
    MAX_READ_LIMIT,
    MAX_RECORD_BYTES,
    MAX_RECORDS_PER_APPEND,
    check_bytes,
    check_revision,
)
from .names import validate_name

__all__ = ["Ledger", "Record", "check_append", "digest_of"]


@dataclass(frozen=True, slots=True)
class Record:
    seq: int
    payload: bytes


def digest_of(data: bytes) -> str:
    """The attachment key of ``data``: lowercase hex SHA-256."""
    return hashlib.sha256(data).hexdigest()


@runtime_checkable
class Ledger(Protocol):
    async def append(
        self,
        name: str,
        records: Sequence[bytes],
        *,
        expected: int,
        attachments: Mapping[str, bytes] | None = None,
        fence: Fence | None = None,
    ) -> int: ...

    async def read(self, name: str, *, after: int = 0, limit: int = 100) -> list[Record]: ...

    async def tip(self, name: str) -> int: ...

    async def names(self, prefix: str = "") -> list[str]:
        """Names of logs with at least one record, sorted."""
        ...

    async def attachments(self, digests: Iterable[str]) -> dict[str, bytes]:
        """Fetch attachments by digest; `AttachmentNotFoundError` names the first missing one."""
        ...


_HEX = frozenset("0123456789abcdef")


def _check_digest(digest: object) -> str:
    if not isinstance(digest, str) or len(digest) != 64 or not _HEX.issuperset(digest):
        raise InvalidValueError("attachment digest", "64 lowercase hex characters", digest)
    return digest


def check_append(
    records: Sequence[bytes], expected: int, attachments: Mapping[str, bytes] | None
) -> tuple[list[bytes], dict[str, bytes]]:
    """Validate an append's arguments (shared by every backend); return normalised copies."""
    check_revision("expected", expected)
    if isinstance(records, bytes | bytearray | str) or not isinstance(records, Sequence):
        raise InvalidValueError("records", "a sequence of bytes", records)
    if not records:
        raise ValueError("append needs at least one record")
    if len(records) > MAX_RECORDS_PER_APPEND:
        raise ValueError(f"at most {MAX_RECORDS_PER_APPEND} records per append, not {len(records)}")
    payloads = [check_bytes("ledger record", r, MAX_RECORD_BYTES) for r in records]
    blobs: dict[str, bytes] = {}
    if attachments:
        if len(attachments) > MAX_ATTACHMENTS_PER_APPEND:
            raise ValueError(
                f"at most {MAX_ATTACHMENTS_PER_APPEND} attachments per append, "
                f"not {len(attachments)}"
            )
        for digest, data in attachments.items():
            _check_digest(digest)
            check_bytes("attachment", data, MAX_ATTACHMENT_BYTES)
            if digest_of(data) != digest:
                raise ValueError(f"attachment bytes do not hash to their digest {digest}")
            blobs[digest] = data
    return payloads, blobs


def check_read(after: int, limit: int) -> None:
    check_revision("after", after)
    check_revision("limit", limit)
    if not 1 <= limit <= MAX_READ_LIMIT:
        raise ValueError(f"limit must be in 1..{MAX_READ_LIMIT}, not {limit}")


def check_names(names: Iterable[str]) -> list[str]:
    """The log names of a ``drop`` (shared by every backend), validated, without repeats."""
    if isinstance(names, str):
        raise InvalidValueError("names", "an iterable of log names", names)
    return list(dict.fromkeys(validate_name(name) for name in names))


def check_digests(digests: Iterable[str]) -> list[str]:
    if isinstance(digests, str):
        raise InvalidValueError("digests", "an iterable of digests", digests)
    return [_check_digest(d) for d in digests]
