"""The PostgreSQL sweep protocol, one interleaving at a time: a transaction on a second
connection stops half-way through what an append (or a sweep) does, with the backend's
own statements, while the store runs the other side.

The pauses (`asyncio.sleep`) only give the other side time to reach its lock; the
outcome asserted is the same whichever side gets there first.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from flowledger.storage import AttachmentNotFoundError, Store, SweepReport, digest_of, open_store

from .._postgres import postgres_url

S = b"shared attachment" * 50
DS = digest_of(S)


@pytest.fixture
async def store() -> AsyncIterator[Store]:
    with postgres_url() as url:
        async with open_store(url) as opened:
            yield opened


async def orphan(store: Store) -> None:
    """Store S with no log referring to it any more."""
    await store.ledger.append("gone", [b"1"], expected=0, attachments={DS: S})
    await store.ledger.drop(["gone"])


def db(store: Store) -> Any:
    return store.ledger._db  # type: ignore[attr-defined]


async def test_a_sweep_passes_over_what_an_append_in_flight_locked(store: Store) -> None:
    """An append that has share-locked S and recorded its reference, not yet committed:
    a sweep meanwhile leaves S (it skips the locked row; a sweep that waited for the
    lock and then deleted with its old snapshot would lose S under a new reference)."""
    await orphan(store)
    await store.ledger.append("b", [b"1"], expected=0)
    q = db(store).q
    async with db(store).connection() as conn:
        await conn.execute("BEGIN")
        await conn.execute(q.attachments_lock, ([bytes.fromhex(DS)],))
        (log_id,) = await (await conn.execute(q.log_lock, ("b",))).fetchone()
        await conn.execute(q.refs_insert, (log_id, [bytes.fromhex(DS)]))
        sweep = asyncio.ensure_future(store.ledger.sweep())
        await asyncio.sleep(0.3)
        await conn.execute("COMMIT")
    await sweep
    assert await store.ledger.attachments([DS]) == {DS: S}
    assert await store.ledger.sweep() == SweepReport(0, 0)  # b refers to it now
    assert await store.ledger.attachments([DS]) == {DS: S}


async def sweep_in_flight(store: Store, conn: Any) -> None:
    """On ``conn``: what a sweep does before its commit - lock S, delete it."""
    q = db(store).q
    await conn.execute("BEGIN")
    locked = await (await conn.execute(q.sweep_lock, (b"", 10))).fetchall()
    assert [bytes(d) for (d,) in locked] == [bytes.fromhex(DS)]
    await conn.execute(q.sweep_delete, ([bytes.fromhex(DS)],))


async def test_an_append_by_ref_during_a_sweep_fails_and_writes_nothing(store: Store) -> None:
    """A sweep has locked and deleted S, not yet committed: an append naming S in refs
    waits for it and then fails with AttachmentNotFoundError, writing nothing (an append
    that did not wait would commit a record needing the deleted S)."""
    await orphan(store)
    async with db(store).connection() as conn:
        await sweep_in_flight(store, conn)
        append = asyncio.ensure_future(store.ledger.append("b", [b"1"], expected=0, refs=[DS]))
        await asyncio.sleep(0.3)
        await conn.execute("COMMIT")
    with pytest.raises(AttachmentNotFoundError):
        await append
    assert await store.ledger.tip("b") == 0
    assert await store.ledger.append("b", [b"1"], expected=0, attachments={DS: S}) == 1
    assert await store.ledger.attachments([DS]) == {DS: S}


async def test_an_append_sending_during_a_sweep_stores_it_again(store: Store) -> None:
    """A sweep has locked and deleted S, not yet committed: an append sending S waits,
    then inserts it afresh - its record and S are both there afterwards."""
    await orphan(store)
    async with db(store).connection() as conn:
        await sweep_in_flight(store, conn)
        append = asyncio.ensure_future(
            store.ledger.append("b", [b"1"], expected=0, attachments={DS: S})
        )
        await asyncio.sleep(0.3)
        await conn.execute("COMMIT")
    assert await append == 1
    assert await store.ledger.attachments([DS]) == {DS: S}
    assert await store.ledger.sweep() == SweepReport(0, 0)
