"""Conformance: references, drop, sweep and usage of the Ledger (every backend)."""

from __future__ import annotations

import pytest

from flowledger.storage import (
    MAX_REFS_PER_APPEND,
    AttachmentNotFoundError,
    InvalidValueError,
    LedgerConflictError,
    LedgerUsage,
    Store,
    SweepReport,
    digest_of,
    open_store,
)

from ._procs import shares_state

X, Y, S = b"x" * 300, b"y" * 500, b"shared" * 100
DX, DY, DS = digest_of(X), digest_of(Y), digest_of(S)
MISSING = digest_of(b"never stored")


def att(*datas: bytes) -> dict[str, bytes]:
    return {digest_of(d): d for d in datas}


async def stored(store: Store, digest: str) -> bool:
    try:
        await store.ledger.attachments([digest])
    except AttachmentNotFoundError:
        return False
    return True


async def test_a_new_store_has_complete_refs_and_nothing_to_sweep(store: Store) -> None:
    """A new store's references are complete; sweeping an empty store deletes nothing."""
    assert await store.ledger.refs_complete()
    assert await store.ledger.sweep() == SweepReport(0, 0)
    assert await store.ledger.sweep(dry_run=True) == SweepReport(0, 0)


async def test_a_missing_ref_raises_and_writes_nothing(store: Store) -> None:
    """A ref to an attachment that is not stored: AttachmentNotFoundError naming it; no
    record, no attachment of the append, no reference is written."""
    with pytest.raises(AttachmentNotFoundError) as caught:
        await store.ledger.append("a", [b"1"], expected=0, attachments=att(X), refs=[MISSING])
    assert caught.value.digest == MISSING
    assert await store.ledger.tip("a") == 0
    assert await store.ledger.names() == []
    assert not await stored(store, DX)
    await store.ledger.append("a", [b"1"], expected=0, attachments=att(Y))
    with pytest.raises(AttachmentNotFoundError):
        await store.ledger.append("a", [b"2"], expected=1, refs=[DY, MISSING])
    assert await store.ledger.tip("a") == 1


async def test_the_first_missing_ref_in_order_is_named(store: Store) -> None:
    """With several refs missing, the error names the first one as given."""
    await store.ledger.append("a", [b"1"], expected=0, attachments=att(X))
    other = digest_of(b"also missing")
    with pytest.raises(AttachmentNotFoundError) as caught:
        await store.ledger.append("b", [b"1"], expected=0, refs=[DX, other, MISSING])
    assert caught.value.digest == other


async def test_refs_to_stored_attachments_append(store: Store) -> None:
    """Refs to stored attachments (also repeated, and sent ones) are accepted."""
    await store.ledger.append("a", [b"1"], expected=0, attachments=att(X))
    assert await store.ledger.append("b", [b"1"], expected=0, refs=[DX, DX]) == 1
    assert await store.ledger.append("b", [b"2"], expected=1, attachments=att(Y), refs=[DY]) == 2


@pytest.mark.parametrize("refs", ["a" * 64, [b"\x00" * 32], ["A" * 64], ["abc"], [None]])
async def test_bad_refs_are_rejected(store: Store, refs: object) -> None:
    """Refs must be an iterable of lowercase hex digests; nothing is written otherwise."""
    with pytest.raises(InvalidValueError):
        await store.ledger.append("a", [b"1"], expected=0, refs=refs)  # type: ignore[arg-type]
    assert await store.ledger.tip("a") == 0


async def test_refs_count_limit(store: Store) -> None:
    """At most MAX_REFS_PER_APPEND distinct refs per append."""
    many = [digest_of(str(i).encode()) for i in range(MAX_REFS_PER_APPEND + 1)]
    with pytest.raises(ValueError, match="refs"):
        await store.ledger.append("a", [b"1"], expected=0, refs=many)


async def test_drop_then_sweep_deletes_only_unreferenced(store: Store) -> None:
    """After a drop, sweep deletes exactly the attachments no remaining log refers to."""
    await store.ledger.append("a", [b"a1"], expected=0, attachments=att(X, S))
    await store.ledger.append("b", [b"b1"], expected=0, refs=[DS])
    await store.ledger.append("c", [b"c1"], expected=0, attachments=att(Y))
    assert await store.ledger.sweep() == SweepReport(0, 0)
    assert await store.ledger.drop(["a"]) == 1
    assert await store.ledger.sweep() == SweepReport(1, len(X))
    assert not await stored(store, DX)
    assert await store.ledger.attachments([DS, DY]) == {DS: S, DY: Y}
    assert await store.ledger.sweep() == SweepReport(0, 0)


async def test_a_shared_attachment_is_kept_while_any_log_refers_to_it(store: Store) -> None:
    """An attachment stays while one log refers to it, by sending it or by a ref."""
    await store.ledger.append("a", [b"1"], expected=0, attachments=att(S))
    await store.ledger.append("b", [b"1"], expected=0, refs=[DS])
    await store.ledger.append("c", [b"1"], expected=0)
    await store.ledger.append("c", [b"2"], expected=1, attachments=att(S))
    for name in ("a", "c"):
        await store.ledger.drop([name])
        assert await store.ledger.sweep() == SweepReport(0, 0)
        assert await stored(store, DS)
    await store.ledger.drop(["b"])
    assert await store.ledger.sweep() == SweepReport(1, len(S))
    assert not await stored(store, DS)


async def test_dry_run_changes_nothing(store: Store) -> None:
    """A dry run reports what a sweep would delete and deletes nothing."""
    await store.ledger.append("a", [b"1"], expected=0, attachments=att(X, Y))
    await store.ledger.append("b", [b"1"], expected=0, attachments=att(S))
    await store.ledger.drop(["a"])
    expected = SweepReport(2, len(X) + len(Y))
    assert await store.ledger.sweep(dry_run=True) == expected
    assert await store.ledger.sweep(dry_run=True) == expected
    assert await store.ledger.attachments([DX, DY, DS]) == {DX: X, DY: Y, DS: S}
    assert await store.ledger.sweep() == expected
    assert await store.ledger.sweep(dry_run=True) == SweepReport(0, 0)


async def test_drop_deletes_the_log_and_is_idempotent(store: Store) -> None:
    """A dropped log is gone (tip 0, no records, not listed); dropping again, or a log
    that never existed, counts nothing; the name starts afresh at expected=0."""
    await store.ledger.append("a", [b"1", b"2", b"3"], expected=0)
    await store.ledger.append("b", [b"1"], expected=0)
    assert await store.ledger.drop(["a", "nothing", "a"]) == 1
    assert await store.ledger.drop(["a"]) == 0
    assert await store.ledger.drop([]) == 0
    assert await store.ledger.tip("a") == 0
    assert await store.ledger.read("a") == []
    assert await store.ledger.names() == ["b"]
    with pytest.raises(LedgerConflictError) as caught:
        await store.ledger.append("a", [b"4"], expected=3)
    assert caught.value.actual == 0
    assert await store.ledger.append("a", [b"new"], expected=0) == 1
    assert [r.payload for r in await store.ledger.read("a")] == [b"new"]


async def test_drop_of_many_logs(store: Store) -> None:
    """A drop of more logs than one batch holds drops them all."""
    names = [f"run/{i:03}" for i in range(150)]
    for name in names:
        await store.ledger.append(name, [b"r"], expected=0, attachments=att(name.encode()))
    await store.ledger.append("keep", [b"k"], expected=0)
    assert await store.ledger.drop(names) == 150
    assert await store.ledger.names() == ["keep"]
    report = await store.ledger.sweep()
    assert report == SweepReport(150, sum(len(n) for n in names))


async def test_a_dropped_log_no_longer_keeps_a_ref(store: Store) -> None:
    """After a drop and sweep, a ref to a swept attachment fails and the writer sends the
    bytes again (as an attachment), which succeeds."""
    await store.ledger.append("a", [b"1"], expected=0, attachments=att(S))
    await store.ledger.drop(["a"])
    await store.ledger.sweep()
    with pytest.raises(AttachmentNotFoundError):
        await store.ledger.append("b", [b"1"], expected=0, refs=[DS])
    assert await store.ledger.append("b", [b"1"], expected=0, attachments=att(S)) == 1
    assert await store.ledger.sweep() == SweepReport(0, 0)
    assert await stored(store, DS)


async def test_usage_counts_records_and_exclusive_attachments(store: Store) -> None:
    """usage: the records of the logs, their bytes, and the bytes of attachments no log
    outside the set refers to; it changes nothing."""
    await store.ledger.append("a", [b"12", b"345"], expected=0, attachments=att(X, S))
    await store.ledger.append("b", [b"6789"], expected=0, attachments=att(Y), refs=[DS])
    await store.ledger.append("c", [b"0"], expected=0)
    assert await store.ledger.usage(["a"]) == LedgerUsage(2, 5, len(X))
    assert await store.ledger.usage(["b"]) == LedgerUsage(1, 4, len(Y))
    assert await store.ledger.usage(["a", "b"]) == LedgerUsage(3, 9, len(X) + len(Y) + len(S))
    assert await store.ledger.usage(["a", "b", "c", "none"]) == LedgerUsage(4, 10, 1400)
    assert await store.ledger.usage([]) == LedgerUsage(0, 0, 0)
    await store.ledger.drop(["a", "b"])
    assert await store.ledger.sweep() == SweepReport(3, len(X) + len(Y) + len(S))


async def test_add_refs_keeps_attachments_and_skips_what_is_not_there(store: Store) -> None:
    """add_refs registers stored digests for an existing log (missing digests and
    missing logs are skipped); the log then keeps them through a sweep."""
    await store.ledger.append("a", [b"1"], expected=0, attachments=att(X, S))
    await store.ledger.append("b", [b"1"], expected=0)
    assert await store.ledger.add_refs("b", [DS, MISSING, DS]) == 1
    assert await store.ledger.add_refs("nothing", [DX]) == 0
    assert await store.ledger.add_refs("b", []) == 0
    await store.ledger.drop(["a"])
    assert await store.ledger.sweep() == SweepReport(1, len(X))
    assert await stored(store, DS)
    await store.ledger.mark_refs_complete()  # idempotent on a complete store
    assert await store.ledger.refs_complete()


async def test_vacuum_keeps_everything(store: Store) -> None:
    """vacuum changes no data."""
    await store.ledger.append("a", [b"1"], expected=0, attachments=att(X))
    await store.ledger.append("b", [b"1"], expected=0, attachments=att(Y))
    await store.ledger.drop(["b"])
    await store.ledger.vacuum()
    assert [r.payload for r in await store.ledger.read("a")] == [b"1"]
    assert await store.ledger.attachments([DX, DY]) == {DX: X, DY: Y}


async def test_another_store_sees_a_drop_and_a_recreated_log(store: Store, store_url: str) -> None:
    """A store that read a log sees another store's drop of it, and the log made afresh:
    reads, tips and appends follow the log that exists now."""
    if not shares_state(store_url):
        pytest.skip("memory stores do not share state")
    await store.ledger.append("a", [b"old1", b"old2"], expected=0)
    await store.ledger.append("z", [b"z"], expected=0)
    assert await store.ledger.tip("a") == 2
    async with open_store(store_url) as other:
        await other.ledger.drop(["a"])
        assert await store.ledger.tip("a") == 0
        assert await store.ledger.read("a") == []
        await other.ledger.append("a", [b"new1"], expected=0)
        await other.ledger.append("zz", [b"zz"], expected=0)
        assert await store.ledger.tip("a") == 1
        assert [r.payload for r in await store.ledger.read("a")] == [b"new1"]
        assert await store.ledger.append("a", [b"new2"], expected=1) == 2
        await other.ledger.drop(["a"])
        assert await store.ledger.append("a", [b"third"], expected=0) == 1
        assert [r.payload for r in await other.ledger.read("a")] == [b"third"]
        assert await other.ledger.names() == ["a", "z", "zz"]


async def test_a_ref_of_a_log_dropped_elsewhere_is_checked_again(
    store: Store, store_url: str
) -> None:
    """A store remembers the references it committed; after another store dropped the log
    and swept, a ref to the swept attachment from the re-created log fails as it should."""
    if not shares_state(store_url):
        pytest.skip("memory stores do not share state")
    await store.ledger.append("a", [b"1"], expected=0, attachments=att(S))
    await store.ledger.append("a", [b"2"], expected=1, refs=[DS])
    async with open_store(store_url) as other:
        await other.ledger.drop(["a"])
        assert await other.ledger.sweep() == SweepReport(1, len(S))
    with pytest.raises(AttachmentNotFoundError):
        await store.ledger.append("a", [b"new"], expected=0, refs=[DS])
    assert await store.ledger.tip("a") == 0
    assert await store.ledger.append("a", [b"new"], expected=0, attachments=att(S)) == 1
    assert await store.ledger.append("a", [b"next"], expected=1, refs=[DS]) == 2
    assert await store.ledger.sweep() == SweepReport(0, 0)


async def test_an_append_at_a_moved_tip_names_the_actual_tip(store: Store, store_url: str) -> None:
    """An append at a tip another store moved on (behind or ahead of the actual one)
    raises LedgerConflictError naming the actual tip and writes nothing; at the actual
    tip every record of it is written."""
    if not shares_state(store_url):
        pytest.skip("memory stores do not share state")
    assert await store.ledger.append("a", [b"1", b"2"], expected=0) == 2
    async with open_store(store_url) as other:
        assert await other.ledger.append("a", [b"3"], expected=2) == 3
    for stale in (2, 1, 4, 9):
        with pytest.raises(LedgerConflictError) as caught:
            await store.ledger.append("a", [b"no", b"no"], expected=stale)
        assert (caught.value.expected, caught.value.actual) == (stale, 3)
    assert await store.ledger.append("a", [b"4", b"5", b"6"], expected=3) == 6
    assert [r.payload for r in await store.ledger.read("a")] == [b"%d" % i for i in range(1, 7)]


async def test_an_append_follows_a_log_dropped_and_recreated_elsewhere(
    store: Store, store_url: str
) -> None:
    """A store that appended to a log, which another store then dropped and made afresh,
    appends to the log that exists now (at its tip) or conflicts with that log's tip;
    after a drop without a new log, with tip 0."""
    if not shares_state(store_url):
        pytest.skip("memory stores do not share state")
    assert await store.ledger.append("a", [b"old1", b"old2"], expected=0) == 2
    async with open_store(store_url) as other:
        await other.ledger.drop(["a"])
        assert await other.ledger.append("a", [b"new1", b"new2"], expected=0) == 2
        assert await store.ledger.append("a", [b"new3"], expected=2) == 3
        assert [r.payload for r in await other.ledger.read("a")] == [b"new1", b"new2", b"new3"]
        await other.ledger.drop(["a"])
        assert await other.ledger.append("a", [b"again"], expected=0) == 1
        with pytest.raises(LedgerConflictError) as caught:
            await store.ledger.append("a", [b"no"], expected=3)
        assert caught.value.actual == 1
        await other.ledger.drop(["a"])
        with pytest.raises(LedgerConflictError) as caught:
            await store.ledger.append("a", [b"no"], expected=1)
        assert caught.value.actual == 0
        assert await other.ledger.names() == []
        assert await store.ledger.append("a", [b"first"], expected=0) == 1
        assert [r.payload for r in await other.ledger.read("a")] == [b"first"]
