"""Retention deletions are counted by status in the process that prunes (Python API,
on SQLite)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from flowledger.host import open_session
from flowledger.observability import metrics
from flowledger.storage import open_store
from flowledger.workflows.retention.pruning import RetentionPolicy, prune

from ..workflows._retention_support import Runs, catalog
from ._scrape import parse, value

pytest.importorskip("prometheus_client")


async def test_a_prune_pass_counts_the_runs_it_deleted_by_status(tmp_path: Path) -> None:
    metrics.enable()
    url = f"sqlite:///{tmp_path / 'r.db'}"
    async with open_session(url, catalog()) as session:
        runs = Runs(session)
        await runs.completed("one")
        await runs.completed("two")
        await runs.cancelled("three")
        await runs.interrupted("kept: not finished")
        session_id = session.session_id
    before = parse((await metrics.exposition()).decode())
    later = datetime.now(UTC) + timedelta(days=2)
    async with open_store(url) as store:
        report = await prune(store, session_id, RetentionPolicy(timedelta(days=1)), now=later)
        dry = await prune(store, session_id, RetentionPolicy(timedelta(days=1)), now=later,
                          dry_run=True)  # fmt: skip
    assert report.by_status()["completed"] == 2 and dry.runs == {}
    after = parse((await metrics.exposition()).decode())
    for status, deleted in (("completed", 2), ("cancelled", 1), ("failed", 0)):
        moved = value(after, "flowledger_retention_deleted_runs_total", status=status) - value(
            before, "flowledger_retention_deleted_runs_total", status=status
        )
        assert moved == deleted, status
