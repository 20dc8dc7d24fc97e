"""Conformance across OS processes: lease exclusivity and takeover after a killed holder."""

from __future__ import annotations

import asyncio
import itertools
import time

import pytest

from flowledger.storage import LeaseHeldError, open_store

from ._procs import Child, shares_state

pytestmark = pytest.mark.slow


@pytest.fixture
def url(store_url: str) -> str:
    if not shares_state(store_url):
        pytest.skip("memory:// is private to one process; there is nothing to share across them")
    return store_url


async def test_lease_held_by_another_process_is_refused(url: str) -> None:
    """A lease held by a child process refuses the parent until the child releases it."""
    child = Child("hold", url, "job", "5")
    try:
        held = await child.aread()
        async with open_store(url) as store:
            for _ in range(3):
                with pytest.raises(LeaseHeldError) as caught:
                    await store.leases.acquire("job", ttl=5)
                assert caught.value.holder_epoch == held["epoch"]
            child.send("release")
            assert await child.aread() == {"released": True, "lost": "released"}
            lease = await store.leases.acquire("job", ttl=5)
            assert lease.epoch > held["epoch"]
            await lease.release()
        assert await asyncio.to_thread(child.proc.wait, 10) == 0
    finally:
        child.close()


async def test_contending_processes_never_overlap(url: str) -> None:
    """Two processes repeatedly acquire/hold/release one name: grants never overlap in time."""
    children = [Child("contend", url, "job", "1.5") for _ in range(2)]
    try:
        for child in children:
            assert await child.aread() == {"ready": True}
        for child in children:
            child.send("go")
        grants: list[tuple[float, float, int, int]] = []
        for who, child in enumerate(children):
            while "done" not in (message := await child.aread()):
                assert message["lost"] is False
                grants.append((message["start"], message["end"], message["epoch"], who))
        for who in range(len(children)):
            assert sum(1 for g in grants if g[3] == who) >= 3, f"process {who} starved: {grants}"
        grants.sort()
        for (_s1, end1, epoch1, _w1), (start2, _e2, epoch2, _w2) in itertools.pairwise(grants):
            assert end1 <= start2, f"overlapping grants: {grants}"
            assert epoch1 < epoch2, f"epochs out of time order: {grants}"
        assert len({g[2] for g in grants}) == len(grants)
    finally:
        for child in children:
            child.close()


async def test_takeover_after_holder_is_killed(url: str) -> None:
    """After SIGKILL of the holder, acquire fails until its TTL runs out, then succeeds."""
    ttl = 1.0
    child = Child("hold", url, "job", str(ttl))
    try:
        held = await child.aread()
        async with open_store(url) as store:
            with pytest.raises(LeaseHeldError):
                await store.leases.acquire("job", ttl=5)
            await asyncio.to_thread(child.kill)
            killed = time.monotonic()
            while True:
                try:
                    lease = await store.leases.acquire("job", ttl=5)
                    break
                except LeaseHeldError as exc:
                    assert exc.holder_epoch == held["epoch"]
                    assert time.monotonic() - killed < ttl + 60, "the dead holder kept the lease"
                    await asyncio.sleep(0.02)
            elapsed = time.monotonic() - killed
            # The child renewed at most ttl/3 before it died, so its grant outlives it by >= 2ttl/3.
            assert elapsed >= ttl / 2, f"granted {elapsed:.2f}s after the kill, before the TTL"
            assert lease.epoch > held["epoch"]
            await lease.release()
    finally:
        child.close()
