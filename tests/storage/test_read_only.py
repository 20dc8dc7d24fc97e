"""``open_store(url, read_only=True)``: open an existing database, never create or write."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from flowledger.storage import StoreNotFoundError, StoreOpenError, open_store


async def test_a_missing_database_is_not_created(tmp_path: Path) -> None:
    path = tmp_path / "missing.db"
    with pytest.raises(StoreNotFoundError, match=f"^no database at {path}$"):
        await open_store(f"sqlite:///{path}", read_only=True)
    assert not path.exists()


async def test_an_existing_database_is_read_and_never_written(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/r.db"
    async with open_store(url) as writer:
        assert not writer.read_only
        await writer.kv.put("a/key", b"value", expected=0)
    async with open_store(url, read_only=True) as reader:
        assert reader.read_only
        assert (await reader.kv.get("a/key")).value == b"value"
        with pytest.raises(sqlite3.OperationalError, match="readonly"):
            await reader.kv.put("b/key", b"x", expected=0)
    async with open_store(url) as writer:
        assert await writer.kv.keys() == ["a/key"]


async def test_a_file_that_is_not_a_flowledger_database_is_refused(tmp_path: Path) -> None:
    empty = tmp_path / "empty.db"
    sqlite3.connect(empty).close()
    with pytest.raises(StoreOpenError, match="not a flowledger database"):
        await open_store(f"sqlite:///{empty}", read_only=True)
    text = tmp_path / "notes.db"
    text.write_text("just some notes, not sqlite at all" * 100)
    with pytest.raises(StoreOpenError, match="not a flowledger database"):
        await open_store(f"sqlite:///{text}", read_only=True)
    assert text.read_text().startswith("just some notes")


async def test_a_memory_store_can_be_opened_read_only() -> None:
    async with open_store("memory://", read_only=True) as store:
        assert store.read_only
        assert await store.kv.keys() == []
