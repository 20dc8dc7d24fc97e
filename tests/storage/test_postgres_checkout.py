"""The PostgreSQL store's connection at hand (`storage/postgres/checkout.py`): calls in a
row take it without asking the pool, and it never keeps a connection from a call that
waits for one, from the pool's checks, or open after the store closed."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest

psycopg = pytest.importorskip("psycopg")

from flowledger.storage import Store, open_store  # noqa: E402
from flowledger.storage.postgres import checkout  # noqa: E402

from .._postgres import postgres_url, with_options  # noqa: E402


@pytest.fixture
def pg_url() -> Iterator[str]:
    with postgres_url() as url:
        yield url


def db_of(store: Store) -> Any:
    return store.kv._db  # type: ignore[attr-defined]


def pool_requests(store: Store) -> int:
    return int(db_of(store)._pool.get_stats().get("requests_num", 0))


async def test_calls_in_a_row_ask_the_pool_once_per_return_every(pg_url: str) -> None:
    async with open_store(with_options(pg_url, pool_min=1, pool_max=2)) as store:
        await store.kv.put("k", b"v", expected=0)
        before = pool_requests(store)
        for _ in range(checkout.RETURN_EVERY - 1):
            await store.kv.get("k")
        assert pool_requests(store) == before  # the connection at hand served them all
        for _ in range(3):
            await store.kv.get("k")
        # It went back to the pool once (the pool's checks on a return ran) and came out.
        assert pool_requests(store) == before + 1


async def test_a_call_waiting_for_the_pool_gets_the_returned_connection(pg_url: str) -> None:
    """With one connection, concurrent calls queue in the pool: each returned connection
    must go to the next of them, not stay at hand (they would wait until the pool's
    timeout and fail)."""
    url = with_options(pg_url, pool_min=1, pool_max=1, connect_timeout=3)
    async with open_store(url) as store:
        await asyncio.gather(*(store.kv.put(f"k/{i}", b"v", expected=0) for i in range(20)))
        assert len(await store.kv.keys("k/")) == 20
        await asyncio.gather(*(store.kv.get(f"k/{i}") for i in range(20)))


async def test_a_connection_left_in_a_transaction_goes_back_to_the_pool(pg_url: str) -> None:
    async with open_store(with_options(pg_url, pool_min=1, pool_max=1)) as store:
        db = db_of(store)
        async with db.connection() as conn:
            await conn.execute("BEGIN")
            left = conn
        assert db._connections._spare is None  # the pool rolls it back
        async with db.connection() as conn:
            assert conn is left  # the only connection, back from the pool
            status = conn.pgconn.transaction_status
            assert status == psycopg.pq.TransactionStatus.IDLE


async def test_close_closes_the_connection_at_hand(pg_url: str) -> None:
    store = await open_store(pg_url)
    db = db_of(store)
    async with db.connection() as conn:
        at_hand = conn
    assert db._connections._spare is at_hand
    await store.close()
    assert at_hand.closed
