"""``workflow_run_prune`` through the MCP SDK client (stdio server): previews are free, a
real prune only applies the served catalog's retention policy."""

from __future__ import annotations

from pathlib import Path

from mcp import Client

from flowledger.host import open_session
from flowledger.storage import open_store
from flowledger.workflows.records.run import run_key

from ..workflows._retention_support import Runs, backdate, catalog, snapshot
from .conftest import error_text, payload, stdio_params

WITH_POLICY = ["--app", "tests.mcp.retention_app:catalog"]


async def _old_runs(db: str) -> dict[str, str]:
    async with open_session(db, catalog()) as session:
        runs = Runs(session)
        made = {"completed": await runs.completed("a"), "failed": await runs.failed("b")}
        sid = session.session_id
    async with open_store(db) as store:
        for run_id in made.values():
            await backdate(store, sid, run_id)
    made["session"] = sid
    return made


async def test_a_model_previews_and_applies_only_the_policy(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path}/p.db"
    made = await _old_runs(db)
    async with open_store(db) as store:
        before = await snapshot(store)
    async with Client(stdio_params(db, *WITH_POLICY)) as client:
        names = [tool.name for tool in (await client.list_tools()).tools]
        assert "workflow_run_prune" in names
        preview = payload(await client.call_tool("workflow_run_prune", {"older_than": "1d"}))
        assert preview["dry_run"] is True
        assert set(preview["run_ids"]) == {made["completed"], made["failed"]}
        shorter = await client.call_tool(
            "workflow_run_prune", {"older_than": "1d", "dry_run": False}
        )
        assert "may not be shorter" in error_text(shorter)
        other = await client.call_tool(
            "workflow_run_prune", {"older_than": "30d", "statuses": "failed", "dry_run": False}
        )
        assert "prunes only completed" in error_text(other)
        bad = await client.call_tool("workflow_run_prune", {"older_than": "soon"})
        assert "invalid duration" in error_text(bad) and "hint" in error_text(bad)
        async with open_store(db) as store:
            assert await snapshot(store) == before  # refusals and previews wrote nothing
        done = payload(
            await client.call_tool(
                "workflow_run_prune",
                {"older_than": "30d", "statuses": "completed", "dry_run": False},
            )
        )
        assert done["run_ids"] == [made["completed"]]
    async with open_store(db) as store:
        keys = await store.kv.keys("")
        assert run_key(made["session"], made["completed"]) not in keys
        assert run_key(made["session"], made["failed"]) in keys


async def test_no_policy_no_deleting_and_read_only_has_no_tool(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path}/q.db"
    made = await _old_runs(db)
    app = ["--app", "tests.workflows.semantics_app:catalog"]
    async with Client(stdio_params(db, *app)) as client:
        refused = await client.call_tool(
            "workflow_run_prune", {"older_than": "30d", "dry_run": False}
        )
        assert "no retention policy" in error_text(refused)
    async with Client(stdio_params(db, *WITH_POLICY, "--read-only")) as reader:
        names = [tool.name for tool in (await reader.list_tools()).tools]
        assert "workflow_run_prune" not in names
        hidden = await reader.call_tool("workflow_run_prune", {"older_than": "30d"})
        assert hidden.is_error
    async with open_store(db) as store:
        keys = await store.kv.keys("")
        assert run_key(made["session"], made["completed"]) in keys
