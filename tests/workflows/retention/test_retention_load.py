"""Retention under load and against concurrent starters sharing inputs with pruned runs."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import sys
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from flowledger.host import open_session
from flowledger.storage import BlobNotFoundError, Blobs, Fence, KeyNotFoundError, Store, open_store
from flowledger.workflows.errors import NotFoundError
from flowledger.workflows.records.input_claims import InputClaims
from flowledger.workflows.records.inputs import InputStore, canonical_json
from flowledger.workflows.records.registry import RunRegistry
from flowledger.workflows.records.run import RunStatus, decode_run, runs_prefix
from flowledger.workflows.retention.pruning import RetentionPolicy, prune
from flowledger.workflows.runtime.session import default_session_id

from ..._postgres import postgres_url
from .._retention_support import Runs, backdate, catalog

ROOT = Path(__file__).resolve().parents[3]
WRITER = Path(__file__).parent.parent / "_retention_writer.py"
HANG = 300  # seconds: only a hang deadline, never a timing expectation


@pytest.fixture(params=["sqlite", "postgres"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'load.db'}"
    else:
        with postgres_url() as found:
            yield found


class _RacingBlobs:
    """Blobs whose first delete of ``key`` lets ``before_delete`` run first: a starter
    creating its run record right between the pruner's second look and its delete."""

    def __init__(self, inner: Blobs, before_delete: Any) -> None:
        self.inner = inner
        self.before_delete = before_delete

    async def put(self, key: str, data: bytes, *, fence: Fence | None = None) -> None:
        await self.inner.put(key, data, fence=fence)

    async def get(self, key: str) -> bytes:
        return await self.inner.get(key)

    async def delete(self, key: str, *, fence: Fence | None = None) -> None:
        hook, self.before_delete = self.before_delete, None
        if hook is not None:
            await hook(key)
        await self.inner.delete(key, fence=fence)

    async def list(self, prefix: str = "") -> list[str]:
        return await self.inner.list(prefix)


@pytest.mark.parametrize("starter_keeps", [True, False])
async def test_a_run_created_while_its_input_is_deleted_keeps_it(
    url: str, starter_keeps: bool
) -> None:
    """With the starter's side of the protocol the new run has its input; without it (an
    old starter) the race this guards against really loses the input."""
    async with open_session(url, catalog()) as session:
        old = await Runs(session).completed("shared")
        sid = session.session_id
    async with open_store(url) as store:
        record = await backdate(store, sid, old)
        data = canonical_json({"text": "shared"})
        keeping: list[asyncio.Task[None]] = []

        async def start_same_input(key: str) -> None:
            registry = RunRegistry(store.kv)
            twin = dataclasses.replace(
                record,
                id="7" * 8 + record.id[8:],
                artifact_run_id="7" * 8 + record.id[8:],
                revision=0,
            )
            await store.blobs.put(key, data)  # what a starter does first (a no-op here)
            await registry.create(twin)
            if starter_keeps:
                claims = InputClaims(store.kv, store.blobs, store.leases)
                inputs = InputStore(store.blobs, claims=claims)
                keeping.append(asyncio.create_task(inputs.keep(sid, twin.input, data)))
                await asyncio.sleep(0.05)  # it finds the marker and waits for the pruner

        racing = dataclasses.replace(store, blobs=_RacingBlobs(store.blobs, start_same_input))
        report = await prune(racing, sid, RetentionPolicy(timedelta(days=30)))
        assert set(report.runs) == {old}
        await asyncio.gather(*keeping)
        if starter_keeps:
            assert await store.blobs.get(record.input.key) == data
        else:
            with pytest.raises(BlobNotFoundError):
                await store.blobs.get(record.input.key)


async def _every_record_has_its_input(store: Store, sid: str, *, settled: bool = True) -> int:
    """Every run has its input blob; ``settled=False`` leaves out the runs not yet seeded
    (their starter may be about to store their input again, see `input_claims`)."""
    prefix = runs_prefix(sid)
    count = 0
    for key in await store.kv.keys(prefix):
        try:
            run = decode_run(key, (await store.kv.get(key)).value)
        except KeyNotFoundError:
            continue  # pruned meanwhile
        if not settled and run.status in (RunStatus.PENDING, RunStatus.RUNNING):
            continue
        await store.blobs.get(run.input.key)  # BlobNotFoundError fails the test
        count += 1
    return count


async def test_prune_under_load_from_another_process(url: str, tmp_path: Path) -> None:
    # PostgreSQL round trips cost more on a shared 2-core machine: fewer runs keep it short.
    count, shared = (300 if url.startswith("sqlite") else 100), 4
    async with open_store(url) as store:
        sid = await default_session_id(store)
    writer = await asyncio.create_subprocess_exec(
        sys.executable,
        str(WRITER),
        url,
        str(count),
        str(shared),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        cwd=ROOT,
    )
    output = asyncio.ensure_future(writer.communicate())
    passes = pruned = 0
    policy = RetentionPolicy(timedelta(minutes=1))
    try:
        async with open_store(url) as store:
            # Runs finished a few seconds ago are old enough: prune keeps racing the writer.
            while not output.done():
                later = datetime.now(UTC) + timedelta(seconds=55)
                report = await prune(store, sid, policy, now=later)
                passes += 1
                pruned += len(report.runs)
                await _every_record_has_its_input(store, sid, settled=False)
                await asyncio.sleep(0.2)  # leave the shared cores to the writer in between
        out_bytes, err_bytes = await asyncio.wait_for(output, HANG)
    finally:
        if writer.returncode is None:
            writer.kill()
            await writer.wait()
    out, err = out_bytes.decode(), err_bytes.decode()
    assert writer.returncode == 0, err
    result = json.loads(out.strip().splitlines()[-1])
    assert result["errors"] == []
    interrupted = set(result["interrupted"])
    assert len(interrupted) == count // 10
    async with open_store(url) as store:
        final = await prune(store, sid, policy, now=datetime.now(UTC) + timedelta(days=1))
        pruned += len(final.runs)
        assert pruned == count - len(interrupted)
        assert await _every_record_has_its_input(store, sid) == len(interrupted)
    async with open_session(url, catalog()) as session:
        runs = Runs(session)
        listed = await runs.call("workflow_run_list", {"limit": 100})
        assert {r["run_id"] for r in listed["runs"]} == interrupted
        for run_id in sorted(interrupted):
            history = await runs.call("workflow_run_history", {"run_id": run_id})
            assert history["entries"]
        one = sorted(interrupted)[0]
        done = await runs.call("workflow_run_resume", {"run_id": one, "resume": {"approved": True}})
        assert done["run_status"] == "completed"
    assert passes >= 1


async def test_a_start_waits_for_an_input_its_starter_stores_again(tmp_path: Path) -> None:
    async with open_store(f"sqlite:///{tmp_path / 'wait.db'}") as store:
        sid = await default_session_id(store)
        claims = InputClaims(store.kv, store.blobs, store.leases)
        data = canonical_json({"text": "late"})
        ref = await InputStore(store.blobs).put(sid, data)
        await store.blobs.delete(ref.key)  # a prune got there between put and record

        async def starter_keeps() -> None:
            await asyncio.sleep(0.1)
            await InputStore(store.blobs, claims=claims).keep(sid, ref, data)

        keeping = asyncio.create_task(starter_keeps())
        now = datetime.now(UTC)
        got = await InputStore(store.blobs, claims=claims).get_for_start(
            sid, ref, created_at=now, now=now
        )
        assert got == data
        await keeping
        await store.blobs.delete(ref.key)
        with pytest.raises(NotFoundError):  # an old run's missing input is not waited for
            await InputStore(store.blobs, claims=claims).get_for_start(
                sid, ref, created_at=now - timedelta(days=1), now=now
            )
