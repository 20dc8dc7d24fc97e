"""A SQLite key page costs the same wherever it starts: the work the database does for a
page far into a prefix (counted in virtual machine steps, `set_progress_handler`) is that
of the first page, not proportional to the keys before it."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from flowledger.storage import open_store
from flowledger.storage.sqlite import SQLiteKV

KEYS = 3000
PAGE = 5


def _steps(conn: sqlite3.Connection) -> list[int]:
    counted = [0]

    def tick() -> int:
        counted[0] += 1
        return 0  # go on

    conn.set_progress_handler(tick, 1)
    return counted


async def test_a_page_after_a_cursor_does_not_walk_from_the_prefix(tmp_path: Path) -> None:
    async with open_store(f"sqlite:///{tmp_path}/k.db?synchronous=OFF") as store:
        kv = store.kv
        assert isinstance(kv, SQLiteKV)
        for n in range(KEYS):
            await kv.put(f"p/{n:06d}", b"", expected=0)
        await kv.put("q/after", b"", expected=0)  # beyond the prefix: never listed
        conn = kv._db.conn
        steps = _steps(conn)

        first = await kv.keys_page("p/", limit=PAGE)
        first_steps, steps[0] = steps[0], 0
        last = await kv.keys_page("p/", start=f"p/{KEYS - PAGE - 1:06d}", limit=PAGE + 1)
        last_steps, steps[0] = steps[0], 0
        before = await kv.keys_page("p/", start="a", limit=PAGE)  # a cursor below the prefix
        conn.set_progress_handler(None, 1)

        assert first == [f"p/{n:06d}" for n in range(PAGE)]
        assert last == [f"p/{n:06d}" for n in range(KEYS - PAGE, KEYS)]
        assert before == first
        # the same page size at the end of the prefix: about the same work (a scan from
        # the prefix's start would take thousands of steps more)
        assert last_steps <= 2 * first_steps + 50, (first_steps, last_steps)
