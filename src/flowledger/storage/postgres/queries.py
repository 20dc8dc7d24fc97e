"""The PostgreSQL backend's statements: their text, rendered once per store for its
schema (`Queries`), the store's connections (`Conn`), and how one is run (`one`, `rows`,
`column`, `write_one`: binary results).

``{s}`` is the store's schema (a quoted identifier). Text keys are ``COLLATE "C"``: byte
order for ``ORDER BY`` and for the prefix range scans, whatever the database's locale.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, fields
from typing import Any, Final

import psycopg
from psycopg import sql

__all__ = ["Conn", "Queries", "column", "one", "rows", "write_one"]


class Conn(psycopg.AsyncConnection[tuple[Any, ...]]):
    """A connection of a store: psycopg's, with the cursor its single-statement writes
    reuse (`write_one`)."""

    __slots__ = ("write_cursor",)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.write_cursor: psycopg.AsyncCursor[tuple[Any, ...]] | None = None


@dataclass(frozen=True, slots=True)
class Queries:
    """Every statement, rendered once per store for its schema."""

    kv_get: bytes = b"SELECT content, revision, bound_crc FROM {s}.kv WHERE key = %s"
    kv_revision: bytes = b"SELECT revision FROM {s}.kv WHERE key = %s"
    # KV writes are single statements too (see `_write_statement`): ``{ok}`` is the
    # fence's verdict (TRUE when unfenced), ``result`` what comes back.
    kv_create: bytes = (
        b"INSERT INTO {s}.kv (key, revision, content, bound_crc) "
        b"SELECT %s::text, 1, %s::bytea, %s::integer WHERE {ok} "
        b"ON CONFLICT (key) DO NOTHING RETURNING revision AS result"
    )
    kv_update: bytes = (
        b"UPDATE {s}.kv SET revision = revision + 1, content = %s, bound_crc = %s "
        b"WHERE key = %s AND revision = %s AND {ok} RETURNING revision AS result"
    )
    kv_delete: bytes = b"DELETE FROM {s}.kv WHERE key = %s AND {ok} RETURNING 1 AS result"
    kv_exists: bytes = b"SELECT 1 FROM {s}.kv WHERE key = %s"
    kv_keys: bytes = b"SELECT key FROM {s}.kv WHERE key >= %s AND key < %s ORDER BY key"
    # Keyset pages on the primary key: only the page's rows are visited.
    kv_page_up: bytes = (
        b"SELECT key FROM {s}.kv WHERE key >= %s AND key > %s AND key < %s ORDER BY key LIMIT %s"
    )
    kv_page_down: bytes = (
        b"SELECT key FROM {s}.kv WHERE key >= %s AND key < %s ORDER BY key DESC LIMIT %s"
    )

    blob_insert: bytes = (
        b"INSERT INTO {s}.blobs (key, content, bound_crc) VALUES (%s, %s, %s) "
        b"ON CONFLICT (key) DO NOTHING "
        b"RETURNING 1"
    )
    # Compare by length and SHA-256 so a big blob crosses the network once, not twice.
    blob_same: bytes = (
        b"SELECT length(content) = %s AND sha256(content) = %s FROM {s}.blobs WHERE key = %s"
    )
    blob_get: bytes = b"SELECT content, bound_crc FROM {s}.blobs WHERE key = %s"
    blob_exists: bytes = b"SELECT 1 FROM {s}.blobs WHERE key = %s"
    blob_delete: bytes = b"DELETE FROM {s}.blobs WHERE key = %s"
    blob_list: bytes = b"SELECT key FROM {s}.blobs WHERE key >= %s AND key < %s ORDER BY key"

    # A whole append in one statement (so in one implicit transaction, one round trip):
    # share-lock the stored attachments it sends or refers to (``held`` counts those of
    # its refs), claim the tip, insert the records, the references and the attachments,
    # each write guarded by the claim; ``{fence}`` is the fence's lease row read ``FOR
    # SHARE`` (or nothing). The claim is conditioned on every ref being held, so no
    # reference is ever inserted without its attachment locked first (see the sweep).
    # The claim's id is NULL when the tip moved, a ref is missing or the fence refused;
    # the count of refs held and the fence's epoch and liveness come back beside it.
    # Locks and inserts go in digest order, so concurrent appends sharing attachments
    # never deadlock.
    append_create: bytes = (
        b"WITH {fence}{held}"
        b"log AS (INSERT INTO {s}.ledger_logs (name, tip) SELECT %s::text, %s::bigint "
        b"WHERE {ok} AND (SELECT n FROM held) = %s ON CONFLICT (name) DO NOTHING RETURNING id), "
        b"{rest}"
    )
    append_advance: bytes = (
        b"WITH {fence}{held}"
        b"log AS (UPDATE {s}.ledger_logs SET tip = %s WHERE name = %s AND tip = %s AND {ok} "
        b"AND (SELECT n FROM held) = %s RETURNING id), {rest}"
    )
    # `add_refs` first share-locks the stored attachments it refers to (as an append
    # does), in digest order: a sweep that locked one first (FOR UPDATE) has deleted it or
    # found it referenced by the time this returns, and a sweep that comes later skips it.
    attachments_lock: bytes = (
        b"SELECT digest FROM {s}.attachments WHERE digest = ANY(%s) ORDER BY digest FOR KEY SHARE"
    )
    log_lock: bytes = b"SELECT id FROM {s}.ledger_logs WHERE name = %s FOR KEY SHARE"
    refs_insert: bytes = (
        b"INSERT INTO {s}.attachment_refs (log_id, digest) SELECT %s, d FROM unnest(%s::bytea[]) "
        b"AS d ORDER BY d ON CONFLICT DO NOTHING"
    )
    refs_complete: bytes = (
        b"SELECT value = '1' FROM {s}.flowledger_meta WHERE key = 'refs_complete'"
    )
    mark_refs_complete: bytes = (
        b"INSERT INTO {s}.flowledger_meta (key, value) VALUES ('refs_complete', '1') "
        b"ON CONFLICT (key) DO UPDATE SET value = '1'"
    )
    # A drop deletes the log rows first (waiting for appends in flight, which hold them),
    # then - in new statements, which see what those appends committed - the records and
    # references: no append can add any for the deleted ids any more.
    logs_drop: bytes = b"DELETE FROM {s}.ledger_logs WHERE name = ANY(%s) RETURNING id"
    records_drop: bytes = b"DELETE FROM {s}.ledger_records WHERE log_id = ANY(%s)"
    refs_drop: bytes = b"DELETE FROM {s}.attachment_refs WHERE log_id = ANY(%s)"
    # The sweep: lock a page of unreferenced attachments (skipping those an append holds),
    # then delete those still unreferenced in a new statement - a fresh snapshot, in which
    # every reference committed before the locks were taken is visible. (One DELETE ...
    # WHERE NOT EXISTS would not do: after waiting for a lock it re-checks the row, but not
    # the subquery, against what has been committed since its snapshot.)
    sweep_lock: bytes = (
        b"SELECT digest FROM {s}.attachments a WHERE digest > %s AND NOT EXISTS "
        b"(SELECT 1 FROM {s}.attachment_refs r WHERE r.digest = a.digest) "
        b"ORDER BY digest LIMIT %s FOR UPDATE SKIP LOCKED"
    )
    sweep_delete: bytes = (
        b"DELETE FROM {s}.attachments a WHERE digest = ANY(%s) AND NOT EXISTS "
        b"(SELECT 1 FROM {s}.attachment_refs r WHERE r.digest = a.digest) "
        b"RETURNING length(content)"
    )
    sweep_count: bytes = (
        b"SELECT (SELECT value = '1' FROM {s}.flowledger_meta WHERE key = 'refs_complete'), "
        b"count(*), coalesce(sum(length(content)), 0)::bigint FROM {s}.attachments a "
        b"WHERE NOT EXISTS (SELECT 1 FROM {s}.attachment_refs r WHERE r.digest = a.digest)"
    )
    usage: bytes = (
        b"WITH logs AS (SELECT id FROM {s}.ledger_logs WHERE name = ANY(%s)), "
        b"records AS (SELECT count(*) AS n, coalesce(sum(length(content)), 0)::bigint AS b "
        b"FROM {s}.ledger_records WHERE log_id IN (SELECT id FROM logs)), "
        b"exclusive AS (SELECT coalesce(sum(length(a.content)), 0)::bigint AS b "
        b"FROM {s}.attachments a WHERE a.digest IN (SELECT digest FROM {s}.attachment_refs "
        b"WHERE log_id IN (SELECT id FROM logs)) AND NOT EXISTS (SELECT 1 FROM "
        b"{s}.attachment_refs r WHERE r.digest = a.digest AND r.log_id NOT IN "
        b"(SELECT id FROM logs))) "
        b"SELECT (SELECT value = '1' FROM {s}.flowledger_meta WHERE key = 'refs_complete'), "
        b"records.n, records.b, exclusive.b FROM records, exclusive"
    )
    vacuum: bytes = (
        b"VACUUM (ANALYZE) {s}.attachments, {s}.attachment_refs, {s}.ledger_records, "
        b"{s}.ledger_logs"
    )
    ledger_tip: bytes = b"SELECT tip FROM {s}.ledger_logs WHERE name = %s"
    ledger_read: bytes = (
        b"SELECT r.seq, r.content, r.bound_crc FROM {s}.ledger_records r "
        b"JOIN {s}.ledger_logs l ON r.log_id = l.id "
        b"WHERE l.name = %s AND r.seq > %s ORDER BY r.seq LIMIT %s"
    )
    ledger_names_in: bytes = b"SELECT name FROM {s}.ledger_logs WHERE name = ANY(%s)"
    ledger_names: bytes = (
        b"SELECT name FROM {s}.ledger_logs WHERE name >= %s AND name < %s ORDER BY name"
    )
    attachments_get: bytes = b"SELECT digest, content FROM {s}.attachments WHERE digest = ANY(%s)"
    attachments_count: bytes = b"SELECT count(*) FROM {s}.attachments WHERE digest = ANY(%s)"
    attachments_in: bytes = b"SELECT digest FROM {s}.attachments WHERE digest = ANY(%s)"

    # ON CONFLICT DO UPDATE locks the existing row even when its WHERE refuses the update,
    # so the follow-up read of the holder's epoch (same transaction) cannot race.
    lease_acquire: bytes = (
        b"INSERT INTO {s}.leases AS l (name, epoch, holder, expires_at) "
        b"VALUES (%s, 1, %s, clock_timestamp() + make_interval(secs => %s)) "
        b"ON CONFLICT (name) DO UPDATE SET epoch = l.epoch + 1, holder = excluded.holder, "
        b"expires_at = clock_timestamp() + make_interval(secs => %s) "
        b"WHERE l.holder IS NULL OR l.expires_at <= clock_timestamp() "
        b"RETURNING l.epoch"
    )
    lease_epoch: bytes = b"SELECT epoch FROM {s}.leases WHERE name = %s"
    lease_extend: bytes = (
        b"UPDATE {s}.leases SET expires_at = clock_timestamp() + make_interval(secs => %s) "
        b"WHERE name = %s AND epoch = %s AND holder = %s AND expires_at > clock_timestamp() "
        b"RETURNING 1"
    )
    lease_get: bytes = b"SELECT epoch, holder FROM {s}.leases WHERE name = %s"
    # A fenced write's first statement. The share lock makes a takeover (an UPDATE of the
    # row) wait until the write has committed or rolled back; so that a writer stalled in
    # the middle of its transaction cannot hold it forever, the server ends the writer's
    # session once it has kept the transaction idle for `_FENCED_IDLE_LIMIT`.
    lease_fence: bytes = (
        b"SELECT epoch, holder IS NOT NULL AND expires_at > clock_timestamp(), "
        b"set_config('idle_in_transaction_session_timeout', %s, true) "
        b"FROM {s}.leases WHERE name = %s FOR SHARE"
    )
    lease_release: bytes = (
        b"UPDATE {s}.leases SET holder = NULL, expires_at = clock_timestamp() "
        b"WHERE name = %s AND epoch = %s AND holder = %s"
    )
    lease_status: bytes = (
        b"SELECT epoch, holder IS NOT NULL AND expires_at > clock_timestamp(), expires_at "
        b"FROM {s}.leases WHERE name = %s"
    )

    # The fenced variants of the single-statement writes (filled in by `for_schema`).
    append_create_fenced: bytes = b""
    append_advance_fenced: bytes = b""
    kv_create_fenced: bytes = b""
    kv_update_fenced: bytes = b""
    kv_delete_fenced: bytes = b""

    @classmethod
    def for_schema(cls, schema: str) -> Queries:
        quoted = sql.Identifier(schema).as_bytes(None)
        templates = cls()
        rendered = {f.name: getattr(templates, f.name).replace(b"{s}", quoted) for f in fields(cls)}
        for name in ("append_create", "append_advance"):
            template = rendered[name]
            rendered[f"{name}_fenced"] = _append_query(template, fenced=True, schema=quoted)
            rendered[name] = _append_query(template, fenced=False, schema=quoted)
        for name in ("kv_create", "kv_update", "kv_delete"):
            template = rendered[name]
            rendered[f"{name}_fenced"] = _write_statement(template, fenced=True, schema=quoted)
            rendered[name] = _write_statement(template, fenced=False, schema=quoted)
        return cls(**rendered)


# The append's arrays go in binary (``%b``), as `arrays.ByteaArray` and
# `arrays.IntegerArray`: each bytea element is sent as its bytes, where the text form
# would hex-encode and quote every payload in Python, and packed in one pass, where
# psycopg's generic list dumper would inspect every element first.
#
# The parameters of an append statement, after the claim's: the fence's (lease name and
# epoch) come first when fenced; then the first sequence number minus one, the payloads,
# their checksums, the attachments' digests and data.
_APPEND_FENCE: Final = (
    b"fence AS (SELECT epoch, holder IS NOT NULL AND expires_at > clock_timestamp() AS live "
    b"FROM {s}.leases WHERE name = %s FOR SHARE), "
    b"ok AS (SELECT 1 FROM fence WHERE epoch = %s AND live), "
)
_APPEND_HELD: Final = (
    b"locked AS (SELECT digest FROM {s}.attachments WHERE digest = ANY(%b::bytea[]) "
    b"ORDER BY digest FOR KEY SHARE), "
    b"held AS (SELECT count(*) AS n FROM locked WHERE digest = ANY(%b::bytea[])), "
)
_APPEND_REST: Final = (
    b"records AS (INSERT INTO {s}.ledger_records (log_id, seq, content, bound_crc) "
    b"SELECT log.id, %s + r.ord, r.payload, r.crc FROM log, "
    b"unnest(%b::bytea[], %b::integer[]) WITH ORDINALITY AS r(payload, crc, ord)), "
    b"refs AS (INSERT INTO {s}.attachment_refs (log_id, digest) SELECT log.id, d "
    b"FROM log, unnest(%b::bytea[]) AS d ORDER BY d ON CONFLICT DO NOTHING), "
    b"attached AS (INSERT INTO {s}.attachments (digest, content) "
    b"SELECT a.digest, a.data FROM unnest(%b::bytea[], %b::bytea[]) AS a(digest, data) "
    b"WHERE EXISTS (SELECT 1 FROM log) ORDER BY a.digest ON CONFLICT (digest) DO NOTHING) "
)


def _write_statement(write: bytes, *, fenced: bool, schema: bytes) -> bytes:
    """One write (``{ok}`` in its condition, ``RETURNING ... AS result``) as a statement
    whose row is ``(result, fence epoch, fence liveness)``, like an append's."""
    if not fenced:
        unfenced = write.replace(b"{ok}", b"TRUE")
        return b"WITH w AS (" + unfenced + b") SELECT result, NULL, NULL FROM w"
    query = (
        b"WITH "
        + _APPEND_FENCE
        + b"w AS ("
        + write.replace(b"{ok}", b"EXISTS (SELECT 1 FROM ok)")
        + b") SELECT (SELECT result FROM w), epoch, live FROM fence "
        b"UNION ALL SELECT NULL, NULL, NULL WHERE NOT EXISTS (SELECT 1 FROM fence)"
    )
    return query.replace(b"{s}", schema)


def _append_query(template: bytes, *, fenced: bool, schema: bytes) -> bytes:
    held = b"(SELECT n FROM held)"
    if fenced:
        rest = _APPEND_REST + b"SELECT (SELECT id FROM log), " + held + b", epoch, live FROM fence "
        # No lease row: one row all the same, so the refusal can name epoch 0.
        rest += b"UNION ALL SELECT NULL, NULL, NULL, NULL WHERE NOT EXISTS (SELECT 1 FROM fence)"
        fence, ok = _APPEND_FENCE, b"EXISTS (SELECT 1 FROM ok)"
    else:
        rest = _APPEND_REST + b"SELECT (SELECT id FROM log), " + held + b", NULL, NULL"
        fence, ok = b"", b"TRUE"
    query = (
        template.replace(b"{fence}", fence)
        .replace(b"{held}", _APPEND_HELD)
        .replace(b"{ok}", ok)
        .replace(b"{rest}", rest)
    )
    return query.replace(b"{s}", schema)


async def one(conn: Conn, query: bytes, params: Sequence[object]) -> tuple[Any, ...] | None:
    cursor = await conn.execute(query, params, binary=True)
    return await cursor.fetchone()


async def write_one(conn: Conn, query: bytes, params: Sequence[object]) -> tuple[Any, ...] | None:
    """`one` for the single-statement writes (an append, a KV put or delete), the hot path
    of every durable step, on the connection's own cursor. A new cursor per statement
    builds its adapters afresh; one cursor running the same statement again keeps them
    (psycopg reuses its dumpers and loaders while the query object is the same), which
    saved about a tenth of an append's client CPU. Its results are one small row, so
    keeping the last one costs nothing."""
    cursor = conn.write_cursor
    if cursor is None:
        cursor = conn.write_cursor = conn.cursor(binary=True)
    await cursor.execute(query, params, binary=True)
    return await cursor.fetchone()


async def rows(conn: Conn, query: bytes, params: Sequence[object]) -> list[tuple[Any, ...]]:
    cursor = await conn.execute(query, params, binary=True)
    return await cursor.fetchall()


async def column(conn: Conn, query: bytes, params: Sequence[object]) -> list[str]:
    return [str(row[0]) for row in await rows(conn, query, params)]
