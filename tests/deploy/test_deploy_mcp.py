"""The deploy tools on the MCP server (stdio, through the ``mcp`` SDK client): save a
deployment, a refused start, a run that pauses, inspect, resume, the trace, and a
typed error for bad arguments."""

from __future__ import annotations

from pathlib import Path

from mcp import Client

from ..mcp.conftest import error_text, payload, stdio_params
from .runs.app import HERE as RUNS
from .test_deployed_runs import deployment, server_script


async def test_deployed_runs_through_the_mcp_server(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'mcp.db'}"
    script = server_script(tmp_path)
    async with Client(stdio_params(db)) as client:
        names = [tool.name for tool in (await client.list_tools()).tools]
        assert {"run_deployment", "resume_run", "inspect_run", "read_run_trace"} <= set(names)

        text = (RUNS / "pinned_env.yaml").read_text()
        artifact = payload(await client.call_tool("artifact_save", {"document": text}))
        assert (artifact["name"], artifact["version"]) == ("pinned_env", "1")
        saved = payload(
            await client.call_tool(
                "deployment_save", {"document": deployment(script, allow=("whoami",))}
            )
        )
        assert saved["revision"] == 1
        refused = payload(
            await client.call_tool("run_deployment", {"deployment": "env_dep", "input": {}})
        )
        assert refused["status"] == "unrunnable"
        assert [d["code"] for d in refused["diagnostics"]] == ["tool_not_allowed"]

        payload(await client.call_tool("deployment_save", {"document": deployment(script)}))
        started = payload(
            await client.call_tool("run_deployment", {"deployment": "env_dep", "input": {}})
        )
        assert started["status"] == "interrupted", started
        run_id = started["run_id"]
        inspected = payload(await client.call_tool("inspect_run", {"run_id": run_id}))
        assert inspected["resume_readiness"] == {"status": "ready"}
        done = payload(
            await client.call_tool("resume_run", {"run_id": run_id, "payload": {"go": True}})
        )
        assert (done["status"], done["output"]["label"]) == ("completed", "one")
        page = payload(
            await client.call_tool("read_run_trace", {"run_id": run_id, "start": 0, "limit": 2})
        )
        assert page["total"] == 5 and len(page["entries"]) == 2
        listed = payload(await client.call_tool("deployment_list", {}))
        assert listed == {"deployments": [{"name": "env_dep", "live": 2, "revisions": 2}]}

        bad = await client.call_tool("read_run_trace", {"run_id": run_id, "limit": 0})
        assert bad.is_error and "invalid arguments at $.limit" in error_text(bad)
        again = await client.call_tool("artifact_save", {"document": text.replace("Go?", "Now?")})
        assert again.is_error and "pinned_env" in error_text(again)
        missing = await client.call_tool("deployment_show", {"name": "nothing_here"})
        assert missing.is_error and "does not exist" in error_text(missing)
