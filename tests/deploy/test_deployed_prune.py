"""Pruning a deployed run deletes its trace too (``deployed_run_logs``), against a real MCP
server (mcp-server-time over stdio)."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

from flowledger.deploy import StdioSource, compile_artifact
from flowledger.deploy.runs.retention import deployed_run_logs
from flowledger.deploy.runs.trace import trace_log
from flowledger.storage import open_store
from flowledger.workflows import Catalog
from flowledger.workflows.retention.pruning import RetentionPolicy, prune

from ..workflows._retention_support import backdate, owned_names, snapshot
from .test_runs import SESSION, one_call, session, settle, start


async def test_pruning_a_deployed_run_deletes_its_trace(
    tmp_path: Path, time_server: StdioSource
) -> None:
    url = f"sqlite:///{tmp_path / 'd.db'}"
    catalog = Catalog()
    validated = one_call("get_current_time", {"timezone": "Etc/UTC"})
    catalog.register(compile_artifact(validated, sources={"dep": time_server}))
    async with session(url, catalog) as (built, tools):
        run_id = await start(tools, "one_call", {})
        assert (await settle(built, tools, run_id))["run_status"] == "completed"
    async with open_store(url) as store:
        record = await backdate(store, SESSION, run_id)
        trace = trace_log(record.graph_run_id)
        assert trace in await store.ledger.names("deploy/")
        owned = await owned_names(store, SESSION, record)
        assert trace in owned
        before = await snapshot(store)
        policy = RetentionPolicy(timedelta(days=30))
        without = await prune(store, SESSION, policy, dry_run=True)
        assert without.logs == len(owned & before.logs) - 1  # the trace is not the bridge's
        report = await prune(store, SESSION, policy, run_logs=(deployed_run_logs,))
        assert set(report.runs) == {run_id}
        gone = before - await snapshot(store)
        assert gone.names() == owned | {record.input.key}
        assert trace not in await store.ledger.names("deploy/")
