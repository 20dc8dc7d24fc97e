"""A stalled owner cannot write after losing its lease (DESIGN: every owner write is fenced
by the owner's lease epoch in the same transaction).

A session owner runs in a child process (`_stall_driver.py`) and stops itself with SIGSTOP
just before one kind of write: a checkpoint append, a swap of the run record, a journal
publication, or the handling of a resume request. The test waits for its lease to expire,
takes the lease over, and sends SIGCONT. What must hold, on SQLite and PostgreSQL: the
stale owner's first write is refused (`FencedWriteError`), nothing it writes lands, no
vertex starts after the loss, and its supervisor stops owning the session.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from flowledger.storage import KeyNotFoundError, Lease, LeaseHeldError, Store, open_store
from flowledger.workflows.activities.journal import journal_name
from flowledger.workflows.records.requests import RunRequests, resume_request_key
from flowledger.workflows.records.run import Run, RunStatus, owner_lease_name
from tests.workflows.conftest import build_session

from .._postgres import postgres_url

pytestmark = pytest.mark.slow

DRIVER = Path(__file__).with_name("_stall_driver.py")
ROOT = Path(__file__).resolve().parents[2]
KINDS = ["checkpoint", "registry", "journal", "request"]
TTL = "1.0"


@pytest.fixture(params=["sqlite", "postgres"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'stale.db'}"
    else:
        with postgres_url() as url:
            yield url


async def prepare(store: Store, session_id: str, kind: str) -> Run:
    """A pending counter run, or (for ``request``) an interrupted asker run with a resume
    request waiting; nobody owns the session afterwards."""
    session = build_session(store, session_id)
    if kind != "request":
        return await session.create_run("counter", {"count": 0})
    supervisor = session.supervisor()
    await supervisor.activate()
    run = await session.create_run("asker", {"count": 0})
    await (await supervisor.start(run.id)).wait()
    assert await supervisor.wait_idle() is None
    await supervisor.shutdown()
    run = await session.registry.get(session_id, run.id)
    assert run.status is RunStatus.INTERRUPTED
    requests = RunRequests(store.kv)
    await requests.request_resume(session_id, run.id, b'{"increment": 2}', run.checkpoint_revision)
    return run


async def snapshot(store: Store, session_id: str, run: Run) -> dict[str, Any]:
    """Everything the owner of the run could write."""
    try:
        request: int | None = (await store.kv.get(resume_request_key(session_id, run.id))).revision
    except KeyNotFoundError:
        request = None
    record = await build_session(store, session_id).registry.get(session_id, run.id)
    return {
        "checkpoints": await store.ledger.tip(run.ledger_locator),
        "journal": await store.ledger.tip(journal_name(session_id, run.id)),
        "record": (record.revision, record.status),
        "request": request,
    }


def stopped(pid: int) -> bool:
    with open(f"/proc/{pid}/stat") as stat:
        return stat.read().rsplit(")", 1)[1].split()[0] == "T"


async def take_over(store: Store, session_id: str) -> Lease:
    deadline = time.monotonic() + 60
    while True:
        try:
            return await store.leases.acquire(owner_lease_name(session_id), ttl=30)
        except LeaseHeldError:
            assert time.monotonic() < deadline, "the stalled owner's lease never expired"
            await asyncio.sleep(0.05)


async def read_line(child: asyncio.subprocess.Process) -> dict[str, Any]:
    assert child.stdout is not None
    line = await asyncio.wait_for(child.stdout.readline(), 90)
    if not line:
        assert child.stderr is not None
        stderr = (await child.stderr.read()).decode()
        raise AssertionError(f"the owner exited with {await child.wait()}: {stderr}")
    message: dict[str, Any] = json.loads(line)
    return message


@pytest.mark.parametrize("kind", KINDS)
async def test_a_stalled_owners_first_write_after_losing_its_lease_fails(
    url: str, kind: str
) -> None:
    session_id = str(uuid.uuid4())
    async with open_store(url) as store:
        run = await prepare(store, session_id, kind)
        child = await asyncio.create_subprocess_exec(
            sys.executable,
            "-u",
            str(DRIVER),
            url,
            session_id,
            run.id,
            kind,
            TTL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            cwd=ROOT,
        )
        try:
            before: list[str] = []
            while "stalling" not in (message := await read_line(child)):
                before.append(message["vertex"])
            target = message["stalling"]
            # The activities are published when the journal catches up, which may be late.
            if kind != "journal":
                assert before == {"checkpoint": ["one"], "registry": [], "request": []}[kind]
            deadline = time.monotonic() + 30
            while not stopped(child.pid):
                assert time.monotonic() < deadline
                await asyncio.sleep(0.01)
            lease = await take_over(store, session_id)
            state = await snapshot(store, session_id, run)
            os.kill(child.pid, signal.SIGCONT)
            after: list[dict[str, Any]] = []
            while "stopped" not in (message := await read_line(child)):
                after.append(message)
            # One write, and no vertex. It is refused by the fence. On PostgreSQL, where the
            # write waits for the server, the refusal stops the owner's work at once, so
            # the write itself may end as cancelled during its rollback; and the owner's
            # lease renewal may even notice the takeover first and cancel the write.
            # Either way nothing of it lands (checked below).
            (write,) = after
            assert write["write"] == target
            if url.startswith("sqlite"):
                assert write["error"] == "FencedWriteError"
                assert message["fenced"]
            else:
                assert write["error"] in ("FencedWriteError", "CancelledError")
            assert message["stopped"] and not message["active"]
            assert await asyncio.wait_for(child.wait(), 60) == 0
            assert await snapshot(store, session_id, run) == state
            await lease.release()
        finally:
            if child.returncode is None:
                child.kill()
                await child.wait()
