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

References and collection (see docs/storage.md for the whole protocol):

* A log *refers to* the attachments its records need. An append declares them: the
  digests it sends in ``attachments`` and, in ``refs=``, those it needs but does not
  send (because the writer knows they are stored already). The append records both
  in the same transaction (one row per log and digest, however many appends name
  it) and checks that every digest in ``refs`` is stored: one that is not raises
  `AttachmentNotFoundError` naming the first missing one (in the order given) and
  writes nothing - the writer then appends again with the bytes. A writer must name
  every attachment its records need in one of the two, or `sweep` may delete it.
* ``drop(names)`` deletes logs - records, the log, its references - as if never
  written (a later append at ``expected=0`` starts the log afresh). Idempotent.
* ``sweep()`` deletes every attachment no log refers to, safely against concurrent
  appenders: an append that names an attachment either commits its reference
  before the sweep decides (and the attachment is kept) or finds it gone and fails
  with `AttachmentNotFoundError` (a sent attachment is simply inserted again), so
  no committed record ever needs a deleted attachment. ``dry_run=True`` reports
  what would be deleted and changes nothing.
* ``usage(names)`` measures what dropping ``names`` and sweeping would free.
* ``vacuum()`` returns freed space to the file system where the backend can (see
  each backend); ``drop`` and ``sweep`` already make freed space reusable.
* Databases written before references existed have logs without them: until the
  layer that can parse the records registered their references (``add_refs``) and
  called ``mark_refs_complete``, ``refs_complete()`` is false and `sweep` and
  `usage` raise `RefsIncompleteError`.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final, NamedTuple, Protocol, runtime_checkable

from .errors import InvalidValueError
from .fence import Fence
from .limits import (
    MAX_ATTACHMENT_BYTES,
    MAX_ATTACHMENTS_PER_APPEND,
    MAX_READ_LIMIT,
    MAX_RECORD_BYTES,
    MAX_RECORDS_PER_APPEND,
    MAX_REFS_PER_APPEND,
    check_bytes,
    check_revision,
)
from .names import validate_name

__all__ = ["Ledger", "LedgerUsage", "Record", "SweepReport", "check_append", "digest_of"]


@dataclass(frozen=True, slots=True)
class Record:
    seq: int
    payload: bytes


class SweepReport(NamedTuple):
    """What a `Ledger.sweep` deleted (or, in a dry run, would delete)."""

    attachments: int  # how many attachments
    bytes: int  # their total size in bytes


class LedgerUsage(NamedTuple):
    """What a set of logs occupies (`Ledger.usage`): dropping them and sweeping frees it."""

    records: int  # records in the logs
    bytes: int  # their payload bytes
    exclusive_attachment_bytes: int  # bytes of attachments no log outside the set refers to


class KnownRefs:
    """The references ``(log id, digest)`` a store has committed, remembered (a bounded
    number) so that its appends need not insert them again, nor check that an attachment
    named in refs is stored: a reference is deleted only with its log, a dropped log's id is
    never given to another log, and an attachment with a reference is never swept. So a
    remembered reference stays true; one forgotten costs a statement, never correctness."""

    def __init__(self, size: int = 1 << 16) -> None:
        self._size = size
        self._pairs: dict[tuple[int, bytes], None] = {}

    def __contains__(self, pair: tuple[int, bytes]) -> bool:
        return pair in self._pairs

    def add(self, pairs: Iterable[tuple[int, bytes]]) -> None:
        for pair in pairs:
            self._pairs[pair] = None
        while len(self._pairs) > self._size:
            del self._pairs[next(iter(self._pairs))]


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
        refs: Iterable[str] = (),
        fence: Fence | None = None,
    ) -> int:
        """Append ``records`` if the tip is ``expected``; return the new tip.

        ``attachments`` (digest -> bytes) are inserted if absent; ``refs`` are digests
        the records need that are stored already. The log refers to both from then on.
        `AttachmentNotFoundError` (nothing written) if a digest of ``refs`` is not stored;
        `LedgerConflictError` if the tip moved; `FencedWriteError` for a stale fence."""
        ...

    async def read(self, name: str, *, after: int = 0, limit: int = 100) -> list[Record]: ...

    async def tip(self, name: str) -> int: ...

    async def names(self, prefix: str = "") -> list[str]:
        """Names of logs with at least one record, sorted."""
        ...

    async def attachments(self, digests: Iterable[str]) -> dict[str, bytes]:
        """Fetch attachments by digest; `AttachmentNotFoundError` names the first missing one."""
        ...

    async def drop(self, names: Iterable[str]) -> int:
        """Delete the logs ``names`` (records, log, references); return how many existed.

        Each log goes in one transaction with all its records (a batch of logs may share
        one); a log that does not exist is skipped, so a repeated or resumed drop is
        harmless. The attachments the logs referred to stay until `sweep`."""
        ...

    async def sweep(self, *, dry_run: bool = False) -> SweepReport:
        """Delete every attachment no log refers to; report how many and their bytes.

        Safe against concurrent appends (see the module docstring). With ``dry_run``,
        count them and change nothing. `RefsIncompleteError` while `refs_complete` is
        false."""
        ...

    async def usage(self, names: Iterable[str]) -> LedgerUsage:
        """The records of ``names`` and the attachments only they refer to (what `drop`
        followed by `sweep` would free, as of now). `RefsIncompleteError` while
        `refs_complete` is false."""
        ...

    async def vacuum(self) -> None:
        """Give freed space back to the file system where the backend can (SQLite: a
        full ``VACUUM``, which also turns on incremental auto-vacuum for an older file;
        PostgreSQL: ``VACUUM`` of the ledger's tables; memory: nothing). Slow on a large
        database: an explicit maintenance operation, never run implicitly."""
        ...

    async def add_refs(self, name: str, digests: Iterable[str]) -> int:
        """Record that log ``name`` refers to ``digests`` (the backfill of a database
        written before references existed); return how many of them are stored. Digests
        that are not stored are skipped (nothing to keep); a log that does not exist is
        skipped (returns 0). Safe against a concurrent `sweep`, like an append."""
        ...

    async def refs_complete(self) -> bool:
        """Whether every log's references are recorded (always, unless the database was
        written before references existed and `mark_refs_complete` was not called)."""
        ...

    async def mark_refs_complete(self) -> None:
        """Declare every log's references recorded (after a backfill through `add_refs`),
        which allows `sweep`. Idempotent."""
        ...


@runtime_checkable
class BlockingAppend(Protocol):
    """A ledger that can also append from synchronous code (SQLite's: its transaction runs
    on the caller's thread anyway), for callers that run no event loop and would
    otherwise start one just to await `Ledger.append`."""

    def append_blocking(
        self,
        name: str,
        records: Sequence[bytes],
        *,
        expected: int,
        attachments: Mapping[str, bytes] | None = None,
        refs: Iterable[str] = (),
        fence: Fence | None = None,
    ) -> int:
        """`Ledger.append`, with the same checks, transaction, errors and durability,
        blocking the calling thread (which must run no event loop) until it is done."""
        ...


_HEX = frozenset("0123456789abcdef")


def _check_digest(digest: object) -> str:
    if not isinstance(digest, str) or len(digest) != 64 or not _HEX.issuperset(digest):
        raise InvalidValueError("attachment digest", "64 lowercase hex characters", digest)
    return digest


# Exact list and tuple: the arguments every caller passes, checked by type alone before
# the slower checks (an ABC's isinstance, a call per record) that other values take.
_PLAIN: Final = (list, tuple)


def check_append(
    records: Sequence[bytes], expected: int, attachments: Mapping[str, bytes] | None
) -> tuple[list[bytes], dict[str, bytes]]:
    """Validate an append's arguments (shared by every backend); return normalised copies."""
    if type(expected) is not int or expected < 0:
        check_revision("expected", expected)
    if type(records) not in _PLAIN and (
        isinstance(records, bytes | bytearray | str) or not isinstance(records, Sequence)
    ):
        raise InvalidValueError("records", "a sequence of bytes", records)
    if not records:
        raise ValueError("append needs at least one record")
    if len(records) > MAX_RECORDS_PER_APPEND:
        raise ValueError(f"at most {MAX_RECORDS_PER_APPEND} records per append, not {len(records)}")
    payloads = [
        r
        if type(r) is bytes and len(r) <= MAX_RECORD_BYTES
        else check_bytes("ledger record", r, MAX_RECORD_BYTES)
        for r in records
    ]
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


def check_refs(refs: Iterable[str], sent: Mapping[str, bytes]) -> list[str]:
    """Validate an append's ``refs``; return the distinct digests not in ``sent``, in order."""
    plain = type(refs) in _PLAIN
    if not plain and isinstance(refs, str | bytes | bytearray):
        raise InvalidValueError("refs", "an iterable of digests", refs)
    if plain and not refs:
        return []
    wanted = list(dict.fromkeys(_check_digest(d) for d in refs))
    if len(wanted) > MAX_REFS_PER_APPEND:
        raise ValueError(f"at most {MAX_REFS_PER_APPEND} refs per append, not {len(wanted)}")
    return [d for d in wanted if d not in sent]


def check_names(names: Iterable[str]) -> list[str]:
    """Validate the log names of a `drop` or `usage`; return them, distinct, in order."""
    if isinstance(names, str | bytes | bytearray):
        raise InvalidValueError("names", "an iterable of log names", names)
    return list(dict.fromkeys(validate_name(n) for n in names))


def check_read(after: int, limit: int) -> None:
    check_revision("after", after)
    check_revision("limit", limit)
    if not 1 <= limit <= MAX_READ_LIMIT:
        raise ValueError(f"limit must be in 1..{MAX_READ_LIMIT}, not {limit}")


def check_digests(digests: Iterable[str]) -> list[str]:
    if isinstance(digests, str):
        raise InvalidValueError("digests", "an iterable of digests", digests)
    return [_check_digest(d) for d in digests]
