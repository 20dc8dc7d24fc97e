"""The file check before every SQLite write, once its directory has settled (`QuietFolder`):
one ``stat`` of the directory while nothing in it changed, and every change of the
database file or its companions still found before the next write.

A directory settles when its times are `SETTLED_NS` older than the clock; rather than
wait that long, these tests move the module's clock (`time.time_ns`) forward."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import pytest

from flowledger.storage import StoreBrokenError, open_store
from flowledger.storage.sqlite import folder as folder_module
from flowledger.storage.sqlite.folder import SETTLED_NS


@pytest.fixture
def later(monkeypatch: pytest.MonkeyPatch) -> None:
    """The folder module's clock runs ahead, so the test directory counts as settled."""
    real = time.time_ns
    monkeypatch.setattr(folder_module.time, "time_ns", lambda: real() + 2 * SETTLED_NS)


class StatCounter:
    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.paths: list[str] = []
        real = os.stat

        def counting(path: Any, *args: Any, **kwargs: Any) -> os.stat_result:
            self.paths.append(os.fspath(path))
            return real(path, *args, **kwargs)

        monkeypatch.setattr(os, "stat", counting)


def _wait_for_a_new_timestamp() -> None:
    # Directory times come from the kernel's coarse clock (a tick of a few ms): after
    # this, a change cannot carry the same timestamps as the directory had before.
    time.sleep(0.05)


async def test_a_settled_directory_takes_one_stat_per_write(
    tmp_path: Path, later: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "s.db"
    async with open_store(f"sqlite:///{path}") as store:
        await store.ledger.append("log", [b"first"], expected=0)  # full check, settles
        stats = StatCounter(monkeypatch)
        for n in range(1, 6):
            await store.ledger.append("log", [b"more"], expected=n)
        assert stats.paths.count(str(tmp_path)) == 5
        assert str(path) not in stats.paths and f"{path}-wal" not in stats.paths


async def test_a_young_directory_gets_the_full_check(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without the clock moved on, the just-made directory is too young to be trusted:
    each write looks at the three files, and the directory is not read again."""
    path = tmp_path / "s.db"
    async with open_store(f"sqlite:///{path}") as store:
        await store.ledger.append("log", [b"first"], expected=0)
        stats = StatCounter(monkeypatch)
        for n in range(1, 4):
            await store.ledger.append("log", [b"more"], expected=n)
        assert stats.paths.count(str(path)) == 3
        assert stats.paths.count(f"{path}-wal") == 3
        assert str(tmp_path) not in stats.paths


@pytest.mark.parametrize("deleted", ["-wal", "-shm"])
async def test_a_companion_deleted_from_a_settled_directory_is_found(
    tmp_path: Path, later: None, deleted: str
) -> None:
    path = tmp_path / "s.db"
    async with open_store(f"sqlite:///{path}") as store:
        await store.ledger.append("log", [b"first"], expected=0)
        await store.ledger.append("log", [b"second"], expected=1)  # the quick path
        _wait_for_a_new_timestamp()
        os.unlink(f"{path}{deleted}")
        with pytest.raises(StoreBrokenError) as caught:
            await store.ledger.append("log", [b"third"], expected=2)
        assert caught.value.reason == f"its {deleted} file was deleted"
    async with open_store(f"sqlite:///{path}") as reopened:
        assert await reopened.ledger.tip("log") == 2  # the refused write wrote nothing


async def test_a_database_replaced_in_a_settled_directory_is_found(
    tmp_path: Path, later: None
) -> None:
    path = tmp_path / "s.db"
    async with open_store(f"sqlite:///{path}") as store:
        await store.kv.put("k", b"before", expected=0)
        await store.kv.put("k", b"again", expected=1)  # the quick path
        copy = tmp_path / "copy.db"
        copy.write_bytes(path.read_bytes())
        _wait_for_a_new_timestamp()
        os.replace(copy, path)
        with pytest.raises(StoreBrokenError) as caught:
            await store.kv.put("k", b"after", expected=2)
        assert caught.value.reason == "the database file was replaced by another file"


async def test_restoring_the_directory_mtime_does_not_hide_a_change(
    tmp_path: Path, later: None
) -> None:
    """``utime`` can put the old mtime back, but it sets the ctime to now."""
    path = tmp_path / "s.db"
    async with open_store(f"sqlite:///{path}") as store:
        await store.ledger.append("log", [b"first"], expected=0)
        await store.ledger.append("log", [b"second"], expected=1)
        before = os.stat(tmp_path)
        _wait_for_a_new_timestamp()
        os.unlink(f"{path}-wal")
        os.utime(tmp_path, ns=(before.st_atime_ns, before.st_mtime_ns))
        assert os.stat(tmp_path).st_mtime_ns == before.st_mtime_ns
        with pytest.raises(StoreBrokenError):
            await store.ledger.append("log", [b"third"], expected=2)
