"""History paging: workflows-spec §6.6 steps 1 and 7-9, checklist §12 item 49.

`page_history` is checked against a literal, non-streaming transcription of the spec
(`reference_page`) on examples and with hypothesis; `ActivityJournal.page` must agree
with both (see also test_journal.py)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Sequence
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from flowledger.flow import RunStatus
from flowledger.storage import open_store
from flowledger.workflows.activities.activity import ProjectedActivity, project
from flowledger.workflows.activities.history import (
    DEFAULT_HISTORY_PAGE,
    MAX_HISTORY_PAGE,
    MAX_HISTORY_RECORDS,
    HistoryPage,
    page_history,
)
from flowledger.workflows.activities.journal import ActivityJournal
from flowledger.workflows.errors import HistoryCursorError

from .._activity_support import RID, SID, FakeMetadata, FakeRun, FakeVertex, checkpoint, sequence

ZERO = "00000000-0000-0000-0000-000000000000"
META = FakeMetadata(vertices=(FakeVertex("Only"),))


@pytest.fixture(params=["memory", "sqlite"])
async def journal(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[ActivityJournal]:
    url = "memory://" if request.param == "memory" else f"sqlite:///{tmp_path}/j.db"
    async with open_store(url) as store:
        yield ActivityJournal(store.ledger)


def reference_page(
    records: Sequence[ProjectedActivity],
    after_revision: int,
    after_event_id: str | None,
    limit: int,
) -> HistoryPage:
    """§6.6 steps 7-9 transcribed literally (limit already normalised), except that an
    event cursor that is not at its revision is refused (Reliability II item 7)."""
    remaining = [r for r in records if r.revision >= after_revision]
    if after_event_id:
        at_cursor = [r for r in remaining if r.revision == after_revision]
        ids = [r.activity.event_id for r in at_cursor]
        if after_event_id not in ids:
            raise HistoryCursorError(after_revision, after_event_id)
        drop = ids.index(after_event_id) + 1
        remaining = at_cursor[drop:] + [r for r in remaining if r.revision > after_revision]
    groups: list[list[ProjectedActivity]] = []
    for item in remaining:
        if groups and groups[-1][0].revision == item.revision:
            groups[-1].append(item)
        else:
            groups.append([item])
    page: list[ProjectedActivity] = []
    used = 0
    for group in groups:
        if page and len(page) + len(group) > limit:
            break
        if not page and len(group) > limit:
            page = group[:limit]
            return HistoryPage(page, group[0].revision, page[-1].activity.event_id)
        page.extend(group)
        used += 1
    if used < len(groups) and page:
        return HistoryPage(page, page[-1].revision + 1, None)
    return HistoryPage(page, None, None)


def walk(records: Sequence[ProjectedActivity], limit: int) -> list[HistoryPage]:
    pages = []
    after_revision, after_event = 0, None
    while True:
        page = page_history(
            records, after_revision=after_revision, after_event_id=after_event, limit=limit
        )
        pages.append(page)
        if page.next_revision is None:
            return pages
        after_revision, after_event = page.next_revision, page.next_event_id
        assert len(pages) <= len(records) + 1


def two_checkpoints() -> list[ProjectedActivity]:
    history = [checkpoint(0), checkpoint(1, RunStatus.COMPLETED)]
    return project(FakeRun(status="completed"), META, history)


def one_checkpoint() -> list[ProjectedActivity]:
    return project(FakeRun(status="completed"), META, [checkpoint(0, RunStatus.COMPLETED)])


def test_constants() -> None:
    assert (DEFAULT_HISTORY_PAGE, MAX_HISTORY_PAGE, MAX_HISTORY_RECORDS) == (50, 100, 10_000)


def test_two_checkpoint_paging() -> None:
    """§12 item 49 (first half): limit 1 over (rev 0 running, rev 1 completed)."""
    records = two_checkpoints()
    first = page_history(records, limit=1)
    assert [r.activity.kind for r in first.records] == ["run_started"]
    assert (first.next_revision, first.next_event_id) == (1, None)
    second = page_history(records, after_revision=1, limit=1)
    assert [r.activity.kind for r in second.records] == ["run_completed"]
    assert (second.next_revision, second.next_event_id) == (None, None)


def test_single_checkpoint_paging_splits_the_revision() -> None:
    """§12 item 49 (second half): one completed checkpoint, limit 1 -> run_started with an
    event cursor at revision 0, then the remainder with no cursors."""
    records = one_checkpoint()
    started = records[0].activity
    first = page_history(records, limit=1)
    assert [r.activity.kind for r in first.records] == ["run_started"]
    assert (first.next_revision, first.next_event_id) == (0, started.event_id)
    second = page_history(records, after_revision=0, after_event_id=first.next_event_id, limit=1)
    assert [r.activity.kind for r in second.records] == ["run_completed"]
    assert (second.next_revision, second.next_event_id) == (None, None)


async def test_item_49_through_the_journal(journal: ActivityJournal) -> None:
    """§12 item 49 served from the durable journal."""
    records = two_checkpoints()
    await journal.publish(records)
    first = await journal.page(SID, RID, limit=1)
    assert first == page_history(records, limit=1)
    assert (first.next_revision, first.next_event_id) == (1, None)
    second = await journal.page(SID, RID, after_revision=1, limit=1)
    assert [r.activity.kind for r in second.records] == ["run_completed"]
    assert second.next_revision is None and second.next_event_id is None

    other_run = "0000a1b2-c3d4-4e5f-8a6b-7c8d9e0f0009"
    single = project(
        FakeRun(id=other_run, status="completed"), META, [checkpoint(0, RunStatus.COMPLETED)]
    )
    await journal.publish(single)
    page = await journal.page(SID, other_run, limit=1)
    assert (page.next_revision, page.next_event_id) == (0, single[0].activity.event_id)
    rest = await journal.page(SID, other_run, after_revision=0, after_event_id=page.next_event_id)
    assert [r.activity.kind for r in rest.records] == ["run_completed"]
    assert (rest.next_revision, rest.next_event_id) == (None, None)


def test_limit_rules() -> None:
    """§6.6 step 1: 0 means 50; otherwise 1..100."""
    records = sequence([1] * 120)
    assert len(page_history(records).records) == 50
    assert len(page_history(records, limit=100).records) == 100
    for bad in (-1, 101):
        with pytest.raises(ValueError):
            page_history(records, limit=bad)
    with pytest.raises(ValueError):
        page_history(records, after_revision=-1)
    with pytest.raises(TypeError):
        page_history(records, limit=True)
    with pytest.raises(TypeError):
        page_history(records, after_event_id=5)  # type: ignore[arg-type]


def test_skip_rules() -> None:
    """§6.6 step 7: skip lower revisions; with an event cursor skip through it (inclusive);
    a zero cursor includes the revision. An event that is not at the cursor's revision is
    a typed error, never a silently skipped revision (ours; the reference skips it)."""
    records = sequence([2, 3, 2])  # revisions 0,0,1,1,1,2,2
    ids = [r.activity.event_id for r in records]
    assert page_history(records, after_revision=1).records == records[2:]
    assert page_history(records, after_revision=1, after_event_id=ids[2]).records == records[3:]
    assert page_history(records, after_revision=1, after_event_id=ids[4]).records == records[5:]
    unknown = "0000a1b2-c3d4-4e5f-8a6b-7c8d9e0f00ff"
    # an unknown event, one of another revision, one past the end of the history
    for revision, event in ((1, unknown), (1, ids[0]), (2, ids[4]), (9, ids[6])):
        with pytest.raises(HistoryCursorError) as caught:
            page_history(records, after_revision=revision, after_event_id=event)
        assert (caught.value.after_revision, caught.value.after_event_id) == (revision, event)
        assert str(caught.value) == (
            f"after_event_id {event} is not an activity of revision {revision}"
        )
    for none in (None, "", ZERO):
        assert page_history(records, after_revision=1, after_event_id=none).records == records[2:]
    past = page_history(records, after_revision=9)
    assert past == HistoryPage([], None, None)
    assert page_history([], limit=3) == HistoryPage([], None, None)


def test_fill_takes_whole_revision_groups() -> None:
    """§6.6 step 8: a group that does not fit after other records waits for the next page."""
    records = sequence([2, 3, 1])
    first = page_history(records, limit=4)
    assert first.records == records[:2]
    assert (first.next_revision, first.next_event_id) == (1, None)
    second = page_history(records, after_revision=1, limit=4)
    assert second.records == records[2:]
    assert (second.next_revision, second.next_event_id) == (None, None)
    exact = page_history(records, limit=5)
    assert exact.records == records[:5] and exact.next_revision == 2


def test_split_inside_one_large_revision() -> None:
    """§6.6 step 8: a group larger than the limit is cut, with an event cursor."""
    records = sequence([5, 1])
    pages = walk(records, 2)
    assert [len(p.records) for p in pages] == [2, 2, 2]  # the tail of rev 0, then rev 1
    assert [(p.next_revision, p.next_event_id) for p in pages] == [
        (0, records[1].activity.event_id),
        (0, records[3].activity.event_id),
        (None, None),
    ]
    assert [r for p in pages for r in p.records] == records


def test_empty_revisions_and_virtual_failure() -> None:
    """Revisions without activities are simply absent; a cursor past them still works."""
    records = sequence([1, 0, 0, 2, 0, 1])
    page = page_history(records, after_revision=1, limit=2)
    assert page.records == records[1:3]
    assert page.next_revision == 4
    assert page_history(records, after_revision=4).records == records[3:]


group_sizes = st.lists(st.integers(min_value=0, max_value=7), min_size=0, max_size=14)


@settings(max_examples=300, deadline=None)
@given(sizes=group_sizes, limit=st.integers(min_value=1, max_value=12), data=st.data())
def test_page_history_matches_the_literal_spec(
    sizes: list[int], limit: int, data: st.DataObject
) -> None:
    """Any start position: the streaming pager equals the literal transcription."""
    records = sequence(sizes)
    ids = [r.activity.event_id for r in records]
    after_revision = data.draw(st.integers(min_value=0, max_value=len(sizes) + 1))
    after_event = data.draw(st.one_of(st.none(), st.sampled_from(ids or [ZERO]), st.just(ZERO)))
    cursor = None if after_event in (None, ZERO) else after_event

    def paged(pager: Callable[[], HistoryPage]) -> HistoryPage | str:
        try:
            return pager()
        except HistoryCursorError as exc:
            return str(exc)

    got = paged(
        lambda: page_history(
            records, after_revision=after_revision, after_event_id=after_event, limit=limit
        )
    )
    assert got == paged(lambda: reference_page(records, after_revision, cursor, limit))
    assert isinstance(got, str) or len(got.records) <= limit


@settings(max_examples=300, deadline=None)
@given(sizes=group_sizes, limit=st.integers(min_value=1, max_value=12))
def test_walking_pages_yields_every_record_once(sizes: list[int], limit: int) -> None:
    records = sequence(sizes)
    pages = walk(records, limit)
    assert [r for p in pages for r in p.records] == records
    for page in pages[:-1]:
        assert page.records  # every page but possibly the last makes progress
        # a page ends at a revision boundary unless it carries an event cursor
        if page.next_event_id is None:
            assert page.next_revision == page.records[-1].revision + 1
        else:
            assert page.next_revision == page.records[-1].revision
            assert page.next_event_id == page.records[-1].activity.event_id
