"""The activity journal: durable, idempotent by event_id, O(page) history reads, live
subscribers. Checklist §12 items 55 and 57 adapted to the journal (the supervisor-side
cursor tests live with the supervisor); every test runs on memory and SQLite storage."""

from __future__ import annotations

import asyncio
import json
import math
import tempfile
from collections.abc import AsyncIterator, Awaitable, Iterable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from flowledger.storage import (
    Ledger,
    LedgerConflictError,
    Record,
    Store,
    open_store,
    validate_name,
)
from flowledger.workflows.activities.activity import ActivityKind, ActivityRecord, ProjectedActivity
from flowledger.workflows.activities.history import HistoryPage, page_history
from flowledger.workflows.activities.journal import (
    PUBLISH_ATTEMPTS,
    ActivityJournal,
    journal_name,
)
from flowledger.workflows.errors import (
    ActivityValidationError,
    CorruptRecordError,
    HistoryCursorError,
)

from .._activity_support import RID, RID2, SID, SID2, activity, sequence

NAME = f"sessions/{SID}/workflows/activity/{RID}"


@pytest.fixture(params=["memory", "sqlite"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    url = "memory://" if request.param == "memory" else f"sqlite:///{tmp_path}/j.db"
    async with open_store(url) as opened:
        yield opened


class Wrapped:
    """A ledger that delegates to ``inner``, counting reads and letting tests inject faults
    around appends (``before`` / ``after`` hooks, called with the append number)."""

    def __init__(self, inner: Ledger) -> None:
        self.inner = inner
        self.appends = 0
        self.read_calls = 0
        self.records_read = 0
        self.before: Any = None
        self.after: Any = None

    def __getattr__(self, name: str) -> Any:
        # drop, sweep, usage, vacuum and the reference calls pass straight through
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self.inner, name)

    async def append(
        self,
        name: str,
        records: Sequence[bytes],
        *,
        expected: int,
        attachments: Mapping[str, bytes] | None = None,
        refs: Iterable[str] = (),
    ) -> int:
        self.appends += 1
        if self.before is not None:
            await self.before(self.appends)
        tip = await self.inner.append(
            name, records, expected=expected, attachments=attachments, refs=refs
        )
        if self.after is not None:
            await self.after(self.appends)
        return tip

    async def read(self, name: str, *, after: int = 0, limit: int = 100) -> list[Record]:
        records = await self.inner.read(name, after=after, limit=limit)
        self.read_calls += 1
        self.records_read += len(records)
        return records

    async def tip(self, name: str) -> int:
        return await self.inner.tip(name)

    async def names(self, prefix: str = "") -> list[str]:
        return await self.inner.names(prefix)

    async def attachments(self, digests: Iterable[str]) -> dict[str, bytes]:
        return await self.inner.attachments(digests)


def drain(subscription: Any) -> list[ActivityRecord]:
    out = []
    while subscription.pending():
        out.append(subscription._queue.get_nowait())
    return out


# -- layout -----------------------------------------------------------------------------------


async def test_layout_one_compact_json_record_per_activity(store: Store) -> None:
    """One log per run named sessions/<sid>/workflows/activity/<rid>; each record is
    compact JSON {"revision": r, "activity": to_json()}."""
    journal = ActivityJournal(store.ledger)
    items = sequence([1, 2])
    assert await journal.publish(items) == 3
    assert journal_name(SID, RID) == NAME == validate_name(NAME)
    assert await store.ledger.names("sessions/") == [NAME]
    raw = await store.ledger.read(NAME, limit=10)
    assert [r.seq for r in raw] == [1, 2, 3]
    for record, item in zip(raw, items, strict=True):
        expected = {"revision": item.revision, "activity": item.activity.to_json()}
        assert json.loads(record.payload) == expected
        assert record.payload == json.dumps(expected, separators=(",", ":")).encode()
    assert await journal.records(SID, RID) == items
    assert await journal.records(SID, RID2) == []


async def test_non_ascii_labels_survive(store: Store) -> None:
    journal = ActivityJournal(store.ledger)
    item = activity(0, 0)
    item = replace(item, activity=replace(item.activity, vertex_label="審査 ✓ 😀"))
    await journal.publish([item])
    assert await journal.records(SID, RID) == [item]
    (raw,) = await store.ledger.read(NAME)
    assert "審査 ✓ 😀".encode() in raw.payload


def test_journal_name_rejects_bad_ids() -> None:
    for sid, rid in ((SID.upper(), RID), (SID, "x"), ("00000000-0000-0000-0000-000000000000", RID)):
        with pytest.raises(ValueError):
            journal_name(sid, rid)


# -- idempotency (items 55 and 57 adapted) ----------------------------------------------------


async def test_republish_after_success_appends_nothing_and_notifies_no_one(store: Store) -> None:
    """§12 item 57 adapted: a durable duplicate is a success with no second record and no
    second delivery, also from a fresh journal (another process, after a restart)."""
    journal = ActivityJournal(store.ledger)
    items = sequence([1, 2, 1])
    with journal.subscribe(SID) as live:
        assert await journal.publish(items) == 4
        assert [r.event_id for r in drain(live)] == [i.activity.event_id for i in items]
        assert await journal.publish(items) == 0
        assert await journal.publish(items[2:]) == 0
        assert await journal.publish([items[1], items[1]]) == 0
        restarted = ActivityJournal(store.ledger)
        assert await restarted.publish(items) == 0
        assert live.pending() == 0
    assert await store.ledger.tip(NAME) == 4
    assert await journal.records(SID, RID) == items


async def test_failed_publish_is_retried_with_the_same_event_ids(store: Store) -> None:
    """§12 item 55 adapted: the first publish fails before anything is written; the retry
    appends the same event ID once and notifies once."""
    ledger = Wrapped(store.ledger)

    async def fail_first(n: int) -> None:
        if n == 1:
            raise RuntimeError("journal unavailable")

    ledger.before = fail_first
    journal = ActivityJournal(ledger)
    item = activity(0, 0, kind=ActivityKind.RUN_STARTED)
    with journal.subscribe(SID) as live:
        with pytest.raises(RuntimeError):
            await journal.publish([item])
        assert await store.ledger.tip(NAME) == 0
        assert live.pending() == 0
        assert await journal.publish([item]) == 1
        assert [r.event_id for r in drain(live)] == [item.activity.event_id]
        assert await journal.publish([item]) == 0
        assert live.pending() == 0
    assert await journal.records(SID, RID) == [item]


async def test_lost_acknowledgement_is_a_duplicate_and_notified_once(store: Store) -> None:
    """The append lands but its acknowledgement is lost: the retry appends nothing, and the
    live subscriber hears of the records exactly once (when the retry confirms them)."""
    ledger = Wrapped(store.ledger)

    async def lose_ack(n: int) -> None:
        if n == 1:
            raise ConnectionError("acknowledgement lost")

    ledger.after = lose_ack
    journal = ActivityJournal(ledger)
    items = sequence([2])
    more = sequence([2, 1])[2:]
    with journal.subscribe(SID) as live:
        with pytest.raises(ConnectionError):
            await journal.publish(items)
        assert await store.ledger.tip(NAME) == 2
        assert live.pending() == 0
        assert await journal.publish(items + more) == 1
        assert [r.event_id for r in drain(live)] == [i.activity.event_id for i in items + more]
        assert await journal.publish(items + more) == 0
        assert live.pending() == 0
    assert await journal.records(SID, RID) == items + more


async def test_partial_batch_is_completed_by_the_retry(store: Store) -> None:
    """More than 64 records go in several atomic appends; if one fails, the retry appends
    exactly the missing suffix, in order."""
    ledger = Wrapped(store.ledger)

    async def fail_second(n: int) -> None:
        if n == 2:
            raise RuntimeError("disk full")

    ledger.before = fail_second
    journal = ActivityJournal(ledger)
    items = sequence([40, 60, 50])
    with journal.subscribe(SID, maxsize=500) as live:
        with pytest.raises(RuntimeError):
            await journal.publish(items)
        assert await store.ledger.tip(NAME) == 64
        assert await journal.publish(items) == 150 - 64
        assert [r.event_id for r in drain(live)] == [i.activity.event_id for i in items]
    assert await journal.records(SID, RID) == items
    assert ledger.appends == 1 + 1 + 2  # 64 ok, failed, then 64 + 22


async def test_large_batch_uses_one_append_per_64_records(store: Store) -> None:
    ledger = Wrapped(store.ledger)
    journal = ActivityJournal(ledger)
    items = sequence([64, 1])
    assert await journal.publish(items) == 65
    assert ledger.appends == 2
    small = sequence([64, 1, 3])[65:]
    assert await journal.publish(small) == 3
    assert ledger.appends == 3
    assert await journal.records(SID, RID) == items + small
    # The duplicate check covers a whole re-sent batch even when it exceeds 64 records.
    assert await journal.publish(items + small) == 0
    assert await store.ledger.tip(NAME) == 68


async def test_new_items_after_known_ones_are_appended(store: Store) -> None:
    """Re-publishing a suffix together with new activities appends only the new ones."""
    journal = ActivityJournal(store.ledger)
    items = sequence([1, 2, 2])
    assert await journal.publish(items[:3]) == 3
    assert await journal.publish(items[1:]) == 2
    assert await journal.records(SID, RID) == items


async def test_concurrent_publishers_store_each_event_once(store: Store) -> None:
    """Two journals (two processes) racing with the same activities: one copy of each."""
    first, second = ActivityJournal(store.ledger), ActivityJournal(store.ledger)
    items = sequence([3, 4, 2])
    counts = await asyncio.gather(first.publish(items), second.publish(items))
    assert sum(counts) == len(items)
    assert await first.records(SID, RID) == items


async def test_conflict_is_retried_after_rereading(store: Store) -> None:
    """A compare-and-append conflict re-reads the tail and retries on the new tip."""
    ledger = Wrapped(store.ledger)
    other = ActivityJournal(store.ledger)
    rival = activity(0, 0, kind=ActivityKind.RUN_STARTED)

    async def race(n: int) -> None:
        if n == 1:
            await other.publish([rival])

    ledger.before = race
    journal = ActivityJournal(ledger)
    mine = sequence([2])
    assert await journal.publish(mine) == 2
    assert ledger.appends == 2
    assert await journal.records(SID, RID) == [rival, *mine]


async def test_conflicts_give_up_after_the_attempt_limit(store: Store) -> None:
    ledger = Wrapped(store.ledger)

    async def conflict(n: int) -> None:
        raise LedgerConflictError(NAME, 0, 1)

    ledger.before = conflict
    journal = ActivityJournal(ledger)
    with journal.subscribe(SID) as live:
        with pytest.raises(LedgerConflictError):
            await journal.publish(sequence([1]))
        assert live.pending() == 0
    assert ledger.appends == PUBLISH_ATTEMPTS
    assert await store.ledger.tip(NAME) == 0


# -- refusals ---------------------------------------------------------------------------------


async def test_refusals_write_nothing(store: Store) -> None:
    journal = ActivityJournal(store.ledger)
    await journal.publish(sequence([1, 1, 1]))
    before = await store.ledger.tip(NAME)
    mixed = [activity(3, 10), activity(3, 11, run_id=RID2)]
    with pytest.raises(ValueError, match="one run"):
        await journal.publish(mixed)
    other_session = [activity(3, 10), activity(3, 11, session_id=SID2)]
    with pytest.raises(ValueError, match="one run"):
        await journal.publish(other_session)
    with pytest.raises(ValueError, match="decrease"):
        await journal.publish([activity(4, 10), activity(3, 11)])
    with pytest.raises(ValueError, match="below the journal's last revision"):
        await journal.publish([activity(1, 10)])
    bad = activity(3, 10)
    bad = replace(bad, activity=replace(bad.activity, vertex_label="\x00"))
    with pytest.raises(ActivityValidationError):
        await journal.publish([bad])
    with pytest.raises(ValueError):
        await journal.publish([ProjectedActivity(-1, activity(3, 10).activity)])
    with pytest.raises(TypeError):
        await journal.publish(activity(3, 10))  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        await journal.publish([activity(3, 10).activity])  # type: ignore[list-item]
    assert await store.ledger.tip(NAME) == before
    assert await journal.publish([]) == 0
    assert await journal.publish([activity(2, 10)]) == 1  # the same revision is fine


# -- corrupt records --------------------------------------------------------------------------


def good_doc() -> dict[str, Any]:
    item = activity(0, 0)
    return {"revision": 0, "activity": item.activity.to_json()}


def corruptions() -> list[bytes]:
    doc = good_doc()
    foreign = good_doc()
    foreign["activity"]["run_id"] = RID2
    return [
        b"not json",
        b"\xff\xfe",
        b"[]",
        json.dumps({**doc, "extra": 1}).encode(),
        json.dumps({"revision": -1, "activity": doc["activity"]}).encode(),
        json.dumps({"revision": True, "activity": doc["activity"]}).encode(),
        json.dumps({"revision": 0, "activity": {**doc["activity"], "kind": "x"}}).encode(),
        json.dumps(foreign).encode(),
        b'{"revision": NaN, "activity": {}}',
        b'{"revision": 0, "revision": 0, "activity": {}}',
    ]


@pytest.mark.parametrize("index", range(len(corruptions())))
async def test_corrupt_records_are_reported(store: Store, index: int) -> None:
    """A record that is not a valid activity of this run raises CorruptRecordError naming
    the log, from every read path (records, page, and publish's tail check)."""
    await store.ledger.append(NAME, [corruptions()[index]], expected=0)
    journal = ActivityJournal(store.ledger)
    with pytest.raises(CorruptRecordError) as caught:
        await journal.records(SID, RID)
    assert caught.value.key.startswith(NAME)
    with pytest.raises(CorruptRecordError):
        await journal.page(SID, RID)
    with pytest.raises(CorruptRecordError):
        await journal.publish([activity(1, 5)])
    assert await store.ledger.tip(NAME) == 1


async def test_revision_order_violation_is_corruption(store: Store) -> None:
    late, early = activity(2, 0), activity(1, 1)
    payloads = [
        json.dumps({"revision": i.revision, "activity": i.activity.to_json()}).encode()
        for i in (late, early)
    ]
    await store.ledger.append(NAME, payloads, expected=0)
    journal = ActivityJournal(store.ledger)
    with pytest.raises(CorruptRecordError, match="backwards"):
        await journal.records(SID, RID)
    with pytest.raises(CorruptRecordError, match="backwards"):
        await journal.page(SID, RID)


# -- live subscribers -------------------------------------------------------------------------


async def test_subscribers_get_their_session_in_order_once(store: Store) -> None:
    journal = ActivityJournal(store.ledger)
    mine = journal.subscribe(SID)
    theirs = journal.subscribe(SID2)
    a = sequence([1, 2])
    b = sequence([2], session_id=SID2, run_id=RID2)
    c = sequence([1], run_id=RID2)  # another run of my session
    await journal.publish(a)
    await journal.publish(b)
    await journal.publish(c)
    await journal.publish(a)  # duplicate: nothing
    mine.close()
    got = [record async for record in mine]
    assert got == [i.activity for i in a + c]
    assert [record.event_id for record in drain(theirs)] == [i.activity.event_id for i in b]
    late = journal.subscribe(SID)
    assert late.pending() == 0  # no replay of earlier records
    await journal.publish(sequence([1, 2, 1]))
    assert [r.event_id for r in drain(late)] == [sequence([1, 2, 1])[3].activity.event_id]
    theirs.close()
    late.close()


async def test_closed_subscription_stops_and_wakes_a_waiting_reader(store: Store) -> None:
    journal = ActivityJournal(store.ledger)
    subscription = journal.subscribe(SID)
    waiter = asyncio.ensure_future(anext(subscription))
    await asyncio.sleep(0)
    assert not waiter.done()
    await journal.publish(sequence([1]))
    assert (await waiter).event_id == sequence([1])[0].activity.event_id
    waiter = asyncio.ensure_future(anext(subscription))
    await asyncio.sleep(0)
    subscription.close()
    subscription.close()  # idempotent
    with pytest.raises(StopAsyncIteration):
        await waiter
    await journal.publish(sequence([1, 1]))
    assert subscription.closed and subscription.pending() == 0
    assert journal._subscribers == {}


async def test_slow_subscriber_drops_the_oldest(store: Store) -> None:
    journal = ActivityJournal(store.ledger)
    items = sequence([3, 2])
    async with journal.subscribe(SID, maxsize=3) as small:
        await journal.publish(items)
        assert small.dropped == 2
        assert drain(small) == [i.activity for i in items[2:]]
    default = journal.subscribe(SID)
    more = sequence([3, 2, 1005])[5:]
    await journal.publish(more)
    assert default.dropped == 5
    assert default.pending() == 1000
    assert drain(default)[0] == more[5].activity
    with pytest.raises(ValueError):
        journal.subscribe(SID, maxsize=0)
    with pytest.raises(ValueError):
        journal.subscribe("not-a-session")


# -- paging -----------------------------------------------------------------------------------


async def test_page_equals_page_history_on_examples(store: Store) -> None:
    journal = ActivityJournal(store.ledger)
    items = sequence([2, 0, 5, 1, 0, 3, 1])
    await journal.publish(items)
    ids = [i.activity.event_id for i in items]
    cases: list[tuple[int, str | None, int]] = [
        (0, None, 0),
        (0, None, 1),
        (0, None, 3),
        (2, None, 2),
        (2, ids[3], 2),
        (2, ids[6], 4),
        (2, "0000a1b2-c3d4-4e5f-8a6b-7c8d9e0f00ff", 4),
        (1, None, 4),
        (4, None, 1),
        (6, None, 5),
        (7, None, 5),
        (40, None, 5),
    ]
    for after_revision, after_event, limit in cases:
        expected = _outcome(items, after_revision, after_event, limit)
        got = await _page_outcome(
            journal.page(
                SID, RID, after_revision=after_revision, after_event_id=after_event, limit=limit
            )
        )
        assert got == expected, (after_revision, after_event, limit)
    assert await journal.page(SID, RID2) == HistoryPage([], None, None)
    for bad in (-1, 101):
        with pytest.raises(ValueError):
            await journal.page(SID, RID, limit=bad)
    with pytest.raises(ValueError):
        await journal.page(SID, RID, after_revision=-1)


async def test_page_reads_log_n_plus_page_records(store: Store) -> None:
    """A page deep into a long journal reads O(log n + page) records, not the prefix."""
    ledger = Wrapped(store.ledger)
    journal = ActivityJournal(ledger)
    items = sequence([1] * 2000 + [300] + [1] * 100)
    await journal.publish(items)
    n = len(items)
    search = math.ceil(math.log2(n + 1))
    for after_revision, limit in ((1500, 10), (1999, 7), (2050, 100), (0, 50)):
        ledger.records_read = ledger.read_calls = 0
        page = await journal.page(SID, RID, after_revision=after_revision, limit=limit)
        assert page == page_history(items, after_revision=after_revision, limit=limit)
        assert ledger.records_read <= search + limit + 1
        assert ledger.read_calls <= search + 1
    # A big revision (300 activities at revision 2000) is paged by event cursor.
    ledger.records_read = 0
    page = await journal.page(SID, RID, after_revision=2000, limit=20)
    assert len(page.records) == 20 and page.next_event_id is not None
    assert ledger.records_read <= search + 21
    # Publishing compares with the journal's tail only.
    ledger.records_read = 0
    assert await journal.publish(items[-3:]) == 0
    assert ledger.records_read == 64


# -- properties -------------------------------------------------------------------------------


def _outcome(
    items: Sequence[ProjectedActivity], after_revision: int, after_event_id: str | None, limit: int
) -> HistoryPage | str:
    """`page_history`'s page, or the message of the `HistoryCursorError` that refused its
    cursor."""
    try:
        return page_history(
            items, after_revision=after_revision, after_event_id=after_event_id, limit=limit
        )
    except HistoryCursorError as exc:
        return str(exc)


async def _page_outcome(paging: Awaitable[HistoryPage]) -> HistoryPage | str:
    try:
        return await paging
    except HistoryCursorError as exc:
        return str(exc)


async def _check_pages(
    url: str, sizes: list[int], splits: list[int], limit: int, starts: list[tuple[int, int]]
) -> None:
    items = sequence(sizes)
    async with open_store(url) as opened:
        journal = ActivityJournal(opened.ledger)
        # Publish in pieces, each piece re-sending a little of the previous one.
        cut = 0
        for split in sorted({min(s, len(items)) for s in splits} | {len(items)}):
            start = max(0, cut - 2)
            await journal.publish(items[start:split])
            cut = split
        assert await journal.records(SID, RID) == items
        # Walking the journal reproduces page_history page by page.
        seen: list[ProjectedActivity] = []
        after_revision, after_event = 0, None
        for _ in range(len(items) + 2):
            got = await journal.page(
                SID, RID, after_revision=after_revision, after_event_id=after_event, limit=limit
            )
            expected = page_history(
                items, after_revision=after_revision, after_event_id=after_event, limit=limit
            )
            assert got == expected
            seen.extend(got.records)
            if got.next_revision is None:
                break
            after_revision, after_event = got.next_revision, got.next_event_id
        assert seen == items
        # Arbitrary start cursors agree too.
        ids = [i.activity.event_id for i in items]
        for revision, pick in starts:
            event = ids[pick % len(ids)] if ids and pick >= 0 else None
            got = await _page_outcome(
                journal.page(SID, RID, after_revision=revision, after_event_id=event, limit=limit)
            )
            assert got == _outcome(items, revision, event, limit)


page_cases = {
    "sizes": st.lists(st.integers(min_value=0, max_value=9), max_size=16),
    "splits": st.lists(st.integers(min_value=0, max_value=80), max_size=4),
    "limit": st.one_of(st.integers(min_value=1, max_value=8), st.sampled_from([0, 50, 100])),
    "starts": st.lists(
        st.tuples(st.integers(min_value=0, max_value=18), st.integers(min_value=-3, max_value=80)),
        max_size=4,
    ),
}


@settings(max_examples=150, deadline=None)
@given(**page_cases)
def test_journal_pages_match_page_history_memory(
    sizes: list[int], splits: list[int], limit: int, starts: list[tuple[int, int]]
) -> None:
    asyncio.run(_check_pages("memory://", sizes, splits, limit, starts))


@settings(max_examples=40, deadline=None)
@given(**page_cases)
def test_journal_pages_match_page_history_sqlite(
    sizes: list[int], splits: list[int], limit: int, starts: list[tuple[int, int]]
) -> None:
    with tempfile.TemporaryDirectory() as directory:
        url = f"sqlite:///{directory}/j.db"
        asyncio.run(_check_pages(url, sizes, splits, limit, starts))
