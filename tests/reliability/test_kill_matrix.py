"""Kill matrix: the built-in ``document_review`` (start, pause for approval, resume,
finish) is driven by a child process (``_kill_driver.py``); the parent polls the run's
checkpoint tip and SIGKILLs the child once the tip reaches revision k, for every checkpoint
boundary k in turn, on SQLite and on PostgreSQL (skipped without a server). A fresh process
then owns the session (after the dead owner's 0.5 s lease expires), adopts the run, resumes
it if it is paused and finishes it. The result must equal the undisturbed run: same status
and final state, contiguous revisions, the same activity kinds with unique event ids, and
registry cursors that match the checkpoints.

By default every third boundary is killed (plus the last); the full matrix:

    FLOWLEDGER_FULL_KILL_MATRIX=1 pytest tests/reliability/test_kill_matrix.py
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from flowledger.host import load_catalog
from flowledger.storage import Store, open_store
from flowledger.workflows.records.run import RunStatus
from flowledger.workflows.runtime.session import WorkflowSession

from .._postgres import postgres_url

pytestmark = pytest.mark.slow

DRIVER = Path(__file__).with_name("_kill_driver.py")
FULL = os.environ.get("FLOWLEDGER_FULL_KILL_MATRIX") == "1"


@dataclass
class Final:
    status: RunStatus
    state: dict[str, Any]
    kinds: list[str]
    revisions: int


async def tip_of_run(store: Store) -> int:
    names = await store.ledger.names("flow/runs/")
    return await store.ledger.tip(names[0]) if names else 0


async def drive(url: str, session_id: str, mode: str, store: Store, kill_at: int | None) -> bool:
    """Run the driver in ``mode``; SIGKILL it once revision ``kill_at`` is durable. Returns
    whether it was killed."""
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        str(DRIVER),
        mode,
        url,
        session_id,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    async with asyncio.timeout(60):
        while process.returncode is None:
            if kill_at is not None and await tip_of_run(store) >= kill_at + 1:
                process.send_signal(signal.SIGKILL)
                await process.wait()
                return True
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(process.wait(), 0.002)
        _out, err = await process.communicate()
    assert process.returncode == 0, err.decode()[-2000:]
    return False


async def final(store: Store, session_id: str) -> Final:
    session = WorkflowSession.build(store, session_id, load_catalog())
    run = (await session.registry.list(session_id, limit=10)).runs[0]
    history = await session.checkpoints.history(run.graph_run_id)
    assert [cp.revision for cp in history] == list(range(len(history)))
    records = await session.journal.records(session_id, run.id)
    ids = [item.activity.event_id for item in records]
    assert len(ids) == len(set(ids)), "an activity was published twice"
    assert run.checkpoint_revision == history[-1].revision
    assert run.activity_cursor == len(history)
    return Final(
        run.status,
        dict(history[-1].state or {}),
        [str(item.activity.kind) for item in records],
        len(history),
    )


async def scenario(url: str, kill_at: int | None) -> tuple[Final, bool]:
    """One run on ``url`` (a fresh database or schema, or a fresh session on it)."""
    session_id = str(uuid.uuid4())
    async with open_store(url) as store:
        killed = await drive(url, session_id, "start", store, kill_at)
        for _ in range(3):
            session = WorkflowSession.build(store, session_id, load_catalog())
            runs = (await session.registry.list(session_id, limit=10)).runs
            if runs and runs[0].status is RunStatus.COMPLETED:
                break
            if not runs:  # killed before the run record was written: start again
                killed |= await drive(url, session_id, "start", store, None)
                continue
            killed |= await drive(url, session_id, "finish", store, None if killed else kill_at)
        return await final(store, session_id), killed


@pytest.fixture(params=["sqlite", "postgres"])
def database(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Callable[[str], str]]:
    """A factory of fresh store URLs: SQLite files, or one PostgreSQL schema per test
    (skipped without a server, failing when CI=true; see ``tests/_postgres.py``) whose
    runs are told apart by their first ledger name - so one run per schema: each call
    gives a new schema."""
    if request.param == "sqlite":
        yield lambda label: f"sqlite:///{tmp_path / label}.db"
        return
    with contextlib.ExitStack() as stack:
        yield lambda label: stack.enter_context(postgres_url())


async def test_kill_at_every_checkpoint_boundary(database: Callable[[str], str]) -> None:
    baseline, killed = await scenario(database("baseline"), None)
    assert not killed
    assert baseline.status is RunStatus.COMPLETED
    assert baseline.state["published"] is True
    boundaries = list(range(baseline.revisions))
    if not FULL:
        boundaries = sorted({*boundaries[::3], boundaries[-1]})
    problems: list[str] = []
    kills = 0
    for k in boundaries:
        result, killed = await scenario(database(f"kill-{k}"), k)
        kills += killed
        if (result.status, result.state, result.kinds) != (
            baseline.status,
            baseline.state,
            baseline.kinds,
        ):
            problems.append(f"k={k}: {result}")
    print(f"{baseline.revisions} revisions; killed at {kills} of {len(boundaries)} boundaries")
    assert not problems, "\n".join(problems)
    assert kills >= len(boundaries) - 1  # the last boundary may be the finished run
