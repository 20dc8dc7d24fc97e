"""`PostgresIntegrity`: confirming a miss by a table scan, and amcheck where installed.

A lookup by name uses a b-tree index (``kv.key``, ``blobs.key``, ``ledger_logs.name``);
a corrupt index can miss a row the table holds. `confirm_absent` looks again in one
transaction whose planner may not use an index (``enable_indexscan``,
``enable_indexonlyscan`` and ``enable_bitmapscan`` off), so the table itself is read:
found there, the miss was the index's fault and the answer is `CorruptDataError`. A log
has a row in ``ledger_logs`` only while it holds records, so a row found is enough.
The server's own corruption errors (``XX001`` data corrupted, ``XX002`` index corrupted)
are a `CorruptDataError` as well.

`check` needs the ``amcheck`` extension (part of PostgreSQL, installed per database by a
superuser with ``CREATE EXTENSION amcheck``): then every b-tree index of the store's
schema is checked with ``bt_index_check(index, heapallindexed => true)`` (each table row
is in its index) and every table with ``verify_heapam``. Without it the check says it is
incomplete (`EngineCheck.complete` False) and checks nothing itself: flowledger installs
nothing and writes nothing to check.
"""

from __future__ import annotations

from typing import Final

import psycopg
from psycopg import sql

from ..errors import CorruptDataError
from ..integrity import EngineCheck, Kind, check_kind, check_limit
from ..names import validate_name
from .database import Database
from .queries import Conn

__all__ = ["PostgresIntegrity"]

_TABLES: Final[dict[str, tuple[str, str, str]]] = {
    "kv": ("kv", "key", "key"),
    "blob": ("blobs", "key", "blob"),
    "log": ("ledger_logs", "name", "ledger log"),
}
_NO_INDEX: Final = (
    "SET LOCAL enable_indexscan = off",
    "SET LOCAL enable_indexonlyscan = off",
    "SET LOCAL enable_bitmapscan = off",
)
_AMCHECK: Final = (
    "SELECT n.nspname FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace "
    "WHERE e.extname = 'amcheck'"
)
_INDEXES: Final = (
    "SELECT c.oid, c.relname FROM pg_index i "
    "JOIN pg_class c ON c.oid = i.indexrelid "
    "JOIN pg_class t ON t.oid = i.indrelid "
    "JOIN pg_namespace n ON n.oid = t.relnamespace "
    "JOIN pg_am a ON a.oid = c.relam "
    "WHERE n.nspname = %s AND a.amname = 'btree' ORDER BY c.relname"
)
_TABLES_OF: Final = (
    "SELECT c.oid, c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
    "WHERE n.nspname = %s AND c.relkind = 'r' ORDER BY c.relname"
)
_NOT_INSTALLED: Final = (
    "the amcheck extension is not installed in this database, so its tables and indexes "
    "were not checked (a superuser can run CREATE EXTENSION amcheck)"
)
_NOT_ALLOWED: Final = (
    "this role may not run amcheck's functions, so the tables and indexes were not checked "
    "(a superuser can grant EXECUTE on bt_index_check and verify_heapam)"
)
_CORRUPTION: Final = (psycopg.errors.DataCorrupted, psycopg.errors.IndexCorrupted)


async def _confirm_absent(db: Database, kind: Kind, name: str) -> None:
    table, column, noun = _TABLES[kind]
    what = f"{noun} {name!r}"
    query = sql.SQL("SELECT 1 FROM {}.{} WHERE {} = %s").format(
        sql.Identifier(db.settings.schema), sql.Identifier(table), sql.Identifier(column)
    )

    async def body(conn: Conn) -> bool:
        async with conn.transaction():
            for setting in _NO_INDEX:
                await conn.execute(setting)
            cursor = await conn.execute(query, (name,))
            return await cursor.fetchone() is not None

    try:
        found = await db.read(body)
    except _CORRUPTION as exc:
        raise CorruptDataError(what, f"the server reports damage ({exc})") from exc
    if found:
        raise CorruptDataError(what, f"the table {table} holds it, but its index missed it")


async def _check(db: Database, limit: int) -> EngineCheck:
    schema = db.settings.schema

    async def body(conn: Conn) -> EngineCheck:
        row = await (await conn.execute(_AMCHECK)).fetchone()
        if row is None:
            return EngineCheck("postgresql", complete=False, note=_NOT_INSTALLED)
        where = sql.Identifier(str(row[0]))
        index_check = sql.SQL("SELECT {}.bt_index_check(%s::oid::regclass, true)").format(where)
        heap_check = sql.SQL(
            "SELECT blkno, offnum, msg FROM {}.verify_heapam(%s::oid::regclass) LIMIT %s"
        ).format(where)
        problems: list[str] = []
        try:
            for oid, table in await (await conn.execute(_TABLES_OF, (schema,))).fetchall():
                cursor = await conn.execute(heap_check, (oid, limit))
                problems.extend(
                    f"table {table}: block {block}, item {item}: {message}"
                    for block, item, message in await cursor.fetchall()
                )
            for oid, index in await (await conn.execute(_INDEXES, (schema,))).fetchall():
                try:
                    async with conn.transaction():
                        await conn.execute(index_check, (oid,))
                except _CORRUPTION as exc:
                    problems.append(f"index {index}: {exc}".strip())
        except psycopg.errors.InsufficientPrivilege:
            return EngineCheck("postgresql amcheck", complete=False, note=_NOT_ALLOWED)
        return EngineCheck("postgresql amcheck", tuple(problems[:limit]))

    return await db.read(body)


class PostgresIntegrity:
    def __init__(self, db: Database) -> None:
        self._db = db

    async def confirm_absent(self, kind: Kind, name: str) -> None:
        check_kind(kind)
        validate_name(name)
        await _confirm_absent(self._db, kind, name)

    async def check(self, *, limit: int = 100) -> EngineCheck:
        return await _check(self._db, check_limit(limit))
