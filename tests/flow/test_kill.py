"""Crash safety with real processes: SIGKILL a worker mid-run, resume in a new process.

flow-spec §9.1 ("a vertex is skipped only after its DONE checkpoint is durable"), §3.7
(contiguous revisions), §4.6 (resume of a RUNNING latest is crash recovery) and our Q3
(the recovered step keeps its index, so idempotency keys match the crashed attempt).
"""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import sys
import uuid
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

from flowledger import flow
from flowledger.flow import RunStatus, VertexStatus
from flowledger.storage import open_store

from . import _kill_worker as worker

SCRIPT = Path(worker.__file__).resolve()


def spawn(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-u", str(SCRIPT), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


async def read_json(proc: subprocess.Popen[str]) -> dict[str, Any]:
    assert proc.stdout is not None and proc.stderr is not None
    line = await asyncio.wait_for(asyncio.to_thread(proc.stdout.readline), 20)
    if not line:
        proc.wait(10)
        raise AssertionError(f"worker exited with {proc.returncode}: {proc.stderr.read()}")
    message: dict[str, Any] = json.loads(line)
    return message


async def run_to_end(proc: subprocess.Popen[str]) -> dict[str, Any]:
    try:
        while True:
            message = await read_json(proc)
            if "status" in message:
                assert await asyncio.to_thread(proc.wait, 20) == 0
                return message
    finally:
        close(proc)


def close(proc: subprocess.Popen[str]) -> None:
    if proc.poll() is None:
        proc.kill()
    proc.wait(10)
    for stream in (proc.stdout, proc.stderr):
        if stream is not None:
            stream.close()


def side_effects(log: Path) -> list[dict[str, Any]]:
    if not log.exists():
        return []
    return [json.loads(line) for line in log.read_text().splitlines() if line.strip()]


def starts_in(log: Path) -> list[dict[str, Any]]:
    return [e for e in side_effects(log) if e["event"] == "start"]


async def history_of(db: Path, run_id: str) -> list[flow.Checkpoint]:
    async with open_store(f"sqlite:///{db}") as storage:
        history: list[flow.Checkpoint] = await flow.LedgerCheckpointStore(storage.ledger).history(
            run_id
        )
        return history


@pytest.mark.slow
@pytest.mark.parametrize(
    ("granularity", "kill_after"),
    [
        ("per_vertex", 0),
        ("per_vertex", 3),
        ("per_vertex", 8),
        ("per_step", 2),
    ],
)
async def test_sigkill_then_resume_elsewhere(
    tmp_path: Path, granularity: str, kill_after: int
) -> None:
    """§8.154/§9.1 SIGKILL mid-run, resume in a new process."""
    db, log = tmp_path / "flow.db", tmp_path / "effects.jsonl"
    run_id = str(uuid.uuid4())

    child = spawn("run", str(db), str(log), run_id, granularity)
    try:
        while (await read_json(child))["revision"] < kill_after:
            pass
        # Kill while a task is in flight: right after the next task logs its start.
        started = starts_in(log)
        deadline = asyncio.get_running_loop().time() + 60  # only catches a hang
        while len(starts_in(log)) == len(started):
            assert asyncio.get_running_loop().time() < deadline, "no task started"
            await asyncio.sleep(0.001)
        child.send_signal(signal.SIGKILL)
    finally:
        close(child)
    assert child.returncode == -signal.SIGKILL

    crashed = await history_of(db, run_id)
    assert crashed[-1].run.status is RunStatus.RUNNING, "the kill landed after completion"
    assert [cp.revision for cp in crashed] == list(range(len(crashed)))
    durable_done = {
        v.vertex for cp in crashed for v in cp.vertices if v.status is VertexStatus.DONE
    }
    before_kill = len(side_effects(log))
    in_flight = starts_in(log)[-1]["vertex"]
    assert in_flight not in durable_done

    resumed = await run_to_end(spawn("resume", str(db), str(log), run_id, granularity))
    assert resumed["status"] == "completed"
    assert resumed["state"] == {"vals": list(worker.VERTICES)}

    history = await history_of(db, run_id)
    assert [cp.revision for cp in history] == list(range(len(history)))
    assert history[: len(crashed)] == crashed
    assert history[-1].run.status is RunStatus.COMPLETED
    assert history[-1].state == {"vals": list(worker.VERTICES)}

    effects = side_effects(log)
    starts: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for effect in effects:
        if effect["event"] == "start":
            starts[effect["vertex"]].append(effect)
    assert set(starts) == set(worker.VERTICES)
    for vertex in durable_done:
        assert len(starts[vertex]) == 1, f"{vertex} ran again after its DONE was durable"
    for vertex, runs in starts.items():
        assert len({r["key"] for r in runs}) == 1, f"{vertex} changed its idempotency key"
        assert len(runs) <= 2
    resumed_effects = effects[before_kill:]
    assert resumed_effects, "the resume executed nothing"
    assert not {e["vertex"] for e in resumed_effects} & durable_done
    assert not {e["pid"] for e in resumed_effects} & {e["pid"] for e in effects[:before_kill]}
    assert len(starts[in_flight]) == 2  # the interrupted execution ran again, same key

    # An uninterrupted run of the same graph ends in the same state.
    async with open_store(f"sqlite:///{tmp_path / 'clean.db'}") as storage:
        clean = worker.build(flow.LedgerCheckpointStore(storage.ledger), str(tmp_path / "x"))
        expected = await clean.run({"vals": []}, checkpoint=flow.Granularity(granularity))
    assert expected.state == resumed["state"]
    assert expected.run.step == history[-1].run.step
