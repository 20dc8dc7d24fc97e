"""PostgreSQL wake-ups: ``NOTIFY`` on the writes that create work, ``LISTEN`` to wait.

A write inside `waking` sends its ``NOTIFY`` in its own transaction (see `Database`), so
PostgreSQL delivers it when, and only if, the write commits; `notify` sends one at once
on a pooled connection. Channels are per schema (`wake_name`).

A `Listener` holds a *session* connection of its own, outside the pool (a pooled
connection is shared and autocommit, and a transaction-mode pooler hands the server
connection to someone else after each statement, so ``LISTEN`` on it would hear
nothing). It connects to the store's ``listen_url`` (default: the store's own URL;
none when ``prepare=off`` names a transaction pooler - see `url`). When that
connection is lost (the server restarted, ``pg_terminate_backend``, a network cut)
the listener is not `live`, wakes its waiter once (a wake-up may have been missed:
look now), and reconnects with backoff (0.1 s doubling up to 5 s) until it is back;
meanwhile its waiter polls. Reconnected, it wakes its waiter once more, for the
same reason.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Iterable
from typing import Final

import psycopg
from psycopg import sql

from ..store import redact_url
from ..wakeups import Listener, Wakeups, check_channels
from .database import Database, wake_name

__all__ = ["PostgresListener", "PostgresWakeups"]

log = logging.getLogger(__name__)

FIRST_RETRY: Final = 0.1  # seconds before the first reconnection attempt
LAST_RETRY: Final = 5.0  # the longest wait between reconnection attempts


class PostgresWakeups(Wakeups):
    def __init__(self, db: Database) -> None:
        self._db = db
        settings = db.settings
        self._conninfo = settings.listen
        self._off = settings.listen_off
        self._warned = False
        self._open: set[PostgresListener] = set()
        self.delivery = (
            f"LISTEN/NOTIFY through {redact_url(settings.listen)}"
            if settings.listen is not None
            else f"none ({settings.listen_off}): waiters poll"
        )

    async def notify(self, *channels: str) -> None:
        checked = check_channels(channels)

        async def body(conn: psycopg.AsyncConnection[tuple[object, ...]]) -> None:
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
        names = [wake_name(self._db.settings.schema, c) for c in checked]
        listener = PostgresListener(checked, self._conninfo, names, self._open)
        listener.start()
        return listener

    async def close(self) -> None:
        for listener in list(self._open):
            await listener.close()


class _Deaf(Listener):
    """A listener that never hears anything (wake-ups are off): its waiter polls."""

    @property
    def live(self) -> bool:
        return False


class PostgresListener(Listener):
    """``LISTEN`` on a session connection of its own (see the module documentation)."""

    def __init__(
        self,
        channels: tuple[str, ...],
        conninfo: str,
        names: list[str],
        open_set: set[PostgresListener],
    ) -> None:
        super().__init__(channels)
        self._conninfo = conninfo
        self._names = names
        self._open_set = open_set
        self._live = False
        self._task: asyncio.Task[None] | None = None
        self._conn: psycopg.AsyncConnection[tuple[object, ...]] | None = None
        self.connects = 0  # successful (re)connections, for tests and status

    @property
    def live(self) -> bool:
        return self._live

    @property
    def backend_pid(self) -> int | None:
        """The server process of the listening connection while there is one."""
        conn = self._conn
        return None if conn is None or conn.closed else conn.info.backend_pid

    def start(self) -> None:
        self._open_set.add(self)
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def _run(self) -> None:
        delay = FIRST_RETRY
        while True:
            try:
                conn = await psycopg.AsyncConnection.connect(
                    self._conninfo, autocommit=True, prepare_threshold=None
                )
            except (psycopg.Error, OSError) as exc:
                log.warning("wake-up listener: cannot connect (retry in %gs): %s", delay, exc)
            else:
                self._conn = conn
                try:
                    async with conn:
                        for name in self._names:
                            await conn.execute(sql.SQL("LISTEN {}").format(sql.Identifier(name)))
                        self._live = True
                        self.connects += 1
                        delay = FIRST_RETRY
                        self.wake()  # anything written while we were away: look now
                        async for _ in conn.notifies():
                            self.wake()
                except (psycopg.Error, OSError) as exc:
                    log.warning("wake-up listener: connection lost (retry in %gs): %s", delay, exc)
                finally:
                    self._conn = None
                    if self._live:
                        self._live = False
                        self.wake()  # wake-ups may be missed from now on: look now
            await asyncio.sleep(delay)
            delay = min(delay * 2, LAST_RETRY)

    async def close(self) -> None:
        self._open_set.discard(self)
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._live = False
        await super().close()
