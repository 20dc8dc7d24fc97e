"""`JournalFollower`: a run's activities as another process publishes them, read from the
durable journal (what a front door forwards while a worker executes the run)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from flowledger.storage import Store, open_store
from flowledger.workflows.activities.activity import ActivityRecord
from flowledger.workflows.activities.follow import JournalFollower
from flowledger.workflows.activities.journal import ActivityJournal

from .._activity_support import RID, RID2, SID, sequence


@pytest.fixture(params=["memory", "sqlite"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    url = "memory://" if request.param == "memory" else f"sqlite:///{tmp_path}/f.db"
    async with open_store(url) as opened:
        yield opened


async def collect(follower: JournalFollower) -> list[ActivityRecord]:
    return [record async for record in follower]


def ids(records: list[ActivityRecord]) -> list[str]:
    return [r.event_id for r in records]


async def test_follows_what_another_journal_publishes_from_where_it_began(store: Store) -> None:
    """The publisher is another journal object over the same store (another process, in
    production): nothing reaches the follower live, everything through the journal."""
    items = sequence([2, 3, 2])
    publisher, reader = ActivityJournal(store.ledger), ActivityJournal(store.ledger)
    await publisher.publish(items[:2])  # before following began: not delivered
    follower = await JournalFollower(reader, SID, RID, interval=0.01).start()
    seen = asyncio.ensure_future(collect(follower))
    await publisher.publish(items[2:5])
    await asyncio.sleep(0.05)  # several reads, each record once
    await publisher.publish(items[5:])
    follower.close()  # what is durable now is still delivered
    assert ids(await asyncio.wait_for(seen, 60)) == [i.activity.event_id for i in items[2:]]


async def test_without_start_it_reads_from_the_beginning(store: Store) -> None:
    items = sequence([1, 1])
    await ActivityJournal(store.ledger).publish(items)
    follower = JournalFollower(ActivityJournal(store.ledger), SID, RID)
    follower.close()
    assert ids(await collect(follower)) == [i.activity.event_id for i in items]


async def test_only_the_followed_run(store: Store) -> None:
    journal = ActivityJournal(store.ledger)
    follower = JournalFollower(journal, SID, RID)
    await journal.publish(sequence([2], run_id=RID2))
    await journal.publish(sequence([1], run_id=RID))
    follower.close()
    assert [r.run_id for r in await collect(follower)] == [RID]


async def test_close_drains_more_than_one_page(store: Store) -> None:
    journal = ActivityJournal(store.ledger)
    items = sequence([300, 300, 300, 300])  # more than one read's limit
    await journal.publish(items)
    follower = JournalFollower(journal, SID, RID)
    follower.close()
    assert ids(await collect(follower)) == [i.activity.event_id for i in items]


async def test_a_failed_read_ends_the_iteration_quietly(store: Store) -> None:
    journal = ActivityJournal(store.ledger)
    await journal.publish(sequence([1]))
    follower = await JournalFollower(journal, SID, RID, interval=0.01).start()
    await store.close()  # every later read fails
    assert await asyncio.wait_for(collect(follower), 60) == []


async def test_an_empty_run_and_a_closed_follower_end_at_once(store: Store) -> None:
    journal = ActivityJournal(store.ledger)
    follower = await JournalFollower(journal, SID, RID, interval=60).start()
    seen = asyncio.ensure_future(collect(follower))
    await asyncio.sleep(0.01)
    follower.close()  # wakes the waiting reader: no 60 s wait (the deadline is half that)
    assert await asyncio.wait_for(seen, 30) == []


def test_interval_is_checked(store: Store) -> None:
    journal = ActivityJournal(store.ledger)
    for bad in (0, -1, 61):
        with pytest.raises(ValueError, match="interval"):
            JournalFollower(journal, SID, RID, interval=bad)
