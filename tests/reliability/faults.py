"""Fault injection around a storage `Store`: make its KV, Blobs or Ledger call number ``k``
fail before it commits, fail after it commits (the reply is lost), or stall.

Every KV/Blobs/Ledger call made while the injector is *armed* is numbered (1, 2, ...) and
recorded as ``"kv.put sessions/..."``. Leases are passed through untouched (their renewals
run on a timer, so counting them would make call numbers depend on timing).
"""

from __future__ import annotations

import asyncio
import enum
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from flowledger.storage import KV, Blobs, Fence, Ledger, Store
from flowledger.storage.kv import Entry
from flowledger.storage.ledger import Record

T = TypeVar("T")

__all__ = ["Fault", "FaultKind", "FaultyStore", "InjectedFault", "faulty"]


class FaultKind(enum.StrEnum):
    BEFORE = "before"  # raise, nothing written
    AFTER = "after"  # the call commits, then the reply is lost
    DELAY = "delay"  # the call is slow but succeeds


class InjectedFault(ConnectionError):
    """The error an injected fault raises: transient and ambiguous, like a dropped link."""


@dataclass(frozen=True)
class Fault:
    kind: FaultKind
    at: int  # the 1-based number of the armed call to disturb
    seconds: float = 0.02


@dataclass
class FaultyStore:
    """Shared call counter and fault plan for the wrapped primitives."""

    inner: Store
    armed: bool = False
    fault: Fault | None = None
    calls: list[str] = field(default_factory=list)
    fired: list[str] = field(default_factory=list)
    names: list[str] = field(default_factory=list)  # every name any call used, armed or not
    prefixes: list[str] = field(default_factory=list)  # every listing prefix

    def arm(self, fault: Fault | None = None) -> None:
        self.calls.clear()
        self.fired.clear()
        self.fault = fault
        self.armed = True

    def disarm(self) -> None:
        self.armed = False
        self.fault = None

    async def call(
        self, what: str, name: str, perform: Callable[[], Awaitable[T]], *, kind: str = "name"
    ) -> T:
        if kind == "name":
            self.names.append(name)
        elif kind == "prefix":
            self.prefixes.append(name)
        if not self.armed:
            return await perform()
        self.calls.append(f"{what} {name}")
        number = len(self.calls)
        fault = self.fault
        if fault is None or fault.at != number:
            return await perform()
        self.fired.append(f"{fault.kind}@{number} {what} {name}")
        if fault.kind is FaultKind.BEFORE:
            raise InjectedFault(f"injected: {what} {name} failed before commit")
        if fault.kind is FaultKind.DELAY:
            await asyncio.sleep(fault.seconds)
            return await perform()
        await perform()
        raise InjectedFault(f"injected: {what} {name} committed, reply lost")


class FaultyKV:
    def __init__(self, inner: KV, faults: FaultyStore) -> None:
        self._inner = inner
        self._faults = faults

    async def get(self, key: str) -> Entry:
        return await self._faults.call("kv.get", key, lambda: self._inner.get(key))

    async def put(
        self, key: str, value: bytes, *, expected: int, fence: Fence | None = None
    ) -> int:
        return await self._faults.call(
            "kv.put", key, lambda: self._inner.put(key, value, expected=expected, fence=fence)
        )

    async def delete(self, key: str, *, fence: Fence | None = None) -> None:
        await self._faults.call("kv.delete", key, lambda: self._inner.delete(key, fence=fence))

    async def keys(self, prefix: str = "") -> list[str]:
        return await self._faults.call(
            "kv.keys", prefix, lambda: self._inner.keys(prefix), kind="prefix"
        )


class FaultyBlobs:
    def __init__(self, inner: Blobs, faults: FaultyStore) -> None:
        self._inner = inner
        self._faults = faults

    async def put(self, key: str, data: bytes, *, fence: Fence | None = None) -> None:
        await self._faults.call("blobs.put", key, lambda: self._inner.put(key, data, fence=fence))

    async def get(self, key: str) -> bytes:
        return await self._faults.call("blobs.get", key, lambda: self._inner.get(key))

    async def delete(self, key: str, *, fence: Fence | None = None) -> None:
        await self._faults.call("blobs.delete", key, lambda: self._inner.delete(key, fence=fence))

    async def list(self, prefix: str = "") -> list[str]:
        return await self._faults.call(
            "blobs.list", prefix, lambda: self._inner.list(prefix), kind="prefix"
        )


class FaultyLedger:
    def __init__(self, inner: Ledger, faults: FaultyStore) -> None:
        self._inner = inner
        self._faults = faults

    def __getattr__(self, name: str) -> Any:
        # drop, sweep, usage, vacuum and the reference calls pass straight through
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self._inner, name)

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
        return await self._faults.call(
            "ledger.append",
            name,
            lambda: self._inner.append(
                name, records, expected=expected, attachments=attachments, refs=refs, fence=fence
            ),
        )

    async def read(self, name: str, *, after: int = 0, limit: int = 100) -> list[Record]:
        return await self._faults.call(
            "ledger.read", name, lambda: self._inner.read(name, after=after, limit=limit)
        )

    async def tip(self, name: str) -> int:
        return await self._faults.call("ledger.tip", name, lambda: self._inner.tip(name))

    async def names(self, prefix: str = "") -> list[str]:
        return await self._faults.call(
            "ledger.names", prefix, lambda: self._inner.names(prefix), kind="prefix"
        )

    async def attachments(self, digests: Iterable[str]) -> dict[str, bytes]:
        wanted = list(digests)
        return await self._faults.call(
            "ledger.attachments",
            ",".join(d[:8] for d in wanted),
            lambda: self._inner.attachments(wanted),
            kind="digests",
        )


def faulty(store: Store) -> tuple[Store, FaultyStore]:
    """A `Store` over ``store``'s backend whose KV, Blobs and Ledger go through a
    `FaultyStore` (returned too). Closing it is the caller's business: close ``store``."""
    faults = FaultyStore(store)
    wrapped = Store(
        store.url,
        FaultyKV(store.kv, faults),
        FaultyBlobs(store.blobs, faults),
        FaultyLedger(store.ledger, faults),
        store.leases,
    )
    return wrapped, faults
