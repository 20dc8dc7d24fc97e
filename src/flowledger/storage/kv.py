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
* ``put`` and ``delete`` take an optional ``fence=`` (see `fence`): checked in the
  same transaction, a grant that is no longer current raises `FencedWriteError`
  and changes nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from .fence import Fence

__all__ = ["KV", "Entry"]


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
