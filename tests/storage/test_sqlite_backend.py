"""What only the SQLite backend has: URLs, pragmas, the schema version, waiting for
locks, and sharing one file between stores and processes.

The behaviour it shares with the memory oracle is covered by the conformance suite.
"""

from __future__ import annotations

import asyncio
import json
import os
import sqlite3
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from flowledger import storage
from flowledger.storage import (
    AttachmentNotFoundError,
    BlobConflictError,
    ConflictError,
    KeyNotFoundError,
    LeaseHeldError,
    LedgerConflictError,
    Store,
    StoreBrokenError,
    UnsupportedURLError,
    digest_of,
    open_store,
)
from flowledger.storage.fence import Fence
from flowledger.storage.sqlite import (
    SCHEMA_VERSION,
    SchemaVersionError,
    SQLiteSettings,
    parse_sqlite_url,
)

from ._procs import Child


def url_for(path: Path, query: str = "") -> str:
    assert path.is_absolute()
    return f"sqlite:///{path}" + (f"?{query}" if query else "")


async def on_connection(store: Store, fn: Callable[[sqlite3.Connection], Any]) -> Any:
    """Run ``fn`` on the store's own connection."""
    worker = store.kv._worker  # type: ignore[attr-defined]
    return await worker.call(worker.db.run, fn)


async def pragma(store: Store, name: str) -> Any:
    return await on_connection(store, lambda conn: conn.execute(f"PRAGMA {name}").fetchone()[0])


# --- URLs -------------------------------------------------------------------------------


def test_parse_relative_and_absolute_paths() -> None:
    assert parse_sqlite_url("sqlite:///data/store.db") == SQLiteSettings("data/store.db")
    assert parse_sqlite_url("sqlite:////var/lib/x.db") == SQLiteSettings("/var/lib/x.db")
    assert parse_sqlite_url("SQLite:///x.db").path == "x.db"
    assert parse_sqlite_url("sqlite:///my%20store.db").path == "my store.db"


@pytest.mark.parametrize(
    ("query", "synchronous", "busy_timeout_ms"),
    [
        ("", "FULL", 5000),
        ("synchronous=NORMAL", "NORMAL", 5000),
        ("synchronous=off", "OFF", 5000),
        ("synchronous=Full", "FULL", 5000),
        ("busy_timeout=0", "FULL", 0),
        ("busy_timeout=250&synchronous=normal", "NORMAL", 250),
    ],
)
def test_parse_options(query: str, synchronous: str, busy_timeout_ms: int) -> None:
    settings = parse_sqlite_url("sqlite:///s.db" + (f"?{query}" if query else ""))
    assert settings == SQLiteSettings("s.db", synchronous, busy_timeout_ms)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("sqlite:///", "path is empty"),
        ("sqlite:///?synchronous=FULL", "path is empty"),
        ("sqlite:////", "names a directory"),
        ("sqlite:///dir/", "names a directory"),
        ("sqlite://host/x.db", "no host"),
        ("sqlite:x.db", "expected sqlite:///"),
        ("sqlite:/x.db", "expected sqlite:///"),
        ("sqlite:///x.db#frag", "fragment"),
        ("sqlite:///x%00.db", "NUL"),
        ("sqlite:///x.db?mode=ro", "unknown option 'mode'"),
        ("sqlite:///x.db?synchronous=EXTRA", "synchronous must be FULL, NORMAL or OFF"),
        ("sqlite:///x.db?synchronous=", "synchronous must be"),
        ("sqlite:///x.db?synchronous", "malformed query"),
        ("sqlite:///x.db?busy_timeout=-1", "busy_timeout must be a whole number"),
        ("sqlite:///x.db?busy_timeout=1.5", "busy_timeout must be a whole number"),
        ("sqlite:///x.db?busy_timeout=abc", "busy_timeout must be a whole number"),
        ("sqlite:///x.db?busy_timeout=99999999999", "busy_timeout must be a whole number"),
        ("sqlite:///x.db?busy_timeout=1&busy_timeout=2", "more than once"),
    ],
)
async def test_bad_urls_are_rejected(url: str, reason: str) -> None:
    with pytest.raises(UnsupportedURLError, match=reason) as caught:
        parse_sqlite_url(url)
    assert caught.value.url == url
    with pytest.raises(UnsupportedURLError, match=reason):
        await open_store(url)


async def test_relative_path_resolves_against_cwd(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "data").mkdir()
    async with open_store("sqlite:///data/rel.db") as store:
        await store.kv.put("k", b"v", expected=0)
    assert (tmp_path / "data" / "rel.db").is_file()


async def test_absolute_path(tmp_path: Path) -> None:
    path = tmp_path / "abs.db"
    url = f"sqlite:///{path}"
    assert url.startswith("sqlite:////")
    async with open_store(url) as store:
        assert store.url == url
        await store.kv.put("k", b"v", expected=0)
    assert path.is_file()


async def test_missing_parent_directory_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="directory") as caught:
        await open_store(url_for(tmp_path / "nope" / "s.db"))
    assert caught.value.filename == str(tmp_path / "nope")
    assert not (tmp_path / "nope").exists()


async def test_path_that_is_a_directory_is_refused(tmp_path: Path) -> None:
    with pytest.raises(IsADirectoryError):
        await open_store(url_for(tmp_path))


# --- settings ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("query", "level"), [("", 2), ("synchronous=normal", 1), ("synchronous=OFF", 0)]
)
async def test_pragmas_are_applied(tmp_path: Path, query: str, level: int) -> None:
    async with open_store(url_for(tmp_path / "s.db", query)) as store:
        assert await pragma(store, "journal_mode") == "wal"
        assert await pragma(store, "synchronous") == level
        # SQLite's own busy handler would sleep inside the event loop; the store waits
        # for locks itself (see the busy tests below).
        assert await pragma(store, "busy_timeout") == 0
    # WAL is a property of the file, visible to any later connection.
    conn = sqlite3.connect(tmp_path / "s.db")
    try:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    finally:
        conn.close()


def hold_write_lock(path: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("BEGIN IMMEDIATE")
    return conn


async def test_a_locked_database_is_waited_for_without_blocking_the_loop(tmp_path: Path) -> None:
    async with open_store(url_for(tmp_path / "s.db")) as store:
        rival = hold_write_lock(tmp_path / "s.db")
        ticks = 0

        async def ticker() -> None:
            nonlocal ticks
            while True:
                ticks += 1
                await asyncio.sleep(0.005)

        ticking = asyncio.ensure_future(ticker())
        write = asyncio.ensure_future(store.kv.put("k", b"v", expected=0))
        await asyncio.sleep(0.2)
        assert not write.done()  # still waiting for the rival's lock ...
        # ... while the event loop kept running (a blocked loop ticks once; a busy machine
        # may tick far fewer than 40 times in 0.2 s, so only "more than once" is asserted)
        assert ticks >= 3
        rival.execute("ROLLBACK")
        rival.close()
        assert await write == 1
        ticking.cancel()


async def test_busy_timeout_bounds_the_wait(tmp_path: Path) -> None:
    async with open_store(url_for(tmp_path / "s.db", "busy_timeout=100")) as store:
        rival = hold_write_lock(tmp_path / "s.db")
        try:
            started = time.monotonic()
            with pytest.raises(sqlite3.OperationalError, match="locked"):
                await store.kv.put("k", b"v", expected=0)
            # it waited the busy timeout; the upper deadline only catches a wait without end
            assert 0.09 <= time.monotonic() - started < 60
        finally:
            rival.close()
        with pytest.raises(KeyNotFoundError):
            await store.kv.get("k")  # nothing was written


# --- schema -----------------------------------------------------------------------------


async def test_schema_version_is_recorded(tmp_path: Path) -> None:
    async with open_store(url_for(tmp_path / "s.db")):
        pass
    conn = sqlite3.connect(tmp_path / "s.db")
    try:
        rows = conn.execute("SELECT key, value FROM flowledger_meta").fetchall()
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    finally:
        conn.close()
    assert rows == [("refs_complete", "1"), ("schema_version", str(SCHEMA_VERSION))]
    assert {
        "kv",
        "blobs",
        "ledger_logs",
        "ledger_records",
        "attachments",
        "attachment_refs",
        "leases",
    } <= tables


@pytest.mark.parametrize("stored", [str(SCHEMA_VERSION + 1), "999", "0", "v2", ""])
async def test_newer_or_unknown_schema_is_refused(tmp_path: Path, stored: str) -> None:
    path = tmp_path / "s.db"
    async with open_store(url_for(path)) as store:
        await store.kv.put("k", b"v", expected=0)
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("UPDATE flowledger_meta SET value = ? WHERE key = 'schema_version'", (stored,))
    conn.close()

    with pytest.raises(SchemaVersionError, match="upgrade flowledger") as caught:
        await open_store(url_for(path))
    assert caught.value.supported == SCHEMA_VERSION
    assert caught.value.path == str(path)
    assert isinstance(caught.value, storage.SchemaVersionError)  # one family for all backends
    assert str(caught.value.found) == stored

    conn = sqlite3.connect(path)
    try:  # refused without writing anything
        assert conn.execute(
            "SELECT value FROM flowledger_meta WHERE key = 'schema_version'"
        ).fetchall() == [(stored,)]
    finally:
        conn.close()


async def test_tip_is_one_index_seek(tmp_path: Path) -> None:
    async with open_store(url_for(tmp_path / "s.db")) as store:
        plan = await on_connection(
            store,
            lambda conn: conn.execute(
                "EXPLAIN QUERY PLAN SELECT max(key) FROM ledger_records "
                "WHERE key BETWEEN 4294967296 AND 8589934591"
            ).fetchall(),
        )
    assert "INTEGER PRIMARY KEY" in str(plan)  # the tip is one b-tree seek, never a scan


# --- persistence and sharing ------------------------------------------------------------


async def test_data_persists_across_close_and_reopen(tmp_path: Path) -> None:
    url = url_for(tmp_path / "s.db")
    blob = os.urandom(100_000)
    attachment = b"attached bytes"
    async with open_store(url) as store:
        await store.kv.put("cfg/a", b"1", expected=0)
        await store.kv.put("cfg/a", b"2", expected=1)
        await store.blobs.put("inputs/x", blob)
        await store.ledger.append(
            "runs/r1", [b"one", b"two"], expected=0, attachments={digest_of(attachment): attachment}
        )
        lease = await store.leases.acquire("owner/r1", ttl=5)
        assert lease.epoch == 1
        await lease.release()

    async with open_store(url) as store:
        entry = await store.kv.get("cfg/a")
        assert (entry.value, entry.revision) == (b"2", 2)
        assert await store.kv.put("cfg/a", b"3", expected=2) == 3
        assert await store.blobs.get("inputs/x") == blob
        assert await store.ledger.tip("runs/r1") == 2
        assert [r.payload for r in await store.ledger.read("runs/r1")] == [b"one", b"two"]
        assert await store.ledger.attachments([digest_of(attachment)]) == {
            digest_of(attachment): attachment
        }
        assert await store.ledger.names() == ["runs/r1"]
        lease = await store.leases.acquire("owner/r1", ttl=5)
        assert lease.epoch == 2  # the epoch counter survives the release and the reopen


async def test_two_stores_on_one_file_see_each_others_writes(tmp_path: Path) -> None:
    url = url_for(tmp_path / "s.db")
    async with open_store(url) as a, open_store(url) as b:
        await a.kv.put("k", b"from a", expected=0)
        assert (await b.kv.get("k")).value == b"from a"
        with pytest.raises(ConflictError) as conflict:
            await b.kv.put("k", b"stale", expected=0)
        assert (conflict.value.expected, conflict.value.actual) == (0, 1)
        assert await b.kv.put("k", b"from b", expected=1) == 2
        assert await a.kv.get("k") == await b.kv.get("k")

        await a.blobs.put("blob", b"x")
        await b.blobs.put("blob", b"x")  # identical bytes: a no-op
        with pytest.raises(BlobConflictError):
            await b.blobs.put("blob", b"y")
        assert await a.blobs.list() == ["blob"]

        assert await a.ledger.append("log", [b"1"], expected=0) == 1
        with pytest.raises(LedgerConflictError) as lc:
            await b.ledger.append("log", [b"other"], expected=0)
        assert (lc.value.name, lc.value.expected, lc.value.actual) == ("log", 0, 1)
        assert await b.ledger.append("log", [b"2"], expected=1) == 2
        assert [r.payload for r in await a.ledger.read("log")] == [b"1", b"2"]

        held = await a.leases.acquire("lease", ttl=5)
        with pytest.raises(LeaseHeldError) as lh:
            await b.leases.acquire("lease")
        assert lh.value.holder_epoch == held.epoch
        await held.release()
        assert (await b.leases.acquire("lease", ttl=5)).epoch == held.epoch + 1

        await a.kv.delete("k")
        with pytest.raises(KeyNotFoundError):
            await b.kv.get("k")
        assert await b.kv.put("k", b"again", expected=0) == 1  # revisions restart


async def test_failed_append_writes_no_attachment(tmp_path: Path) -> None:
    data = b"would-be attachment"
    async with open_store(url_for(tmp_path / "s.db")) as store:
        await store.ledger.append("log", [b"1"], expected=0)
        with pytest.raises(LedgerConflictError):
            await store.ledger.append(
                "log", [b"x"], expected=0, attachments={digest_of(data): data}
            )
        with pytest.raises(AttachmentNotFoundError) as missing:
            await store.ledger.attachments([digest_of(data)])
        assert missing.value.digest == digest_of(data)
        count = await on_connection(
            store, lambda conn: conn.execute("SELECT count(*) FROM attachments").fetchone()[0]
        )
        assert count == 0


async def test_names_skip_over_long_logs(tmp_path: Path) -> None:
    async with open_store(url_for(tmp_path / "s.db", "synchronous=OFF")) as store:
        for name in ["a", "a/b", "ab", "b/c", "runs/1", "runs/2"]:
            await store.ledger.append(name, [b"r"] * 64, expected=0)
            await store.ledger.append(name, [b"r"] * 64, expected=64)
        assert await store.ledger.names() == ["a", "a/b", "ab", "b/c", "runs/1", "runs/2"]
        assert await store.ledger.names("a") == ["a", "a/b", "ab"]
        assert await store.ledger.names("a/") == ["a/b"]
        assert await store.ledger.names("runs/") == ["runs/1", "runs/2"]
        assert await store.ledger.names("z") == []
        assert await store.ledger.names("é") == []
        assert await store.ledger.names("a\x00") == []
        assert await store.ledger.read("a", after=2**70) == []
        assert [r.seq for r in await store.ledger.read("a", after=126, limit=5)] == [127, 128]


async def test_empty_values_stay_empty_bytes(tmp_path: Path) -> None:
    async with open_store(url_for(tmp_path / "s.db")) as store:
        await store.kv.put("k", b"", expected=0)
        assert (await store.kv.get("k")).value == b""
        await store.blobs.put("b", b"")
        await store.blobs.put("b", b"")
        assert await store.blobs.get("b") == b""
        await store.ledger.append("l", [b""], expected=0, attachments={digest_of(b""): b""})
        assert (await store.ledger.read("l"))[0].payload == b""
        assert await store.ledger.attachments([digest_of(b"")]) == {digest_of(b""): b""}


# --- lifecycle --------------------------------------------------------------------------


async def test_close_lets_started_calls_finish(tmp_path: Path) -> None:
    store = await open_store(url_for(tmp_path / "s.db", "synchronous=OFF"))
    pending = [
        asyncio.ensure_future(store.ledger.append("l", [b"%d" % i], expected=i)) for i in range(50)
    ]
    await asyncio.sleep(0)  # every append has run: a call is one transaction, never suspended
    await store.close()
    assert await asyncio.gather(*pending) == list(range(1, 51))
    async with open_store(url_for(tmp_path / "s.db")) as reopened:
        assert await reopened.ledger.tip("l") == 50


async def test_a_call_cancelled_before_it_ran_wrote_nothing(tmp_path: Path) -> None:
    async with open_store(url_for(tmp_path / "s.db")) as store:
        call = asyncio.ensure_future(store.kv.put("k", b"v", expected=0))
        call.cancel()
        with pytest.raises(asyncio.CancelledError):
            await call
        with pytest.raises(KeyNotFoundError):
            await store.kv.get("k")
        assert await store.kv.put("k", b"v", expected=0) == 1  # and the store still works


async def test_concurrent_tasks_on_one_store(tmp_path: Path) -> None:
    async with open_store(url_for(tmp_path / "s.db", "synchronous=OFF")) as store:
        await store.kv.put("counter", b"0", expected=0)

        async def increment() -> int:
            conflicts = 0
            while True:
                entry = await store.kv.get("counter")
                try:
                    await store.kv.put(
                        "counter", b"%d" % (int(entry.value) + 1), expected=entry.revision
                    )
                    return conflicts
                except ConflictError:
                    conflicts += 1

        await asyncio.gather(*(increment() for _ in range(40)))
        assert (await store.kv.get("counter")).value == b"40"


async def test_store_is_usable_from_another_event_loop(tmp_path: Path) -> None:
    async with open_store(url_for(tmp_path / "s.db")) as store:

        async def elsewhere() -> bytes:
            await store.kv.put("k", b"from thread", expected=0)
            return (await store.kv.get("k")).value

        assert await asyncio.to_thread(asyncio.run, elsewhere()) == b"from thread"
        assert (await store.kv.get("k")).value == b"from thread"


# --- several processes --------------------------------------------------------------------

_CHILD_PRELUDE = """
import asyncio, json, os, sys, time
from flowledger.storage import ConflictError, KeyNotFoundError, LedgerConflictError, open_store
from flowledger.storage import digest_of
url, me, count, start_at = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
"""

_CAS_CHILD = """
async def main():
    conflicts = 0
    async with open_store(url) as store:
        await asyncio.sleep(max(0.0, start_at - time.time()))
        for _ in range(count):
            while True:
                entry = await store.kv.get("counter")
                try:
                    await store.kv.put(
                        "counter", b"%d" % (int(entry.value) + 1), expected=entry.revision
                    )
                    break
                except ConflictError:
                    conflicts += 1
    print(json.dumps({"conflicts": conflicts}))
asyncio.run(main())
"""

_LEDGER_CHILD = """
async def main():
    won, lost = [], []
    async with open_store(url) as store:
        await asyncio.sleep(max(0.0, start_at - time.time()))
        attempt = 0
        while len(won) < count:
            attempt += 1
            payload = f"{me}:{attempt}".encode()
            tip = await store.ledger.tip("race")
            try:
                new_tip = await store.ledger.append(
                    "race", [payload], expected=tip, attachments={digest_of(payload): payload}
                )
                assert new_tip == tip + 1, (new_tip, tip)
                won.append(payload.decode())
            except LedgerConflictError as exc:
                assert exc.expected == tip and exc.actual > tip, (exc.expected, exc.actual, tip)
                lost.append(payload.decode())
    print(json.dumps({"won": won, "lost": lost}))
asyncio.run(main())
"""

_OPEN_CHILD = """
async def main():
    for k in range(count):  # one fresh file per round, every process opening it at once
        await asyncio.sleep(max(0.0, start_at + 0.1 * k - time.time()))
        async with open_store(url.format(k=k)) as store:
            await store.kv.put(f"opener/{me}", b"x", expected=0)
    print(json.dumps({"ok": True}))
asyncio.run(main())
"""


def run_children(body: str, url: str, processes: int, count: int) -> list[dict[str, Any]]:
    """Run ``processes`` copies of a child script that start their work together."""
    script = textwrap.dedent(_CHILD_PRELUDE) + textwrap.dedent(body)
    start_at = time.time() + 1.0  # past every child's interpreter start-up
    children = [
        subprocess.Popen(
            [sys.executable, "-c", script, url, str(i), str(count), str(start_at)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in range(processes)
    ]
    results = []
    for child in children:
        out, err = child.communicate(timeout=60)
        assert child.returncode == 0, err
        results.append(json.loads(out.strip().splitlines()[-1]))
    return results


@pytest.mark.slow
async def test_cas_increments_across_processes(tmp_path: Path) -> None:
    url = url_for(tmp_path / "s.db")
    async with open_store(url) as store:
        await store.kv.put("counter", b"0", expected=0)
    results = await asyncio.to_thread(run_children, _CAS_CHILD, url, 4, 50)
    async with open_store(url) as store:
        entry = await store.kv.get("counter")
    assert entry.value == b"200"
    assert entry.revision == 201  # one revision per increment, none lost or doubled
    assert len(results) == 4


@pytest.mark.slow
async def test_ledger_race_across_processes(tmp_path: Path) -> None:
    url = url_for(tmp_path / "s.db")
    async with open_store(url):
        pass
    results = await asyncio.to_thread(run_children, _LEDGER_CHILD, url, 4, 25)
    won = [p for r in results for p in r["won"]]
    lost = [p for r in results for p in r["lost"]]
    async with open_store(url) as store:
        records = await store.ledger.read("race", limit=1000)
        assert await store.ledger.tip("race") == 100
        # Every winning append has its attachment; no losing one left any behind.
        assert len(await store.ledger.attachments(digest_of(p.encode()) for p in won)) == 100
        for payload in lost:
            with pytest.raises(AttachmentNotFoundError):
                await store.ledger.attachments([digest_of(payload.encode())])
    assert [r.seq for r in records] == list(range(1, 101))
    payloads = [r.payload.decode() for r in records]
    assert len(set(payloads)) == 100
    assert sorted(payloads) == sorted(won)
    # Each process's own appends land in the order it made them.
    for me in range(4):
        mine = [p for p in payloads if p.startswith(f"{me}:")]
        assert mine == results[me]["won"]


@pytest.mark.slow
async def test_processes_racing_to_create_a_fresh_file(tmp_path: Path) -> None:
    # The switch to WAL ignores busy_timeout, so simultaneous first opens must retry it.
    rounds = 10
    url = url_for(tmp_path / "fresh-{k}.db")
    results = await asyncio.to_thread(run_children, _OPEN_CHILD, url, 6, rounds)
    assert results == [{"ok": True}] * 6
    for k in range(rounds):
        async with open_store(url.format(k=k)) as store:
            assert await store.kv.keys("opener/") == [f"opener/{i}" for i in range(6)]


@pytest.mark.slow
async def test_lease_held_by_another_process(tmp_path: Path) -> None:
    url = url_for(tmp_path / "s.db")
    script = textwrap.dedent(
        """
        import asyncio, os, sys
        from flowledger.storage import open_store
        async def main():
            async with open_store(sys.argv[1]) as store:
                lease = await store.leases.acquire("owner", ttl=0.6)
                print(lease.epoch, flush=True)
                await asyncio.to_thread(sys.stdin.readline)
                print(lease.lost_reason, flush=True)
                os._exit(0)  # die holding the lease: no release
        asyncio.run(main())
        """
    )
    child = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        script,
        url,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    assert child.stdout is not None and child.stdin is not None
    try:
        assert int(await child.stdout.readline()) == 1
        async with open_store(url) as store:
            await asyncio.sleep(0.8)  # longer than the TTL: only renewals keep it held
            with pytest.raises(LeaseHeldError) as held:
                await store.leases.acquire("owner")
            assert held.value.holder_epoch == 1
            child.stdin.write(b"go\n")
            await child.stdin.drain()
            assert (await child.stdout.readline()).strip() == b"None"  # never lost
            assert await asyncio.wait_for(child.wait(), 10) == 0
            # Dead without releasing: the grant frees itself once its TTL runs out.
            deadline = time.monotonic() + 5
            while True:
                try:
                    lease = await store.leases.acquire("owner", ttl=5)
                    break
                except LeaseHeldError:
                    assert time.monotonic() < deadline
                    await asyncio.sleep(0.05)
            assert lease.epoch == 2
    finally:
        if child.returncode is None:
            child.kill()
            await child.wait()


# --- files changed under a live store ----------------------------------------------------


@pytest.mark.parametrize("deleted", [("-wal",), ("-shm",), ("-wal", "-shm")])
async def test_deleted_wal_or_shm_breaks_the_store(
    tmp_path: Path, deleted: tuple[str, ...]
) -> None:
    """Deleting the -wal or -shm file of an open database (which SQLite documents as
    unsafe) is found before the next write and at the next lease renewal: every write is
    refused with `StoreBrokenError` saying what happened, and the leases are lost."""
    path = tmp_path / "s.db"
    async with open_store(url_for(path)) as store:
        lease = await store.leases.acquire("owner", ttl=0.3)
        await store.kv.put("k", b"before", expected=0)
        for suffix in deleted:
            os.unlink(f"{path}{suffix}")
        assert await asyncio.wait_for(lease.wait_lost(), 30) == "broken"
        writes: list[Callable[[], Any]] = [
            lambda: store.kv.put("k", b"after", expected=1),
            lambda: store.kv.delete("k"),
            lambda: store.blobs.put("b", b"x"),
            lambda: store.ledger.append("log", [b"x"], expected=0),
            lambda: store.leases.acquire("other", ttl=1),
        ]
        for write in writes:
            with pytest.raises(StoreBrokenError) as caught:
                await write()
            assert caught.value.path == str(path)
            assert caught.value.reason == f"its {deleted[0]} file was deleted"
            assert "refuses writes" in str(caught.value)
        await lease.release()  # no write, no error: the grant runs out by its TTL


async def test_a_replaced_database_file_breaks_the_store(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    async with open_store(url_for(path)) as store:
        await store.kv.put("k", b"before", expected=0)
        copy = tmp_path / "copy.db"
        copy.write_bytes(path.read_bytes())
        os.replace(copy, path)
        with pytest.raises(StoreBrokenError) as caught:
            await store.kv.put("k", b"after", expected=1)
        assert caught.value.reason == "the database file was replaced by another file"
        with pytest.raises(StoreBrokenError):  # sticky
            await store.kv.put("k", b"after", expected=1)


async def test_a_store_whose_files_are_intact_keeps_writing(tmp_path: Path) -> None:
    """Other connections opening and closing, and checkpoints, do not trip the check that
    every write and every lease renewal makes: fenced writes land and renewals renew."""
    path = tmp_path / "s.db"
    async with open_store(url_for(path)) as store:
        # The renewals are made here rather than by a lease's timer: on a loaded machine a
        # timed renewal of a short lease can come after its TTL, which is an expiry, not
        # the check tripping (that would raise `StoreBrokenError`).
        backend = store.leases._backend
        epoch = await backend.try_acquire("owner", "me", 3600)
        fence = Fence("owner", epoch)
        for round in range(5):
            async with open_store(url_for(path)) as other:
                await other.kv.put(f"other/{round}", b"x", expected=0)
            await on_connection(store, lambda c: c.execute("PRAGMA wal_checkpoint(TRUNCATE)"))
            await store.kv.put(f"mine/{round}", b"x", expected=0, fence=fence)
            assert await backend.renew("owner", epoch, "me", 3600) == "renewed"
        await backend.release("owner", epoch, "me")
        assert not (await store.leases.status("owner")).held


@pytest.mark.slow
async def test_wal_and_shm_deleted_under_a_live_owner_process(tmp_path: Path) -> None:
    """A live owner in another process, writing and renewing its lease: after its -wal and
    -shm files are deleted, its next write is refused with `StoreBrokenError` and its lease
    is lost as "broken" - it stops writing instead of corrupting the database."""
    path = tmp_path / "s.db"
    child = Child("own", url_for(path), "owner", "0.6")
    try:
        assert (await child.aread())["epoch"] == 1
        assert await child.aread() == {"writing": True}
        for suffix in ("-wal", "-shm"):
            os.unlink(f"{path}{suffix}")
        refused = await child.aread(30)
        assert refused["write_error"] == "StoreBrokenError"
        assert refused["reason"] in ("its -wal file was deleted", "its -shm file was deleted")
        assert await child.aread(30) == {"lost": "broken", "refused": "StoreBrokenError"}
        assert await asyncio.to_thread(child.proc.wait, 30) == 0
    finally:
        child.close()
