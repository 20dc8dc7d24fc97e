"""Conformance: the storage name grammar, and that every primitive enforces it."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import pytest

from flowledger.storage import (
    MAX_NAME_BYTES,
    AttachmentNotFoundError,
    BlobNotFoundError,
    InvalidNameError,
    KeyNotFoundError,
    Store,
    digest_of,
    validate_name,
)

VALID = [
    "a",
    "0",
    "z9",
    "a/b",
    "a.b",
    "a-b",
    "a_b",
    "a..b",
    "a/b.",
    "0/1/2/3",
    "runs/r-1/checkpoints/00000001",
    "x" * MAX_NAME_BYTES,
    "a/" * 255 + "bc",  # exactly 512 bytes, 256 segments
]

# (name, rule) for every rule of the grammar.
INVALID = [
    ("", "empty"),
    ("x" * (MAX_NAME_BYTES + 1), "too long"),
    ("a/" * 256 + "b", "too long"),
    ("é" * 257, "too long"),  # 257 characters, 514 UTF-8 bytes
    ("ab" + "é" * 256, "too long"),  # 258 characters but 514 bytes
    ("/", "empty segment"),
    ("/a", "empty segment"),
    ("a/", "empty segment"),
    ("a//b", "empty segment"),
    ("a/b/", "empty segment"),
    (".", "bad first byte"),
    ("..", "bad first byte"),
    ("a/..", "bad first byte"),
    ("a/./b", "bad first byte"),
    ("../a", "bad first byte"),
    ("_a", "bad first byte"),
    ("-a", "bad first byte"),
    (".hidden", "bad first byte"),
    ("A", "bad first byte"),
    ("a/Bc", "bad first byte"),
    (" a", "bad first byte"),
    ("aB", "illegal byte"),
    ("abC", "illegal byte"),
    ("a b", "illegal byte"),
    ("a:b", "illegal byte"),
    ("a\\b", "illegal byte"),
    ("a\x00", "illegal byte"),
    ("a\n", "illegal byte"),
    ("a%", "illegal byte"),
    ("a*", "illegal byte"),
    ("aé", "illegal byte"),  # short multi-byte name: the byte is illegal, not the length
    ("é", "illegal byte"),
    ("a\u200b", "illegal byte"),
]


@pytest.mark.parametrize("name", VALID)
def test_valid_names_are_returned_unchanged(name: str) -> None:
    """validate_name returns a valid name itself."""
    assert validate_name(name) is name


@pytest.mark.parametrize(("name", "rule"), INVALID)
def test_invalid_names_name_the_rule(name: str, rule: str) -> None:
    """Each grammar violation raises InvalidNameError carrying the name and the broken rule."""
    with pytest.raises(InvalidNameError) as caught:
        validate_name(name)
    assert caught.value.name == name
    assert caught.value.rule == rule
    assert isinstance(caught.value, ValueError)


@pytest.mark.parametrize("name", [b"a", None, 1, ["a"]])
def test_non_string_names_are_rejected(name: object) -> None:
    """A name that is not a str is an InvalidNameError (rule 'illegal byte'), not a crash."""
    with pytest.raises(InvalidNameError) as caught:
        validate_name(name)
    assert caught.value.rule == "illegal byte"


class _PosingName(str):
    """An invalid name that hashes and compares like a valid one."""

    def __hash__(self) -> int:
        return hash("posed/as")

    def __eq__(self, other: object) -> bool:
        return True


def test_a_name_validated_before_is_still_checked_by_type() -> None:
    """Names that passed are remembered, but only a plain str is taken from memory: a str
    subclass posing as a remembered name is checked by the grammar (and rejected)."""
    assert validate_name("posed/as") == "posed/as"
    assert validate_name("posed/as") == "posed/as"  # remembered
    with pytest.raises(InvalidNameError) as caught:
        validate_name(_PosingName("Not/Valid"))
    assert caught.value.rule == "bad first byte"


def test_remembered_names_are_bounded() -> None:
    """Many distinct valid names do not grow the memory of validated names without bound,
    and each is still accepted (and invalid ones still rejected) after it was emptied."""
    from flowledger.storage import names

    for i in range(names._SEEN_MAX * 2 + 10):
        assert validate_name(f"many/{i}") == f"many/{i}"
        assert len(names._SEEN) <= names._SEEN_MAX
    assert validate_name("many/0") == "many/0"
    with pytest.raises(InvalidNameError):
        validate_name("Many/0")


def test_length_limit_counts_utf8_bytes() -> None:
    """Non-ASCII names are measured in UTF-8 bytes: 512 bytes is 'illegal byte', 514 'too long'."""
    with pytest.raises(InvalidNameError) as caught:
        validate_name("é" * 256)
    assert caught.value.rule == "illegal byte"
    with pytest.raises(InvalidNameError) as caught:
        validate_name("a" + "é" * 256)
    assert caught.value.rule == "too long"


Op = Callable[[Store, str], Awaitable[object]]
ATTACHMENT = b"attachment of a rejected append"

OPS: dict[str, Op] = {
    "kv.get": lambda s, n: s.kv.get(n),
    "kv.put": lambda s, n: s.kv.put(n, b"value", expected=0),
    "kv.put-update": lambda s, n: s.kv.put(n, b"value", expected=1),
    "kv.delete": lambda s, n: s.kv.delete(n),
    "blobs.put": lambda s, n: s.blobs.put(n, b"data"),
    "blobs.get": lambda s, n: s.blobs.get(n),
    "blobs.delete": lambda s, n: s.blobs.delete(n),
    "ledger.append": lambda s, n: s.ledger.append(
        n, [b"r1", b"r2"], expected=0, attachments={digest_of(ATTACHMENT): ATTACHMENT}
    ),
    "ledger.read": lambda s, n: s.ledger.read(n),
    "ledger.tip": lambda s, n: s.ledger.tip(n),
    "leases.acquire": lambda s, n: s.leases.acquire(n, ttl=5),
}

# One or more names per rule; the uppercase ones check that nothing is silently lower-cased.
BAD_FOR_OPS = ["", "A", "Runs/a", "a/", "/a", "a//b", "..", "_x", "a b", "é", "x" * 513]


@pytest.mark.parametrize("op", sorted(OPS))
async def test_every_operation_validates_names(store: Store, op: str) -> None:
    """Every named operation rejects bad names with InvalidNameError and writes nothing."""
    for name in BAD_FOR_OPS:
        with pytest.raises(InvalidNameError) as caught:
            await OPS[op](store, name)
        assert caught.value.name == name
    assert await store.kv.keys() == []
    assert await store.blobs.list() == []
    assert await store.ledger.names() == []
    with pytest.raises(AttachmentNotFoundError):
        await store.ledger.attachments([digest_of(ATTACHMENT)])
    with pytest.raises(KeyNotFoundError):
        await store.kv.get("runs/a")
    with pytest.raises(BlobNotFoundError):
        await store.blobs.get("a")
    lease = await store.leases.acquire("a", ttl=5)  # the lowercase twin of "A" is free
    await lease.release()


@pytest.mark.parametrize("name", VALID)
async def test_valid_names_work_everywhere(store: Store, name: str) -> None:
    """Every valid name (including edge lengths and '..' inside a segment) is usable in all four."""
    await store.kv.put(name, b"v", expected=0)
    assert (await store.kv.get(name)).value == b"v"
    await store.blobs.put(name, b"b")
    assert await store.blobs.get(name) == b"b"
    assert await store.ledger.append(name, [b"r"], expected=0) == 1
    assert await store.ledger.tip(name) == 1
    lease = await store.leases.acquire(name, ttl=5)
    await lease.release()
    assert await store.kv.keys() == [name]
    assert await store.blobs.list() == [name]
    assert await store.ledger.names() == [name]


@pytest.mark.parametrize(
    "prefix", ["A", "/", "a//", "%", "_", "*", "?", "[a]", "é", " ", "..", "\x00"]
)
async def test_prefixes_are_not_validated(store: Store, prefix: str) -> None:
    """keys/list/names accept any string prefix, even one no valid name could start with."""
    await store.kv.put("a", b"v", expected=0)
    await store.blobs.put("a", b"b")
    await store.ledger.append("a", [b"r"], expected=0)
    assert await store.kv.keys(prefix) == []
    assert await store.blobs.list(prefix) == []
    assert await store.ledger.names(prefix) == []
