"""The deploy tools on the MCP server (stdio, through the ``mcp`` SDK client): save a
deployment, a refused start, a run that pauses, inspect, resume, the trace, and a
typed error for bad arguments; the discovery tools (probe a source, validate, list and
show artifacts) and what a read-only server lists."""

from __future__ import annotations

from pathlib import Path

import mcp_types as types
from mcp import Client, StdioServerParameters
from mcp.client.stdio import get_default_environment

from ..mcp.conftest import error_text, payload, stdio_params
from .runs.app import HERE as RUNS
from .servers import time_command
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
        assert payload(await client.call_tool("validate_run", {"run_id": run_id})) == {
            "run_id": run_id,
            "status": "interrupted",
            "resume_readiness": {"status": "ready"},
        }
        script.unlink()
        blocked = payload(await client.call_tool("validate_run", {"run_id": run_id}))
        assert blocked["resume_readiness"]["status"] == "blocked"
        assert [d["code"] for d in blocked["resume_readiness"]["diagnostics"]] == [
            "source_unreachable"
        ]
        server_script(tmp_path)
        unknown = await client.call_tool(
            "validate_run", {"run_id": "0" * 8 + "-0000-4000-8000-" + "0" * 12}
        )
        assert "not found" in error_text(unknown)
        done = payload(
            await client.call_tool("resume_run", {"run_id": run_id, "payload": {"go": True}})
        )
        assert (done["status"], done["output"]["label"]) == ("completed", "one")
        page = payload(
            await client.call_tool("read_run_trace", {"run_id": run_id, "start": 0, "limit": 2})
        )
        assert page["total"] == 5 and len(page["entries"]) == 2
        listed = payload(await client.call_tool("deployment_list", {}))
        assert listed == {
            "deployments": [{"name": "env_dep", "live": 2, "revisions": 2}],
            "next": None,
        }

        bad = await client.call_tool("read_run_trace", {"run_id": run_id, "limit": 0})
        assert bad.is_error and "invalid arguments at $.limit" in error_text(bad)
        again = await client.call_tool("artifact_save", {"document": text.replace("Go?", "Now?")})
        assert again.is_error and "pinned_env" in error_text(again)
        missing = await client.call_tool("deployment_show", {"name": "nothing_here"})
        assert missing.is_error and "does not exist" in error_text(missing)


def _params(db: str, *options: str, env: dict[str, str] | None = None) -> StdioServerParameters:
    params = stdio_params(db, *options)
    if env is not None:
        params.env = {**get_default_environment(), **env}
    return params


async def test_discovery_tools_probe_validate_list_and_show(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'discover.db'}"
    secret = "probe-secret-value-8d1f"
    time = time_command()
    async with Client(_params(db, env={"PROBE_TOKEN": secret})) as client:
        # a source given like a binding, the credential by reference: names, never values
        spec = {
            "command": time,
            "args": ["--local-timezone", "Etc/UTC"],
            "env": {"TOKEN": {"secret": "PROBE_TOKEN"}, "MODE": "plain"},
        }
        probed = await client.call_tool("source_probe", {"stdio": spec})
        assert not probed.is_error, probed.content
        block = probed.content[0]
        assert isinstance(block, types.TextContent) and secret not in block.text
        found = payload(probed)
        assert found["source"]["env"] == ["MODE", "TOKEN"]
        assert found["source"]["secrets"] == ["PROBE_TOKEN"]
        tools = {tool["name"]: tool for tool in found["tools"]}
        assert "get_current_time" in tools
        current = tools["get_current_time"]
        assert current["input_schema"]["type"] == "object"
        assert current["contract_fingerprint"].startswith("sha256:")

        unset = await client.call_tool(
            "source_probe", {"stdio": {**spec, "env": {"T": {"secret": "PROBE_UNSET"}}}}
        )
        assert "PROBE_UNSET" in error_text(unset)
        both = await client.call_tool(
            "source_probe", {"stdio": spec, "http": {"url": "http://127.0.0.1:9/mcp"}}
        )
        assert "exactly one of stdio and http" in error_text(both)
        gone = await client.call_tool(
            "source_probe", {"stdio": {"command": str(tmp_path / "no-such-server")}}
        )
        assert gone.is_error and "no-such-server" in error_text(gone)

        # validation: every problem with its place and hint, nothing saved
        text = (RUNS / "pinned_env.yaml").read_text()
        valid = payload(await client.call_tool("artifact_validate", {"document": text}))
        assert (valid["valid"], valid["name"], valid["version"]) == (True, "pinned_env", "1")
        broken = payload(
            await client.call_tool(
                "artifact_validate",
                {"document": {"format": "flowledger.artifact/v1", "name": "x", "version": "1"}},
            )
        )
        assert broken["valid"] is False and broken["issues"]
        assert all(
            set(issue) == {"place", "code", "message", "hint", "next_actions"}
            for issue in broken["issues"]
        )
        assert payload(await client.call_tool("artifact_list", {})) == {
            "artifacts": [],
            "next": None,
        }

        saved = payload(await client.call_tool("artifact_save", {"document": text}))
        listed = payload(await client.call_tool("artifact_list", {}))
        [entry] = listed["artifacts"]
        assert entry["name"] == "pinned_env"
        assert [(v["version"], v["digest"]) for v in entry["versions"]] == [("1", saved["digest"])]
        shown = payload(
            await client.call_tool("artifact_show", {"name": "pinned_env", "version": "1"})
        )
        assert shown["digest"] == valid["digest"] == saved["digest"]
        assert shown["document"]["name"] == "pinned_env"
        unknown = await client.call_tool("artifact_show", {"name": "pinned_env", "version": "9"})
        assert "no saved artifact pinned_env@9" in error_text(unknown)

    async with Client(_params(db, "--read-only")) as client:
        listing = {tool.name: tool for tool in (await client.list_tools()).tools}
        assert {"artifact_validate", "artifact_list", "artifact_show"} <= set(listing)
        assert not {"source_probe", "artifact_save", "deployment_save", "run_deployment"} & set(
            listing
        )
        assert listing["artifact_show"].annotations is not None
        assert listing["artifact_show"].annotations.read_only_hint is True
        listed = payload(await client.call_tool("artifact_list", {}))
        assert [e["name"] for e in listed["artifacts"]] == ["pinned_env"]
        refused = await client.call_tool("source_probe", {"stdio": {"command": time}})
        assert refused.is_error
