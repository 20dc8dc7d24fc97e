"""Direct byte surgery on a flowledger SQLite database (for corruption tests)."""

from __future__ import annotations

import contextlib
import sqlite3
from pathlib import Path

__all__ = ["SqliteBytes", "flip"]


class SqliteBytes:
    def __init__(self, path: Path) -> None:
        self.path = path

    def _connect(self) -> sqlite3.Connection:
        return sqlite3.connect(self.path, isolation_level=None)

    def _where(self, table: str, name: str) -> tuple[str, str, object]:
        """(value column, where clause, parameter) of one stored value."""
        if table in ("kv", "blobs"):
            return "content", "key = ?", name
        if table == "attachments":
            return "content", "digest = ?", bytes.fromhex(name)
        raise ValueError(table)

    def read(self, table: str, name: str) -> bytes:
        column, where, param = self._where(table, name)
        with self._connect() as db:
            row = db.execute(f"SELECT {column} FROM {table} WHERE {where}", (param,)).fetchone()
        assert row is not None, f"{table} {name} not found"
        return bytes(row[0])

    def write(self, table: str, name: str, data: bytes) -> None:
        column, where, param = self._where(table, name)
        with self._connect() as db:
            db.execute(f"UPDATE {table} SET {column} = ? WHERE {where}", (data, param))

    def record_key(self, log: str, seq: int) -> int:
        with self._connect() as db:
            row = db.execute("SELECT id FROM ledger_logs WHERE name = ?", (log,)).fetchone()
        assert row is not None, f"ledger {log} not found"
        return int(row[0]) << 32 | seq

    def read_record(self, log: str, seq: int) -> bytes:
        key = self.record_key(log, seq)
        with self._connect() as db:
            row = db.execute("SELECT content FROM ledger_records WHERE key = ?", (key,)).fetchone()
        assert row is not None
        return bytes(row[0])

    def write_record(self, log: str, seq: int, data: bytes) -> None:
        key = self.record_key(log, seq)
        with self._connect() as db:
            db.execute("UPDATE ledger_records SET content = ? WHERE key = ?", (data, key))

    def read_record_row(self, log: str, seq: int) -> tuple[bytes, int]:
        """A record's bytes and its stored checksum, as a copy of the whole row would take."""
        key = self.record_key(log, seq)
        with self._connect() as db:
            row = db.execute(
                "SELECT content, bound_crc FROM ledger_records WHERE key = ?", (key,)
            ).fetchone()
        assert row is not None
        return bytes(row[0]), int(row[1])

    def write_record_row(self, log: str, seq: int, row: tuple[bytes, int]) -> None:
        key = self.record_key(log, seq)
        with self._connect() as db:
            db.execute(
                "UPDATE ledger_records SET content = ?, bound_crc = ? WHERE key = ?", (*row, key)
            )

    def delete_record(self, log: str, seq: int) -> None:
        """Remove one ledger record (the log's tip stays: a gap where it was)."""
        key = self.record_key(log, seq)
        with self._connect() as db:
            db.execute("DELETE FROM ledger_records WHERE key = ?", (key,))

    def rename_attachment(self, digest: str, new_digest: str) -> None:
        """Store an attachment under another digest (its old one then names nothing)."""
        with self._connect() as db:
            db.execute(
                "UPDATE attachments SET digest = ? WHERE digest = ?",
                (bytes.fromhex(new_digest), bytes.fromhex(digest)),
            )

    def digests(self) -> list[str]:
        with self._connect() as db:
            return [bytes(r[0]).hex() for r in db.execute("SELECT digest FROM attachments")]

    def flip_in_index(self, index: str, needle: str) -> int:
        """Flip the low bit of the last byte of ``needle`` where it is stored in a page of
        the b-tree ``index`` (an index's name in ``sqlite_schema``, found with ``dbstat``),
        straight in the file, as a bad sector would: the table keeps the row, the index
        entry names another key, so a lookup of ``needle`` misses. Returns the page
        number. Every connection to the file must be closed (the write-ahead log is
        checkpointed into the file first, so the page on disk is the current one)."""
        with contextlib.closing(self._connect()) as db:
            db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            size = int(db.execute("PRAGMA page_size").fetchone()[0])
            pages = [
                int(row[0])
                for row in db.execute("SELECT pageno FROM dbstat WHERE name = ?", (index,))
            ]
        assert pages, f"no pages of {index}"
        target = needle.encode()
        with open(self.path, "r+b") as file:
            for page in pages:
                file.seek((page - 1) * size)
                found = file.read(size).find(target)
                if found < 0:
                    continue
                offset = (page - 1) * size + found + len(target) - 1
                file.seek(offset)
                byte = file.read(1)[0]
                file.seek(offset)
                file.write(bytes([byte ^ 0x01]))
                return page
        raise AssertionError(f"{needle!r} is in no page of {index}")

    def problems(self) -> list[str]:
        """``PRAGMA integrity_check``: ``[]`` when the file is intact."""
        with contextlib.closing(self._connect()) as db:
            found = [str(row[0]) for row in db.execute("PRAGMA integrity_check")]
        return [] if found == ["ok"] else found

    def dump(self) -> dict[str, list[tuple[object, ...]]]:
        """Every row of flowledger's data tables (not the leases an owner takes), read by
        table scans: what "nothing was written" is compared with."""
        tables = ("kv", "blobs", "ledger_logs", "ledger_records", "attachments")
        with contextlib.closing(self._connect()) as db:
            return {
                table: sorted(db.execute(f"SELECT * FROM {table} NOT INDEXED").fetchall())
                for table in tables
            }


def flip(data: bytes, position: int, mask: int = 0x01) -> bytes:
    changed = bytearray(data)
    changed[position] ^= mask
    return bytes(changed)
