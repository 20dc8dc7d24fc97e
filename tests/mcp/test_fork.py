"""``workflow_run_fork`` over stdio, through the SDK's client: a fork of an interrupted run
with a patch executes and pauses where its origin did; typed errors; hidden in
``--read-only``."""

from __future__ import annotations

from pathlib import Path

from mcp import Client

from .conftest import REVIEW_INPUT, error_text, payload, stdio_params, wait_status


async def test_fork_through_the_sdk_client(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path}/m.db"
    async with Client(stdio_params(db)) as client:
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
        fork_tool = tools["workflow_run_fork"]
        assert fork_tool.input_schema["required"] == ["run_id", "revision"]
        assert fork_tool.annotations is not None and fork_tool.annotations.read_only_hint is False
        started = payload(
            await client.call_tool(
                "workflow_run_start",
                {
                    "definition_name": "document_review",
                    "definition_version": "v1",
                    "input": REVIEW_INPUT,
                },
            )
        )
        origin = await wait_status(client, started["run_id"], "interrupted")
        origin_history = payload(
            await client.call_tool("workflow_run_history", {"run_id": origin["run_id"]})
        )
        forked = payload(
            await client.call_tool(
                "workflow_run_fork",
                {"run_id": origin["run_id"], "revision": 0, "patch": {"title": "Forked"}},
            )
        )
        assert forked["run_id"] != origin["run_id"]
        assert forked["forked_from"]["run_id"] == origin["run_id"]
        assert forked["forked_from"]["revision"] == 0
        paused = await wait_status(client, forked["run_id"], "interrupted")
        assert paused["pending"]["info"]["question"] == "Publish 'Forked'?"
        assert paused["forked_from"] == forked["forked_from"]
        history = payload(
            await client.call_tool("workflow_run_history", {"run_id": forked["run_id"]})
        )
        assert history["entries"][0]["kind"] == "run_started"
        resumed = payload(
            await client.call_tool(
                "workflow_run_resume", {"run_id": forked["run_id"], "resume": {"approved": True}}
            )
        )
        assert resumed["run_status"] == "completed"
        # the origin is still waiting, with the same history
        still = payload(await client.call_tool("workflow_run_get", {"run_id": origin["run_id"]}))
        assert still["run_status"] == "interrupted"
        assert still["checkpoint_revision"] == origin["checkpoint_revision"]
        assert (
            payload(await client.call_tool("workflow_run_history", {"run_id": origin["run_id"]}))
            == origin_history
        )
        before = payload(await client.call_tool("workflow_run_list", {}))
        for arguments, words in (
            ({"revision": -1}, "invalid fork revision"),
            ({"revision": 10_000}, "invalid fork revision"),
            ({"revision": 0, "patch": {"nope": 1}}, "state field 'nope'"),
            ({"revision": 0, "patch": {"title": 3}}, "state field 'title'"),
            ({"revision": 0, "definition_version": "v2"}, "invalid fork definition"),
        ):
            text = error_text(
                await client.call_tool(
                    "workflow_run_fork", {"run_id": origin["run_id"], **arguments}
                )
            )
            assert text.startswith("workflow tools:") and words in text, (words, text)
        assert payload(await client.call_tool("workflow_run_list", {})) == before


async def test_read_only_hides_the_fork_tool(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path}/m.db"
    async with Client(stdio_params(db)) as owner:
        started = payload(
            await owner.call_tool(
                "workflow_run_start",
                {
                    "definition_name": "document_review",
                    "definition_version": "v1",
                    "input": REVIEW_INPUT,
                },
            )
        )
        async with Client(stdio_params(db, "--read-only")) as reader:
            names = {tool.name for tool in (await reader.list_tools()).tools}
            assert "workflow_run_fork" not in names
            refused = error_text(
                await reader.call_tool(
                    "workflow_run_fork", {"run_id": started["run_id"], "revision": 0}
                )
            )
            assert "workflow_run_fork" in refused
            listed = payload(await reader.call_tool("workflow_run_list", {}))
            assert [r["run_id"] for r in listed["runs"]] == [started["run_id"]]
