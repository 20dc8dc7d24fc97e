"""One writer per thread (``single_writer=True``): two processes writing one thread, one
wins and the other gets a typed error, and the history stays one chain; a saver that
writes after another process wrote the thread, or after its lease ended, is refused."""

from __future__ import annotations

import asyncio
import itertools
import json
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest

from flowledger.integrations.langgraph import (
    FlowledgerSaver,
    ThreadConflictError,
    ThreadLeaseHeldError,
    ThreadLeaseLostError,
)
from flowledger.storage import open_store

from . import _writer as writer

SCRIPT = Path(writer.__file__).resolve()
ROOT = Path(__file__).resolve().parents[3]
STEPS = 40


def spawn(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-u", str(SCRIPT), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )


def line_of(proc: subprocess.Popen[str]) -> dict[str, Any]:
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if not line:
        proc.wait(30)
        assert proc.stderr is not None
        raise AssertionError(f"writer exited with {proc.returncode}: {proc.stderr.read()}")
    result: dict[str, Any] = json.loads(line)
    return result


def test_two_processes_on_one_thread_one_wins_and_history_stays_linear(
    durable_url: str, tmp_path: Path
) -> None:
    thread_id = f"shared-{uuid.uuid4()}"
    start = tmp_path / "start"
    procs = [spawn(durable_url, thread_id, str(STEPS), str(start)) for _ in range(2)]
    try:
        for proc in procs:
            assert "ready" in line_of(proc)
        start.touch()  # both begin together
        results = [line_of(proc) for proc in procs]
        for proc in procs:
            assert proc.wait(60) == 0
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    winners = [r for r in results if r.get("ok")]
    losers = [r for r in results if "error" in r]
    assert len(winners) == 1 and len(losers) == 1, results
    assert winners[0]["count"] == STEPS
    assert losers[0]["error"] in ("ThreadLeaseHeldError", "ThreadConflictError"), losers

    with FlowledgerSaver.from_url(durable_url) as saver:
        history = list(saver.list({"configurable": {"thread_id": thread_id}}))
    # the input checkpoint, then one per step: one chain, all the winner's
    assert [h.metadata["step"] for h in history] == list(range(STEPS, -2, -1))
    for newer, older in itertools.pairwise(history):
        assert newer.parent_config is not None
        assert (
            newer.parent_config["configurable"]["checkpoint_id"]
            == older.config["configurable"]["checkpoint_id"]
        )
    assert {h.checkpoint["channel_values"]["writer"] for h in history[:-1]} == {
        winners[0]["writer"]
    }


def _checkpoint(n: int) -> dict[str, Any]:
    from langgraph.checkpoint.base import empty_checkpoint

    cp: dict[str, Any] = dict(empty_checkpoint())
    cp["channel_values"] = {"n": n}
    cp["channel_versions"] = {"n": n + 1}
    return cp


async def test_a_write_on_a_stale_read_is_refused(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'sw.db'}"
    config = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}
    async with (
        FlowledgerSaver.from_url(url, single_writer=True, lease_idle=0.05) as first,
        FlowledgerSaver.from_url(url, single_writer=True, lease_idle=0.05) as second,
    ):
        base = await first.aput(config, _checkpoint(0), {"source": "input", "step": -1}, {"n": 1})
        assert (await second.aget_tuple(config)) is not None  # second has read the thread
        await first.arelease_thread("t")
        await asyncio.sleep(0)
        # first writes again after second read: second's view is stale now
        base = await first.aput(base, _checkpoint(1), {"source": "loop", "step": 0}, {"n": 2})
        await first.arelease_thread("t")
        with pytest.raises(ThreadConflictError, match="written by another process"):
            await second.aput(config, _checkpoint(2), {"source": "loop", "step": 0}, {"n": 3})
        latest = await second.aget_tuple(config)  # reading catches up ...
        assert (
            latest is not None
            and latest.config["configurable"]["checkpoint_id"]
            == base["configurable"]["checkpoint_id"]
        )
        await second.aput(
            base, _checkpoint(2), {"source": "loop", "step": 1}, {"n": 3}
        )  # ... so this one is not stale
        history = [t async for t in first.alist(config)]
        assert [t.metadata["step"] for t in history] == [1, 0, -1]


async def test_a_second_writer_while_the_lease_is_held(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'sw.db'}"
    config = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}
    async with (
        FlowledgerSaver.from_url(url, single_writer=True, lease_idle=60) as first,
        FlowledgerSaver.from_url(url, single_writer=True) as second,
    ):
        await first.aput(config, _checkpoint(0), {"source": "input", "step": -1}, {"n": 1})
        tip_before = await _tip(url)
        with pytest.raises(ThreadLeaseHeldError, match="being written by another process"):
            await second.aput(config, _checkpoint(1), {"source": "loop", "step": 0}, {"n": 2})
        with pytest.raises(ThreadLeaseHeldError):
            await second.aput_writes(await _latest(second, config), [("n", 5)], "task")
        assert await _tip(url) == tip_before  # nothing written


async def test_a_write_after_the_lease_ended_is_fenced(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'sw.db'}"
    config = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}
    async with (
        FlowledgerSaver.from_url(url, single_writer=True, lease_ttl=0.3, lease_idle=60) as first,
        open_store(url) as other,
    ):
        await first.aput(config, _checkpoint(0), {"source": "input", "step": -1}, {"n": 1})
        assert first.leases is not None
        held = first.leases._held["t"]
        # The holder stalls (its renewals stop) past the TTL; another process takes over.
        assert held.lease._renewer is not None
        held.lease._renewer.cancel()
        await asyncio.sleep(0.5)
        taker = await other.leases.acquire(held.lease.name, ttl=30)
        tip_before = await _tip(url)
        with pytest.raises(ThreadLeaseLostError, match="lost the lease"):
            await first.aput(config, _checkpoint(1), {"source": "loop", "step": 0}, {"n": 2})
        assert await _tip(url) == tip_before
        await taker.release()


async def _latest(saver: FlowledgerSaver, config: dict[str, Any]) -> dict[str, Any]:
    found = await saver.aget_tuple(config)
    assert found is not None
    return dict(found.config)


async def _tip(url: str) -> int:
    async with open_store(url) as store:
        names = await store.ledger.names("langgraph/threads/")
        return sum([await store.ledger.tip(name) for name in names])
