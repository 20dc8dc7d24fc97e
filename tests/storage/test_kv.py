"""Conformance: KV, per-key revision compare-and-swap."""

from __future__ import annotations

import asyncio
import itertools

import pytest

from flowledger.storage import (
    KV,
    MAX_KV_VALUE_BYTES,
    ConflictError,
    Entry,
    InvalidValueError,
    KeyNotFoundError,
    PagedKV,
    StorageError,
    Store,
    ValueTooLargeError,
    open_store,
    overwrite,
)

from ._procs import run_threads, shares_state


async def test_kv_satisfies_protocol(store: Store) -> None:
    """store.kv is a KV."""
    assert isinstance(store.kv, KV)


async def test_get_absent_key(store: Store) -> None:
    """get of an absent key raises KeyNotFoundError carrying the key (also a KeyError)."""
    with pytest.raises(KeyNotFoundError) as caught:
        await store.kv.get("missing/key")
    assert caught.value.key == "missing/key"
    assert isinstance(caught.value, KeyError)
    assert isinstance(caught.value, StorageError)


async def test_create_then_get(store: Store) -> None:
    """put(expected=0) creates the key and get returns exactly the bytes and that revision."""
    rev = await store.kv.put("k", b"hello", expected=0)
    assert isinstance(rev, int)
    assert rev > 0
    entry = await store.kv.get("k")
    assert entry == Entry(b"hello", rev)
    assert type(entry.value) is bytes
    assert type(entry.revision) is int


@pytest.mark.parametrize("value", [b"", b"\x00", bytes(range(256)), b"\x00" * 1000 + b"\x01"])
async def test_binary_values_round_trip(store: Store, value: bytes) -> None:
    """Any bytes, including empty and NUL-laden values, come back identical."""
    rev = await store.kv.put("k", value, expected=0)
    assert await store.kv.get("k") == Entry(value, rev)


async def test_create_only_conflicts_when_present(store: Store) -> None:
    """A create (expected=0) of a present key raises ConflictError(key, 0, actual); value kept."""
    rev = await store.kv.put("k", b"first", expected=0)
    with pytest.raises(ConflictError) as caught:
        await store.kv.put("k", b"second", expected=0)
    assert (caught.value.key, caught.value.expected, caught.value.actual) == ("k", 0, rev)
    assert await store.kv.get("k") == Entry(b"first", rev)


async def test_cas_update(store: Store) -> None:
    """put with the current revision replaces the value and returns a greater revision."""
    r1 = await store.kv.put("k", b"v1", expected=0)
    r2 = await store.kv.put("k", b"v2", expected=r1)
    assert r2 > r1
    assert await store.kv.get("k") == Entry(b"v2", r2)


async def test_stale_revision_conflicts(store: Store) -> None:
    """put with an older revision raises ConflictError(key, stale, current); value unchanged."""
    r1 = await store.kv.put("k", b"v1", expected=0)
    r2 = await store.kv.put("k", b"v2", expected=r1)
    with pytest.raises(ConflictError) as caught:
        await store.kv.put("k", b"v3", expected=r1)
    assert (caught.value.key, caught.value.expected, caught.value.actual) == ("k", r1, r2)
    assert await store.kv.get("k") == Entry(b"v2", r2)


async def test_future_revision_conflicts(store: Store) -> None:
    """put with a revision never issued raises ConflictError(key, future, current)."""
    r1 = await store.kv.put("k", b"v1", expected=0)
    future = r1 + 1000
    with pytest.raises(ConflictError) as caught:
        await store.kv.put("k", b"v2", expected=future)
    assert (caught.value.key, caught.value.expected, caught.value.actual) == ("k", future, r1)
    assert await store.kv.get("k") == Entry(b"v1", r1)
    assert await store.kv.put("k", b"v3", expected=r1) > r1


@pytest.mark.parametrize("expected", [1, 2, 10**9])
async def test_update_of_absent_key_conflicts(store: Store, expected: int) -> None:
    """put(expected=N>0) of an absent key raises ConflictError(key, N, 0) and creates nothing."""
    with pytest.raises(ConflictError) as caught:
        await store.kv.put("k", b"v", expected=expected)
    assert (caught.value.key, caught.value.expected, caught.value.actual) == ("k", expected, 0)
    assert await store.kv.keys() == []
    with pytest.raises(KeyNotFoundError):
        await store.kv.get("k")


async def test_revisions_strictly_increase(store: Store) -> None:
    """Every successful write of a key returns a revision greater than the last."""
    revs = [await store.kv.put("k", b"0", expected=0)]
    for i in range(1, 20):
        revs.append(await store.kv.put("k", str(i).encode(), expected=revs[-1]))
        assert (await store.kv.get("k")).revision == revs[-1]
    assert all(a < b for a, b in itertools.pairwise(revs))
    assert await store.kv.get("k") == Entry(b"19", revs[-1])


async def test_keys_have_independent_revisions(store: Store) -> None:
    """Writing one key does not change another key's revision."""
    ra = await store.kv.put("a", b"a", expected=0)
    rb = await store.kv.put("b", b"b", expected=0)
    await store.kv.put("b", b"b2", expected=rb)
    assert await store.kv.get("a") == Entry(b"a", ra)
    assert await store.kv.put("a", b"a2", expected=ra) > ra


async def test_delete_is_idempotent_and_allows_recreate(store: Store) -> None:
    """delete of present or absent keys succeeds; afterwards get fails and create succeeds."""
    await store.kv.delete("never")
    rev = await store.kv.put("k", b"v1", expected=0)
    await store.kv.put("k", b"v2", expected=rev)
    await store.kv.delete("k")
    await store.kv.delete("k")
    with pytest.raises(KeyNotFoundError):
        await store.kv.get("k")
    assert await store.kv.keys() == []
    new = await store.kv.put("k", b"again", expected=0)
    assert await store.kv.get("k") == Entry(b"again", new)
    assert await store.kv.put("k", b"again2", expected=new) > new


async def test_update_after_delete_conflicts(store: Store) -> None:
    """After a delete the key is absent: updating with its old revision conflicts (actual 0)."""
    rev = await store.kv.put("k", b"v1", expected=0)
    await store.kv.delete("k")
    with pytest.raises(ConflictError) as caught:
        await store.kv.put("k", b"v2", expected=rev)
    assert (caught.value.expected, caught.value.actual) == (rev, 0)
    assert await store.kv.keys() == []


async def test_delete_leaves_other_keys(store: Store) -> None:
    """delete removes only its key, not keys it is a prefix of."""
    for key in ["a", "a/b", "ab", "a/b/c"]:
        await store.kv.put(key, key.encode(), expected=0)
    await store.kv.delete("a/b")
    assert await store.kv.keys() == ["a", "a/b/c", "ab"]
    await store.kv.delete("a")
    assert await store.kv.keys() == ["a/b/c", "ab"]


async def test_keys_sorted_and_prefix_filtered(store: Store) -> None:
    """keys() is byte-order sorted and unique; keys(prefix) is a plain string-prefix filter."""
    names = ["b", "a/b", "a", "a-b", "a.b", "a0", "a_b", "ab", "a/b/c", "a/c", "b/a", "aa"]
    for name in names:
        await store.kv.put(name, b"x", expected=0)
    await store.kv.put("a", b"y", expected=(await store.kv.get("a")).revision)  # no duplicate
    everything = sorted(names, key=lambda n: n.encode())
    assert everything == [
        "a",
        "a-b",
        "a.b",
        "a/b",
        "a/b/c",
        "a/c",
        "a0",
        "a_b",
        "aa",
        "ab",
        "b",
        "b/a",
    ]
    assert await store.kv.keys() == everything
    assert await store.kv.keys("") == everything
    assert await store.kv.keys("a") == everything[:-2]
    assert await store.kv.keys("a/") == ["a/b", "a/b/c", "a/c"]
    assert await store.kv.keys("a/b") == ["a/b", "a/b/c"]
    assert await store.kv.keys("a/b/") == ["a/b/c"]
    assert await store.kv.keys("a_") == ["a_b"]
    assert await store.kv.keys("a.") == ["a.b"]
    assert await store.kv.keys("b") == ["b", "b/a"]
    assert await store.kv.keys("c") == []
    assert await store.kv.keys("ab/") == []
    assert await store.kv.keys("A") == []
    assert await store.kv.keys("%") == []
    assert await store.kv.keys("a%") == []
    assert await store.kv.keys("a*") == []
    assert await store.kv.keys("a?") == []
    assert await store.kv.keys("[a]") == []


async def test_keys_page_walks_keys_in_both_directions(store: Store) -> None:
    """keys_page is keys(prefix) cut into pages by an exclusive keyset cursor."""
    assert isinstance(store.kv, PagedKV)
    names = ["a", "a/b", "a/b/c", "a/c", "a0", "aa", "b", "b/a"]
    for name in reversed(names):
        await store.kv.put(name, b"x", expected=0)
    assert await store.kv.keys_page("a", limit=3) == ["a", "a/b", "a/b/c"]
    assert await store.kv.keys_page("a", start="a/b/c", limit=3) == ["a/c", "a0", "aa"]
    assert await store.kv.keys_page("a", start="aa", limit=3) == []
    assert await store.kv.keys_page("a", limit=3, descending=True) == ["aa", "a0", "a/c"]
    assert await store.kv.keys_page("a", start="a/c", limit=3, descending=True) == [
        "a/b/c",
        "a/b",
        "a",
    ]
    assert await store.kv.keys_page("a", start="a", limit=3, descending=True) == []
    # The cursor need not be a key, nor lie under the prefix.
    assert await store.kv.keys_page("a/", start="a/bz", limit=10) == ["a/c"]
    assert await store.kv.keys_page("a/", start="zz", limit=10, descending=True) == [
        "a/c",
        "a/b/c",
        "a/b",
    ]
    assert await store.kv.keys_page("a/", start="0", limit=10) == ["a/b", "a/b/c", "a/c"]
    assert await store.kv.keys_page("", limit=100) == await store.kv.keys()
    assert await store.kv.keys_page("c", limit=5) == []
    assert await store.kv.keys_page("a%", limit=5) == []
    assert await store.kv.keys_page("\u00e9", limit=5) == []
    # Walking page by page sees every key once, in order, whatever the page size.
    for size in (1, 2, 5):
        seen: list[str] = []
        page = await store.kv.keys_page("", limit=size)
        while page:
            seen.extend(page)
            page = await store.kv.keys_page("", start=page[-1], limit=size)
        assert seen == names
        back: list[str] = []
        page = await store.kv.keys_page("", limit=size, descending=True)
        while page:
            back.extend(page)
            page = await store.kv.keys_page("", start=page[-1], limit=size, descending=True)
        assert back == names[::-1]


@pytest.mark.parametrize("limit", [0, -1])
async def test_keys_page_limit_must_be_positive(store: Store, limit: int) -> None:
    assert isinstance(store.kv, PagedKV)
    with pytest.raises(ValueError, match="at least 1"):
        await store.kv.keys_page("", limit=limit)


async def test_name_and_its_extension_coexist(store: Store) -> None:
    """`a` and `a/b` are independent keys: both can exist, be updated and deleted separately."""
    ra = await store.kv.put("a", b"parent", expected=0)
    rab = await store.kv.put("a/b", b"child", expected=0)
    assert await store.kv.get("a") == Entry(b"parent", ra)
    assert await store.kv.get("a/b") == Entry(b"child", rab)
    ra2 = await store.kv.put("a", b"parent2", expected=ra)
    assert await store.kv.get("a/b") == Entry(b"child", rab)
    await store.kv.delete("a/b")
    assert await store.kv.get("a") == Entry(b"parent2", ra2)
    await store.kv.put("a/b", b"child2", expected=0)
    await store.kv.delete("a")
    assert (await store.kv.get("a/b")).value == b"child2"


async def test_value_at_the_size_limit_is_accepted(store: Store) -> None:
    """A value of exactly MAX_KV_VALUE_BYTES is stored and read back intact."""
    value = bytes(range(256)) * (MAX_KV_VALUE_BYTES // 256)
    assert len(value) == MAX_KV_VALUE_BYTES
    rev = await store.kv.put("big", value, expected=0)
    assert await store.kv.get("big") == Entry(value, rev)


async def test_value_over_the_size_limit_is_rejected(store: Store) -> None:
    """One byte over MAX_KV_VALUE_BYTES raises ValueTooLargeError and writes nothing."""
    too_big = b"x" * (MAX_KV_VALUE_BYTES + 1)
    with pytest.raises(ValueTooLargeError) as caught:
        await store.kv.put("big", too_big, expected=0)
    assert caught.value.size == MAX_KV_VALUE_BYTES + 1
    assert caught.value.limit == MAX_KV_VALUE_BYTES
    assert isinstance(caught.value, ValueError)
    assert await store.kv.keys() == []
    rev = await store.kv.put("big", b"small", expected=0)
    with pytest.raises(ValueTooLargeError):
        await store.kv.put("big", too_big, expected=rev)
    assert await store.kv.get("big") == Entry(b"small", rev)


@pytest.mark.parametrize("value", ["text", bytearray(b"x"), memoryview(b"x"), None, 1, [1]])
async def test_value_must_be_bytes(store: Store, value: object) -> None:
    """A non-bytes value raises InvalidValueError (a TypeError) and writes nothing."""
    with pytest.raises(InvalidValueError) as caught:
        await store.kv.put("k", value, expected=0)  # type: ignore[arg-type]
    assert isinstance(caught.value, TypeError)
    assert await store.kv.keys() == []


@pytest.mark.parametrize("expected", [True, False, 1.0, "1", None])
async def test_expected_must_be_an_int(store: Store, expected: object) -> None:
    """A bool/float/str/None expected revision raises InvalidValueError; nothing changes."""
    rev = await store.kv.put("k", b"v", expected=0)
    for key in ("k", "new"):
        with pytest.raises(InvalidValueError):
            await store.kv.put(key, b"w", expected=expected)  # type: ignore[arg-type]
    assert await store.kv.keys() == ["k"]
    assert await store.kv.get("k") == Entry(b"v", rev)


@pytest.mark.parametrize("expected", [-1, -(10**9)])
async def test_expected_must_not_be_negative(store: Store, expected: int) -> None:
    """A negative expected revision raises ValueError; nothing changes."""
    rev = await store.kv.put("k", b"v", expected=0)
    for key in ("k", "new"):
        with pytest.raises(ValueError):
            await store.kv.put(key, b"w", expected=expected)
    assert await store.kv.keys() == ["k"]
    assert await store.kv.get("k") == Entry(b"v", rev)


async def test_concurrent_creates_have_one_winner(store: Store) -> None:
    """Of many concurrent create-only puts of one key, exactly one succeeds."""
    results = await asyncio.gather(
        *(store.kv.put("k", str(i).encode(), expected=0) for i in range(10)),
        return_exceptions=True,
    )
    winners = [(i, r) for i, r in enumerate(results) if isinstance(r, int)]
    assert len(winners) == 1
    (index, rev), losers = winners[0], [r for r in results if not isinstance(r, int)]
    assert all(isinstance(e, ConflictError) and (e.expected, e.actual) == (0, rev) for e in losers)
    assert await store.kv.get("k") == Entry(str(index).encode(), rev)


THREADS = 4
INCREMENTS = 25


async def test_threaded_cas_increments_lose_no_update(store: Store, store_url: str) -> None:
    """Threads (own event loops) doing get+CAS increments with retry end at the exact count."""
    key = "counter"

    async def increment_many(kv: KV) -> list[tuple[int, int]]:
        done: list[tuple[int, int]] = []
        while len(done) < INCREMENTS:
            try:
                entry = await kv.get(key)
                current, expected = int(entry.value), entry.revision
            except KeyNotFoundError:
                current, expected = 0, 0
            try:
                rev = await kv.put(key, str(current + 1).encode(), expected=expected)
            except ConflictError:
                continue
            done.append((rev, current + 1))
        return done

    async def worker_main() -> list[tuple[int, int]]:
        if not shares_state(store_url):
            return await increment_many(store.kv)  # memory: the one store object is shared
        async with open_store(store_url) as own:
            return await increment_many(own.kv)

    per_thread = await asyncio.to_thread(
        run_threads, THREADS, lambda _i: asyncio.run(worker_main()), 60.0
    )
    writes = sorted(w for thread in per_thread for w in thread)
    total = THREADS * INCREMENTS
    assert len(writes) == total
    # Serialisable: ordered by revision, the written counter values are exactly 1..total.
    assert [value for _rev, value in writes] == list(range(1, total + 1))
    assert len({rev for rev, _value in writes}) == total
    entry = await store.kv.get(key)
    assert entry.value == str(total).encode()
    assert entry.revision == writes[-1][0]


async def test_overwrite_creates_replaces_and_lets_the_last_of_racing_writers_win(
    store: Store,
) -> None:
    """`overwrite` (operator settings): a create where the key is absent, a replace where
    it is present, and writers racing on one key all return, one of their values kept."""
    kv = store.kv
    await overwrite(kv, "settings/limit", b"1")
    assert (await kv.get("settings/limit")).value == b"1"
    await overwrite(kv, "settings/limit", b"2")
    assert (await kv.get("settings/limit")).value == b"2"
    values = [str(n).encode() for n in range(3, 13)]
    await asyncio.gather(*(overwrite(kv, "settings/limit", value) for value in values))
    assert (await kv.get("settings/limit")).value in values
