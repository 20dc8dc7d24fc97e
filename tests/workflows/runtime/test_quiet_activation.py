"""Activating a session over paused runs writes nothing to them (Dashboard II, item 3).

Regression: every activation (``flowledger web``, a CLI command, an MCP server taking the
session) re-recorded each paused run's status through the registry, moving its revision
and ``updated_at`` to the activation's time although nothing had changed."""

from __future__ import annotations

from pathlib import Path

from flowledger.examples.review import review_definition
from flowledger.host import open_session
from flowledger.tools import WorkflowTools
from flowledger.workflows import Catalog
from flowledger.workflows.records.pending import pending_key


def catalog() -> Catalog:
    catalog = Catalog()
    catalog.register(review_definition())
    return catalog


async def test_activating_a_session_over_paused_runs_rewrites_none_of_them(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'quiet.db'}"
    async with open_session(url, catalog()) as session:
        tools = WorkflowTools.for_session(session)
        run_ids = []
        for title in ("first", "second"):
            started = await tools.call(
                "workflow_run_start",
                {
                    "definition_name": "document_review",
                    "definition_version": "v1",
                    "input": {"title": title, "document": "One sentence. Another one."},
                },
            )
            run_ids.append(started["run_id"])
        await session.supervisor.wait_idle()
        session_id = session.session_id
        before = {}
        for run_id in run_ids:
            run = await session.registry.get(session_id, run_id)
            assert run.status.value == "interrupted"
            pending = await session.store.kv.get(pending_key(session_id, run_id))
            before[run_id] = (run, pending.revision)

    for _ in range(2):  # each activation adopts the paused runs again
        async with open_session(url, catalog()) as session:
            await session.supervisor.wait_idle()
            for run_id in run_ids:
                run = await session.registry.get(session_id, run_id)
                pending = await session.store.kv.get(pending_key(session_id, run_id))
                assert (run, pending.revision) == before[run_id]
