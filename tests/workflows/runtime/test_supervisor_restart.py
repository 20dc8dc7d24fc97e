"""Issue 4 restart tests: a SIGKILLed process holding the session, then a new supervisor."""

from __future__ import annotations

import asyncio
import signal
import sys
import time
import uuid
from pathlib import Path

import pytest

from flowledger.storage import open_store
from flowledger.workflows.errors import SessionOwnedError
from flowledger.workflows.records.run import RunStatus

from ..conftest import build_session

CHILD = Path(__file__).parent.parent / "_supervisor_child.py"

pytestmark = pytest.mark.slow


async def run_child_until_ready(
    url: str, session_id: str, name: str
) -> tuple[asyncio.subprocess.Process, str]:
    process = await asyncio.create_subprocess_exec(
        sys.executable, str(CHILD), url, session_id, name, stdout=asyncio.subprocess.PIPE
    )
    assert process.stdout is not None
    async with asyncio.timeout(30):
        line = await process.stdout.readline()
    run_id = line.decode().strip()
    assert run_id, "the child printed no run id"
    return process, run_id


@pytest.mark.parametrize(
    ("name", "expected", "kinds"),
    [
        (
            "counter",
            RunStatus.COMPLETED,
            ["run_started", "vertex_completed", "vertex_completed", "run_completed"],
        ),
        ("asker", RunStatus.INTERRUPTED, ["run_started", "run_interrupted"]),
    ],
)
async def test_sigkilled_owner_is_replaced_after_its_lease_expires(
    tmp_path: Path, name: str, expected: RunStatus, kinds: list[str]
) -> None:
    """A process running (or holding an interrupted) run is SIGKILLed; a new supervisor is
    refused while the dead owner's lease lives, then adopts the run once it expired and
    reaches the right status and history without re-running durable work. (The deadline
    only catches a lease that never expires; adoption latency is measured by
    bench/adoption.py.)"""
    url = f"sqlite:///{tmp_path / 'killed.db'}"
    session_id = str(uuid.uuid4())
    process, run_id = await run_child_until_ready(url, session_id, name)
    process.send_signal(signal.SIGKILL)
    killed_at = time.monotonic()
    await process.wait()
    async with open_store(url) as store:
        session = build_session(store, session_id)
        supervisor = session.supervisor()
        while True:
            try:
                await supervisor.activate()
                break
            except SessionOwnedError:
                assert time.monotonic() - killed_at < 60, "the dead owner's lease never expired"
                await asyncio.sleep(0.05)
        assert await supervisor.wait_idle() is None
        run = await session.registry.get(session_id, run_id)
        assert run.status is expected
        assert await session.kinds(run_id) == kinds
        if name == "counter":
            assert session.gates.runs == {"two": 1}  # "one" was durable before the kill
        history = await session.checkpoints.history(run.graph_run_id)
        assert [cp.revision for cp in history] == list(range(len(history)))
        assert run.activity_cursor == len(history)
        await supervisor.shutdown()
