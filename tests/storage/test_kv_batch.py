"""Conformance: ``KV.write_many``, many puts and deletes in one transaction."""

from __future__ import annotations

import pytest

from flowledger.storage import (
    MAX_KV_BATCH_BYTES,
    MAX_KV_VALUE_BYTES,
    MAX_KV_WRITES,
    BatchKV,
    ConflictError,
    Entry,
    InvalidNameError,
    InvalidValueError,
    KeyNotFoundError,
    KVDelete,
    KVPut,
    Store,
    ValueTooLargeError,
)


async def snapshot(store: Store) -> dict[str, Entry]:
    return {key: await store.kv.get(key) for key in await store.kv.keys()}


async def test_every_backend_batches(store: Store) -> None:
    assert isinstance(store.kv, BatchKV)


async def test_a_batch_creates_updates_and_deletes_and_returns_revisions(store: Store) -> None:
    first = await store.kv.put("b/update", b"old", expected=0)
    await store.kv.put("b/delete", b"gone", expected=0)
    revisions = await store.kv.write_many(
        [
            KVPut("b/create", b"new", 0),
            KVPut("b/update", b"newer", first),
            KVDelete("b/delete"),
            KVDelete("b/never-there"),  # idempotent, like delete
        ]
    )
    assert revisions[2:] == [0, 0]
    assert await store.kv.get("b/create") == Entry(b"new", revisions[0])
    assert await store.kv.get("b/update") == Entry(b"newer", revisions[1])
    assert revisions[1] > first
    with pytest.raises(KeyNotFoundError):
        await store.kv.get("b/delete")
    # A deleted key can be created again, by a batch too.
    again = await store.kv.write_many([KVPut("b/delete", b"back", 0)])
    assert await store.kv.get("b/delete") == Entry(b"back", again[0])


async def test_an_empty_batch_writes_nothing(store: Store) -> None:
    assert await store.kv.write_many([]) == []
    assert await store.kv.keys() == []


@pytest.mark.parametrize("position", ["first", "last"])
async def test_one_conflict_refuses_the_whole_batch(store: Store, position: str) -> None:
    await store.kv.put("c/present", b"v", expected=0)
    await store.kv.put("c/victim", b"keep", expected=0)
    good = [KVDelete("c/victim"), KVPut("c/new", b"n", 0)]
    bad = KVPut("c/present", b"x", 0)  # a create of a present key
    batch = [bad, *good] if position == "first" else [*good, bad]
    before = await snapshot(store)
    with pytest.raises(ConflictError) as caught:
        await store.kv.write_many(batch)
    assert (caught.value.key, caught.value.expected) == ("c/present", 0)
    assert await snapshot(store) == before
    stale = [KVPut("c/new", b"n", 0), KVPut("c/victim", b"x", 7)]  # a stale update
    with pytest.raises(ConflictError):
        await store.kv.write_many(stale)
    assert await snapshot(store) == before


@pytest.mark.parametrize(
    ("writes", "error"),
    [
        ("not a list", InvalidValueError),
        ([("k", b"v", 0)], InvalidValueError),
        ([KVPut("k", "text", 0)], InvalidValueError),  # type: ignore[arg-type]
        ([KVPut("k", b"v", -1)], ValueError),
        ([KVPut("k", b"v", True)], InvalidValueError),
        ([KVPut("Bad Name", b"v", 0)], InvalidNameError),
        ([KVDelete("../up")], InvalidNameError),
        ([KVPut("k", b"v", 0), KVDelete("k")], ValueError),  # one key twice
        ([KVPut("k", b"x" * (MAX_KV_VALUE_BYTES + 1), 0)], ValueTooLargeError),
        ([KVDelete(f"k/{i}") for i in range(MAX_KV_WRITES + 1)], ValueError),
        (
            [KVPut(f"k/{i}", b"x" * MAX_KV_VALUE_BYTES, 0) for i in range(17)],
            ValueTooLargeError,
        ),
    ],
)
async def test_bad_batches_are_refused_before_anything_is_written(
    store: Store, writes: object, error: type[Exception]
) -> None:
    assert 17 * MAX_KV_VALUE_BYTES > MAX_KV_BATCH_BYTES
    await store.kv.put("keep", b"v", expected=0)
    before = await snapshot(store)
    with pytest.raises(error):
        await store.kv.write_many(writes)  # type: ignore[arg-type]
    assert await snapshot(store) == before


async def test_the_largest_batch_lands(store: Store) -> None:
    keys = [f"m/{i:04d}" for i in range(MAX_KV_WRITES)]
    await store.kv.write_many([KVPut(k, b"v", 0) for k in keys])
    assert await store.kv.keys("m/") == keys
    await store.kv.write_many([KVDelete(k) for k in keys])
    assert await store.kv.keys("m/") == []
