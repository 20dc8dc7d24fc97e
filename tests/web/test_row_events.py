"""The runs table's stream (`RowEvents`, behind ``GET /events/runs``) reads the session's
runs whole once, then on each wake only the runs that can have changed: its record reads
are counted on a real SQLite session (the route itself is exercised end to end by
test_live.py)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

from flowledger.host import open_session
from flowledger.web.sessions import Served
from flowledger.web.streams import RowEvents
from flowledger.web.views import RunFilter
from flowledger.workflows.records.run import Run
from flowledger.workflows.records.unfinished import complete_key
from flowledger.workflows.runtime.session import WorkflowSession

from ..workflows._retention_support import Runs, catalog


class _Counted:
    """The session's registry ``get`` (every record read of a listing goes through it),
    counted per run."""

    def __init__(self, session: WorkflowSession) -> None:
        self.reads: list[str] = []
        inner = session.registry.get

        async def get(session_id: str, run_id: str) -> Run:
            self.reads.append(run_id)
            return await inner(session_id, run_id)

        session.registry.get = get  # type: ignore[method-assign]

    def take(self) -> list[str]:
        taken, self.reads = self.reads, []
        return taken


@asynccontextmanager
async def _session(db: Path) -> AsyncIterator[tuple[WorkflowSession, Runs]]:
    async with open_session(f"sqlite:///{db}", catalog()) as session:
        yield session, Runs(session)


async def _rows(events: RowEvents) -> list[str]:
    """The run IDs of the ``row`` events one wake sends."""
    sent = []
    async for message in events():
        assert message.event == "row"
        sent.append(message.data["run_id"])
    return sent


async def test_a_wake_reads_the_open_and_new_runs_not_every_run(tmp_path: Path) -> None:
    async with _session(tmp_path / "rows.db") as (session, runs):
        finished = [await runs.completed(f"done {i}") for i in range(12)]
        waiting = await runs.interrupted("waiting")
        served = cast(Served, SimpleNamespace(session=session, tools=runs.tools))

        async def row_html(run: dict[str, Any]) -> str:
            return str(run["run_id"])

        events = RowEvents(served, RunFilter("", "", ""), "", row_html=row_html)
        counted = _Counted(session)

        first = await _rows(events)  # from no mark: every run, read once
        assert sorted(first) == sorted([*finished, waiting])
        assert sorted(counted.take()) == sorted([*finished, waiting])

        # Nothing changed: the unfinished run and the newest run are read, nothing sent.
        assert await _rows(events) == []
        reads = counted.take()
        assert set(reads) <= {waiting, finished[-1]} and waiting in reads, reads

        # The waiting run finishes and two runs start (one finishes at once): those are
        # read and sent, and none of the twelve finished before.
        await runs.call("workflow_run_resume", {"run_id": waiting, "resume": {"approved": True}})
        started = await runs.interrupted("new")
        done = await runs.completed("new and done")
        assert sorted(await _rows(events)) == sorted([waiting, started, done])
        reads = counted.take()
        assert set(reads) <= {waiting, started, done}, reads
        assert not set(reads) & set(finished)

        # The run that finished was read one last time; now only the open one is.
        assert await _rows(events) == []
        assert set(counted.take()) <= {started, done} and len(finished) > 2


async def test_a_session_without_a_complete_index_is_read_whole(tmp_path: Path) -> None:
    async with _session(tmp_path / "whole.db") as (session, runs):
        made = [await runs.completed(f"done {i}") for i in range(3)]
        served = cast(Served, SimpleNamespace(session=session, tools=runs.tools))
        index = session.registry.index
        assert index is not None
        await session.store.kv.delete(complete_key(session.session_id))
        assert not await index.complete(session.session_id)

        async def row_html(run: dict[str, Any]) -> str:
            return str(run["run_id"])

        events = RowEvents(served, RunFilter("", "", ""), "", row_html=row_html)
        counted = _Counted(session)
        assert sorted(await _rows(events)) == sorted(made)
        counted.take()
        assert await _rows(events) == []
        assert sorted(counted.take()) == sorted(made)  # as before: every run, every wake
