"""Direct byte surgery on a flowledger SQLite database (for corruption tests)."""

from __future__ import annotations

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


def flip(data: bytes, position: int, mask: int = 0x01) -> bytes:
    changed = bytearray(data)
    changed[position] ^= mask
    return bytes(changed)
