"""Every stored value read once, so that each checksum is checked (`storage`'s CRC-32
bound to the value's place): every KV value, every blob, every record of every ledger log
(and that each log's sequence numbers run 1..tip without a gap).

Values are listed through the store's own listings (`KV.keys_page` a page at a time,
`Blobs.list`, `Ledger.names`), read one at a time (a log in pages), and never kept. A
damaged value is a `Findings` entry naming its key, or its log and sequence number; a
page of records that fails is read again one record at a time, so each damaged record is
named.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Final

from ...storage import (
    KV,
    MAX_READ_LIMIT,
    BlobNotFoundError,
    CorruptDataError,
    InvalidNameError,
    KeyNotFoundError,
    PagedKV,
    Store,
)
from .findings import Findings

__all__ = ["scan_values"]

_PAGE: Final = min(1000, MAX_READ_LIMIT)
# A listed name that is no valid name: a byte of it was damaged where it is stored (a
# lookup by it is refused before it reaches the database).
_BAD_NAME: Final = "its stored name is no valid name (a damaged byte)"
_PER_LOG: Final = 20  # damaged records named per log; more are counted in one entry


async def scan_values(store: Store, findings: Findings) -> None:
    await _kv(store, findings)
    await _blobs(store, findings)
    await _logs(store, findings)


async def _kv_keys(kv: KV) -> AsyncIterator[str]:
    """Every key, a page at a time where the store pages (every bundled backend)."""
    if not isinstance(kv, PagedKV):
        for key in await kv.keys(""):
            yield key
        return
    start = ""
    while True:
        page = await kv.keys_page("", start=start, limit=_PAGE)
        for key in page:
            yield key
        if len(page) < _PAGE:
            return
        start = page[-1]


async def _kv(store: Store, findings: Findings) -> None:
    async for key in _kv_keys(store.kv):
        findings.checked["kv values"] += 1
        try:
            await store.kv.get(key)
        except CorruptDataError as exc:
            findings.add("kv", key, exc.reason)
        except KeyNotFoundError:
            findings.add("kv", key, "listed, but not found when read")
        except InvalidNameError:
            findings.add("kv", key, _BAD_NAME)


async def _blobs(store: Store, findings: Findings) -> None:
    for key in await store.blobs.list(""):
        findings.checked["blobs"] += 1
        try:
            await store.blobs.get(key)
        except CorruptDataError as exc:
            findings.add("blob", key, exc.reason)
        except BlobNotFoundError:
            findings.add("blob", key, "listed, but not found when read")
        except InvalidNameError:
            findings.add("blob", key, _BAD_NAME)


async def _logs(store: Store, findings: Findings) -> None:
    for name in await store.ledger.names(""):
        findings.checked["logs"] += 1
        try:
            tip = await store.ledger.tip(name)
        except InvalidNameError:
            findings.add("log", name, _BAD_NAME)
            continue
        if tip == 0:
            findings.add("log", name, "listed, but holds no record")
            continue
        damaged: list[tuple[int, str]] = []
        after = 0
        while after < tip:
            size = min(_PAGE, tip - after)
            try:
                records = await store.ledger.read(name, after=after, limit=size)
            except CorruptDataError:
                damaged.extend(await _one_by_one(store, findings, name, after, size))
                after += size
                continue
            findings.checked["log records"] += len(records)
            expected = [after + 1 + offset for offset in range(len(records))]
            gaps = sorted(set(range(after + 1, after + size + 1)) - {r.seq for r in records})
            if [r.seq for r in records] != expected or not records:
                damaged.extend((seq, "the record is missing") for seq in gaps)
                after += size
                continue
            after = records[-1].seq
        _report(findings, name, tip, damaged)


def _report(findings: Findings, name: str, tip: int, damaged: list[tuple[int, str]]) -> None:
    """Each damaged record of a log, up to `_PER_LOG`; a log all of whose records fail
    (its name damaged where it is listed, so each checksum is checked under another name)
    as one entry."""
    if len(damaged) == tip > 1:
        findings.add("log", name, f"all {tip} records fail: {damaged[0][1]}")
        return
    for seq, problem in damaged[:_PER_LOG]:
        findings.add("log", f"{name}#{seq}", problem)
    if len(damaged) > _PER_LOG:
        findings.add("log", name, f"{len(damaged)} damaged records in all")


async def _one_by_one(
    store: Store, findings: Findings, name: str, after: int, size: int
) -> list[tuple[int, str]]:
    """Read ``size`` records after ``after`` singly: the damaged ones and why."""
    found: list[tuple[int, str]] = []
    for seq in range(after + 1, after + size + 1):
        findings.checked["log records"] += 1
        try:
            records = await store.ledger.read(name, after=seq - 1, limit=1)
        except CorruptDataError as exc:
            found.append((seq, exc.reason))
            continue
        if not records or records[0].seq != seq:
            found.append((seq, "the record is missing"))
    return found
