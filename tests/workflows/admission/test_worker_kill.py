"""Two ``flowledger worker`` processes on PostgreSQL share 20 runs of a definition limited
to ``max_running=2`` across five sessions; one worker is SIGKILLed mid-way and a new one
takes its place. Nothing is lost (all 20 complete), and no more than two runs were ever
in progress: each run's flow interval (seed to completion, from its checkpoints, which
lies inside the interval its run record was running) overlaps at most one other."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from flowledger.storage import open_store
from flowledger.workflows.admission import Limits
from flowledger.workflows.records.registry import RunRegistry
from flowledger.workflows.records.run import RunStatus
from flowledger.workflows.records.unfinished import UnfinishedIndex

from ..._postgres import postgres_url
from ..conftest import build_session

APP = textwrap.dedent(
    """
    import asyncio

    from pydantic import BaseModel

    from flowledger import flow
    from flowledger.workflows import Catalog, Metadata, TypedDefinition, VertexMetadata


    class Count(BaseModel):
        count: int = 0


    async def step(state: Count) -> dict:
        await asyncio.sleep(0.2)
        return {"count": state.count + 1}


    def catalog() -> Catalog:
        graph = flow.Graph("slow", state=Count)
        graph.add_vertex("one", step)
        graph.add_vertex("two", step)
        graph.add_edge("one", "two")
        runner = graph.compile(entry="one", finish="two", version="1")
        metadata = Metadata(
            "slow",
            "v1",
            description="two slow steps",
            input_schema={
                "type": "object",
                "additionalProperties": False,
                "required": ["count"],
                "properties": {"count": {"type": "integer", "minimum": 0}},
            },
            vertices=[VertexMetadata("one", "one"), VertexMetadata("two", "two")],
        )
        found = Catalog()
        found.register(TypedDefinition(metadata, runner))
        return found
    """
)

RUNS = 20
SESSIONS = 5


@pytest.fixture
def pg_url() -> Iterator[str]:
    with postgres_url() as url:
        yield url


def worker(url: str, folder: Path) -> subprocess.Popen[str]:
    env = {k: v for k, v in os.environ.items() if k != "FLOWLEDGER_DB"}
    env["PYTHONPATH"] = os.pathsep.join([str(folder), env.get("PYTHONPATH", "")])
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "flowledger",
            "worker",
            "--db",
            url,
            "--app",
            "admission_slow_app:catalog",
            "--lease-ttl",
            "2",
            "--poll",
            "0.1",
        ],
        cwd=folder,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )


async def test_two_workers_and_a_kill_keep_the_limit_and_lose_nothing(
    pg_url: str, tmp_path: Path
) -> None:
    (tmp_path / "admission_slow_app.py").write_text(APP, encoding="utf-8")
    workers: list[subprocess.Popen[str]] = []
    async with open_store(pg_url) as store:
        await Limits(store.kv).set("definition", "slow", 2)
        sessions = [build_session(store) for _ in range(SESSIONS)]
        for session in sessions:  # front doors: pending runs the workers find
            session.registry = RunRegistry(store.kv, index=UnfinishedIndex(store.kv))
        created = [await sessions[i % SESSIONS].create_run("slow") for i in range(RUNS)]
        try:
            workers = [worker(pg_url, tmp_path), worker(pg_url, tmp_path)]

            async def statuses() -> list[RunStatus]:
                return [
                    (await s.registry.get(r.session_id, r.id)).status
                    for s in sessions
                    for r in created
                    if r.session_id == s.session_id
                ]

            async with asyncio.timeout(300):  # only catches a hang
                while sum(s is RunStatus.COMPLETED for s in await statuses()) < 4:  # noqa: ASYNC110
                    await asyncio.sleep(0.1)
                workers[0].send_signal(signal.SIGKILL)
                workers[0].wait()
                workers.append(worker(pg_url, tmp_path))
                while not all(s is RunStatus.COMPLETED for s in await statuses()):  # noqa: ASYNC110
                    await asyncio.sleep(0.2)
        finally:
            for proc in workers:
                if proc.poll() is None:
                    proc.send_signal(signal.SIGTERM)
            for proc in workers:
                try:
                    proc.communicate(timeout=30)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.communicate()
        checkpoints = sessions[0].checkpoints
        intervals = []
        for run in created:
            last = (await checkpoints.history(run.graph_run_id))[-1].run
            assert last.completed_at is not None
            intervals.append((last.started_at, last.completed_at))
        peak = max(
            sum(start <= moment < end for start, end in intervals) for moment, _ in intervals
        )
        assert peak == 2, intervals  # reached (the check has teeth), never exceeded
        assert await store.kv.keys("admission/queue/") == []
        assert len(await store.kv.keys("admission/slots/")) <= 2
