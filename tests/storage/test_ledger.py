"""Conformance: Ledger, append-only record logs with compare-and-append and attachments."""

from __future__ import annotations

import asyncio
import contextlib

import pytest

from flowledger.storage import (
    MAX_ATTACHMENT_BYTES,
    MAX_ATTACHMENTS_PER_APPEND,
    MAX_READ_LIMIT,
    MAX_RECORD_BYTES,
    MAX_RECORDS_PER_APPEND,
    AttachmentNotFoundError,
    InvalidValueError,
    Ledger,
    LedgerConflictError,
    Record,
    StorageError,
    Store,
    ValueTooLargeError,
    digest_of,
    open_store,
)

from ._procs import run_threads, shares_state


def att(*datas: bytes) -> dict[str, bytes]:
    return {digest_of(d): d for d in datas}


async def payloads(store: Store, name: str) -> list[bytes]:
    return [r.payload for r in await store.ledger.read(name, limit=MAX_READ_LIMIT)]


async def test_ledger_satisfies_protocol(store: Store) -> None:
    """store.ledger is a Ledger."""
    assert isinstance(store.ledger, Ledger)


def test_digest_of_is_lowercase_hex_sha256() -> None:
    """digest_of is the lowercase hex SHA-256 of the bytes."""
    assert digest_of(b"") == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
    assert digest_of(b"abc") == ("ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")


async def test_unknown_log_is_empty(store: Store) -> None:
    """A never-written log has tip 0, reads as empty and is not listed by names()."""
    assert await store.ledger.tip("nothing") == 0
    assert await store.ledger.read("nothing") == []
    assert await store.ledger.read("nothing", after=5) == []
    assert await store.ledger.names() == []


async def test_sequences_start_at_one_and_are_contiguous(store: Store) -> None:
    """Appends return the new tip; records get seqs 1, 2, 3, ... in append order."""
    assert await store.ledger.append("log", [b"a"], expected=0) == 1
    assert await store.ledger.append("log", [b"b", b"c", b"d"], expected=1) == 4
    assert await store.ledger.append("log", [b"e"], expected=4) == 5
    assert await store.ledger.tip("log") == 5
    records = await store.ledger.read("log")
    assert records == [Record(i + 1, p) for i, p in enumerate([b"a", b"b", b"c", b"d", b"e"])]
    assert all(type(r.payload) is bytes and type(r.seq) is int for r in records)


@pytest.mark.parametrize("payload", [b"", b"\x00", bytes(range(256)), b"\xff" * 300])
async def test_binary_records_round_trip(store: Store, payload: bytes) -> None:
    """Any bytes, including empty records, come back identical."""
    await store.ledger.append("log", [payload, b"after"], expected=0)
    assert await store.ledger.read("log") == [Record(1, payload), Record(2, b"after")]


async def test_logs_are_independent(store: Store) -> None:
    """Each log has its own sequence; `a` and `a/b` are different logs."""
    await store.ledger.append("a", [b"a1"], expected=0)
    await store.ledger.append("a/b", [b"ab1", b"ab2"], expected=0)
    await store.ledger.append("a", [b"a2"], expected=1)
    assert await store.ledger.tip("a") == 2
    assert await store.ledger.tip("a/b") == 2
    assert await payloads(store, "a") == [b"a1", b"a2"]
    assert await payloads(store, "a/b") == [b"ab1", b"ab2"]


@pytest.mark.parametrize("expected", [0, 1, 2, 4, 100])
async def test_wrong_tip_conflicts_and_writes_nothing(store: Store, expected: int) -> None:
    """Append with a stale or future tip raises LedgerConflictError(name, expected, tip)."""
    await store.ledger.append("log", [b"a", b"b", b"c"], expected=0)
    with pytest.raises(LedgerConflictError) as caught:
        await store.ledger.append("log", [b"x", b"y"], expected=expected)
    assert (caught.value.name, caught.value.expected, caught.value.actual) == ("log", expected, 3)
    assert isinstance(caught.value, StorageError)
    assert await store.ledger.tip("log") == 3
    assert await payloads(store, "log") == [b"a", b"b", b"c"]


async def test_conflict_on_empty_log_creates_nothing(store: Store) -> None:
    """Append to an empty log expecting tip 1 conflicts (actual 0) and the log stays unlisted."""
    with pytest.raises(LedgerConflictError) as caught:
        await store.ledger.append("log", [b"x"], expected=1)
    assert (caught.value.expected, caught.value.actual) == (1, 0)
    assert await store.ledger.tip("log") == 0
    assert await store.ledger.names() == []


async def test_multi_record_append_is_atomic(store: Store) -> None:
    """A multi-record append with one bad record raises and writes none of them."""
    await store.ledger.append("log", [b"a"], expected=0)
    with pytest.raises(InvalidValueError):
        await store.ledger.append("log", [b"b", "c", b"d"], expected=1)  # type: ignore[list-item]
    with pytest.raises(ValueTooLargeError):
        await store.ledger.append("log", [b"b", bytes(MAX_RECORD_BYTES + 1)], expected=1)
    assert await store.ledger.tip("log") == 1
    assert await payloads(store, "log") == [b"a"]
    assert await store.ledger.append("log", [b"b", b"c", b"d"], expected=1) == 4


async def test_read_ranges(store: Store) -> None:
    """read(after, limit) returns up to limit records with seq > after, ascending."""
    await store.ledger.append("log", [str(i).encode() for i in range(1, 11)], expected=0)

    async def seqs(after: int, limit: int) -> list[int]:
        records = await store.ledger.read("log", after=after, limit=limit)
        assert all(r.payload == str(r.seq).encode() for r in records)
        return [r.seq for r in records]

    assert await seqs(0, 100) == list(range(1, 11))
    assert await seqs(0, 3) == [1, 2, 3]
    assert await seqs(3, 3) == [4, 5, 6]
    assert await seqs(8, 3) == [9, 10]
    assert await seqs(9, 1) == [10]
    assert await seqs(10, 5) == []
    assert await seqs(11, 5) == []
    assert await seqs(10**9, 5) == []
    assert await seqs(0, 1) == [1]
    assert await seqs(0, MAX_READ_LIMIT) == list(range(1, 11))


async def test_read_default_limit_is_100(store: Store) -> None:
    """read() without a limit returns the first 100 records."""
    for tip in range(0, 128, MAX_RECORDS_PER_APPEND):
        await store.ledger.append("log", [b"r"] * MAX_RECORDS_PER_APPEND, expected=tip)
    records = await store.ledger.read("log")
    assert [r.seq for r in records] == list(range(1, 101))
    assert [r.seq for r in await store.ledger.read("log", after=100)] == list(range(101, 129))


@pytest.mark.parametrize(
    ("after", "limit", "error"),
    [
        (0, 0, ValueError),
        (0, MAX_READ_LIMIT + 1, ValueError),
        (0, -1, ValueError),
        (-1, 10, ValueError),
        (True, 10, InvalidValueError),
        (0, True, InvalidValueError),
        (0.0, 10, InvalidValueError),
        (0, 1.5, InvalidValueError),
        ("0", 10, InvalidValueError),
    ],
)
async def test_read_bounds_are_checked(
    store: Store, after: object, limit: object, error: type[Exception]
) -> None:
    """read rejects bad bounds (ValueError) and non-int bounds (InvalidValueError)."""
    await store.ledger.append("log", [b"r"], expected=0)
    with pytest.raises(error):
        await store.ledger.read("log", after=after, limit=limit)  # type: ignore[arg-type]


async def test_names_sorted_and_prefix_filtered(store: Store) -> None:
    """names(prefix) lists logs with records, byte-order sorted, by plain string prefix."""
    logs = ["b", "a/b", "a", "a-b", "a_b", "a0", "runs/1", "runs/10", "runs/2"]
    for name in logs:
        await store.ledger.append(name, [b"r"], expected=0)
    await store.ledger.append("a", [b"r"], expected=1)  # a second append does not duplicate
    everything = sorted(logs, key=lambda n: n.encode())
    assert await store.ledger.names() == everything
    assert await store.ledger.names("a") == ["a", "a-b", "a/b", "a0", "a_b"]
    assert await store.ledger.names("a/") == ["a/b"]
    assert await store.ledger.names("runs/") == ["runs/1", "runs/10", "runs/2"]
    assert await store.ledger.names("runs/1") == ["runs/1", "runs/10"]
    assert await store.ledger.names("a_") == ["a_b"]
    for nothing in ["c", "A", "%", "_", "*", "[a]", "runs/1/"]:
        assert await store.ledger.names(nothing) == [], nothing


@pytest.mark.parametrize(
    ("records", "error"),
    [
        ([], ValueError),
        ([b"r"] * (MAX_RECORDS_PER_APPEND + 1), ValueError),
        (b"raw bytes", InvalidValueError),
        (bytearray(b"raw"), InvalidValueError),
        ("text", InvalidValueError),
        ([b"ok", "text"], InvalidValueError),
        ([bytearray(b"x")], InvalidValueError),
        ([None], InvalidValueError),
        ([b"ok", bytes(MAX_RECORD_BYTES + 1)], ValueTooLargeError),
    ],
)
async def test_bad_records_are_rejected(
    store: Store, records: object, error: type[Exception]
) -> None:
    """Empty, too many, non-bytes or oversized records are rejected and nothing is written."""
    with pytest.raises(error):
        await store.ledger.append("log", records, expected=0)  # type: ignore[arg-type]
    assert await store.ledger.tip("log") == 0
    assert await store.ledger.names() == []


@pytest.mark.parametrize("expected", [-1, True, 1.0, None, "0"])
async def test_bad_expected_is_rejected(store: Store, expected: object) -> None:
    """A negative or non-int expected tip is rejected (ValueError / InvalidValueError)."""
    with pytest.raises((ValueError, InvalidValueError)):
        await store.ledger.append("log", [b"r"], expected=expected)  # type: ignore[arg-type]
    assert await store.ledger.tip("log") == 0


async def test_limits_are_inclusive(store: Store) -> None:
    """MAX_RECORDS_PER_APPEND records and a record of exactly MAX_RECORD_BYTES are accepted."""
    assert await store.ledger.append("many", [b"r"] * MAX_RECORDS_PER_APPEND, expected=0) == (
        MAX_RECORDS_PER_APPEND
    )
    big = bytes(range(256)) * (MAX_RECORD_BYTES // 256)
    assert await store.ledger.append("big", [big], expected=0) == 1
    assert (await store.ledger.read("big")) == [Record(1, big)]


# --- attachments ------------------------------------------------------------------------


async def test_attachments_are_written_with_the_append(store: Store) -> None:
    """Attachments of a successful append can be fetched by digest, with their exact bytes."""
    one, two = b"first attachment", bytes(range(256))
    await store.ledger.append("log", [b"r"], expected=0, attachments=att(one, two))
    got = await store.ledger.attachments([digest_of(two), digest_of(one)])
    assert got == {digest_of(one): one, digest_of(two): two}
    assert all(type(v) is bytes for v in got.values())
    assert await store.ledger.attachments([]) == {}
    assert await store.ledger.attachments(iter([digest_of(one)])) == {digest_of(one): one}


async def test_empty_attachment_map_is_allowed(store: Store) -> None:
    """attachments={} or None is the same as no attachments."""
    assert await store.ledger.append("log", [b"r"], expected=0, attachments={}) == 1
    assert await store.ledger.append("log", [b"r"], expected=1, attachments=None) == 2


async def test_attachments_are_shared_and_inserted_if_absent(store: Store) -> None:
    """An attachment is global: logs re-attaching it succeed and it stays fetchable."""
    data = b"shared"
    await store.ledger.append("a", [b"r"], expected=0, attachments=att(data))
    await store.ledger.append("b", [b"r"], expected=0, attachments=att(data))
    await store.ledger.append("a", [b"r"], expected=1, attachments=att(data, b"new"))
    got = await store.ledger.attachments([digest_of(data), digest_of(b"new")])
    assert got == att(data, b"new")
    assert await store.blobs.list() == []


async def test_missing_attachment_names_the_first_missing_digest(store: Store) -> None:
    """attachments() raises AttachmentNotFoundError for the first digest that is absent."""
    await store.ledger.append("log", [b"r"], expected=0, attachments=att(b"here"))
    missing1, missing2 = digest_of(b"gone"), digest_of(b"also gone")
    with pytest.raises(AttachmentNotFoundError) as caught:
        await store.ledger.attachments([digest_of(b"here"), missing1, missing2])
    assert caught.value.digest == missing1
    assert isinstance(caught.value, KeyError)
    with pytest.raises(AttachmentNotFoundError) as caught:
        await store.ledger.attachments([missing2, digest_of(b"here")])
    assert caught.value.digest == missing2


async def test_conflicting_append_writes_no_attachment(store: Store) -> None:
    """An append that loses its compare-and-append leaves its attachments absent."""
    await store.ledger.append("log", [b"r"], expected=0)
    data = b"attachment of the loser"
    with pytest.raises(LedgerConflictError):
        await store.ledger.append("log", [b"x"], expected=0, attachments=att(data))
    with pytest.raises(AttachmentNotFoundError) as caught:
        await store.ledger.attachments([digest_of(data)])
    assert caught.value.digest == digest_of(data)
    assert await payloads(store, "log") == [b"r"]


async def test_digest_mismatch_is_rejected_and_nothing_written(store: Store) -> None:
    """Attachment bytes that do not hash to their key are rejected; no record or attachment."""
    good, bad = b"good", b"bad"
    attachments = {digest_of(good): good, digest_of(b"claimed"): bad}
    with pytest.raises(ValueError):
        await store.ledger.append("log", [b"r"], expected=0, attachments=attachments)
    assert await store.ledger.tip("log") == 0
    assert await store.ledger.names() == []
    for digest in (digest_of(good), digest_of(b"claimed"), digest_of(bad)):
        with pytest.raises(AttachmentNotFoundError):
            await store.ledger.attachments([digest])


BAD_DIGESTS = [
    digest_of(b"x").upper(),
    digest_of(b"x")[:63],
    digest_of(b"x") + "0",
    "g" * 64,
    " " + digest_of(b"x")[1:],
    "",
    b"0" * 64,
    None,
    64,
]


@pytest.mark.parametrize("digest", BAD_DIGESTS)
async def test_bad_digest_formats_are_rejected(store: Store, digest: object) -> None:
    """Digests must be 64 lowercase hex characters, in append and attachments()."""
    with pytest.raises(InvalidValueError):
        await store.ledger.append("log", [b"r"], expected=0, attachments={digest: b"x"})  # type: ignore[dict-item]
    assert await store.ledger.tip("log") == 0
    with pytest.raises(AttachmentNotFoundError):
        await store.ledger.attachments([digest_of(b"x")])
    with pytest.raises(InvalidValueError):
        await store.ledger.attachments([digest])  # type: ignore[list-item]


async def test_attachments_rejects_a_bare_string(store: Store) -> None:
    """attachments(digest) with one str instead of an iterable of digests is InvalidValueError."""
    await store.ledger.append("log", [b"r"], expected=0, attachments=att(b"x"))
    with pytest.raises(InvalidValueError):
        await store.ledger.attachments(digest_of(b"x"))


async def test_attachment_size_limit(store: Store) -> None:
    """An attachment of MAX_ATTACHMENT_BYTES is accepted; one byte more is rejected, unwritten."""
    exact = b"\x01" * MAX_ATTACHMENT_BYTES
    over = b"\x02" * (MAX_ATTACHMENT_BYTES + 1)
    with pytest.raises(ValueTooLargeError) as caught:
        await store.ledger.append("log", [b"r"], expected=0, attachments=att(over))
    assert (caught.value.size, caught.value.limit) == (len(over), MAX_ATTACHMENT_BYTES)
    assert await store.ledger.tip("log") == 0
    with pytest.raises(AttachmentNotFoundError):
        await store.ledger.attachments([digest_of(over)])
    await store.ledger.append("log", [b"r"], expected=0, attachments=att(exact))
    assert await store.ledger.attachments([digest_of(exact)]) == att(exact)


@pytest.mark.parametrize("data", ["text", bytearray(b"x"), None])
async def test_attachment_data_must_be_bytes(store: Store, data: object) -> None:
    """Non-bytes attachment data raises InvalidValueError; nothing written."""
    with pytest.raises(InvalidValueError):
        await store.ledger.append("log", [b"r"], expected=0, attachments={"0" * 64: data})  # type: ignore[dict-item]
    assert await store.ledger.tip("log") == 0


async def test_attachment_count_limit(store: Store) -> None:
    """MAX_ATTACHMENTS_PER_APPEND attachments are accepted; one more is rejected, unwritten."""
    datas = [b"%d" % i for i in range(MAX_ATTACHMENTS_PER_APPEND + 1)]
    with pytest.raises(ValueError):
        await store.ledger.append("log", [b"r"], expected=0, attachments=att(*datas))
    assert await store.ledger.tip("log") == 0
    with pytest.raises(AttachmentNotFoundError):
        await store.ledger.attachments([digest_of(datas[0])])
    await store.ledger.append("log", [b"r"], expected=0, attachments=att(*datas[:-1]))
    got = await store.ledger.attachments(digest_of(d) for d in datas[:-1])
    assert len(got) == MAX_ATTACHMENTS_PER_APPEND
    with pytest.raises(AttachmentNotFoundError):
        await store.ledger.attachments([digest_of(datas[-1])])


# --- concurrency ------------------------------------------------------------------------


async def test_concurrent_appenders_have_one_winner_per_tip(store: Store, store_url: str) -> None:
    """Of appenders racing on one tip (same store, and peer stores), exactly one wins."""
    async with contextlib.AsyncExitStack() as stack:
        stores = [store] * 2
        if shares_state(store_url):
            stores += [await stack.enter_async_context(open_store(store_url)) for _ in range(2)]
        ledgers = [s.ledger for s in stores for _ in range(3)]
        winners: list[bytes] = []
        for tip in range(6):
            results = await asyncio.gather(
                *(
                    ledger.append(
                        "log",
                        [b"%d/%d" % (tip, i)],
                        expected=tip,
                        attachments=att(b"%d/%d" % (tip, i)),
                    )
                    for i, ledger in enumerate(ledgers)
                ),
                return_exceptions=True,
            )
            won = [i for i, r in enumerate(results) if r == tip + 1]
            assert len(won) == 1, results
            for i, result in enumerate(results):
                if i != won[0]:
                    assert isinstance(result, LedgerConflictError), result
                    assert (result.expected, result.actual) == (tip, tip + 1)
            winners.append(b"%d/%d" % (tip, won[0]))
        assert await payloads(store, "log") == winners
        for tip in range(6):
            for i in range(len(ledgers)):
                data = b"%d/%d" % (tip, i)
                if data in winners:
                    assert await store.ledger.attachments([digest_of(data)]) == att(data)
                else:
                    with pytest.raises(AttachmentNotFoundError):
                        await store.ledger.attachments([digest_of(data)])


async def test_threaded_appenders_lose_nothing(store: Store, store_url: str) -> None:
    """Threads (own event loops) appending with retry produce one contiguous, complete log."""
    threads, each = 4, 15

    async def append_many(ledger: Ledger, me: int) -> None:
        for n in range(each):
            while True:
                tip = await ledger.tip("log")
                try:
                    await ledger.append("log", [b"%d:%d" % (me, n)], expected=tip)
                    break
                except LedgerConflictError:
                    continue

    async def worker_main(me: int) -> None:
        if not shares_state(store_url):
            await append_many(store.ledger, me)
            return
        async with open_store(store_url) as own:
            await append_many(own.ledger, me)

    await asyncio.to_thread(run_threads, threads, lambda i: asyncio.run(worker_main(i)), 60.0)
    records = await store.ledger.read("log", limit=MAX_READ_LIMIT)
    assert [r.seq for r in records] == list(range(1, threads * each + 1))
    assert sorted(r.payload for r in records) == sorted(
        b"%d:%d" % (t, n) for t in range(threads) for n in range(each)
    )
    for t in range(threads):  # each thread's records appear in its own order
        mine = [r.payload for r in records if r.payload.startswith(b"%d:" % t)]
        assert mine == [b"%d:%d" % (t, n) for n in range(each)]
