"""Group commit: appends issued together share a transaction, yet each keeps its own outcome.

The conformance part runs on every backend (through the Ledger API only): many concurrent
appends all land and each caller sees its own tip, one member's conflict or stale fence
fails only that member, and a caller is answered only once its records are visible to
another connection. The SQLite part checks what only that backend does: appends issued
together commit once, a failed COMMIT fails every member of its group (and a retry
succeeds), a call cancelled in line writes nothing, and threads with their own event loops
may share one store.
"""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from flowledger.storage import (
    FencedWriteError,
    LedgerConflictError,
    Store,
    StoreClosedError,
    open_store,
)
from flowledger.storage.sqlite.database import Database

from ._procs import run_threads, shares_state

LOGS = 50


async def test_concurrent_appends_all_land_with_their_own_tips(store: Store) -> None:
    for round_ in range(3):
        tips = await asyncio.gather(
            *(
                store.ledger.append(f"log/{i}", [b"%d" % round_] * (1 + i % 3), expected=tip)
                for i, tip in enumerate([await store.ledger.tip(f"log/{i}") for i in range(LOGS)])
            )
        )
        for i, tip in enumerate(tips):
            assert tip == (round_ + 1) * (1 + i % 3)
            assert await store.ledger.tip(f"log/{i}") == tip
    assert len(await store.ledger.names("log/")) == LOGS


async def test_a_conflicting_member_fails_alone(store: Store) -> None:
    await store.ledger.append("hot", [b"first"], expected=0)
    outcomes = await asyncio.gather(
        *(store.ledger.append(f"cold/{i}", [b"x"], expected=0) for i in range(10)),
        store.ledger.append("hot", [b"stale"], expected=0),  # the tip is 1
        *(store.ledger.append(f"warm/{i}", [b"y"], expected=0) for i in range(10)),
        return_exceptions=True,
    )
    assert outcomes[:10] == [1] * 10 and outcomes[11:] == [1] * 10
    conflict = outcomes[10]
    assert isinstance(conflict, LedgerConflictError)
    assert (conflict.expected, conflict.actual) == (0, 1)
    assert [r.payload for r in await store.ledger.read("hot")] == [b"first"]
    assert len(await store.ledger.names("cold/")) == len(await store.ledger.names("warm/")) == 10


async def test_two_members_racing_for_one_log_have_one_winner(store: Store) -> None:
    outcomes = await asyncio.gather(
        *(store.ledger.append("race", [b"%d" % i], expected=0) for i in range(5)),
        return_exceptions=True,
    )
    assert sorted(o for o in outcomes if isinstance(o, int)) == [1]
    assert sum(isinstance(o, LedgerConflictError) for o in outcomes) == 4
    assert await store.ledger.tip("race") == 1


async def test_a_member_with_a_stale_fence_fails_alone(store: Store) -> None:
    old = await store.leases.acquire("owner", ttl=10)
    await old.release()
    new = await store.leases.acquire("owner", ttl=10)
    outcomes = await asyncio.gather(
        store.ledger.append("a", [b"ok"], expected=0, fence=new.fence),
        store.ledger.append("b", [b"refused"], expected=0, fence=old.fence),
        store.ledger.append("c", [b"ok"], expected=0),
        return_exceptions=True,
    )
    assert outcomes[0] == 1 and outcomes[2] == 1
    assert isinstance(outcomes[1], FencedWriteError)
    assert await store.ledger.tip("b") == 0
    await new.release()


async def test_a_caller_is_answered_only_when_another_connection_sees_its_records(
    store: Store, store_url: str
) -> None:
    if not shares_state(store_url):
        pytest.skip("memory:// has no second connection")
    async with open_store(store_url) as other:
        seen: list[tuple[int, int]] = []

        async def append_then_look(i: int) -> None:
            tip = await store.ledger.append(f"seen/{i}", [b"a", b"b"], expected=0)
            seen.append((tip, await other.ledger.tip(f"seen/{i}")))

        await asyncio.gather(*(append_then_look(i) for i in range(30)))
        assert seen == [(2, 2)] * 30


# --- SQLite ------------------------------------------------------------------------------


def sqlite_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'group.db'}"


def count_commits(monkeypatch: pytest.MonkeyPatch, fail: list[Exception]) -> list[int]:
    """Count COMMITs of every SQLite store; the next one raises ``fail.pop()`` if any."""
    commits = [0]
    real = Database.commit

    def commit(self: Database) -> None:
        commits[0] += 1
        if fail:
            raise fail.pop()
        real(self)

    monkeypatch.setattr(Database, "commit", commit)
    return commits


async def test_appends_issued_together_share_one_commit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with open_store(sqlite_url(tmp_path)) as store:
        commits = count_commits(monkeypatch, [])
        tips = await asyncio.gather(
            *(store.ledger.append(f"log/{i}", [b"r"], expected=0) for i in range(LOGS))
        )
        assert tips == [1] * LOGS
        assert commits == [1]
        await store.ledger.append("lone", [b"r"], expected=0)  # alone: a commit of its own
        assert commits == [2]
    conn = sqlite3.connect(tmp_path / "group.db")
    try:
        assert conn.execute("SELECT count(*) FROM ledger_records").fetchone() == (LOGS + 1,)
    finally:
        conn.close()


async def test_a_failed_commit_fails_every_member_and_a_retry_succeeds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with open_store(sqlite_url(tmp_path)) as store:
        await store.ledger.append("known", [b"r"], expected=0)  # its log id is cached
        failure = sqlite3.OperationalError("disk I/O error")
        count_commits(monkeypatch, [failure])
        # "known" last: a first append to the log of the previous one would go alone
        members = [*((f"new/{i}", 0) for i in range(9)), ("known", 1)]
        outcomes = await asyncio.gather(
            *(store.ledger.append(name, [b"s"], expected=tip) for name, tip in members),
            return_exceptions=True,
        )
        for outcome in outcomes:
            assert isinstance(outcome, sqlite3.OperationalError), outcome
            assert "disk I/O error" in str(outcome)
            assert "group of 10 ledger appends failed" in str(outcome)
            assert outcome.__cause__ is failure
        assert await store.ledger.tip("known") == 1
        assert await store.ledger.names("new/") == []
        retried = await asyncio.gather(
            *(store.ledger.append(name, [b"s"], expected=tip) for name, tip in members)
        )
        assert retried == [1] * 9 + [2]
        assert [r.payload for r in await store.ledger.read("new/3")] == [b"s"]
    async with open_store(sqlite_url(tmp_path)) as reopened:  # and it is on disk
        assert await reopened.ledger.tip("known") == 2
        assert len(await reopened.ledger.names("new/")) == 9


async def test_a_failed_commit_loses_no_later_group(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with open_store(sqlite_url(tmp_path)) as store:
        count_commits(monkeypatch, [sqlite3.OperationalError("disk I/O error")])
        first = asyncio.gather(
            *(store.ledger.append(f"a/{i}", [b"r"], expected=0) for i in range(5)),
            return_exceptions=True,
        )
        await asyncio.sleep(0)  # the first group is in line
        second = asyncio.gather(
            *(store.ledger.append(f"b/{i}", [b"r"], expected=0) for i in range(5)),
            return_exceptions=True,
        )
        failed, landed = await first, await second
        assert all(isinstance(o, sqlite3.OperationalError) for o in failed)
        assert landed == [1] * 5
        assert len(await store.ledger.names("b/")) == 5


async def test_an_append_cancelled_in_line_writes_nothing(tmp_path: Path) -> None:
    async with open_store(sqlite_url(tmp_path)) as store:
        doomed = asyncio.ensure_future(store.ledger.append("doomed", [b"r"], expected=0))
        kept = asyncio.ensure_future(store.ledger.append("kept", [b"r"], expected=0))
        await asyncio.sleep(0)  # both wait in line
        doomed.cancel()
        assert await kept == 1
        with pytest.raises(asyncio.CancelledError):
            await doomed
        assert await store.ledger.tip("doomed") == 0
        assert await store.ledger.append("doomed", [b"r"], expected=0) == 1


async def test_threads_with_their_own_loops_share_one_store(tmp_path: Path) -> None:
    threads, rounds, per_round = 4, 5, 10
    async with open_store(sqlite_url(tmp_path)) as store:

        async def work(me: int) -> list[int]:
            tips: list[int] = []
            for r in range(rounds):
                tips += await asyncio.gather(
                    *(
                        store.ledger.append(f"t{me}/{i}", [b"%d" % r], expected=r)
                        for i in range(per_round)
                    )
                )
                await store.kv.put(f"t{me}/round", b"%d" % r, expected=r)
            return tips

        def thread_main(me: int) -> Any:
            return asyncio.run(work(me))

        results = await asyncio.to_thread(run_threads, threads, thread_main, 60.0)
        for tips in results:
            assert sorted(tips) == sorted(list(range(1, rounds + 1)) * per_round)
        for me in range(threads):
            assert (await store.kv.get(f"t{me}/round")).revision == rounds
            for i in range(per_round):
                records = await store.ledger.read(f"t{me}/{i}")
                assert [r.payload for r in records] == [b"%d" % r for r in range(rounds)]


async def test_a_lone_writer_appends_without_waiting_in_line(tmp_path: Path) -> None:
    """One writer appending to one log commits at once, never suspended (no hand-off)."""
    async with open_store(sqlite_url(tmp_path)) as store:
        assert await store.ledger.append("solo", [b"0"], expected=0) == 1
        for tip in range(1, 4):
            call = store.ledger.append("solo", [b"%d" % tip], expected=tip)
            with pytest.raises(StopIteration) as done:
                call.send(None)  # type: ignore[attr-defined]
            assert done.value.value == tip + 1
        assert await store.ledger.tip("solo") == 4


async def test_blocking_appends_from_threads_share_the_store_with_grouped_ones(
    tmp_path: Path,
) -> None:
    """`append_blocking` (synchronous callers, no event loop) takes the connection in
    turn with the event loop's grouped appends and other threads' blocking ones: every
    record lands once, in order, each caller sees its own tips."""
    threads, rounds = 4, 20
    async with open_store(sqlite_url(tmp_path)) as store:
        ledger: Any = store.ledger

        def blocking(me: int) -> list[int]:
            return [
                ledger.append_blocking(f"sync/{me}", [b"%d" % r], expected=r) for r in range(rounds)
            ]

        async def grouped() -> None:
            for r in range(rounds):
                await asyncio.gather(
                    *(store.ledger.append(f"async/{i}", [b"%d" % r], expected=r) for i in range(5))
                )

        results, _ = await asyncio.gather(
            asyncio.to_thread(run_threads, threads, blocking, 60.0), grouped()
        )
        assert results == [list(range(1, rounds + 1))] * threads
        for name in [*(f"sync/{me}" for me in range(threads)), *(f"async/{i}" for i in range(5))]:
            records = await store.ledger.read(name, limit=100)
            assert [r.payload for r in records] == [b"%d" % r for r in range(rounds)]
        with pytest.raises(LedgerConflictError):
            ledger.append_blocking("sync/0", [b"stale"], expected=0)
        assert await store.ledger.tip("sync/0") == rounds


async def test_a_failed_blocking_append_writes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with open_store(sqlite_url(tmp_path)) as store:
        ledger: Any = store.ledger
        assert ledger.append_blocking("log", [b"a"], expected=0) == 1
        commits = count_commits(monkeypatch, [sqlite3.OperationalError("disk I/O error")])
        with pytest.raises(sqlite3.OperationalError, match="disk I/O error"):
            await asyncio.to_thread(
                ledger.append_blocking, "log", [b"b", b"c"], expected=1, attachments={}
            )
        assert commits == [1]
        assert await store.ledger.tip("log") == 1
        assert [r.payload for r in await store.ledger.read("log")] == [b"a"]
        assert ledger.append_blocking("log", [b"b"], expected=1) == 2
    async with open_store(sqlite_url(tmp_path)) as reopened:
        assert [r.payload for r in await reopened.ledger.read("log")] == [b"a", b"b"]
        closed: Any = reopened.ledger
    with pytest.raises(StoreClosedError):
        closed.append_blocking("log", [b"x"], expected=2)
