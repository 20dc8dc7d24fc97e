"""Conformance: fenced writes land only while their lease grant is current.

Every write of the contract takes ``fence=Fence(lease, epoch)``; the backend checks the
grant inside the write's own transaction. A released, expired or taken-over grant is a
`FencedWriteError` and nothing is written - on every backend alike.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import pytest

from flowledger.storage import (
    BlobNotFoundError,
    ConflictError,
    Fence,
    FencedWriteError,
    InvalidNameError,
    InvalidValueError,
    KeyNotFoundError,
    KVDelete,
    KVPut,
    Store,
    current_fence,
    fence_arg,
    fencing,
)

from ._procs import LoopThread
from .test_leases import open_in, peer_store

Write = Callable[[Fence], Awaitable[object]]


def writes(store: Store) -> dict[str, Write]:
    """One of each fenced write, each on names of its own."""
    return {
        "kv create": lambda f: store.kv.put("w/created", b"v", expected=0, fence=f),
        "kv update": lambda f: store.kv.put("w/existing", b"new", expected=1, fence=f),
        "kv delete": lambda f: store.kv.delete("w/existing", fence=f),
        "kv batch": lambda f: store.kv.write_many(
            [KVPut("w/created", b"v", 0), KVDelete("w/existing")], fence=f
        ),
        "blob put": lambda f: store.blobs.put("w/blob", b"b", fence=f),
        "blob delete": lambda f: store.blobs.delete("w/old-blob", fence=f),
        "ledger append": lambda f: store.ledger.append(
            "w/log", [b"r"], expected=1, attachments={}, fence=f
        ),
    }


async def seed(store: Store) -> None:
    await store.kv.put("w/existing", b"old", expected=0)
    await store.blobs.put("w/old-blob", b"old")
    await store.ledger.append("w/log", [b"first"], expected=0)


async def assert_nothing_written(store: Store) -> None:
    with pytest.raises(KeyNotFoundError):
        await store.kv.get("w/created")
    assert (await store.kv.get("w/existing")).value == b"old"
    with pytest.raises(BlobNotFoundError):
        await store.blobs.get("w/blob")
    assert await store.blobs.get("w/old-blob") == b"old"
    assert await store.ledger.tip("w/log") == 1


async def test_writes_with_the_current_grant_land(store: Store) -> None:
    await seed(store)
    lease = await store.leases.acquire("owner", ttl=10)
    assert lease.fence == Fence("owner", lease.epoch)
    operations = writes(store)
    for name in ("kv create", "kv update", "blob put", "blob delete", "ledger append"):
        await operations[name](lease.fence)
    assert (await store.kv.get("w/created")).value == b"v"
    assert (await store.kv.get("w/existing")).value == b"new"
    assert await store.blobs.get("w/blob") == b"b"
    with pytest.raises(BlobNotFoundError):
        await store.blobs.get("w/old-blob")
    assert await store.ledger.tip("w/log") == 2
    await operations["kv delete"](lease.fence)
    with pytest.raises(KeyNotFoundError):
        await store.kv.get("w/existing")
    await lease.release()


async def test_writes_after_release_are_refused(store: Store) -> None:
    await seed(store)
    lease = await store.leases.acquire("owner", ttl=10)
    await lease.release()
    for name, write in writes(store).items():
        with pytest.raises(FencedWriteError) as caught:
            await write(lease.fence)
        error = caught.value
        assert (error.lease, error.epoch, error.current, error.held) == (
            "owner",
            lease.epoch,
            lease.epoch,
            False,
        ), name
        assert "no longer held at epoch" in str(error)
    await assert_nothing_written(store)


async def test_writes_of_an_older_grant_are_refused(store: Store, store_url: str) -> None:
    """After a takeover (by this store or another process's), the old grant's writes fail
    and the new grant's land."""
    await seed(store)
    old = await store.leases.acquire("owner", ttl=10)
    await old.release()
    async with peer_store(store, store_url) as other:
        new = await other.leases.acquire("owner", ttl=10)
        for write in writes(store).values():
            with pytest.raises(FencedWriteError) as caught:
                await write(old.fence)
            assert (caught.value.current, caught.value.held) == (new.epoch, True)
        await assert_nothing_written(store)
        await writes(store)["ledger append"](new.fence)
        assert await store.ledger.tip("w/log") == 2
        await new.release()


async def test_writes_after_expiry_are_refused_even_without_a_takeover(store: Store) -> None:
    """A grant whose TTL ran out (its holder stalled; nobody else took the name) fences
    too: the stalled holder's first write fails."""
    await seed(store)
    backend = store.leases._backend
    epoch = await backend.try_acquire("owner", "holder", 0.05)
    await asyncio.sleep(0.15)
    for write in writes(store).values():
        with pytest.raises(FencedWriteError) as caught:
            await write(Fence("owner", epoch))
        assert (caught.value.current, caught.value.held) == (epoch, False)
    await assert_nothing_written(store)


async def test_a_stalled_holders_first_write_fails(store: Store, store_url: str) -> None:
    """A holder whose event loop stalls past its TTL while another holder takes the name:
    when it wakes, its fenced append fails, whether or not it has noticed the loss yet."""
    await seed(store)
    thread = LoopThread()
    try:
        stalled = await open_in(thread, store, store_url)
        lease = await thread.arun(stalled.leases.acquire("owner", ttl=0.2))
        thread.block(1.0)  # no renewal runs
        await asyncio.sleep(0.4)
        taker = await store.leases.acquire("owner", ttl=10)
        with pytest.raises(FencedWriteError):
            await thread.arun(
                stalled.ledger.append("w/log", [b"late"], expected=1, fence=lease.fence)
            )
        assert await store.ledger.tip("w/log") == 1
        await taker.release()
        if stalled is not store:
            await thread.arun(stalled.close())
    finally:
        thread.close()


async def test_an_unknown_lease_fences_everything(store: Store) -> None:
    await seed(store)
    for write in writes(store).values():
        with pytest.raises(FencedWriteError) as caught:
            await write(Fence("never/granted", 1))
        assert (caught.value.current, caught.value.held) == (0, False)
    await assert_nothing_written(store)


async def test_the_fence_is_checked_before_the_compare_and_swap(store: Store) -> None:
    """A stale fence is refused as such even when the write would also conflict."""
    await seed(store)
    with pytest.raises(FencedWriteError):
        await store.kv.put("w/existing", b"x", expected=7, fence=Fence("nobody", 1))
    lease = await store.leases.acquire("owner", ttl=10)
    with pytest.raises(ConflictError):
        await store.kv.put("w/existing", b"x", expected=7, fence=lease.fence)
    await lease.release()


@pytest.mark.parametrize(
    ("fence", "error"),
    [
        (("owner", 1), InvalidValueError),
        (Fence("Owner", 1), InvalidNameError),
        (Fence("owner", 0), InvalidValueError),
        (Fence("owner", True), InvalidValueError),  # type: ignore[arg-type]
        (Fence("owner", "1"), InvalidValueError),  # type: ignore[arg-type]
    ],
)
async def test_a_bad_fence_is_rejected_before_anything(
    store: Store, fence: object, error: type[Exception]
) -> None:
    await seed(store)
    for write in writes(store).values():
        with pytest.raises(error):
            await write(fence)  # type: ignore[arg-type]
    await assert_nothing_written(store)


async def test_fencing_sets_the_current_fence_for_a_context() -> None:
    assert current_fence() is None and fence_arg() == {}
    outer, inner = Fence("a", 1), Fence("b", 2)
    with fencing(outer):
        assert fence_arg() == {"fence": outer}

        async def child() -> Fence | None:
            return current_fence()

        assert await asyncio.ensure_future(child()) == outer  # tasks inherit it
        with fencing(inner):
            assert current_fence() == inner
        with fencing(None):
            assert fence_arg() == {}
        assert current_fence() == outer
    assert current_fence() is None


async def test_a_refusal_of_the_current_fence_is_reported_first(store: Store) -> None:
    """Inside `fencing(fence, on_refused=...)`, a backend that refuses a write carrying that
    fence calls ``on_refused`` before it raises; refusals of other fences, and refusals
    outside the context, are not reported."""
    await seed(store)
    lease = await store.leases.acquire("owner", ttl=10)
    await lease.release()
    reported: list[FencedWriteError] = []
    raised: list[FencedWriteError] = []

    def on_refused(error: FencedWriteError) -> None:
        assert not raised  # before the write raises
        reported.append(error)

    with fencing(lease.fence, on_refused=on_refused):
        assert fence_arg() == {"fence": lease.fence}
        with pytest.raises(FencedWriteError) as caught:
            await store.ledger.append("w/log", [b"r"], expected=1, **fence_arg())
        raised.append(caught.value)
        with pytest.raises(FencedWriteError):
            await store.kv.put("w/created", b"v", expected=0, fence=Fence("other", 1))
    assert reported == raised
    with pytest.raises(FencedWriteError):
        await store.kv.put("w/created", b"v", expected=0, fence=lease.fence)
    assert reported == raised
    await assert_nothing_written(store)
