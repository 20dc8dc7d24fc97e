"""The ``schedule_*`` tools through the MCP SDK client: over HTTP each token's tenant
sees and changes only its own session's schedules (an escape attempt finds nothing and
changes nothing); a refused ``schedule_add`` names the field and writes nothing; the
owning server fires a trigger's run at once; ``--read-only`` hides the mutating tools."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mcp import Client

from flowledger.mcp import session_for_token
from flowledger.storage import open_store

from .conftest import (
    REVIEW_INPUT,
    error_text,
    http_client,
    http_server,
    payload,
    stdio_params,
    wait_status,
)

TOKEN_A = "token-a-0123456789abcdef"
TOKEN_B = "token-b-0123456789abcdef"
SESSION_A = "7c9e6679-7425-40de-944b-e07fc1f90ae7"
DAILY: dict[str, Any] = {
    "definition_name": "document_review",
    "definition_version": "v1",
    "input": REVIEW_INPUT,
    "cron": "0 9 * * 1-5",
    "timezone": "Europe/Riga",
}


async def test_a_tenant_cannot_reach_another_tenants_schedules(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path}/s.db"
    tokens = {TOKEN_A: SESSION_A, TOKEN_B: session_for_token(TOKEN_B)}
    async with (
        http_server(db, tokens=tokens) as url,
        http_client(url, TOKEN_A) as a,
        http_client(url, TOKEN_B) as b,
    ):
        mine = payload(await a.call_tool("schedule_add", DAILY))
        assert len(mine["next_fire_times"]) == 3
        assert mine["next_fire_times"][0].endswith(("06:00:00Z", "07:00:00Z"))  # 09:00 Riga
        assert payload(await b.call_tool("schedule_list", {})) == {"schedules": []}
        async with open_store(db) as store:
            before = {k: (await store.kv.get(k)).revision for k in await store.kv.keys("")}
        for tool in (
            "schedule_get",
            "schedule_pause",
            "schedule_resume",
            "schedule_remove",
            "schedule_trigger",
        ):
            answer = await b.call_tool(tool, {"schedule_id": mine["schedule_id"]})
            assert "not found" in error_text(answer), tool
        async with open_store(db) as store:
            after = {k: (await store.kv.get(k)).revision for k in await store.kv.keys("")}
        assert after == before  # the escape attempts wrote nothing
        shown = payload(await a.call_tool("schedule_get", {"schedule_id": mine["schedule_id"]}))
        assert shown["paused"] is False and shown["recent_firings"] == []


async def test_refusals_name_the_field_and_a_trigger_runs_on_the_owner(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path}/t.db"
    async with Client(stdio_params(db)) as client:
        for change, field in [
            ({"cron": "0 25 * * *"}, "cron"),
            ({"timezone": "Atlantis/Capital"}, "timezone"),
            ({"cron": None, "timezone": None, "every": 0}, "every"),
            ({"overlap": "pile"}, "overlap"),
            ({"catch_up": "every"}, "catch_up"),
            ({"definition_version": "v9"}, "target"),
            ({"input": {"title": "only a title"}}, "input"),
        ]:
            arguments = {k: v for k, v in {**DAILY, **change}.items() if v is not None}
            answer = error_text(await client.call_tool("schedule_add", arguments))
            assert f"invalid schedule {field}" in answer, (field, answer)
        assert payload(await client.call_tool("schedule_list", {})) == {"schedules": []}

        added = payload(await client.call_tool("schedule_add", {**DAILY, "paused": True}))
        assert added["paused"] is True and added["next_fire_times"] == []
        fired = payload(
            await client.call_tool("schedule_trigger", {"schedule_id": added["schedule_id"]})
        )
        assert fired["manual"] is True
        run = await wait_status(client, fired["run_id"], "interrupted")
        assert run["scheduled_by"] == {
            "schedule_id": added["schedule_id"],
            "slot": fired["slot"],
            "manual": True,
        }
        removed = await client.call_tool("schedule_remove", {"schedule_id": added["schedule_id"]})
        assert payload(removed) == {"schedule_id": added["schedule_id"], "removed": True}

    async with Client(stdio_params(db, "--read-only")) as reader:
        names = {tool.name for tool in (await reader.list_tools()).tools}
        assert {"schedule_list", "schedule_get"} <= names
        assert not names & {
            "schedule_add",
            "schedule_pause",
            "schedule_resume",
            "schedule_remove",
            "schedule_trigger",
        }


GREETING: dict[str, Any] = {
    "format": "flowledger.artifact/v1",
    "name": "greeting",
    "version": "1",
    "input_schema": {
        "type": "object",
        "properties": {"team": {"type": "string"}},
        "required": ["team"],
        "additionalProperties": False,
    },
    "output_schema": {"type": "object", "additionalProperties": False},
    "start": "done",
    "nodes": {"done": {"kind": "end", "outcome": "ok"}},
}
GREET: dict[str, Any] = {
    "format": "flowledger.deployment/v1",
    "name": "greet",
    "artifact": {"name": "greeting", "version": "1"},
    "sources": {},
}


async def test_a_tenant_can_schedule_only_its_own_sessions_deployments(tmp_path: Path) -> None:
    """Tenant B deploys ``greet``; tenant A naming ``greet`` in ``schedule_add`` finds no
    such deployment and writes nothing; B's own schedule of it starts a pinned run."""
    db = f"sqlite:///{tmp_path}/d.db"
    tokens = {TOKEN_A: SESSION_A, TOKEN_B: session_for_token(TOKEN_B)}
    async with (
        http_server(db, tokens=tokens) as url,
        http_client(url, TOKEN_A) as a,
        http_client(url, TOKEN_B) as b,
    ):
        payload(await b.call_tool("artifact_save", {"document": GREETING}))
        payload(await b.call_tool("deployment_save", {"document": GREET}))
        target = {"deployment": "greet", "input": {"team": "ops"}, "every": 3600}
        async with open_store(db) as store:
            before = {k: (await store.kv.get(k)).revision for k in await store.kv.keys("")}
        escape = error_text(await a.call_tool("schedule_add", target))
        assert "invalid schedule deployment" in escape, escape
        async with open_store(db) as store:
            after = {k: (await store.kv.get(k)).revision for k in await store.kv.keys("")}
        assert after == before
        assert payload(await a.call_tool("schedule_list", {})) == {"schedules": []}

        refused = error_text(await b.call_tool("schedule_add", {**target, "input": {}}))
        assert "invalid schedule input" in refused, refused
        added = payload(await b.call_tool("schedule_add", target))
        assert added["deployment"] == "greet" and "definition_name" not in added
        fired = payload(
            await b.call_tool("schedule_trigger", {"schedule_id": added["schedule_id"]})
        )
        assert fired["deployment_revision"] == 1
        run = await wait_status(b, fired["run_id"], "completed")
        assert run["scheduled_by"]["schedule_id"] == added["schedule_id"]
        inspected = payload(await b.call_tool("inspect_run", {"run_id": fired["run_id"]}))
        assert inspected["deployment"]["revision"] == 1, inspected
