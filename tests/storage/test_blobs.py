"""Conformance: Blobs, immutable bytes under names."""

from __future__ import annotations

import pytest

from flowledger.storage import (
    MAX_BLOB_BYTES,
    BlobConflictError,
    BlobNotFoundError,
    Blobs,
    InvalidValueError,
    StorageError,
    Store,
    ValueTooLargeError,
    digest_of,
)


async def test_blobs_satisfies_protocol(store: Store) -> None:
    """store.blobs is a Blobs."""
    assert isinstance(store.blobs, Blobs)


@pytest.mark.parametrize("data", [b"", b"\x00", bytes(range(256)) * 3, b"hello world"])
async def test_put_then_get(store: Store, data: bytes) -> None:
    """get returns exactly the bytes put (as bytes), including empty and binary data."""
    await store.blobs.put("b", data)
    got = await store.blobs.get("b")
    assert got == data
    assert type(got) is bytes


async def test_every_get_returns_the_same_bytes(store: Store) -> None:
    """Repeated gets each return bytes equal to what was put."""
    data = bytes(range(256)) * 64
    await store.blobs.put("b", data)
    first = await store.blobs.get("b")
    second = await store.blobs.get("b")
    assert first == second == data
    assert type(first) is bytes
    assert type(second) is bytes


async def test_get_absent_blob(store: Store) -> None:
    """get of an absent blob raises BlobNotFoundError carrying the key (also a KeyError)."""
    with pytest.raises(BlobNotFoundError) as caught:
        await store.blobs.get("no/such/blob")
    assert caught.value.key == "no/such/blob"
    assert isinstance(caught.value, KeyError)
    assert isinstance(caught.value, StorageError)


async def test_identical_put_is_a_no_op(store: Store) -> None:
    """Putting the same bytes again succeeds and changes nothing."""
    await store.blobs.put("b", b"same")
    await store.blobs.put("b", b"same")
    assert await store.blobs.get("b") == b"same"
    assert await store.blobs.list() == ["b"]


@pytest.mark.parametrize(
    ("original", "other"),
    [
        (b"abc", b"abd"),
        (b"abc", b"abcd"),
        (b"abcd", b"abc"),
        (b"", b"x"),
        (b"x", b""),
        (b"\x00", b"\x00\x00"),
    ],
)
async def test_different_put_conflicts_and_keeps_original(
    store: Store, original: bytes, other: bytes
) -> None:
    """Putting different bytes raises BlobConflictError(key); the original bytes stay."""
    await store.blobs.put("b", original)
    with pytest.raises(BlobConflictError) as caught:
        await store.blobs.put("b", other)
    assert caught.value.key == "b"
    assert await store.blobs.get("b") == original


async def test_delete_is_idempotent_and_allows_new_bytes(store: Store) -> None:
    """delete of present or absent blobs succeeds; afterwards get fails and any bytes can be put."""
    await store.blobs.delete("never")
    await store.blobs.put("b", b"one")
    await store.blobs.delete("b")
    await store.blobs.delete("b")
    with pytest.raises(BlobNotFoundError):
        await store.blobs.get("b")
    assert await store.blobs.list() == []
    await store.blobs.put("b", b"two")
    assert await store.blobs.get("b") == b"two"


async def test_list_sorted_and_prefix_filtered(store: Store) -> None:
    """list() is byte-order sorted and unique; list(prefix) is a plain string-prefix filter."""
    names = ["b", "a/b", "a", "a-b", "a.b", "a0", "a_b", "ab", "a/b/c", "b/a", "aa"]
    for name in names:
        await store.blobs.put(name, name.encode())
    await store.blobs.put("a", b"a")  # identical re-put does not duplicate
    everything = sorted(names, key=lambda n: n.encode())
    assert await store.blobs.list() == everything
    assert await store.blobs.list("") == everything
    assert await store.blobs.list("a") == everything[:-2]
    assert await store.blobs.list("a/") == ["a/b", "a/b/c"]
    assert await store.blobs.list("a/b") == ["a/b", "a/b/c"]
    assert await store.blobs.list("a_") == ["a_b"]
    assert await store.blobs.list("b") == ["b", "b/a"]
    for nothing in ["c", "A", "%", "a%", "*", "a?", "[a]", "ab/"]:
        assert await store.blobs.list(nothing) == [], nothing


async def test_name_and_its_extension_coexist(store: Store) -> None:
    """Blobs `a` and `a/b` are independent: both exist, and deleting one keeps the other."""
    await store.blobs.put("a", b"parent")
    await store.blobs.put("a/b", b"child")
    assert await store.blobs.get("a") == b"parent"
    assert await store.blobs.get("a/b") == b"child"
    await store.blobs.delete("a")
    assert await store.blobs.get("a/b") == b"child"
    assert await store.blobs.list() == ["a/b"]


async def test_blob_at_the_size_limit_is_accepted(store: Store) -> None:
    """A blob of exactly MAX_BLOB_BYTES is stored and read back intact."""
    data = bytes(range(256)) * (MAX_BLOB_BYTES // 256)
    assert len(data) == MAX_BLOB_BYTES
    await store.blobs.put("big", data)
    assert digest_of(await store.blobs.get("big")) == digest_of(data)


async def test_blob_over_the_size_limit_is_rejected(store: Store) -> None:
    """One byte over MAX_BLOB_BYTES raises ValueTooLargeError and writes nothing."""
    with pytest.raises(ValueTooLargeError) as caught:
        await store.blobs.put("big", bytes(MAX_BLOB_BYTES + 1))
    assert (caught.value.size, caught.value.limit) == (MAX_BLOB_BYTES + 1, MAX_BLOB_BYTES)
    assert await store.blobs.list() == []
    with pytest.raises(BlobNotFoundError):
        await store.blobs.get("big")


@pytest.mark.parametrize("data", ["text", bytearray(b"x"), memoryview(b"x"), None, 7])
async def test_data_must_be_bytes(store: Store, data: object) -> None:
    """Non-bytes data raises InvalidValueError (a TypeError) and writes nothing."""
    with pytest.raises(InvalidValueError) as caught:
        await store.blobs.put("b", data)  # type: ignore[arg-type]
    assert isinstance(caught.value, TypeError)
    assert await store.blobs.list() == []


async def test_primitives_have_separate_namespaces(store: Store) -> None:
    """One name used in KV, Blobs and Ledger names three independent things."""
    await store.kv.put("x", b"kv", expected=0)
    await store.blobs.put("x", b"blob")
    await store.ledger.append("x", [b"record"], expected=0, attachments={digest_of(b"a"): b"a"})
    assert (await store.kv.get("x")).value == b"kv"
    assert await store.blobs.get("x") == b"blob"
    assert [r.payload for r in await store.ledger.read("x")] == [b"record"]
    assert await store.blobs.list() == ["x"]  # attachments are not blobs
    await store.blobs.delete("x")
    assert (await store.kv.get("x")).value == b"kv"
    assert await store.ledger.tip("x") == 1
    await store.kv.delete("x")
    assert await store.ledger.names() == ["x"]
