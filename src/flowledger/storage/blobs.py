"""`Blobs`: immutable bytes under names.

A put of bytes identical to what is stored is a no-op; different bytes raise
`BlobConflictError` and keep the original. Each `get` returns a fresh `bytes`
object. ``delete`` is idempotent; ``list(prefix)`` is sorted and unique.
``put`` and ``delete`` take an optional ``fence=`` (see `fence`).
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from .fence import Fence

__all__ = ["Blobs"]


@runtime_checkable
class Blobs(Protocol):
    async def put(self, key: str, data: bytes, *, fence: Fence | None = None) -> None: ...

    async def get(self, key: str) -> bytes:
        """`BlobNotFoundError` if absent."""
        ...

    async def delete(self, key: str, *, fence: Fence | None = None) -> None: ...

    async def list(self, prefix: str = "") -> list[str]: ...
