"""PostgreSQL wake-ups: NOTIFY rides in the write's transaction, the listener's own
session connection and its reconnection, ``listen_url``, and a transaction-mode PgBouncer
in front (the documented ``?prepare=off`` set-up).

No assertion bounds a time: ``HANG`` deadlines only catch hangs."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from urllib.parse import quote

import pytest

from flowledger.storage import KVPut, Store, UnsupportedURLError, open_store, waking
from flowledger.storage.postgres.url import parse_postgres_url
from flowledger.storage.postgres.wakeups import PostgresListener
from flowledger.storage.store import redact_url

from .._pgbouncer import pgbouncer_url
from .._postgres import drop_schema, new_schema, postgres_url, require_postgres, with_options

pytest.importorskip("psycopg")

HANG = 30.0


async def _live(listener: object) -> None:
    async with asyncio.timeout(HANG):
        while True:
            if getattr(listener, "live", False):
                return
            await asyncio.sleep(0.01)


async def _quiet(store: Store, listener: PostgresListener) -> bool:
    """Whether ``listener`` got nothing: checked after a probe wake-up sent later has
    arrived (notifications are delivered in commit order)."""
    probe = await store.wakeups.listen(["probe"])
    try:
        await _live(probe)
        await probe.wait(0)
        await store.wakeups.notify("probe")
        assert await probe.wait(HANG)
    finally:
        await probe.close()
    return not await listener.wait(0)


async def test_a_rolled_back_transaction_sends_no_wake_up() -> None:
    """The NOTIFY is sent inside the transaction: rolled back, it is never delivered."""
    with postgres_url() as url:
        async with open_store(url) as store:
            listener = await store.wakeups.listen(["work"])
            assert isinstance(listener, PostgresListener)
            await _live(listener)
            await listener.wait(0)
            db = store.kv._db  # type: ignore[attr-defined]

            class Abort(Exception):
                pass

            with pytest.raises(Abort):
                async with db.connection() as conn, conn.transaction():
                    await db.notify(conn, ["work"])
                    raise Abort
            assert await _quiet(store, listener)
            async with db.connection() as conn, conn.transaction():
                await db.notify(conn, ["work"])
            assert await listener.wait(HANG)


async def test_the_listener_uses_a_session_connection_of_its_own() -> None:
    with postgres_url() as url:
        async with open_store(url) as store:
            listener = await store.wakeups.listen(["work"])
            assert isinstance(listener, PostgresListener)
            await _live(listener)
            db = store.kv._db  # type: ignore[attr-defined]
            async with db.connection() as conn:
                pooled = conn.info.backend_pid
                row = await (
                    await conn.execute("SELECT count(*) FROM pg_listening_channels()")
                ).fetchone()
            assert listener.backend_pid not in (None, pooled)
            assert row == (0,)  # nothing listens on a pooled connection


async def test_a_killed_listener_reconnects() -> None:
    with postgres_url() as url:
        async with open_store(url) as store:
            listener = await store.wakeups.listen(["work"])
            assert isinstance(listener, PostgresListener)
            await _live(listener)
            await listener.wait(0)
            pid = listener.backend_pid
            db = store.kv._db  # type: ignore[attr-defined]
            async with db.connection() as conn:
                await conn.execute("SELECT pg_terminate_backend(%s)", (pid,))
            assert await listener.wait(HANG)  # the loss itself wakes: look now

            async def back() -> bool:
                return listener.live and listener.backend_pid not in (None, pid)

            async with asyncio.timeout(HANG):
                while True:
                    if await back():
                        break
                    await asyncio.sleep(0.01)
            await listener.wait(0)
            with waking("work"):
                await store.kv.put("a/key", b"1", expected=0)
            assert await listener.wait(HANG)
            assert listener.connects == 2


def test_listen_url_is_checked_and_masked() -> None:
    base = "postgresql://u:pw@127.0.0.1:5432/db"
    direct = "postgresql://u:secret@10.0.0.1:5432/db"
    settings = parse_postgres_url(f"{base}?listen_url={quote(direct, safe='')}")
    assert settings.listen == direct
    assert "listen_url" not in settings.conninfo
    assert parse_postgres_url(base).listen == parse_postgres_url(base).conninfo
    off = parse_postgres_url(f"{base}?listen_url=off")
    assert off.listen is None and off.listen_off == "listen_url=off"
    pooled = parse_postgres_url(f"{base}?prepare=off")
    assert pooled.listen is None and "transaction-mode pooler" in pooled.listen_off
    for bad in ("mysql://x/y", "postgresql://u:secret@h/db?nosuchkeyword=1", "on"):
        with pytest.raises(UnsupportedURLError, match="listen_url") as caught:
            parse_postgres_url(f"{base}?listen_url={quote(bad, safe='')}")
        assert "secret" not in str(caught.value)
    shown = redact_url(f"{base}?listen_url={quote(direct, safe='')}")
    assert "secret" not in shown and "listen_url=***" in shown


async def test_behind_pgbouncer_without_listen_url_waiters_poll(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Transaction pooling cannot keep a LISTEN: with only the pooled URL there are no
    wake-ups (a warning says why and what to do), and the store still works."""
    schema = new_schema()
    try:
        with pgbouncer_url(tmp_path) as pooled:
            url = with_options(pooled, schema=schema, prepare="off")
            async with open_store(url) as store:
                with caplog.at_level(logging.WARNING):
                    listener = await store.wakeups.listen(["work"])
                assert not listener.live
                assert "listen_url" in caplog.text
                with waking("work"):
                    await store.kv.put("a/key", b"1", expected=0)
                assert not await listener.wait(0)
                assert "none" in store.wakeups.delivery
    finally:
        drop_schema(schema)


async def test_behind_pgbouncer_with_a_direct_listen_url(tmp_path: Path) -> None:
    """Writes go through the transaction-mode pooler (their NOTIFY in their transaction);
    the listener connects straight to PostgreSQL through ``listen_url``."""
    direct = require_postgres()
    schema = new_schema()
    try:
        with pgbouncer_url(tmp_path) as pooled:
            url = with_options(pooled, schema=schema, prepare="off", listen_url=direct)
            async with open_store(url) as store, open_store(url) as other:
                listener = await other.wakeups.listen(["work"])
                assert isinstance(listener, PostgresListener)
                await _live(listener)
                await listener.wait(0)
                with waking("work"):
                    await store.kv.write_many([KVPut("a/key", b"1", expected=0)])
                assert await listener.wait(HANG)
                with waking("work"):
                    await store.kv.put("a/key", b"2", expected=1)
                assert await listener.wait(HANG)
                await store.wakeups.notify("work")
                assert await listener.wait(HANG)
                with waking("work"), pytest.raises(Exception, match="a/key"):
                    await store.kv.put("a/key", b"3", expected=1)  # refused: no wake-up
                assert await _quiet(store, listener)
    finally:
        drop_schema(schema)


async def test_listeners_share_one_connection_and_join_it_later() -> None:
    """However many listeners a store has (a front door per session, an owner per session,
    a worker), they share one session connection; one added while it is serving joins
    it (LISTEN on the running connection) and is woken like the first."""
    with postgres_url() as url:
        async with open_store(url) as store:
            first = await store.wakeups.listen(["work"])
            assert isinstance(first, PostgresListener)
            await _live(first)
            later = await store.wakeups.listen(["started.x"])
            assert isinstance(later, PostgresListener)
            await _live(later)
            assert later.backend_pid == first.backend_pid is not None
            assert later.connects == 1
            await later.wait(0)
            await first.wait(0)
            await store.wakeups.notify("started.x")
            assert await later.wait(HANG)
            assert await _quiet(store, first)
            await later.close()
            await store.wakeups.notify("work")
            assert await first.wait(HANG)
