"""What only the PostgreSQL backend has: URLs, the pool, migrations, lost acknowledgements,
the database's clock, and sharing one database between stores and processes.

The behaviour it shares with the memory oracle is covered by the conformance suite. Tests
that need a server use `pg_url` (a fresh schema, dropped afterwards; skipped without a
server, failing when CI=true); the URL tests run without one.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
import textwrap
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from types import TracebackType
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import pytest

psycopg = pytest.importorskip("psycopg")

from flowledger.storage import (  # noqa: E402
    BlobConflictError,
    BlobNotFoundError,
    ConflictError,
    Entry,
    LeaseHeldError,
    LedgerConflictError,
    Store,
    StoreClosedError,
    UnsupportedURLError,
    digest_of,
    open_store,
)
from flowledger.storage import postgres as pg  # noqa: E402
from flowledger.storage.fence import Fence  # noqa: E402
from flowledger.storage.postgres import (  # noqa: E402
    SCHEMA_VERSION,
    PostgresSettings,
    SchemaVersionError,
    parse_postgres_url,
)
from flowledger.storage.postgres import queries as pg_queries  # noqa: E402

from .. import _postgres  # noqa: E402
from .._postgres import postgres_url, require_postgres, with_options  # noqa: E402
from ._procs import Child  # noqa: E402


@pytest.fixture
def pg_url() -> Iterator[str]:
    with postgres_url() as url:
        yield url


@pytest.fixture
async def store(pg_url: str) -> AsyncIterator[Store]:
    async with open_store(pg_url) as opened:
        yield opened


def schema_of(url: str) -> str:
    return parse_postgres_url(url).schema


def admin(query: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Run ``query`` on a connection of its own (autocommit) and return its rows."""
    with psycopg.connect(require_postgres(), autocommit=True) as conn:
        cursor = conn.execute(query, params)
        return cursor.fetchall() if cursor.description else []


def db_of(store: Store) -> Any:
    return store.kv._db  # type: ignore[attr-defined]


# --- URLs -------------------------------------------------------------------------------


def test_parse_defaults() -> None:
    settings = parse_postgres_url("postgresql://alice@db.example:5433/app")
    conninfo = "postgresql://alice@db.example:5433/app?connect_timeout=10"
    # the wake-up listener connects where the store does
    assert settings == PostgresSettings(conninfo, "flowledger", 1, 10, 10, listen=conninfo)
    assert parse_postgres_url("postgres://h/d").conninfo == "postgres://h/d?connect_timeout=10"
    assert parse_postgres_url("PostgreSQL://h/d").schema == "flowledger"


def test_parse_options_and_libpq_passthrough() -> None:
    settings = parse_postgres_url(
        "postgresql://u:p%40ss@h/d?schema=tenant_7&pool_min=2&pool_max=5&connect_timeout=3"
        "&sslmode=require&application_name=my%20app&target_session_attrs=read-write"
    )
    assert (settings.schema, settings.pool_min, settings.pool_max) == ("tenant_7", 2, 5)
    assert settings.connect_timeout == 3
    assert settings.prepare is True
    assert parse_postgres_url("postgresql://h/d?prepare=off").prepare is False
    # Our options are gone; libpq's are passed on, percent-encoded (libpq decodes them).
    assert settings.conninfo == (
        "postgresql://u:p%40ss@h/d?sslmode=require&application_name=my%20app"
        "&target_session_attrs=read-write&connect_timeout=3"
    )
    conninfo = psycopg.conninfo.conninfo_to_dict(settings.conninfo)
    assert conninfo["application_name"] == "my app"
    assert conninfo["password"] == "p@ss"
    assert conninfo["connect_timeout"] == "3"


@pytest.mark.parametrize(
    ("query", "pool_min", "pool_max"),
    [("pool_min=0", 0, 10), ("pool_min=25", 25, 25), ("pool_max=1", 1, 1), ("pool_max=7", 1, 7)],
)
def test_parse_pool_sizes(query: str, pool_min: int, pool_max: int) -> None:
    settings = parse_postgres_url(f"postgresql://h/d?{query}")
    assert (settings.pool_min, settings.pool_max) == (pool_min, pool_max)


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("postgresql:h/d", "expected postgresql://"),
        ("postgresql://h:99999/d", "malformed URL"),
        ("postgresql://h/d#frag", "fragment"),
        ("postgresql://h/d?schema", "malformed query"),
        ("postgresql://h/d?=x", "malformed query"),
        ("postgresql://h/d?sslmode=require&", "malformed query"),
        ("postgresql://h/d?mode=ro", "unknown option 'mode'"),
        ("postgresql://h/d?replication=database", "unknown option 'replication'"),
        ("postgresql://h/d?sslmode=require&sslmode=disable", "more than once"),
        ("postgresql://h/d?schema=a&schema=b", "more than once"),
        ("postgresql://h/d?schema=", "schema must be"),
        ("postgresql://h/d?schema=Tenant", "schema must be"),
        ("postgresql://h/d?schema=1abc", "schema must be"),
        ("postgresql://h/d?schema=pg_x", "schema must be"),
        ("postgresql://h/d?schema=a-b", "schema must be"),
        ("postgresql://h/d?schema=a%22b", "schema must be"),
        ("postgresql://h/d?schema=" + "a" * 64, "schema must be"),
        ("postgresql://h/d?pool_min=-1", "pool_min must be a whole number"),
        ("postgresql://h/d?pool_min=x", "pool_min must be a whole number"),
        ("postgresql://h/d?pool_max=0", "pool_max must be a whole number"),
        ("postgresql://h/d?pool_max=1001", "pool_max must be a whole number"),
        ("postgresql://h/d?pool_min=5&pool_max=2", "must not be less than pool_min"),
        ("postgresql://h/d?connect_timeout=0", "connect_timeout must be a whole number"),
        ("postgresql://h/d?connect_timeout=1.5", "connect_timeout must be a whole number"),
        ("postgresql://h/d?prepare=yes", "prepare must be on or off"),
        ("postgresql://h/d?prepare=", "prepare must be on or off"),
    ],
)
async def test_bad_urls_are_rejected(url: str, reason: str) -> None:
    with pytest.raises(UnsupportedURLError, match=reason) as caught:
        parse_postgres_url(url)
    assert caught.value.url == url
    with pytest.raises(UnsupportedURLError, match=reason):
        await open_store(url)  # rejected before any connection is attempted


async def test_both_schemes_open_the_postgres_backend(pg_url: str) -> None:
    for scheme in ("postgresql", "postgres"):
        url = scheme + pg_url[pg_url.index(":") :]
        async with open_store(url) as store:
            assert isinstance(store.kv, pg.PostgresKV)
            assert isinstance(store.ledger, pg.PostgresLedger)
            assert store.url == url
    with pytest.raises(UnsupportedURLError, match="must be memory, sqlite, postgresql or postgres"):
        await open_store("postgresqlx://h/d")


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("postgresql://alice:s3cret@h/d?bogus=1", "postgresql://alice:***@h/d?bogus=1"),
        ("postgresql://h/d?password=s3cret&bogus=1", "postgresql://h/d?password=***&bogus=1"),
        ("postgresql://h/d?sslpassword=s3cret&x", "postgresql://h/d?sslpassword=***&x"),
    ],
)
def test_passwords_are_masked_in_url_errors(url: str, shown: str) -> None:
    with pytest.raises(UnsupportedURLError) as caught:
        parse_postgres_url(url)
    assert "s3cret" not in str(caught.value)
    assert caught.value.url == shown


def test_the_test_helper_fails_instead_of_skipping_on_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without a server the postgres params skip, except with CI=true, where they fail."""
    monkeypatch.setattr(_postgres, "_unavailable", lambda: "no server here")
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match="no server here"):
        require_postgres()
    monkeypatch.setenv("CI", "false")
    with pytest.raises(pytest.skip.Exception):
        require_postgres()
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match=r"no server here.*CI=true"):
        require_postgres()


# --- connecting -------------------------------------------------------------------------


async def test_unreachable_server_is_a_clear_error_and_leaks_nothing() -> None:
    """The libpq error itself (not a pool timeout), at once, with no pool task left behind."""
    before = asyncio.all_tasks()
    started = time.monotonic()
    with pytest.raises(psycopg.OperationalError, match=r"127\.0\.0\.1") as caught:
        await open_store("postgresql://nobody:pw@127.0.0.1:1/none?connect_timeout=2")
    # libpq gives up after connect_timeout=2; only a hang (a pool waiting for ever) fails
    assert time.monotonic() - started < 60
    assert "pw" not in str(caught.value)
    await asyncio.sleep(0.05)
    assert [t for t in asyncio.all_tasks() - before if not t.done()] == []


async def test_pool_settings_are_applied(pg_url: str) -> None:
    url = with_options(pg_url, pool_min=2, pool_max=3, connect_timeout=4)
    async with open_store(url) as store:
        pool = db_of(store)._pool
        assert (pool.min_size, pool.max_size, pool.timeout) == (2, 3, 4.0)
        await pool.wait(5)  # min_size connections get opened
        assert pool.get_stats()["pool_size"] >= 2
        async with db_of(store).connection() as conn:
            assert conn.autocommit is True
            assert conn.prepare_threshold == 5  # psycopg's default (see prepare=off)
            assert conn.isolation_level == psycopg.IsolationLevel.READ_COMMITTED
            assert conn.info.get_parameters()["connect_timeout"] == "4"

        # Twenty concurrent calls share three connections.
        await asyncio.gather(*(store.kv.put(f"k/{i}", b"v", expected=0) for i in range(20)))
        assert len(await store.kv.keys("k/")) == 20
        assert pool.get_stats()["pool_size"] <= 3


@pytest.mark.parametrize("prepare", ["on", "off"])
async def test_repeated_statements_are_prepared_unless_prepare_is_off(
    pg_url: str, prepare: str
) -> None:
    """By default a connection prepares what it runs repeatedly (the server parses and
    plans an append once); with ``prepare=off`` nothing is ever prepared, so a
    transaction-mode pooler without prepared-statement support works."""
    async with open_store(with_options(pg_url, pool_max=1, prepare=prepare)) as store:
        for i in range(10):
            await store.kv.put(f"k{i}", b"v", expected=0)
            await store.kv.get(f"k{i}")
            await store.ledger.append("log", [b"r"], expected=i)
        async with db_of(store).connection() as conn:
            cursor = await conn.execute(
                "SELECT statement FROM pg_prepared_statements WHERE from_sql = false"
            )
            prepared = [row[0] for row in await cursor.fetchall()]
    if prepare == "off":
        assert prepared == []
    else:
        assert any("ledger_logs" in text and "attachment_refs" in text for text in prepared)
        assert len(prepared) == 3  # the append, the put and the get


async def test_writes_are_read_committed_whatever_the_server_default(pg_url: str) -> None:
    """Even with default_transaction_isolation=serializable (here a libpq startup option),
    writes run READ COMMITTED, and racing CAS writers see conflicts, never errors."""
    url = with_options(pg_url, options="-c default_transaction_isolation=serializable")
    async with open_store(url) as store:
        db = db_of(store)

        async def isolation(conn: Any) -> str:
            cursor = await conn.execute("SHOW transaction_isolation")
            row = await cursor.fetchone()
            return str(row[0])

        assert await db.write(isolation) == "read committed"
        assert await db.read(isolation) == "serializable"  # reads are single statements
        await store.kv.put("counter", b"0", expected=0)

        async def increment() -> None:
            while True:
                entry = await store.kv.get("counter")
                try:
                    await store.kv.put(
                        "counter", b"%d" % (int(entry.value) + 1), expected=entry.revision
                    )
                    return
                except ConflictError:
                    pass

        await asyncio.gather(*(increment() for _ in range(20)))
        assert (await store.kv.get("counter")).value == b"20"

        # An append is one statement (no BEGIN of its own, so it runs serializable here):
        # racing appenders still see conflicts, never serialization failures.
        lease = await store.leases.acquire("owner", ttl=30)

        async def append(fence: Fence | None) -> None:
            while True:
                tip = await store.ledger.tip("log")
                try:
                    await store.ledger.append("log", [b"r"], expected=tip, fence=fence)
                    return
                except LedgerConflictError:
                    pass

        await asyncio.gather(*(append(None if i % 2 else lease.fence) for i in range(20)))
        assert await store.ledger.tip("log") == 20


async def test_tables_are_schema_qualified(pg_url: str) -> None:
    """A search_path that does not even exist changes nothing; schemas are independent."""
    other = f"t_{uuid.uuid4().hex}"
    try:
        first = with_options(pg_url, options="-c search_path=nowhere")
        second = with_options(_postgres.base_url(), schema=other)
        async with open_store(first) as a, open_store(second) as b:
            await a.kv.put("k", b"a", expected=0)
            await b.kv.put("k", b"b", expected=0)
            assert (await a.kv.get("k")).value == b"a"
            assert (await b.kv.get("k")).value == b"b"
    finally:
        _postgres.drop_schema(other)


# --- schema and migrations --------------------------------------------------------------


async def test_migration_table_records_the_version(pg_url: str) -> None:
    schema = schema_of(pg_url)
    assert admin("SELECT 1 FROM pg_namespace WHERE nspname = %s", (schema,)) == []
    async with open_store(pg_url):
        pass
    rows = admin(f'SELECT version, applied_at FROM "{schema}".flowledger_migrations')
    assert [r[0] for r in rows] == list(range(1, SCHEMA_VERSION + 1))
    assert all(r[1] is not None for r in rows)
    tables = admin(
        "SELECT table_name FROM information_schema.tables WHERE table_schema = %s "
        "ORDER BY table_name",
        (schema,),
    )
    assert [t[0] for t in tables] == [
        "attachment_refs",
        "attachments",
        "blobs",
        "flowledger_meta",
        "flowledger_migrations",
        "kv",
        "leases",
        "ledger_logs",
        "ledger_records",
    ]
    # Every text key sorts by bytes, whatever the database's collation.
    collations = admin(
        "SELECT table_name, column_name, collation_name FROM information_schema.columns "
        "WHERE table_schema = %s AND data_type = 'text' ORDER BY 1, 2",
        (schema,),
    )
    assert [(t, c) for t, c, _ in collations] == [
        ("blobs", "key"),
        ("flowledger_meta", "key"),
        ("flowledger_meta", "value"),
        ("kv", "key"),
        ("leases", "holder"),
        ("leases", "name"),
        ("ledger_logs", "name"),
    ]
    assert {coll for t, c, coll in collations if c != "holder"} == {"C"}
    # A second open is read-only: nothing re-applied.
    async with open_store(pg_url):
        pass
    assert len(admin(f'SELECT * FROM "{schema}".flowledger_migrations')) == SCHEMA_VERSION


async def test_an_existing_empty_schema_is_migrated(pg_url: str) -> None:
    schema = schema_of(pg_url)
    admin(f'CREATE SCHEMA "{schema}"')
    async with open_store(pg_url) as store:
        assert await store.kv.put("k", b"v", expected=0) == 1


async def test_a_newer_schema_is_refused_and_left_alone(pg_url: str) -> None:
    schema = schema_of(pg_url)
    async with open_store(pg_url) as store:
        await store.kv.put("k", b"v", expected=0)
    admin(
        f'INSERT INTO "{schema}".flowledger_migrations (version) VALUES (%s)', (SCHEMA_VERSION + 1,)
    )
    with pytest.raises(SchemaVersionError) as caught:
        await open_store(pg_url)
    assert (caught.value.schema, caught.value.found, caught.value.supported) == (
        schema,
        SCHEMA_VERSION + 1,
        SCHEMA_VERSION,
    )
    assert "upgrade flowledger" in str(caught.value)
    assert admin(f'SELECT key, revision FROM "{schema}".kv') == [("k", 1)]


async def test_concurrent_first_opens_in_one_process(pg_url: str) -> None:
    """Sixteen stores opening a fresh schema at once: one migration, every store works."""
    schema = schema_of(pg_url)

    async def open_and_write(i: int) -> Store:
        store = await open_store(pg_url)
        await store.kv.put(f"opener/{i:02}", b"x", expected=0)
        return store

    stores = await asyncio.gather(*(open_and_write(i) for i in range(16)))
    try:
        assert await stores[0].kv.keys("opener/") == [f"opener/{i:02}" for i in range(16)]
    finally:
        await asyncio.gather(*(s.close() for s in stores))
    versions = admin(f'SELECT version FROM "{schema}".flowledger_migrations')
    assert versions == [(v,) for v in range(1, SCHEMA_VERSION + 1)]


_OPEN_CHILD = """
import asyncio, json, sys, time
from flowledger.storage import open_store
url, me, start_at = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
async def main():
    await asyncio.sleep(max(0.0, start_at - time.time()))
    async with open_store(url) as store:
        await store.kv.put(f"opener/{me}", b"x", expected=0)
    print(json.dumps({"ok": True}))
asyncio.run(main())
"""


@pytest.mark.slow
async def test_concurrent_first_opens_across_processes(pg_url: str) -> None:
    schema = schema_of(pg_url)
    start_at = time.time() + 1.0  # past every child's interpreter start-up
    children = [
        await asyncio.create_subprocess_exec(
            sys.executable,
            "-c",
            textwrap.dedent(_OPEN_CHILD),
            pg_url,
            str(i),
            str(start_at),
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        for i in range(4)
    ]
    for child in children:
        out, err = await asyncio.wait_for(child.communicate(), 60)
        assert child.returncode == 0, err.decode()
        assert json.loads(out) == {"ok": True}
    async with open_store(pg_url) as store:
        assert await store.kv.keys("opener/") == [f"opener/{i}" for i in range(4)]
    assert len(admin(f'SELECT * FROM "{schema}".flowledger_migrations')) == SCHEMA_VERSION


async def test_byte_order_even_on_a_database_with_a_linguistic_collation() -> None:
    """Under an ICU en-US default collation, listings still sort by bytes."""
    base = require_postgres()
    name = f"t_{uuid.uuid4().hex}"
    try:
        admin(
            f'CREATE DATABASE "{name}" TEMPLATE template0 ENCODING UTF8 '
            f"LOCALE_PROVIDER icu ICU_LOCALE 'en-US' LOCALE 'C.UTF-8'"
        )
    except psycopg.Error as exc:
        pytest.skip(f"cannot create an ICU database here: {exc}")
    try:
        url = urlunsplit(urlsplit(base)._replace(path=f"/{name}"))
        names = ["b", "a_b", "a0", "a/b", "a.b", "a-b", "aa", "a"]
        async with open_store(url) as store:
            for n in names:
                await store.kv.put(n, b"", expected=0)
                await store.blobs.put(n, b"")
                await store.ledger.append(n, [b""], expected=0)
            expected = sorted(names, key=str.encode)
            assert expected == ["a", "a-b", "a.b", "a/b", "a0", "a_b", "aa", "b"]
            assert await store.kv.keys() == expected
            assert await store.blobs.list("a") == expected[:-1]
            assert await store.ledger.names() == expected
        with psycopg.connect(url) as conn:  # the database itself sorts differently
            rows = conn.execute("SELECT unnest(%s::text[]) AS n ORDER BY n", (names,)).fetchall()
            assert [r[0] for r in rows] != expected
    finally:
        admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


# --- lost acknowledgements ----------------------------------------------------------------


class _Rollback(Exception):
    pass


class CommitFault:
    """Makes the next write's COMMIT fail with an OperationalError, after really
    committing (``"after"``), or after rolling back instead (``"instead"``).

    A ledger append or a KV write is one statement, its own transaction: there its reply
    is lost, after it ran (``"after"``), or after it ran in a transaction rolled back.
    ``meanwhile`` runs between the (non-)commit and the error: another writer's turn.
    """

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.plan: list[str] = []
        self.meanwhile: Callable[[], Awaitable[None]] | None = None
        self.injected: list[BaseException] = []
        real_exit = psycopg.AsyncTransaction.__aexit__

        async def exit_(
            txn: Any,
            exc_type: type[BaseException] | None,
            exc: BaseException | None,
            tb: TracebackType | None,
        ) -> bool:
            if exc_type is not None or not self.plan:
                return await real_exit(txn, exc_type, exc, tb)
            if self.plan.pop(0) == "after":
                await real_exit(txn, None, None, None)
            else:
                await real_exit(txn, _Rollback, _Rollback(), None)
            if self.meanwhile is not None:
                await self.meanwhile()
            error = psycopg.OperationalError("injected: the connection dropped during COMMIT")
            self.injected.append(error)
            raise error

        monkeypatch.setattr(psycopg.AsyncTransaction, "__aexit__", exit_)
        # One-statement writes run through `write_one` (the `WITH` statements).
        real_one = pg_queries.write_one

        async def one(conn: Any, query: bytes, params: Any) -> Any:
            if not self.plan:
                return await real_one(conn, query, params)
            if self.plan.pop(0) == "after":
                await real_one(conn, query, params)
            else:
                with contextlib.suppress(_Rollback):
                    async with conn.transaction():
                        await real_one(conn, query, params)
                        raise _Rollback()
            if self.meanwhile is not None:
                await self.meanwhile()
            error = psycopg.OperationalError("injected: the connection dropped after the append")
            self.injected.append(error)
            raise error

        monkeypatch.setattr(pg_queries, "write_one", one)

    def next(self, action: str, meanwhile: Callable[[], Awaitable[None]] | None = None) -> None:
        self.plan = [action]
        self.meanwhile = meanwhile


@pytest.fixture
def fault(monkeypatch: pytest.MonkeyPatch) -> CommitFault:
    return CommitFault(monkeypatch)


async def test_lost_ack_of_a_committed_append_is_a_success(
    store: Store, fault: CommitFault
) -> None:
    payload = b"attached"
    await store.ledger.append("log", [b"r1"], expected=0)
    fault.next("after")
    tip = await store.ledger.append(
        "log", [b"r2", b"r3"], expected=1, attachments={digest_of(payload): payload}
    )
    assert tip == 3
    assert len(fault.injected) == 1
    assert [r.payload for r in await store.ledger.read("log")] == [b"r1", b"r2", b"r3"]
    assert await store.ledger.attachments([digest_of(payload)]) == {digest_of(payload): payload}


async def test_lost_ack_of_an_append_that_never_committed_raises_the_original_error(
    store: Store, fault: CommitFault
) -> None:
    await store.ledger.append("log", [b"r1"], expected=0)
    fault.next("instead")
    with pytest.raises(psycopg.OperationalError) as caught:
        await store.ledger.append("log", [b"r2"], expected=1)
    assert caught.value is fault.injected[0]
    assert await store.ledger.tip("log") == 1
    assert await store.ledger.append("log", [b"r2"], expected=1) == 2  # a retry succeeds


async def test_lost_ack_of_a_first_append_that_never_committed(
    store: Store, fault: CommitFault
) -> None:
    fault.next("instead")
    with pytest.raises(psycopg.OperationalError):
        await store.ledger.append("log", [b"r1"], expected=0)
    assert await store.ledger.names() == []


async def test_lost_ack_with_another_writer_in_between_is_a_conflict(
    store: Store, pg_url: str, fault: CommitFault
) -> None:
    await store.ledger.append("log", [b"r1"], expected=0)
    async with open_store(pg_url) as other:

        async def other_appends() -> None:
            await other.ledger.append("log", [b"theirs", b"too"], expected=1)

        fault.next("instead", other_appends)
        with pytest.raises(LedgerConflictError) as caught:
            await store.ledger.append("log", [b"ours"], expected=1)
    assert (caught.value.name, caught.value.expected, caught.value.actual) == ("log", 1, 3)
    assert [r.payload for r in await store.ledger.read("log")] == [b"r1", b"theirs", b"too"]


async def test_identical_records_without_our_attachments_are_not_ours(
    store: Store, pg_url: str, fault: CommitFault
) -> None:
    """Another writer appended the same bytes but not our attachment: ours did not commit."""
    payload = b"only ours"
    async with open_store(pg_url) as other:

        async def other_appends() -> None:
            await other.ledger.append("log", [b"same"], expected=0)

        fault.next("instead", other_appends)
        with pytest.raises(LedgerConflictError):
            await store.ledger.append(
                "log", [b"same"], expected=0, attachments={digest_of(payload): payload}
            )


async def test_lost_ack_when_the_reread_fails_too_raises_the_original_error(
    store: Store, fault: CommitFault, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = db_of(store)

    async def failing_read(body: Any) -> Any:
        raise psycopg.OperationalError("still no database")

    async def cut_reads() -> None:
        monkeypatch.setattr(db, "read", failing_read)

    fault.next("after", cut_reads)
    with pytest.raises(psycopg.OperationalError) as caught:
        await store.kv.put("k", b"v", expected=0)
    assert caught.value is fault.injected[0]
    monkeypatch.undo()
    assert await store.kv.get("k") == Entry(b"v", 1)  # it had committed: unknown, not lost


async def test_lost_ack_of_kv_puts(store: Store, pg_url: str, fault: CommitFault) -> None:
    fault.next("after")
    assert await store.kv.put("k", b"v1", expected=0) == 1
    fault.next("after")
    assert await store.kv.put("k", b"v2", expected=1) == 2
    assert await store.kv.get("k") == Entry(b"v2", 2)

    fault.next("instead")
    with pytest.raises(psycopg.OperationalError):
        await store.kv.put("k", b"v3", expected=2)  # unchanged: the original error
    fault.next("instead")
    with pytest.raises(psycopg.OperationalError):
        await store.kv.put("new", b"v", expected=0)  # still absent: the original error

    async with open_store(pg_url) as other:

        async def other_puts() -> None:
            await other.kv.put("k", b"theirs", expected=2)

        fault.next("instead", other_puts)
        with pytest.raises(ConflictError) as caught:
            await store.kv.put("k", b"ours", expected=2)
        assert (caught.value.expected, caught.value.actual) == (2, 3)

        async def other_puts_the_same_bytes() -> None:
            await other.kv.put("k", b"same", expected=3)

        # The same bytes at expected+1 are indistinguishable from our own write: success.
        fault.next("instead", other_puts_the_same_bytes)
        assert await store.kv.put("k", b"same", expected=3) == 4


async def test_lost_ack_of_blob_puts_and_deletes(
    store: Store, pg_url: str, fault: CommitFault
) -> None:
    fault.next("after")
    await store.blobs.put("b", b"data")
    assert await store.blobs.get("b") == b"data"
    fault.next("instead")
    with pytest.raises(psycopg.OperationalError):
        await store.blobs.put("c", b"data")
    async with open_store(pg_url) as other:

        async def other_puts() -> None:
            await other.blobs.put("c", b"other bytes")

        fault.next("instead", other_puts)
        with pytest.raises(BlobConflictError):
            await store.blobs.put("c", b"data")

    await store.kv.put("k", b"v", expected=0)
    fault.next("after")
    await store.kv.delete("k")  # gone: the delete happened
    fault.next("after")
    await store.blobs.delete("b")
    assert await store.blobs.list() == ["c"]
    fault.next("instead")
    with pytest.raises(psycopg.OperationalError):
        await store.blobs.delete("c")  # still there
    assert await store.blobs.get("c") == b"other bytes"


async def test_lost_ack_of_lease_acquire_and_release(store: Store, fault: CommitFault) -> None:
    fault.next("after")
    lease = await store.leases.acquire("job", ttl=5)
    assert lease.epoch == 1
    with pytest.raises(LeaseHeldError):
        await store.leases.acquire("job", ttl=5)
    fault.next("after")
    await lease.release()
    assert lease.lost_reason == "released"
    fault.next("instead")
    with pytest.raises(psycopg.OperationalError):
        await store.leases.acquire("job", ttl=5)  # nothing granted: the original error
    again = await store.leases.acquire("job", ttl=5)
    assert again.epoch == 2  # the rolled-back grant used no epoch
    fault.next("instead")
    with pytest.raises(psycopg.OperationalError):
        await again.release()  # still held: the original error
    await again.release()  # idempotent: the retry frees it
    assert (await store.leases.acquire("job", ttl=5)).epoch == 3


async def test_a_failure_before_commit_needs_no_resolution(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Nothing can have been written when the connection fails before COMMIT was sent."""
    db = db_of(store)
    resolved: list[object] = []
    real_one = pg_queries.one
    real_resolve = db._resolve
    failures = [psycopg.OperationalError("injected: dropped before COMMIT")]

    async def one(conn: Any, query: bytes, params: Any) -> Any:
        if failures:
            raise failures.pop()
        return await real_one(conn, query, params)

    async def resolve(lost: Any, how: Any) -> Any:
        resolved.append(lost)
        return await real_resolve(lost, how)

    monkeypatch.setattr(pg_queries, "one", one)
    monkeypatch.setattr(db, "_resolve", resolve)
    with pytest.raises(psycopg.OperationalError, match="before COMMIT"):
        await store.blobs.put("b", b"v")  # an explicit transaction (a KV write is not)
    assert resolved == []
    with pytest.raises(BlobNotFoundError):
        await store.blobs.get("b")


async def test_a_connection_broken_while_idle_is_replaced(pg_url: str) -> None:
    """A pooled connection killed by the server (or a pooler restart) costs no call."""
    app = f"fl_{uuid.uuid4().hex[:12]}"
    url = with_options(pg_url, pool_min=1, pool_max=1, application_name=app)
    async with open_store(url) as store:
        await store.kv.put("k", b"v", expected=0)
        for call in (
            lambda: store.blobs.put("b", b"x"),  # a transaction: retried at BEGIN
            lambda: store.kv.put("k", b"w", expected=1),  # one statement: resolved, retried
            lambda: store.kv.get("k"),  # a read: retried once
            # an append (one statement): resolved (nothing there), then retried once
            lambda: store.ledger.append("log", [b"r1"], expected=0),
            lambda: store.ledger.append("log", [b"r2"], expected=1),
        ):
            killed = admin(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE application_name = %s",
                (app,),
            )
            assert killed == [(True,)]
            await asyncio.sleep(0.05)
            await call()
        assert await store.kv.get("k") == Entry(b"w", 2)
        assert [r.payload for r in await store.ledger.read("log")] == [b"r1", b"r2"]


# --- leases on the database's clock ------------------------------------------------------


async def test_leases_use_the_database_clock(
    store: Store, pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The local wall clock is irrelevant: expires_at is the server's now() + ttl."""
    lease = await store.leases.acquire("job", ttl=30)
    (remaining,) = admin(
        f'SELECT extract(epoch FROM expires_at - now()) FROM "{schema_of(pg_url)}".leases '
        "WHERE name = 'job'"
    )[0]
    assert 28 < float(remaining) <= 30
    monkeypatch.setattr(time, "time", lambda: 4_000_000_000.0)  # a clock far in the future
    with pytest.raises(LeaseHeldError) as caught:
        await store.leases.acquire("job", ttl=5)
    assert caught.value.holder_epoch == lease.epoch
    await lease.release()
    (row,) = admin(f'SELECT epoch, holder FROM "{schema_of(pg_url)}".leases')
    assert row == (lease.epoch, None)  # release keeps the epoch


@pytest.mark.slow
async def test_lease_across_processes_and_takeover_after_sigkill(pg_url: str) -> None:
    """A child process holds a lease (renewing past its TTL); the parent is refused with its
    epoch; after SIGKILL the grant outlives the child by about its TTL, then the parent
    gets the next epoch."""
    ttl = 1.0
    child = Child("hold", pg_url, "owner", str(ttl))
    try:
        held = await child.aread()
        async with open_store(pg_url) as store:
            await asyncio.sleep(ttl * 1.5)  # past the TTL: only the child's renewals keep it
            with pytest.raises(LeaseHeldError) as caught:
                await store.leases.acquire("owner", ttl=5)
            assert caught.value.holder_epoch == held["epoch"]
            await asyncio.to_thread(child.kill)
            killed = time.monotonic()
            while True:
                try:
                    lease = await store.leases.acquire("owner", ttl=5)
                    break
                except LeaseHeldError as exc:
                    assert exc.holder_epoch == held["epoch"]
                    assert time.monotonic() - killed < ttl + 60, "the dead holder kept the lease"
                    await asyncio.sleep(0.02)
            assert time.monotonic() - killed >= ttl / 2
            assert lease.epoch == held["epoch"] + 1
            await lease.release()
    finally:
        child.close()


# --- lifecycle ----------------------------------------------------------------------------


async def test_close_closes_the_pool(pg_url: str) -> None:
    """(Every call after close raising `StoreClosedError` is in ``test_close.py``.)"""
    store = await open_store(pg_url)
    pool = db_of(store)._pool
    await store.kv.put("k", b"v", expected=0)
    await store.close()
    assert pool.closed
    with pytest.raises(StoreClosedError):
        await store.kv.get("k")


async def test_close_lets_started_calls_finish(pg_url: str) -> None:
    store = await open_store(with_options(pg_url, pool_max=2))
    pending = [
        asyncio.ensure_future(store.ledger.append("l", [b"%d" % i], expected=0)) for i in range(5)
    ]
    await asyncio.sleep(0.001)
    await store.close()
    outcomes = await asyncio.gather(*pending, return_exceptions=True)
    winners = [o for o in outcomes if o == 1]
    assert len(winners) <= 1
    for outcome in outcomes:
        assert outcome == 1 or isinstance(outcome, LedgerConflictError | StoreClosedError)


async def test_a_store_is_bound_to_its_event_loop(store: Store) -> None:
    async def elsewhere() -> None:
        await store.kv.get("k")

    with pytest.raises(RuntimeError, match="bound to the event loop"):
        await asyncio.to_thread(asyncio.run, elsewhere())


async def test_data_persists_across_close_and_reopen(pg_url: str) -> None:
    payload = b"\x00\xff" * 1000
    async with open_store(pg_url) as store:
        await store.kv.put("k", payload, expected=0)
        await store.blobs.put("b", payload)
        await store.ledger.append(
            "l", [payload, b""], expected=0, attachments={digest_of(payload): payload}
        )
        lease = await store.leases.acquire("job", ttl=5)
        await lease.release()
    async with open_store(pg_url) as store:
        assert await store.kv.get("k") == Entry(payload, 1)
        assert await store.blobs.get("b") == payload
        assert [r.payload for r in await store.ledger.read("l")] == [payload, b""]
        assert await store.ledger.attachments([digest_of(payload)]) == {digest_of(payload): payload}
        assert (await store.leases.acquire("job", ttl=5)).epoch == 2


async def test_big_blob_is_compared_without_sending_it_back(store: Store) -> None:
    big = bytes(range(256)) * 4096  # 1 MiB
    await store.blobs.put("big", big)
    await store.blobs.put("big", big)  # identical: a no-op
    with pytest.raises(BlobConflictError):
        await store.blobs.put("big", big[:-1] + b"\x00")  # same length, other bytes
    with pytest.raises(BlobConflictError):
        await store.blobs.put("big", big + b"\x00")
    assert await store.blobs.get("big") == big


async def test_single_statement_writes_reuse_their_connection_s_cursor(pg_url: str) -> None:
    """Appends and KV writes run on one cursor per connection (`queries.write_one`), so
    psycopg keeps its adapters between them; a refused write leaves it usable."""
    async with open_store(with_options(pg_url, pool_min=1, pool_max=1)) as store:
        db = db_of(store)
        await store.ledger.append("log", [b"1"], expected=0)
        async with db.connection() as conn:
            cursor = conn.write_cursor
        assert cursor is not None
        with pytest.raises(ConflictError):
            await store.kv.put("k", b"v", expected=3)
        await store.kv.put("k", b"v", expected=0)
        await store.kv.delete("k")
        assert await store.ledger.append("log", [b"2"], expected=1) == 2
        async with db.connection() as conn:
            assert conn.write_cursor is cursor
        assert [r.payload for r in await store.ledger.read("log")] == [b"1", b"2"]


async def test_an_append_naming_attachments_is_one_statement(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An append that sends one attachment and refers to another stored one is a single
    statement with no explicit transaction: one round trip, its own commit."""
    stored = b"stored attachment" * 20
    sent = b"sent attachment" * 20
    await store.ledger.append("log", [b"1"], expected=0, attachments={digest_of(stored): stored})
    statements: list[bytes] = []
    transactions: list[object] = []
    # Every statement goes through a cursor (a connection's execute makes one).
    real_execute = psycopg.AsyncCursor.execute
    real_transaction = psycopg.AsyncConnection.transaction

    def execute(cursor: Any, query: Any, *args: Any, **kwargs: Any) -> Any:
        statements.append(bytes(query) if isinstance(query, bytes | str) else b"?")
        return real_execute(cursor, query, *args, **kwargs)

    def transaction(conn: Any, *args: Any, **kwargs: Any) -> Any:
        transactions.append(conn)
        return real_transaction(conn, *args, **kwargs)

    monkeypatch.setattr(psycopg.AsyncCursor, "execute", execute)
    monkeypatch.setattr(psycopg.AsyncConnection, "transaction", transaction)
    await store.ledger.append(
        "log",
        [b"2"],
        expected=1,
        attachments={digest_of(sent): sent},
        refs=[digest_of(stored)],
    )
    monkeypatch.undo()
    assert len(statements) == 1 and transactions == []
    assert [r.payload for r in await store.ledger.read("log")] == [b"1", b"2"]
    assert set(await store.ledger.attachments([digest_of(stored), digest_of(sent)])) == {
        digest_of(stored),
        digest_of(sent),
    }
