"""PostgreSQL wake-ups: ``NOTIFY`` on the writes that create work, ``LISTEN`` to wait.

A write inside `waking` sends its ``NOTIFY`` in its own transaction (see `Database`), so
PostgreSQL delivers it when, and only if, the write commits; `notify` sends one at once
on a pooled connection. Channels are per schema (`wake_name`).

Every listener of a store shares one *session* connection of the store's own, outside
the pool (a pooled connection is shared and autocommit, and a transaction-mode pooler
hands the server connection to someone else after each statement, so ``LISTEN`` on it
would hear nothing): one connection per store however many sessions its workers, owners
and front doors listen for. It connects to the store's ``listen_url`` (default: the
store's own URL; none when ``prepare=off`` names a transaction pooler - see `url`) on
the first `listen`. A new listener's channels are added with ``LISTEN`` on that
connection (the connection's loop is interrupted by a ``NOTIFY`` on a control channel
of its own); the listener is `live` from then on, and `listen` returns once it is (or
after ``connect_timeout`` seconds if the connection cannot be made by then).

When the connection is lost (the server restarted, ``pg_terminate_backend``, a network
cut) no listener is `live`, each is woken once (a wake-up may have been missed: look
now), and the connection is re-made with backoff (0.1 s doubling up to 5 s) until it is
back; meanwhile waiters poll. Reconnected, it listens again and wakes every listener
once more, for the same reason.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import Iterable
from typing import Final

import psycopg
from psycopg import sql

from ..store import redact_url
from ..wakeups import Listener, Wakeups, check_channels
from .database import Database, wake_name
from .queries import Conn

__all__ = ["PostgresListener", "PostgresWakeups"]

log = logging.getLogger(__name__)

FIRST_RETRY: Final = 0.1  # seconds before the first reconnection attempt
LAST_RETRY: Final = 5.0  # the longest wait between reconnection attempts

_Conn = psycopg.AsyncConnection[tuple[object, ...]]


class PostgresWakeups(Wakeups):
    across_processes = True  # NOTIFY reaches every LISTEN (with none, no waiter is live)

    def __init__(self, db: Database) -> None:
        self._db = db
        settings = db.settings
        self._conninfo = settings.listen
        self._off = settings.listen_off
        self._warned = False
        self._subscribers: dict[str, set[PostgresListener]] = {}
        self._listening: set[str] = set()  # LISTENed on the current connection
        self._control = wake_name(settings.schema, f"control.{uuid.uuid4().hex[:16]}")
        self._resync = asyncio.Event()  # set when the channels to listen to changed
        self._synced = asyncio.Event()  # set (and replaced) after every resync
        self._task: asyncio.Task[None] | None = None
        self._conn: _Conn | None = None
        self.connects = 0  # successful (re)connections, for tests and status
        self.delivery = (
            f"LISTEN/NOTIFY through {redact_url(settings.listen)}"
            if settings.listen is not None
            else f"none ({settings.listen_off}): waiters poll"
        )

    @property
    def backend_pid(self) -> int | None:
        """The server process of the listening connection while there is one."""
        conn = self._conn
        return None if conn is None or conn.closed else conn.info.backend_pid

    def listening(self, names: Iterable[str]) -> bool:
        return self._conn is not None and all(n in self._listening for n in names)

    async def notify(self, *channels: str) -> None:
        checked = check_channels(channels)

        async def body(conn: Conn) -> None:
            await self._db.notify(conn, checked)

        # Autocommit: delivered at once. A broken pooled connection is replaced once.
        await self._db.read(body)

    async def listen(self, channels: Iterable[str]) -> Listener:
        checked = check_channels(channels)
        self._db.check_open()
        if self._conninfo is None:
            if not self._warned:
                self._warned = True
                log.warning("postgres store: no wake-ups, waiters poll: %s", self._off)
            return _Deaf(checked)
        names = tuple(wake_name(self._db.settings.schema, c) for c in checked)
        listener = PostgresListener(checked, names, self)
        for name in names:
            self._subscribers.setdefault(name, set()).add(listener)
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run(self._conninfo))
        elif self._conn is not None and not self.listening(names):
            self._resync.set()
            with contextlib.suppress(Exception):  # interrupt the wait for notifications
                await self._ping()
        # Return once it listens, so that what its caller reads next is either already
        # there or announced to it - unless the connection cannot be made that soon (the
        # listener goes live later; its waiter polls meanwhile).
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(self._db.settings.connect_timeout):
                while not listener.live:
                    await self._synced.wait()
        return listener

    def _unsubscribe(self, listener: PostgresListener) -> None:
        for name in listener.names:
            group = self._subscribers.get(name)
            if group is not None:
                group.discard(listener)
                if not group:
                    del self._subscribers[name]  # UNLISTENed at the next resync

    async def _ping(self) -> None:
        async def body(conn: _Conn) -> None:
            await conn.execute(b"SELECT pg_notify(%s, '')", (self._control,))

        await self._db.read(body)

    async def _sync(self, conn: _Conn) -> None:
        """LISTEN to every subscribed channel, UNLISTEN the rest; wake the listeners
        that were not live (they may have missed something)."""
        self._resync.clear()
        wanted = set(self._subscribers)
        for name in sorted(wanted - self._listening):
            await conn.execute(sql.SQL("LISTEN {}").format(sql.Identifier(name)))
            self._listening.add(name)
        for name in sorted(self._listening - wanted):
            await conn.execute(sql.SQL("UNLISTEN {}").format(sql.Identifier(name)))
            self._listening.discard(name)
        for listener in self._all():
            if not listener.was_live and listener.live:
                listener.was_live = True
                listener.wake()
        synced, self._synced = self._synced, asyncio.Event()
        synced.set()

    def _all(self) -> set[PostgresListener]:
        return set().union(*self._subscribers.values()) if self._subscribers else set()

    async def _serve(self, conn: _Conn) -> None:
        await conn.execute(sql.SQL("LISTEN {}").format(sql.Identifier(self._control)))
        self._listening = set()
        self._conn = conn
        self.connects += 1
        while True:
            await self._sync(conn)
            while not self._resync.is_set():
                # One notification at a time: the generator ends (releasing the
                # connection) after each, so a resync can run LISTEN between two.
                async for notification in conn.notifies(stop_after=1):
                    for listener in list(self._subscribers.get(notification.channel, ())):
                        listener.wake()

    async def _run(self, conninfo: str) -> None:
        delay = FIRST_RETRY
        while True:
            try:
                conn = await psycopg.AsyncConnection.connect(
                    conninfo, autocommit=True, prepare_threshold=None
                )
            except (psycopg.Error, OSError) as exc:
                log.warning("wake-up listener: cannot connect (retry in %gs): %s", delay, exc)
            else:
                try:
                    async with conn:
                        delay = FIRST_RETRY
                        await self._serve(conn)
                except Exception as exc:  # whatever it was, listen again (waiters poll)
                    log.warning("wake-up listener: connection lost (retry in %gs): %s", delay, exc)
                finally:
                    self._conn = None
                    self._listening = set()
                    for listener in self._all():
                        if listener.was_live:
                            listener.was_live = False
                            listener.wake()  # wake-ups may be missed from now on: look now
            await asyncio.sleep(delay)
            delay = min(delay * 2, LAST_RETRY)

    async def close(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        for listener in self._all():
            await listener.close()


class _Deaf(Listener):
    """A listener that never hears anything (wake-ups are off): its waiter polls."""

    @property
    def live(self) -> bool:
        return False


class PostgresListener(Listener):
    """Listens through its store's shared connection (see the module documentation)."""

    def __init__(
        self, channels: tuple[str, ...], names: tuple[str, ...], hub: PostgresWakeups
    ) -> None:
        super().__init__(channels)
        self.names = names
        self._hub = hub
        self._open = True
        self.was_live = False  # live as of the hub's last look (it wakes on changes)

    @property
    def live(self) -> bool:
        return self._open and self._hub.listening(self.names)

    @property
    def backend_pid(self) -> int | None:
        return self._hub.backend_pid

    @property
    def connects(self) -> int:
        return self._hub.connects

    async def close(self) -> None:
        if self._open:
            self._open = False
            self._hub._unsubscribe(self)
        await super().close()
