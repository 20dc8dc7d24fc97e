"""The wake-up contract (`storage.wakeups`) on every backend.

No test here bounds a time: a wake-up is proved by `Listener.wait` returning True with a
long timeout (a hang deadline), its absence by `wait(0)` (what was delivered before that
call) after a round trip that would have carried it.
"""

from __future__ import annotations

import asyncio

import pytest

from flowledger.storage import (
    ConflictError,
    FencedWriteError,
    InvalidChannelError,
    KVPut,
    Store,
    open_store,
    waking,
)

HANG: float = 30.0  # seconds: only catches a hang


async def _settle(store: Store, listener_channel: str) -> None:
    """Make sure anything already sent has arrived: a wake-up on a fresh channel is
    delivered after it (PostgreSQL delivers notifications in commit order)."""
    probe = await store.wakeups.listen([listener_channel])
    try:
        await store.wakeups.notify(listener_channel)
        assert await probe.wait(HANG)
    finally:
        await probe.close()


async def _live(listener: object) -> None:
    for _ in range(3000):
        if getattr(listener, "live", False):
            return
        await asyncio.sleep(0.01)
    raise AssertionError("the listener never became live")


async def test_notify_wakes_listeners_of_that_channel_only(store: Store) -> None:
    async with (
        await store.wakeups.listen(["work", "due"]) as both,
        await store.wakeups.listen(["other"]) as other,
    ):
        await _live(both)
        await _live(other)
        await both.wait(0)  # a (re)connection wakes once: start from quiet
        await other.wait(0)
        await store.wakeups.notify("due")
        assert await both.wait(HANG)
        await _settle(store, "probe")
        assert not await other.wait(0)
        assert not await both.wait(0)  # one wake-up, one True


async def test_a_wake_up_while_nobody_waits_is_kept(store: Store) -> None:
    async with await store.wakeups.listen(["work"]) as listener:
        await _live(listener)
        await listener.wait(0)
        await store.wakeups.notify("work")
        await store.wakeups.notify("work")
        await _settle(store, "probe")
        assert await listener.wait(0)  # kept, and the two collapsed into one
        assert not await listener.wait(0)


async def test_a_write_inside_waking_wakes_on_commit(store: Store) -> None:
    async with await store.wakeups.listen(["work"]) as listener:
        await _live(listener)
        await listener.wait(0)
        with waking("work"):
            await store.kv.put("a/key", b"1", expected=0)
        assert await listener.wait(HANG)
        with waking("work"):
            await store.kv.write_many([KVPut("a/other", b"2", expected=0)])
        assert await listener.wait(HANG)
        await store.kv.put("a/key", b"3", expected=1)  # outside waking: no wake-up
        await _settle(store, "probe")
        assert not await listener.wait(0)


async def test_a_refused_write_wakes_nobody(store: Store) -> None:
    """A compare-and-swap or fence that refuses the write: nothing committed, so no
    wake-up (on PostgreSQL the NOTIFY is rolled back with the transaction)."""
    await store.kv.put("a/key", b"1", expected=0)
    lease = await store.leases.acquire("lease/x", ttl=30)
    stale = lease.fence
    await lease.release()
    await store.leases.acquire("lease/x", ttl=30)
    async with await store.wakeups.listen(["work"]) as listener:
        await _live(listener)
        await listener.wait(0)
        with waking("work"):
            with pytest.raises(ConflictError):
                await store.kv.put("a/key", b"2", expected=0)
            with pytest.raises(ConflictError):
                await store.kv.write_many(
                    [KVPut("a/new", b"2", expected=0), KVPut("a/key", b"2", expected=0)]
                )
            with pytest.raises(FencedWriteError):
                await store.kv.put("a/fenced", b"2", expected=0, fence=stale)
        await _settle(store, "probe")
        assert not await listener.wait(0)
        assert (await store.kv.get("a/key")).value == b"1"


@pytest.mark.parametrize(
    "channel", ["", "Upper", "-lead", "a" * 49, "sp ace", "slash/x", "ü", 7, None]
)
async def test_bad_channels_are_typed_errors_and_send_nothing(
    store: Store, channel: object
) -> None:
    async with await store.wakeups.listen(["work"]) as listener:
        await _live(listener)
        await listener.wait(0)
        with pytest.raises(InvalidChannelError, match="wake-up channel"):
            await store.wakeups.notify("work", channel)  # type: ignore[arg-type]
        with pytest.raises(InvalidChannelError):
            await store.wakeups.listen([channel])  # type: ignore[list-item]
        with pytest.raises(InvalidChannelError), waking("work", channel):  # type: ignore[arg-type]
            await store.kv.put("a/key", b"1", expected=0)
        with pytest.raises(InvalidChannelError):
            await store.wakeups.listen("work")  # a bare string, not a list of channels
        await _settle(store, "probe")
        assert not await listener.wait(0)
        assert await store.kv.keys("a/") == []


async def test_another_store_on_the_same_database_is_woken(store_url: str) -> None:
    """memory:// stores are private; an SQLite file is shared in-process; PostgreSQL
    across connections (and processes)."""
    async with (
        open_store(store_url) as first,
        open_store(store_url) as second,
        await second.wakeups.listen(["work"]) as listener,
    ):
        await _live(listener)
        await listener.wait(0)
        with waking("work"):
            await first.kv.put("a/key", b"1", expected=0)
        if store_url.startswith("memory"):
            await _settle(second, "probe")
            assert not await listener.wait(0)
        else:
            assert await listener.wait(HANG)


async def test_closing_the_store_closes_its_listeners(store_url: str) -> None:
    store = await open_store(store_url)
    listener = await store.wakeups.listen(["work"])
    await _live(listener)
    await store.close()
    assert not listener.live
    await listener.wait(0)  # closed: still returns
