"""The three-branch lost update through the MCP server (stdio, the ``mcp`` SDK client,
``--app tests.mcp.reducers_app:catalog``).

Without a field reducer the run does not complete with one branch's note: it is reported
``interrupted`` (the later branches' conflicting updates are errored pauses) and its
history shows only the first branch completing; the error itself - type, field and both
vertices - is in the run's durable checkpoint, where the session's owner reads it. With
``flow.append`` on the field the run completes with every branch's note.
"""

from __future__ import annotations

from pathlib import Path

from mcp import Client

from flowledger.host import load_catalog, open_session

from .conftest import payload, stdio_params, wait_status

APP = "tests.mcp.reducers_app:catalog"


def start_arguments(name: str) -> dict[str, object]:
    return {"definition_name": name, "definition_version": "v1", "input": {"topic": "tea"}}


async def stored_pause(db: str, run_id: str) -> list[tuple[str, str]]:
    """(vertex, error text) of each errored pause, from the run's latest checkpoint."""
    async with open_session(db, load_catalog(APP), activate=False) as session:
        run = await session.registry.get(session.session_id, run_id)
        definition = session.catalog.resolve(run.definition_name, run.definition_version)
        result = await definition.get(run.graph_run_id)
        assert result.interrupts is not None
        return [(i.vertex, str(i.cause)) for i in result.interrupts]


async def test_lost_update_and_field_reducer_over_stdio(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path}/r.db"
    async with Client(stdio_params(db, "--app", APP)) as client:
        definitions = payload(await client.call_tool("workflow_definition_list", {}))
        assert [d["name"] for d in definitions["definitions"]] == [
            "branches_plain",
            "branches_reduced",
        ]

        plain = payload(
            await client.call_tool("workflow_run_start", start_arguments("branches_plain"))
        )
        lost = await wait_status(client, plain["run_id"], "interrupted")
        assert lost["definition_name"] == "branches_plain"
        history = payload(
            await client.call_tool("workflow_run_history", {"run_id": plain["run_id"]})
        )
        kinds = [(e["kind"], e.get("vertex_id")) for e in history["entries"]]
        assert kinds == [
            ("run_started", None),
            ("vertex_completed", "split"),
            ("vertex_completed", "alpha"),
            ("run_interrupted", None),
        ]

        reduced = payload(
            await client.call_tool("workflow_run_start", start_arguments("branches_reduced"))
        )
        kept = await wait_status(client, reduced["run_id"], "completed")
        assert kept["status_summary"] == "alpha on tea; beta on tea; gamma on tea"

    pauses = await stored_pause(db, plain["run_id"])
    assert [vertex for vertex, _ in pauses] == ["beta", "gamma"]
    for vertex, error in pauses:
        assert "conflicting update of field 'notes'" in error
        assert f"vertex {vertex} would overwrite the update of vertex alpha" in error
