"""How a store call gets a connection: `Connections`, the store's pool and the one
connection it keeps at hand between calls.

Every call of the store runs on a connection of its pool. Taking one out of a
``psycopg_pool.AsyncConnectionPool`` and putting it back costs more client CPU than many
of the statements run on it (an asyncio lock each way, statistics, logging calls, the
return's checks), so the connection a call gives back is kept at hand, checked out, for
the next call, which takes it without asking the pool. It goes back to the pool when a
call is waiting for one (the pool is at its ``max_size``, so only a returned connection
serves that call), when it is not idle and healthy (a transaction left open, a broken
or closed connection: the pool rolls back or replaces it, as for any return), every
`RETURN_EVERY` calls (so the pool's own checks on a return, such as ``max_lifetime``,
still run), and when the store closes. Concurrent calls beyond the first take
connections from the pool as before.

``getconn`` and ``putconn`` are used directly, not the pool's ``connection()``: that adds
a generator-based context manager and the connection's own ``async with`` (a commit or
rollback, a no-op on the store's autocommit connections: ``putconn`` rolls back a
transaction left open).
"""

from __future__ import annotations

from typing import Final

import psycopg.pq
from psycopg_pool import AsyncConnectionPool, PoolClosed

from ..errors import StoreClosedError
from .queries import Conn

__all__ = ["RETURN_EVERY", "Checkout", "Connections"]

# Calls served by the connection at hand before it goes back to the pool once.
RETURN_EVERY: Final = 1000

_IDLE: Final = psycopg.pq.TransactionStatus.IDLE


class Connections:
    """A store's pool, and the connection kept at hand for its next call."""

    __slots__ = ("_closing", "_served", "_spare", "_waiting", "pool")

    def __init__(self, pool: AsyncConnectionPool[Conn]) -> None:
        self.pool = pool
        self._spare: Conn | None = None
        self._served = 0  # calls since the connection at hand last went back to the pool
        self._waiting = 0  # calls waiting in the pool's getconn
        self._closing = False

    def checkout(self) -> Checkout:
        """``async with connections.checkout() as conn``."""
        return Checkout(self)

    async def take(self) -> Conn:
        conn = self._spare
        if conn is not None:
            self._spare = None
            return conn
        self._waiting += 1
        try:
            return await self.pool.getconn()
        except PoolClosed:
            raise StoreClosedError() from None
        finally:
            self._waiting -= 1

    async def give_back(self, conn: Conn) -> None:
        keep = (
            self._spare is None
            and not self._waiting
            and not self._closing
            and self._served < RETURN_EVERY
            and conn.pgconn.transaction_status == _IDLE  # also not broken, not closed
        )
        if keep:
            self._served += 1
            self._spare = conn
            return
        if self._spare is None:
            self._served = 0
        await self.pool.putconn(conn)

    async def close(self) -> None:
        """Return the connection at hand, then close the pool (calls holding a
        connection finish; their connections are closed as they come back)."""
        self._closing = True
        spare, self._spare = self._spare, None
        if spare is not None:
            await self.pool.putconn(spare)
        await self.pool.close()


class Checkout:
    """A connection for the body of an ``async with``, given back at its end."""

    __slots__ = ("_conn", "_connections")

    def __init__(self, connections: Connections) -> None:
        self._connections = connections
        self._conn: Conn | None = None

    async def __aenter__(self) -> Conn:
        self._conn = await self._connections.take()
        return self._conn

    async def __aexit__(self, *exc_info: object) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            await self._connections.give_back(conn)
