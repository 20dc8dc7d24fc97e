"""The lifecycle tools on the MCP server through the ``mcp`` SDK client: over stdio (the
operator's server) ``deployment_check``, a deployment kept by its interrupted run and an
artifact kept by the deployment (typed errors naming them), ``deployment_rollback``
under compare-and-swap, the paged lists, and the deletes once the run finished; a
read-only server hides the mutating ones, and a finished run of a deleted deployment
is still inspected and traced (from its pin's snapshots). Over HTTP with two tokens, a tenant cannot
delete, roll back, check or list another session's artifacts and deployments: they do
not exist for it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mcp import Client

from flowledger.deploy.registry.store import SourceRegistry
from flowledger.mcp import session_for_token
from flowledger.storage import open_store

from ..mcp.conftest import error_text, http_client, http_server, payload, stdio_params
from .runs.app import HERE as RUNS
from .test_deployed_runs import deployment, server_script

TEXT = (RUNS / "pinned_env.yaml").read_text()


async def test_lifecycle_through_the_stdio_server(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'lifecycle.db'}"
    script = server_script(tmp_path)
    async with Client(stdio_params(db)) as client:

        async def call(name: str, arguments: dict[str, Any]) -> Any:
            return payload(await client.call_tool(name, arguments))

        async def refused(name: str, arguments: dict[str, Any]) -> str:
            return error_text(await client.call_tool(name, arguments))

        await call("artifact_save", {"document": TEXT})
        await call("deployment_save", {"document": deployment(script, allow=("whoami",))})
        await call("deployment_save", {"document": deployment(script)})

        checked = await call("deployment_check", {"name": "env_dep"})
        assert (checked["status"], checked["revision"], checked["diagnostics"]) == (
            "runnable",
            2,
            [],
        )
        old = await call("deployment_check", {"name": "env_dep", "revision": 1})
        assert old["status"] == "unrunnable"
        assert [d["code"] for d in old["diagnostics"]] == ["tool_not_allowed"]
        missing = await call("deployment_check", {"name": "nothing_here"})
        assert [d["code"] for d in missing["diagnostics"]] == ["deployment_missing"]

        started = await call(
            "run_deployment", {"deployment": "env_dep", "input": {}, "wait_seconds": 120}
        )
        assert started["status"] == "interrupted", started
        run_id = started["run_id"]

        in_use = await refused("deployment_delete", {"name": "env_dep"})
        assert "deployment_delete: [deployment_in_use]" in in_use, in_use
        assert f"run {run_id}" in in_use
        kept = await refused("artifact_delete", {"name": "pinned_env", "version": "1"})
        assert "artifact_delete: [artifact_in_use]" in kept, kept
        assert "deployment env_dep (revisions 1, 2)" in kept
        explained = await call("explain", {"code": "deployment_in_use"})
        assert "unfinished runs" in explained["cause"]

        stale = await refused("deployment_rollback", {"name": "env_dep", "live": 1})
        assert "deployment_rollback: [deployment_conflict]" in stale, stale
        rolled = await call("deployment_rollback", {"name": "env_dep", "live": 2})
        assert (rolled["revision"], rolled["live"], rolled["previous"]) == (1, True, 2)
        listed = await call("deployment_list", {"query": "env", "limit": 1})
        assert listed == {
            "deployments": [{"name": "env_dep", "live": 1, "revisions": 2}],
            "next": None,
        }
        assert await call("artifact_list", {"query": "nothing"}) == {"artifacts": [], "next": None}
        bad = await refused("artifact_list", {"limit": 0})
        assert "invalid arguments at $.limit" in bad
        await call("draft_create", {"name": "first_draft"})
        await call("draft_create", {"name": "second_draft"})
        drafts = await call("draft_list", {"limit": 1, "cursor": "first_draft"})
        assert ([d["draft"] for d in drafts["drafts"]], drafts["next"]) == (["second_draft"], None)

        done = await call(
            "resume_run", {"run_id": run_id, "payload": {"go": True}, "wait_seconds": 120}
        )
        assert done["status"] == "completed", done
        deleted = await call("deployment_delete", {"name": "env_dep"})
        assert deleted == {"name": "env_dep", "deleted": True, "revisions": [1, 2]}
        gone = await call("artifact_delete", {"name": "pinned_env", "version": "1"})
        assert (gone["name"], gone["deleted"]) == ("pinned_env", True)
        shown = await refused("deployment_show", {"name": "env_dep"})
        assert "deployment_show: [deployment_missing]" in shown, shown
        again = await refused("artifact_delete", {"name": "pinned_env", "version": "1"})
        assert "[artifact_missing]" in again

    async with Client(stdio_params(db, "--read-only")) as client:
        names = {tool.name for tool in (await client.list_tools()).tools}
        assert {"deployment_check", "deployment_list", "artifact_list", "draft_list"} <= names
        assert not {"deployment_rollback", "deployment_delete", "artifact_delete"} & names
        hidden = await client.call_tool("deployment_delete", {"name": "env_dep"})
        assert hidden.is_error
        # a new process: the finished run of the deleted deployment is compiled from the
        # snapshots its pin holds, so it can still be inspected and traced
        inspected = payload(
            await client.call_tool("inspect_run", {"run_id": run_id, "revalidate": False})
        )
        assert (inspected["status"], inspected["output"]["label"]) == ("completed", "one")
        assert inspected["deployment"] == {"name": "env_dep", "revision": 2}
        trace = payload(await client.call_tool("read_run_trace", {"run_id": run_id}))
        assert trace["total"] == inspected["trace_count"] > 0


TOKEN_A = "token-a-lifecycle-0123456789"
TOKEN_B = "token-b-lifecycle-0123456789"


async def test_a_tenant_cannot_reach_another_sessions_artifacts_or_deployments(
    tmp_path: Path,
) -> None:
    script = server_script(tmp_path)
    tokens = {TOKEN_A: session_for_token(TOKEN_A), TOKEN_B: session_for_token(TOKEN_B)}
    db = f"sqlite:///{tmp_path / 'tenants.db'}"
    async with open_store(db) as store:  # the operator registers the source for A only
        await SourceRegistry.over(store).add(
            {
                "format": "flowledger.source/v1",
                "name": "env",
                "stdio": {"command": str(script), "env": {"LABEL": "one"}},
                "sessions": [tokens[TOKEN_A]],
            }
        )
    registered = deployment(
        script, sources={"env": {"source": "env", "allow_tools": ["whoami", "secret_digest"]}}
    )
    async with (
        http_server(db, tokens=tokens) as url,
        http_client(url, TOKEN_A) as a,
        http_client(url, TOKEN_B) as b,
    ):
        payload(await a.call_tool("artifact_save", {"document": TEXT}))
        payload(await a.call_tool("deployment_save", {"document": registered}))
        payload(await a.call_tool("deployment_save", {"document": registered}))
        payload(await a.call_tool("draft_create", {"name": "secret_plan"}))

        async def b_refused(name: str, arguments: dict[str, Any], code: str) -> None:
            text = error_text(await b.call_tool(name, arguments))
            assert f"{name}: [{code}]" in text, text
            assert "in_use" not in text  # not found: never told that it exists

        await b_refused("deployment_rollback", {"name": "env_dep", "live": 2}, "deployment_missing")
        await b_refused("deployment_delete", {"name": "env_dep"}, "deployment_missing")
        await b_refused(
            "artifact_delete", {"name": "pinned_env", "version": "1"}, "artifact_missing"
        )
        checked = payload(await b.call_tool("deployment_check", {"name": "env_dep"}))
        assert [d["code"] for d in checked["diagnostics"]] == ["deployment_missing"]
        for tool, key in (
            ("deployment_list", "deployments"),
            ("artifact_list", "artifacts"),
            ("draft_list", "drafts"),
        ):
            for arguments in ({}, {"query": "env"}, {"cursor": "a", "limit": 5}):
                assert payload(await b.call_tool(tool, arguments)) == {key: [], "next": None}

        # B's own artifact of the same name is B's: deleting it leaves A's alone
        payload(await b.call_tool("artifact_save", {"document": TEXT}))
        deleted = payload(
            await b.call_tool("artifact_delete", {"name": "pinned_env", "version": "1"})
        )
        assert deleted["deleted"] is True

        listed = payload(await a.call_tool("deployment_list", {}))
        assert listed == {
            "deployments": [{"name": "env_dep", "live": 2, "revisions": 2}],
            "next": None,
        }
        [artifact] = payload(await a.call_tool("artifact_list", {}))["artifacts"]
        assert artifact["name"] == "pinned_env"
        kept = error_text(
            await a.call_tool("artifact_delete", {"name": "pinned_env", "version": "1"})
        )
        assert "[artifact_in_use]" in kept
