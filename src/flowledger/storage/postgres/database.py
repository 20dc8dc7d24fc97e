"""A PostgreSQL store's connection pool, and what every call on it does.

Semantics, the same as the memory oracle's (the conformance suite compares them):

* Every call validates its arguments with the shared contract checks before
  touching the database, so a rejected call changes nothing.
* Every write is one ``READ COMMITTED`` transaction, atomic and isolated
  against every other connection, process and machine: a KV compare-and-swap
  (an ``INSERT ... ON CONFLICT DO NOTHING`` for a create, an ``UPDATE ... WHERE
  revision = expected`` otherwise), a blob put (insert if absent, else compare),
  and a ledger append - the tip check on the log's row, all of its records and
  the insert-if-absent of all of its attachments commit together or not at
  all. An append, a KV put and a KV delete are one statement each (its own
  implicit transaction, one round trip: they are the hot path of every durable
  step and run-record update), run at the server's default isolation (a
  serialization failure under a stricter one than READ COMMITTED is a race:
  nothing was written and the write is redone); every other write is an
  explicit transaction. Concurrent writers of one key or log queue on its row lock; the loser
  re-checks and gets the contract's conflict error.
* Text keys are ``COLLATE "C"``, so listings are sorted by byte order whatever the
  database's locale.

Fences. A fenced write (see `fence`) starts its transaction by reading its
lease's row ``FOR SHARE`` (in a single-statement write, its first part, which
every write of the statement is conditioned on): a grant that is not current raises
`FencedWriteError` before anything is written, and a takeover (an update of that row) waits until
the write has ended, so it can never land after one. The same statement sets
``idle_in_transaction_session_timeout`` to 5 s for the transaction, so a writer
stalled in the middle of one (SIGSTOP, a frozen VM) is disconnected by the server
and rolled back instead of blocking the takeover for as long as it is stopped.

Lost acknowledgements. When the connection fails while a ``COMMIT`` is in
flight (``psycopg.OperationalError`` after the commit was sent), the write may
or may not have happened. It is resolved by re-reading on a fresh connection,
never by guessing:

* a ledger append re-reads records ``expected+1 .. expected+n``: all there with
  identical bytes (and every attachment of the append present) - it
  succeeded, and returns the new tip; none there - the original error is
  raised (the outcome is still unknown; retry the append); other records there
  - `LedgerConflictError` (another writer moved the tip, so ours cannot have
  committed: it held the log's row lock until its own commit or rollback);
* a KV put re-reads the key: the same bytes at revision ``expected+1`` - it
  succeeded; the revision still ``expected`` (or absent for a create) - the
  original error; anything else - `ConflictError` (the key has moved on, by
  another writer's put, or by ours and then another's: re-read and decide);
* a blob put succeeds if the same bytes are there, raises `BlobConflictError`
  if different bytes are, and the original error if none are; a delete
  succeeds if the key is gone; a lease acquire succeeds if the row names this
  grant's holder; a release succeeds if the grant is no longer current.

If the re-read fails too, the original error is raised. A failure before the
``COMMIT`` was sent needs no resolution (nothing can have been written). A pooled
connection that turns out to be dead (the server or a pooler restarted) costs
no call: a write that finds it broken at ``BEGIN``, or a read that finds it
broken at all, is retried once on a fresh connection. An append or KV write has
no ``COMMIT`` of its own: any connection failure during its statement is resolved
as a lost acknowledgement, and when the re-read finds none of it and the connection
is broken it is retried once (another compare-and-swap or -append at the same
revision, so at most one of the two lands; a conflict then is re-read the same way).

Pooling. Each `Store` owns a ``psycopg_pool.AsyncConnectionPool`` of autocommit
connections, keeps the connection its last call gave back at hand for the next call
(`checkout`), and keeps no session state but prepared statements: no ``SET``, no
``LISTEN``/``NOTIFY``, no advisory lock held across transactions. A statement run
repeatedly on a connection is prepared there (psycopg's ``prepare_threshold``), which
saves the server a parse and a plan per append; with ``?prepare=off`` nothing is, and
the store works behind any transaction-mode pooler (PgBouncer, RDS Proxy, Supavisor).
Reads are single statements; writes are explicit ``BEGIN ISOLATION LEVEL READ
COMMITTED`` ... ``COMMIT`` transactions (appends and KV writes are one statement, see
above) whatever the server's default isolation. A store is bound to the event loop that
opened it (as its pool is); using it from another loop raises `RuntimeError` - open one
store per loop. `Store.close` closes the pool after the store's leases are freed; calls
already holding a connection finish, later calls raise `StoreClosedError`. Database
errors other than the contract's propagate as ``psycopg.Error``.

Checksums. Every KV value, blob and ledger record is stored with its CRC-32
bound to its place (key and revision, blob key, log and sequence number) and
checked on every read: damaged bytes, or a row copied to another place, raise
`CorruptDataError` (naming the key, or the log and sequence number) instead of
being returned. Attachments are
checked by their reader against their SHA-256.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Final, TypeVar

import psycopg
import psycopg.errors
from psycopg_pool import AsyncConnectionPool

from ..errors import (
    BlobConflictError,
    ConflictError,
    FencedWriteError,
    LedgerConflictError,
    StoreClosedError,
)
from ..fence import Fence, refused
from . import arrays, queries
from .checkout import Checkout, Connections
from .queries import Conn, Queries
from .schema import ensure_schema
from .url import PostgresSettings

__all__ = ["Database", "fenced_result", "prefix_bounds", "wake_name"]

_T = TypeVar("_T")

# The longest a fenced write may keep its transaction idle (it holds its lease's row).
_FENCED_IDLE_LIMIT: Final = "5s"
# psycopg's default: a statement is prepared on a connection once it has run this often.
_PREPARE_AFTER: Final = 5


class Database:
    """A store's connection pool, and how a read, a write and a single-statement write run
    on it; the operations live with their tables (`kv`, ...)."""

    def __init__(self, settings: PostgresSettings) -> None:
        self.settings = settings
        self.q = Queries.for_schema(settings.schema)
        self._pool: AsyncConnectionPool[Conn] | None = None
        self._connections: Connections | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._closed = False

    # lifecycle

    async def open(self) -> None:
        settings = self.settings
        self._loop = asyncio.get_running_loop()
        prepare_after = _PREPARE_AFTER if settings.prepare else None
        pool: AsyncConnectionPool[Conn] = AsyncConnectionPool(
            settings.conninfo,
            min_size=settings.pool_min,
            max_size=settings.pool_max,
            timeout=float(settings.connect_timeout),
            kwargs={"autocommit": True, "prepare_threshold": prepare_after},
            connection_class=Conn,
            configure=_configure,
            open=False,
            name=f"flowledger:{settings.schema}",
        )
        # The pool fills in the background while the schema is checked on a connection
        # of its own, whose failure (refused, bad password, no such database) is the
        # clear libpq error rather than a pool timeout.
        await pool.open(wait=False)
        try:
            conn = await Conn.connect(
                settings.conninfo, autocommit=True, prepare_threshold=None
            )  # the schema check's statements run once
            try:
                await ensure_schema(conn, settings.schema)
            finally:
                await conn.close()
        except BaseException:
            await pool.close()
            raise
        self._pool = pool
        self._connections = Connections(pool)

    async def close(self) -> None:
        self._closed = True
        connections, self._connections = self._connections, None
        self._pool = None
        if connections is not None:
            await connections.close()

    def check_open(self) -> None:
        if self._closed:
            raise StoreClosedError()

    def connection(self) -> Checkout:
        """``async with db.connection() as conn``: a connection for one call, given back
        at the end (see `checkout`); `StoreClosedError` once the store is closed."""
        connections = self._connections
        if connections is None or self._closed:
            raise StoreClosedError()
        if asyncio.get_running_loop() is not self._loop:
            raise RuntimeError(
                "a postgres store is bound to the event loop that opened it; "
                "open another store on this loop"
            )
        return connections.checkout()

    # running calls

    async def read(self, body: Callable[[Conn], Awaitable[_T]]) -> _T:
        """Run a read-only ``body``; once more on a fresh connection if the first was broken."""
        for attempt in (1, 2):
            conn: Conn | None = None
            try:
                async with self.connection() as conn:
                    return await body(conn)
            except psycopg.OperationalError:
                if attempt == 2 or conn is None or not conn.broken:
                    raise
        raise AssertionError("unreachable")

    async def write(
        self,
        body: Callable[[Conn], Awaitable[_T]],
        resolve: Callable[[psycopg.OperationalError], Awaitable[_T]] | None = None,
    ) -> _T:
        """Run ``body`` in one READ COMMITTED transaction.

        A connection that turns out broken at ``BEGIN`` (nothing sent yet) is replaced
        once. A connection failure while the ``COMMIT`` is in flight is a lost
        acknowledgement: ``resolve(error)`` decides the outcome by re-reading.
        """
        for attempt in (1, 2):
            conn: Conn | None = None
            began = committing = False
            try:
                async with self.connection() as conn, conn.transaction():
                    began = True
                    result = await body(conn)
                    committing = True
                return result
            except psycopg.OperationalError as exc:
                if committing and resolve is not None:
                    return await self._resolve(exc, resolve)
                if began or attempt == 2 or conn is None or not conn.broken:
                    raise
        raise AssertionError("unreachable")

    async def _resolve(
        self,
        lost: psycopg.OperationalError,
        resolve: Callable[[psycopg.OperationalError], Awaitable[_T]],
    ) -> _T:
        try:
            return await resolve(lost)
        except (ConflictError, LedgerConflictError, BlobConflictError):
            raise  # the re-read proved that another writer got there first
        except Exception as exc:
            if exc is lost:
                raise
            raise lost from None  # the re-read failed too: the outcome stays unknown

    async def _statement_waking(
        self, conn: Conn, query: bytes, params: Sequence[object], wake: Sequence[str]
    ) -> tuple[Any, ...] | None:
        async with conn.transaction():
            row = await queries.write_one(conn, query, params)
            if row is not None and row[0] is not None:
                await self.notify(conn, wake)
        return row

    async def notify(self, conn: Conn, channels: Sequence[str]) -> None:
        """``NOTIFY`` ``channels`` (our names, mapped to the schema's) on ``conn``: at
        once on an autocommit connection, at the commit inside a transaction."""
        if channels:
            names = [wake_name(self.settings.schema, c) for c in channels]
            query = "SELECT " + ", ".join(["pg_notify(%s, '')"] * len(names))
            await conn.execute(query.encode(), names)

    async def check_fence(self, conn: Conn, fence: Fence | None) -> None:
        """The first statement of a fenced write: `FencedWriteError` unless ``fence``'s
        grant is current; its row stays share-locked until the write ends."""
        if fence is None:
            return
        row = await queries.one(conn, self.q.lease_fence, (_FENCED_IDLE_LIMIT, fence.lease))
        live = row is not None and bool(row[1])
        if row is None or row[0] != fence.epoch or not live:
            current = 0 if row is None else int(row[0])
            raise refused(FencedWriteError(fence.lease, fence.epoch, current, live))

    # KV
    async def statement(
        self,
        query: bytes,
        params: Sequence[object],
        resolve: Callable[[psycopg.OperationalError], Awaitable[object]],
        wake: Sequence[str] = (),
    ) -> tuple[tuple[Any, ...] | None, bool]:
        """Run one single-statement write (an append, a KV put or delete): its row (the
        write's result - claimed log id, new revision - fence epoch and liveness; a
        NULL result when the write's condition refused it, ``(None, None, None)`` when
        no row came back; ``()`` for a serialization failure), or None for a lost
        acknowledgement that `resolve` proved committed; and whether it was retried.

        The statement is its own transaction, run at the server's default isolation;
        under a stricter one than READ COMMITTED a race is a serialization failure
        (nothing was written: the caller re-reads the tip, and claims again while it has
        not moved). A connection failure at any moment may have come after the commit:
        it is resolved by re-reading. A connection that was already broken when taken
        from the pool (the resolution found nothing) is replaced once; the retry is
        another compare-and-swap (or -append) at the same revision, so at most one of
        the two can land, and whichever does holds our bytes (a delete is idempotent).

        With ``wake`` channels (a write inside `waking`) the statement runs in an
        explicit transaction that also ``NOTIFY``s them if the statement wrote (its
        result is not NULL), so the wake-up is delivered when, and only if, it commits.
        """
        for attempt in (1, 2):
            conn: Conn | None = None
            try:
                async with self.connection() as conn:
                    if wake:
                        row = await self._statement_waking(conn, query, params, wake)
                    else:
                        row = await queries.write_one(conn, query, params)
                return (None, None, None) if row is None else row, attempt == 2
            except psycopg.errors.SerializationFailure:
                # Only under a stricter default isolation than READ COMMITTED (a
                # statement has no BEGIN to set its own): a concurrent writer moved the
                # log's or the lease's row. Nothing was written; the caller re-reads.
                return (), attempt == 2
            except psycopg.OperationalError as exc:
                broken = conn is not None and conn.broken
                try:
                    await self._resolve(exc, resolve)
                except psycopg.OperationalError as unresolved:
                    if unresolved is not exc or attempt == 2 or not broken:
                        raise
                    continue  # nothing of ours is there: retry on a fresh connection
                return None, attempt == 2
        raise AssertionError("unreachable")


def fenced_result(row: tuple[Any, ...], fence: Fence | None) -> Any:
    """The write's result from a single-statement write's row (None for ``()``, a
    serialization failure); `FencedWriteError` if the fence refused the write."""
    if not row:
        return None
    result, epoch, live = row
    if fence is not None and (epoch != fence.epoch or not live):
        current = 0 if epoch is None else int(epoch)
        raise refused(FencedWriteError(fence.lease, fence.epoch, current, bool(live)))
    return result


async def _configure(conn: Conn) -> None:
    # Client-side only: psycopg then starts transactions with
    # BEGIN ISOLATION LEVEL READ COMMITTED, whatever the server's default is.
    await conn.set_isolation_level(psycopg.IsolationLevel.READ_COMMITTED)
    arrays.register(conn)


def wake_name(schema: str, channel: str) -> str:
    """The PostgreSQL channel of our wake-up ``channel`` in ``schema`` (stores on other
    schemas of the database are not woken): ``<schema>.<channel>`` when it fits
    PostgreSQL's 63-byte identifiers, else the schema and a digest of the channel."""
    name = f"{schema}.{channel}"
    if len(name) <= 63:
        return name
    digest = hashlib.blake2b(channel.encode(), digest_size=10).hexdigest()
    return f"{schema[:42]}.{digest}"


def prefix_bounds(prefix: str) -> tuple[str, str] | None:
    """The half-open key range holding exactly the names that start with ``prefix``.

    Names are ASCII below 0x7f, so ``prefix + "\\x7f"`` bounds them in byte order; a
    prefix that is not ASCII, or holds a NUL (which text values cannot), matches no name.
    """
    if not isinstance(prefix, str):
        raise TypeError(f"prefix must be a str, not {type(prefix).__name__}")
    if not prefix.isascii() or "\0" in prefix:
        return None
    return prefix, prefix + "\x7f"
