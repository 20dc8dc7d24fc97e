"""`KV`: small values under names, written by per-key revision compare-and-swap.

Semantics every backend keeps:

* ``put(key, value, expected=0)`` creates the key and fails if it exists;
  ``expected=N`` replaces the value only if the current revision is ``N``.
  Any mismatch (stale, future, update of an absent key, create of a present
  one) raises `ConflictError` and changes nothing.
* Revisions of one key strictly increase across writes. They need not be
  contiguous; the memory and SQLite backends happen to count 1, 2, 3, ...
* ``delete`` is idempotent; afterwards a create-only put succeeds again.
* ``keys(prefix)`` is sorted by byte order and unique; the prefix is a plain
  string filter, not a validated name.
* ``keys_page(prefix, start=..., limit=..., descending=...)`` (`PagedKV`, which every
  bundled backend implements) is one page of ``keys(prefix)``: the keys strictly after
  ``start`` (ascending) or strictly before it (descending; ``""`` starts at the end),
  at most ``limit`` of them. It reads only that page off the key index, so a listing
  costs the same whatever else the store holds.
* ``put`` and ``delete`` take an optional ``fence=`` (see `fence`): checked in the
  same transaction, a grant that is no longer current raises `FencedWriteError`
  and changes nothing.
* ``write_many(writes, fence=...)`` (`BatchKV`, which every bundled backend implements)
  applies up to `MAX_KV_WRITES` puts (`KVPut`, a compare-and-swap as ``put``) and
  deletes (`KVDelete`, idempotent as ``delete``) of distinct keys in *one* transaction:
  all of them or, on the first conflict or a refused fence, none. It returns the new
  revision of each put (0 for a delete), in order. Arguments are checked before
  anything is touched (`InvalidValueError`, `ValueTooLargeError`, `InvalidNameError`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final, Protocol, runtime_checkable

from .errors import ConflictError, InvalidValueError, KeyNotFoundError, ValueTooLargeError
from .fence import Fence
from .limits import MAX_KV_VALUE_BYTES, check_bytes, check_revision
from .names import validate_name

__all__ = [
    "KV",
    "MAX_KV_BATCH_BYTES",
    "MAX_KV_WRITES",
    "BatchKV",
    "Entry",
    "KVDelete",
    "KVPut",
    "KVWrite",
    "PagedKV",
    "check_writes",
    "overwrite",
]

MAX_KV_WRITES: Final = 1000
"""Writes in one ``write_many`` (a bound on one transaction's size and lock time)."""
MAX_KV_BATCH_BYTES: Final = 16 << 20
"""The values of one ``write_many`` together (16 MiB)."""


@dataclass(frozen=True, slots=True)
class Entry:
    value: bytes
    revision: int


@runtime_checkable
class KV(Protocol):
    async def get(self, key: str) -> Entry:
        """Return the value and revision; `KeyNotFoundError` if absent."""
        ...

    async def put(
        self, key: str, value: bytes, *, expected: int, fence: Fence | None = None
    ) -> int:
        """Compare-and-swap; return the new revision."""
        ...

    async def delete(self, key: str, *, fence: Fence | None = None) -> None: ...

    async def keys(self, prefix: str = "") -> list[str]: ...


@runtime_checkable
class PagedKV(Protocol):
    """A `KV` that reads one page of keys at a time (a keyset cursor on the key index)."""

    async def keys_page(
        self, prefix: str = "", *, start: str = "", limit: int = 100, descending: bool = False
    ) -> list[str]: ...


def check_page(start: str, limit: int) -> None:
    """The argument rules of ``keys_page`` every backend shares."""
    if not isinstance(start, str):
        raise TypeError(f"start must be a str, not {type(start).__name__}")
    if not isinstance(limit, int) or isinstance(limit, bool):
        raise TypeError("limit must be an int")
    if limit < 1:
        raise ValueError(f"page limit {limit} must be at least 1")


@dataclass(frozen=True, slots=True)
class KVPut:
    """In a batch: ``put(key, value, expected=expected)``."""

    key: str
    value: bytes
    expected: int


@dataclass(frozen=True, slots=True)
class KVDelete:
    """In a batch: ``delete(key)``."""

    key: str


KVWrite = KVPut | KVDelete


@runtime_checkable
class BatchKV(Protocol):
    """A `KV` that applies many writes in one transaction (see the module documentation)."""

    async def write_many(
        self, writes: Sequence[KVWrite], *, fence: Fence | None = None
    ) -> list[int]: ...


def check_writes(writes: object) -> list[KVWrite]:
    """The argument rules of ``write_many`` every backend shares: a sequence of at most
    `MAX_KV_WRITES` `KVPut`/`KVDelete` of distinct valid keys, puts with bytes values
    and non-negative revisions, `MAX_KV_BATCH_BYTES` of values in all."""
    if not isinstance(writes, Sequence) or isinstance(writes, str | bytes):
        raise InvalidValueError("writes", "a sequence of KVPut or KVDelete", writes)
    if len(writes) > MAX_KV_WRITES:
        raise ValueError(f"a batch holds at most {MAX_KV_WRITES} writes, not {len(writes)}")
    seen: set[str] = set()
    total = 0
    for index, write in enumerate(writes):
        if not isinstance(write, KVPut | KVDelete):
            raise InvalidValueError(f"writes[{index}]", "a KVPut or KVDelete", write)
        validate_name(write.key)
        if write.key in seen:
            raise ValueError(f"writes[{index}]: key {write.key!r} is written twice in one batch")
        seen.add(write.key)
        if isinstance(write, KVPut):
            check_revision(f"writes[{index}].expected", write.expected)
            total += len(check_bytes(f"writes[{index}].value", write.value, MAX_KV_VALUE_BYTES))
    if total > MAX_KV_BATCH_BYTES:
        raise ValueTooLargeError("writes (values)", total, MAX_KV_BATCH_BYTES)
    return list(writes)


async def overwrite(kv: KV, key: str, value: bytes) -> None:
    """Set ``key`` to ``value`` whatever it holds: a create, or a compare-and-swap against
    the revision just read, tried again when another writer came between (the last writer
    wins). For settings an operator writes, where no decision depends on the old value."""
    while True:
        try:
            current = (await kv.get(key)).revision
        except KeyNotFoundError:
            current = 0
        try:
            await kv.put(key, value, expected=current)
            return
        except ConflictError:
            continue
