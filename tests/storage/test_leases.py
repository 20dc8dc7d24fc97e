"""Conformance: leases, exclusive time-limited grants with strictly increasing epochs."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import pytest

from flowledger.storage import (
    FencedWriteError,
    InvalidNameError,
    Lease,
    LeaseHeldError,
    StorageError,
    Store,
    fence_arg,
    fencing,
    open_store,
)

from ._procs import LoopThread, shares_state


@contextlib.asynccontextmanager
async def peer_store(store: Store, url: str) -> AsyncIterator[Store]:
    """A second store over the same data (for memory://, the same store object)."""
    if not shares_state(url):
        yield store
        return
    async with open_store(url) as other:
        yield other


async def open_in(thread: LoopThread, store: Store, url: str) -> Store:
    """A store for use on ``thread``'s loop that shares ``store``'s data."""
    if not shares_state(url):
        return store  # the memory store is thread-safe and loop-agnostic

    async def opener() -> Store:
        return await open_store(url)

    return await thread.arun(opener())


async def test_lease_backend_semantics(store: Store) -> None:
    """The backend contract under `Leaser`, the same on every backend: grants, expiry,
    takeover, stale renewals and releases."""
    backend = store.leases._backend
    assert await backend.try_acquire("l", "h1", 10) == 1
    with pytest.raises(LeaseHeldError) as held:
        await backend.try_acquire("l", "h2", 10)
    assert held.value.holder_epoch == 1
    assert await backend.renew("l", 1, "h1", 0.05) == "renewed"  # now due in 50 ms
    await asyncio.sleep(0.1)
    assert await backend.renew("l", 1, "h1", 10) == "expired"
    assert await backend.try_acquire("l", "h2", 10) == 2  # free after expiry
    assert await backend.renew("l", 1, "h1", 10) == "taken over"
    await backend.release("l", 1, "h1")  # a stale release frees nothing
    with pytest.raises(LeaseHeldError):
        await backend.try_acquire("l", "h3", 10)
    await backend.release("l", 2, "h2")
    await backend.release("l", 2, "h2")
    assert await backend.renew("l", 2, "h2", 10) == "taken over"
    assert await backend.try_acquire("l", "h3", 10) == 3
    assert await backend.try_acquire("other", "h3", 10) == 1


async def test_acquire_grants_a_live_lease(store: Store) -> None:
    """acquire returns an unlost Lease with the name, a positive int epoch and the ttl."""
    lease = await store.leases.acquire("job", ttl=5)
    assert isinstance(lease, Lease)
    assert lease.name == "job"
    assert type(lease.epoch) is int
    assert lease.epoch > 0
    assert lease.ttl == 5.0
    assert not lease.lost
    assert lease.lost_reason is None
    await lease.release()


async def test_default_ttl_is_valid(store: Store) -> None:
    """acquire without a ttl uses a positive default."""
    lease = await store.leases.acquire("job")
    assert lease.ttl > 0
    await lease.release()


async def test_second_acquire_is_refused(store: Store, store_url: str) -> None:
    """While held, acquire (same store or a peer store) raises LeaseHeldError(name, epoch)."""
    lease = await store.leases.acquire("job", ttl=5)
    async with peer_store(store, store_url) as other:
        for leases in (store.leases, other.leases, store.leases):
            with pytest.raises(LeaseHeldError) as caught:
                await leases.acquire("job", ttl=5)
            assert (caught.value.name, caught.value.holder_epoch) == ("job", lease.epoch)
            assert isinstance(caught.value, StorageError)
    assert not lease.lost
    await lease.release()


async def test_names_are_independent(store: Store) -> None:
    """Different names, including `a` and `a/b`, are held at the same time."""
    leases = [await store.leases.acquire(n, ttl=5) for n in ("a", "a/b", "b", "ab")]
    assert not any(lease.lost for lease in leases)
    for lease in leases:
        with pytest.raises(LeaseHeldError):
            await store.leases.acquire(lease.name, ttl=5)
    for lease in leases:
        await lease.release()


async def test_epochs_strictly_increase_across_grants(store: Store, store_url: str) -> None:
    """Each grant of a name (from either store) has a greater epoch than every earlier one."""
    epochs: list[int] = []
    async with peer_store(store, store_url) as other:
        for leases in (store.leases, other.leases) * 4:
            lease = await leases.acquire("job", ttl=5)
            epochs.append(lease.epoch)
            await lease.release()
    assert epochs == sorted(set(epochs))


async def test_release_frees_the_name(store: Store, store_url: str) -> None:
    """After release another holder (same or peer store) is granted at once."""
    first = await store.leases.acquire("job", ttl=30)
    await first.release()
    async with peer_store(store, store_url) as other:
        second = await other.leases.acquire("job", ttl=30)
        assert second.epoch > first.epoch
        await second.release()


async def test_release_fires_lost_exactly_once(store: Store) -> None:
    """release marks the lease lost ('released') once; callbacks run once; release is idempotent."""
    lease = await store.leases.acquire("job", ttl=5)
    calls: list[str] = []
    lease.on_lost(calls.append)
    lease.on_lost(calls.append)
    waiter = asyncio.create_task(lease.wait_lost())
    await lease.release()
    await lease.release()
    assert await asyncio.wait_for(waiter, 60) == "released"  # the deadline catches a hang
    assert await lease.wait_lost() == "released"
    assert lease.lost
    assert lease.lost_reason == "released"
    assert calls == ["released", "released"]
    late: list[str] = []
    lease.on_lost(late.append)  # registered after the loss: called at once
    assert late == ["released"]
    await lease.release()
    assert calls == ["released", "released"]
    assert late == ["released"]


async def test_failing_callback_does_not_stop_others(store: Store) -> None:
    """A lost callback that raises does not stop release or the other callbacks."""
    lease = await store.leases.acquire("job", ttl=5)
    calls: list[str] = []

    def boom(_reason: str) -> None:
        raise RuntimeError("callback failure")

    lease.on_lost(boom)
    lease.on_lost(calls.append)
    await lease.release()
    assert calls == ["released"]
    again = await store.leases.acquire("job", ttl=5)
    await again.release()


async def test_release_cannot_free_a_later_holder(store: Store, store_url: str) -> None:
    """Releasing an old lease object again after a new grant leaves the new holder holding."""
    old = await store.leases.acquire("job", ttl=5)
    await old.release()
    async with peer_store(store, store_url) as other:
        new = await other.leases.acquire("job", ttl=5)
        await old.release()
        with pytest.raises(LeaseHeldError) as caught:
            await store.leases.acquire("job", ttl=5)
        assert caught.value.holder_epoch == new.epoch
        assert not new.lost
        await new.release()


async def test_renewal_keeps_the_lease_past_its_ttl(store: Store, store_url: str) -> None:
    """A held lease renews itself: after 3x its TTL it is still live and still exclusive.
    (A TTL of 1 s, renewed every third of it: a busy machine that delays a renewal by a
    few hundred ms must not fail the test.)"""
    ttl = 1.0
    lease = await store.leases.acquire("job", ttl=ttl)
    await asyncio.sleep(ttl * 3)
    assert not lease.lost
    async with peer_store(store, store_url) as other:
        with pytest.raises(LeaseHeldError) as caught:
            await other.leases.acquire("job", ttl=5)
    assert caught.value.holder_epoch == lease.epoch
    await lease.release()


async def test_stalled_holder_loses_the_lease_as_expired(store: Store, store_url: str) -> None:
    """A holder stalled past its TTL sees 'expired' once; then the name is granted anew."""
    ttl = 0.3
    thread = LoopThread()
    try:
        holder_store = await open_in(thread, store, store_url)
        old = await thread.arun(holder_store.leases.acquire("job", ttl=ttl))
        calls: list[str] = []
        old.on_lost(calls.append)
        thread.block(ttl * 2.5)  # no renewal can run; nobody else acquires meanwhile
        reason = await thread.arun(asyncio.wait_for(old.wait_lost(), 60))  # hang-only
        assert reason == "expired"
        assert old.lost_reason == "expired"
        new = await store.leases.acquire("job", ttl=5)
        assert new.epoch > old.epoch
        await thread.arun(old.release())  # must not free the new holder
        assert calls == ["expired"]
        with pytest.raises(LeaseHeldError) as caught:
            await store.leases.acquire("job", ttl=5)
        assert caught.value.holder_epoch == new.epoch
        await new.release()
        if holder_store is not store:
            await thread.arun(holder_store.close())
    finally:
        thread.close()


async def test_stalled_holder_is_taken_over_after_ttl(store: Store, store_url: str) -> None:
    """A stalled holder keeps the name until its TTL ends, then sees 'taken over' exactly once."""
    ttl = 0.4
    thread = LoopThread()
    try:
        holder_store = await open_in(thread, store, store_url)
        old = await thread.arun(holder_store.leases.acquire("job", ttl=ttl))
        calls: list[str] = []
        old.on_lost(calls.append)
        thread.block(ttl + 0.6)
        started = time.monotonic()
        with pytest.raises(LeaseHeldError) as caught:
            await store.leases.acquire("job", ttl=5)
        assert caught.value.holder_epoch == old.epoch
        while True:
            try:
                new = await store.leases.acquire("job", ttl=5)
                break
            except LeaseHeldError as exc:
                assert exc.holder_epoch == old.epoch
                assert time.monotonic() - started < ttl + 60, "lease never expired"
                await asyncio.sleep(0.01)
        elapsed = time.monotonic() - started
        # The last renewal was at most ttl/3 before the stall began.
        assert elapsed >= ttl / 2, f"granted {elapsed:.3f}s into a stall, before the TTL ran out"
        assert new.epoch > old.epoch
        reason = await thread.arun(asyncio.wait_for(old.wait_lost(), 60))  # hang-only
        assert reason == "taken over"
        await thread.arun(old.release())
        assert calls == ["taken over"]
        assert old.lost_reason == "taken over"
        with pytest.raises(LeaseHeldError) as caught:
            await store.leases.acquire("job", ttl=5)
        assert caught.value.holder_epoch == new.epoch
        assert not new.lost
        await new.release()
        if holder_store is not store:
            await thread.arun(holder_store.close())
    finally:
        thread.close()


async def test_a_refused_write_marks_the_lease_lost_before_any_renewal(
    store: Store, store_url: str
) -> None:
    """A holder whose grant ended unheard (its last renewal asked for 50 ms, as if it had
    stalled) and was granted to another learns it from its first fenced write: `refused`
    marks the lease lost as taken over at once, and a release afterwards stays a loss."""
    lease = await store.leases.acquire("job", ttl=3600)  # its renewer sleeps for 20 min
    calls: list[str] = []
    lease.on_lost(calls.append)
    backend = store.leases._backend
    assert await backend.renew("job", lease.epoch, lease._holder, 0.05) == "renewed"
    async with peer_store(store, store_url) as other:
        deadline = time.monotonic() + 60  # hang-only
        while True:
            try:
                taker = await other.leases.acquire("job", ttl=60)
                break
            except LeaseHeldError:
                assert time.monotonic() < deadline, "the 50 ms grant never expired"
                await asyncio.sleep(0.01)
        assert not lease.lost  # nothing has told the holder yet
        with fencing(lease.fence, on_refused=lease.refused), pytest.raises(FencedWriteError):
            await store.kv.put("job/out", b"v", expected=0, **fence_arg())
        assert lease.lost_reason == "taken over"
        await lease.release()
        assert calls == ["taken over"]
        assert lease.lost_reason == "taken over"
        assert not taker.lost  # the release freed nothing of the new grant
        with pytest.raises(LeaseHeldError):
            await store.leases.acquire("job", ttl=5)
        await taker.release()


async def test_close_marks_leases_lost(store_url: str) -> None:
    """Closing a store marks its live leases lost with reason 'closed', exactly once."""
    store = await open_store(store_url)
    done = await store.leases.acquire("done", ttl=5)
    await done.release()
    leases = [await store.leases.acquire(n, ttl=5) for n in ("a", "b/c")]
    calls: list[str] = []
    for lease in [done, *leases]:
        lease.on_lost(calls.append)
    assert calls == ["released"]
    await store.close()
    assert [lease.lost_reason for lease in leases] == ["closed", "closed"]
    assert [await lease.wait_lost() for lease in leases] == ["closed", "closed"]
    assert done.lost_reason == "released"
    await store.close()  # idempotent
    assert calls == ["released", "closed", "closed"]


async def test_release_after_close_is_safe(store_url: str) -> None:
    """Lease.release after its store closed does not raise and keeps the reason 'closed'."""
    store = await open_store(store_url)
    lease = await store.leases.acquire("job", ttl=5)
    await store.close()
    await lease.release()
    assert lease.lost_reason == "closed"


async def test_close_frees_leases(store_url: str) -> None:
    """Closing a store frees its leases: a peer store is granted them at once."""
    if not shares_state(store_url):
        pytest.skip("memory:// stores share no state, so no other store can observe the release")
    async with open_store(store_url) as other:
        closing = await open_store(store_url)
        lease = await closing.leases.acquire("job", ttl=60)
        with pytest.raises(LeaseHeldError):
            await other.leases.acquire("job", ttl=5)
        await closing.close()
        new = await other.leases.acquire("job", ttl=5)
        assert new.epoch > lease.epoch
        await new.release()


@pytest.mark.parametrize(
    ("ttl", "error"),
    [
        (0, ValueError),
        (0.01, ValueError),
        (-1, ValueError),
        (3600.5, ValueError),
        (float("nan"), ValueError),
        (float("inf"), ValueError),
        ("5", TypeError),
        (True, TypeError),
        ([5], TypeError),
    ],
)
async def test_bad_ttl_is_rejected(store: Store, ttl: object, error: type[Exception]) -> None:
    """ttl must be a number of seconds in [0.05, 3600]; a rejected acquire grants nothing."""
    with pytest.raises(error):
        await store.leases.acquire("job", ttl=ttl)  # type: ignore[arg-type]
    lease = await store.leases.acquire("job", ttl=5)  # the name was not taken
    await lease.release()


@pytest.mark.parametrize("ttl", [0.05, 1, 3600])
async def test_ttl_bounds_are_inclusive(store: Store, ttl: float) -> None:
    """The smallest and largest TTLs (and ints) are accepted."""
    lease = await store.leases.acquire("job", ttl=ttl)
    assert lease.ttl == float(ttl)
    await lease.release()


async def test_bad_name_grants_nothing(store: Store) -> None:
    """acquire with an invalid name raises InvalidNameError."""
    with pytest.raises(InvalidNameError):
        await store.leases.acquire("Job", ttl=5)
    lease = await store.leases.acquire("job", ttl=5)
    await lease.release()


async def test_status_reads_a_lease_without_holding_it(store: Store, store_url: str) -> None:
    """`Leaser.status` (from this store or a peer): epoch 0 and free before any grant;
    the grant's epoch, held, and an expiry within the TTL while held; after release, free
    since the release; after a holder's TTL ran out, free since that expiry. The holder
    token never shows."""
    async with peer_store(store, store_url) as other:
        never = await other.leases.status("job")
        assert (never.epoch, never.held, never.until) == (0, False, None)

        before = datetime.now(UTC)
        lease = await store.leases.acquire("job", ttl=30)
        held = await other.leases.status("job")
        assert (held.epoch, held.held) == (lease.epoch, True)
        assert held.until is not None
        assert before < held.until <= datetime.now(UTC) + timedelta(seconds=31)
        assert not hasattr(held, "holder")

        await lease.release()
        released = await other.leases.status("job")
        assert (released.epoch, released.held) == (lease.epoch, False)
        assert released.until is not None
        assert before - timedelta(seconds=1) <= released.until < held.until

        backend = store.leases._backend
        epoch = await backend.try_acquire("job", "stalled", 0.05)
        await asyncio.sleep(0.1)
        expired = await other.leases.status("job")
        assert (expired.epoch, expired.held) == (epoch, False)
        assert expired.until is not None and expired.until <= datetime.now(UTC)
        assert (await other.leases.status("other")).epoch == 0  # names are independent


async def test_status_of_a_bad_name_is_refused(store: Store) -> None:
    with pytest.raises(InvalidNameError):
        await store.leases.status("Bad Name")


async def test_wait_proven_answers_at_once_while_renewals_prove_the_grant(
    store: Store, store_url: str
) -> None:
    """A held lease is proven at once; a holder stalled past its TTL while another holder
    took the name learns from `wait_proven` that it lost it (False), without acting."""
    lease = await store.leases.acquire("proven", ttl=5)
    assert await lease.wait_proven() is True
    await lease.release()
    assert await lease.wait_proven() is False
    thread = LoopThread()
    try:
        stalled = await open_in(thread, store, store_url)
        held = await thread.arun(stalled.leases.acquire("owner", ttl=0.2))
        thread.block(1.0)  # no renewal runs
        await asyncio.sleep(0.4)
        async with peer_store(store, store_url) as other:
            taker = await other.leases.acquire("owner", ttl=10)
            assert await thread.arun(held.wait_proven()) is False
            assert held.lost_reason == "taken over"
            await taker.release()
        if stalled is not store:
            await thread.arun(stalled.close())
    finally:
        thread.close()
