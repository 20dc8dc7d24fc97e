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
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from .fence import Fence

__all__ = ["KV", "Entry", "PagedKV"]


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
