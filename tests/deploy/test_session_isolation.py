"""Artifacts, deployments and deployed runs belong to one session: over the HTTP MCP
server with two bearer tokens (one session each, through the SDK client), session B
sees none of session A's and cannot run A's deployment, resume, inspect or trace A's
run; A's run is untouched by B's attempts."""

from __future__ import annotations

from pathlib import Path

from flowledger.deploy.registry.store import SourceRegistry
from flowledger.mcp import session_for_token
from flowledger.storage import open_store

from ..mcp.conftest import error_text, http_client, http_server, payload
from .runs.app import HERE as RUNS
from .test_deployed_runs import deployment, server_script

TOKEN_A = "token-a-deploy-0123456789"
TOKEN_B = "token-b-deploy-0123456789"


async def test_a_session_never_sees_or_uses_another_sessions_deployments(
    tmp_path: Path,
) -> None:
    """Testing Strategy: artifacts, deployments and runs are per session."""
    script = server_script(tmp_path)
    text = (RUNS / "pinned_env.yaml").read_text()
    tokens = {TOKEN_A: session_for_token(TOKEN_A), TOKEN_B: session_for_token(TOKEN_B)}
    db = f"sqlite:///{tmp_path / 'iso.db'}"
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
        payload(await a.call_tool("artifact_save", {"document": text}))
        payload(await a.call_tool("deployment_save", {"document": registered}))
        started = payload(
            await a.call_tool(
                "run_deployment", {"deployment": "env_dep", "input": {}, "wait_seconds": 120}
            )
        )
        assert started["status"] == "interrupted", started
        run_id = started["run_id"]

        assert payload(await b.call_tool("deployment_list", {})) == {
            "deployments": [],
            "next": None,
        }
        shown = await b.call_tool("deployment_show", {"name": "env_dep"})
        assert "does not exist" in error_text(shown)
        refused = payload(
            await b.call_tool("run_deployment", {"deployment": "env_dep", "input": {}})
        )
        assert refused["status"] == "unrunnable"
        assert [d["code"] for d in refused["diagnostics"]] == ["deployment_missing"]
        # B cannot lean on A's artifact: saving a deployment of it finds no artifact,
        # and B's own pinned_env@1 with other bytes is no conflict with A's.
        orphan = await b.call_tool("deployment_save", {"document": registered})
        assert "pinned_env" in error_text(orphan)
        # and a command line of its own is refused before anything else is looked at
        inline = await b.call_tool("deployment_save", {"document": deployment(script)})
        assert "registered by the operator" in error_text(inline)
        other = text.replace("Go?", "Proceed?")
        assert payload(await b.call_tool("artifact_save", {"document": other}))["name"] == (
            "pinned_env"
        )
        # B may bind the name, but A's source is not B's to run: it does not exist for B
        payload(await b.call_tool("deployment_save", {"document": registered}))
        hidden = payload(
            await b.call_tool("run_deployment", {"deployment": "env_dep", "input": {}})
        )
        assert [d["code"] for d in hidden["diagnostics"]] == ["source_missing"]
        for tool, arguments in [
            ("inspect_run", {"run_id": run_id}),
            ("read_run_trace", {"run_id": run_id}),
            ("resume_run", {"run_id": run_id, "payload": {"go": True}}),
        ]:
            assert "not found" in error_text(await b.call_tool(tool, arguments)), tool
        assert payload(await b.call_tool("workflow_run_list", {}))["runs"] == []

        # A's run is as it was: still paused at the same checkpoint, then resumable by A.
        inspected = payload(await a.call_tool("inspect_run", {"run_id": run_id}))
        assert inspected["status"] == "interrupted"
        assert inspected["latest_checkpoint"] == started["latest_checkpoint"]
        assert inspected["interrupt"]["info"] == {"question": "Go?"}
        done = payload(
            await a.call_tool(
                "resume_run", {"run_id": run_id, "payload": {"go": True}, "wait_seconds": 120}
            )
        )
        assert done["status"] == "completed", done
        assert payload(await a.call_tool("deployment_list", {}))["deployments"][0]["name"] == (
            "env_dep"
        )
