"""Issue #26's scripted model: an SDK client that knows only the server's answers and its
goal (`scripted_model.Goal`) builds a workflow calling tools of two real MCP servers
(mcp-server-time and server-everything) with a pause for a person, passes through an
invalid state and leaves it by the diagnostics' next actions, validates, publishes with a
deployment, runs, sees the pause, resumes and sees the run complete.

Over stdio (the operator's own server, the sources registered through the Python API)
and over HTTP as a tenant (``flowledger mcp --http`` with a tokens file, the sources
registered and probed by the operator's CLI first; a tenant cannot start processes). The
tenant also tries to reach what it was not granted. ``pytest -s`` prints the transcript.
"""

from __future__ import annotations

import asyncio
import json
import os
import shlex
import signal
import subprocess
import sys
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx2
import pytest
from mcp import Client
from typer.testing import CliRunner

from flowledger.cli import app
from flowledger.deploy.registry.store import SourceRegistry
from flowledger.storage import open_store

from ...mcp.conftest import http_client, stdio_params
from ..servers import EVERYTHING, REPO, free_port, node_command, time_command
from ..test_registered_runs import marked_server, starts
from ..test_runs import wait_for
from .scripted_model import ScriptedModel, ToolFailed

# generous: the loop takes about 20 calls; a model that wanders would take many more
MAX_CALLS = 60
TENANT = str(uuid.UUID(int=2601, version=4))
OTHER = str(uuid.UUID(int=2602, version=4))


def _stdio(name: str) -> dict[str, Any]:
    command = {
        "time": [time_command(), "--local-timezone", "Etc/UTC"],
        "everything": [node_command(), str(EVERYTHING), "stdio"],
    }[name]
    return {"command": command[0], "args": command[1:]}


def check_the_loop(model: ScriptedModel, run: dict[str, Any], label: str) -> None:
    """What every transport's model must have done and seen."""
    goal = model.goal
    print(f"\nscripted model over {label}: {len(model.transcript)} tool calls")
    print(model.transcript.render())
    assert len(model.transcript) <= MAX_CALLS, model.transcript.render()
    assert model.transcript.tools()[:2] == ["capability_list", "capability_inspect"]

    # the invalid state, and how the model left it: by its next actions
    (repair,) = model.repairs
    assert repair["diagnostic"]["code"] == "unreachable_node"
    assert repair["diagnostic"]["pointer"] == f"/nodes/{goal.pause}"
    # the server offered the edit itself (a draft_connect putting the pause on the path),
    # and the model called it as given
    assert not repair["fix"], "the model had to read explain to find the edit"
    assert repair["edit"] in repair["next_actions"], (repair["edit"], repair["next_actions"])
    assert repair["edit"]["tool"] == "draft_connect"
    assert repair["edit"]["arguments"]["to"] == goal.pause

    # paused for a person at the pause node, then completed with both servers' answers
    assert model.paused["status"] == "interrupted"
    assert model.paused["interrupt"]["vertex_id"] == goal.pause
    assert model.paused["interrupt"]["info"]["question"] == goal.question
    assert run["status"] == "completed" and run["resumed"] is True, run
    output = run["output"]
    assert goal.timezone in output["text"] and output[goal.approval] is True
    assert output[goal.echoed] == f"Echo: {output['text']}"


async def test_the_scripted_model_over_stdio(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'scripted.db'}"
    async with open_store(db) as store:  # the operator registers and probes both servers
        registry = SourceRegistry.over(store)
        for name in ("time", "everything"):
            await registry.add(
                {"format": "flowledger.source/v1", "name": name, "stdio": _stdio(name)}
            )
            probe = await registry.probe(name, {}, seconds=60)
            assert probe.ok, probe.error
    async with Client(stdio_params(db)) as client:
        model = ScriptedModel(client)
        run = await model.build_and_run()
        check_the_loop(model, run, "stdio")
        shown = await model.call("deployment_show", {"name": model.goal.draft})
        assert shown["document"]["sources"] == {
            "time": {"source": "time", "allow_tools": ["get_current_time"]},
            "everything": {"source": "everything", "allow_tools": ["echo"]},
        }


def _operator(db: str, *args: str) -> Any:
    """The operator's CLI, in-process: its ``--json`` answer."""
    done = CliRunner().invoke(app, [*args, "--db", db, "--json"], env={"COLUMNS": "200"})
    assert done.exit_code == 0, done.output
    return json.loads(done.stdout)


@contextmanager
def _http_server(db: str, tokens: Path) -> Iterator[str]:
    """``flowledger mcp --http`` with ``tokens`` on a free loopback port; its URL."""
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    env = {k: v for k, v in os.environ.items() if not k.startswith("FLOWLEDGER_")}
    command = Path(sys.executable).parent / "flowledger"
    process = subprocess.Popen(
        [
            str(command),
            "mcp",
            "--http",
            "--port",
            str(port),
            "--db",
            db,
            "--tokens-file",
            str(tokens),
        ],
        cwd=REPO,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )

    def listening() -> bool:
        if process.poll() is not None:
            raise AssertionError(f"flowledger mcp --http exited with {process.returncode}")
        try:
            httpx2.get(url, timeout=2.0)
        except httpx2.TransportError:
            return False
        return True

    try:
        wait_for(listening, "flowledger mcp --http")
        yield url
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGTERM)
            try:
                process.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait(30)


async def test_the_scripted_model_as_a_tenant_over_http(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'tenant.db'}"
    hidden_script, hidden_marker = marked_server(tmp_path)

    def register() -> None:  # the operator: two sources for the tenant, one for another
        for name in ("time", "everything"):
            line = shlex.join([_stdio(name)["command"], *_stdio(name)["args"]])
            _operator(db, "source", "add", name, "--stdio", line, "--session", TENANT)
            probed = _operator(db, "source", "probe", name)
            assert any(tool["name"] in ("echo", "get_current_time") for tool in probed["tools"])
        _operator(db, "source", "add", "hidden", "--stdio", str(hidden_script), "--session", OTHER)

    await asyncio.to_thread(register)
    tokens = tmp_path / "tokens"
    tokens.write_text(f"tenant-token-2601 {TENANT}\n")
    tokens.chmod(0o600)
    with _http_server(db, tokens) as url:
        async with http_client(url, "tenant-token-2601") as client:
            model = ScriptedModel(client)
            run = await model.build_and_run()
            check_the_loop(model, run, "HTTP (tenant)")

            # what the tenant was not granted stays out of reach, and nothing starts it
            listed = await model.call("capability_list", {})
            assert {r["source"] for r in listed["results"]} == {"time", "everything"}
            with pytest.raises(ToolFailed, match=r"\[source_missing\]"):
                await model.call(
                    "draft_create",
                    {"name": "sneaky", "from": {"source": "hidden", "tool": "whoami"}},
                )
            with pytest.raises(ToolFailed, match=r"\[source_missing\]"):
                await model.call(
                    "draft_publish",
                    {
                        "draft": model.goal.draft,
                        "revision": model.revision,
                        "version": "2.0.0",
                        "deploy": True,
                        "bindings": {"time": "hidden"},
                    },
                )
            inline = {
                "format": "flowledger.deployment/v1",
                "name": "sneaky",
                "artifact": {"name": model.goal.draft, "version": model.goal.version},
                "sources": {
                    "time": {
                        "stdio": {"command": str(hidden_script)},
                        "allow_tools": ["get_current_time"],
                    },
                    "everything": {"source": "everything", "allow_tools": ["echo"]},
                },
            }
            # (this refusal names no [code] to explain yet: h2's guidance work)
            with pytest.raises(ToolFailed, match=r"command line or URL is refused here"):
                await model.call("deployment_save", {"document": inline})
            (artifact,) = (await model.call("artifact_list", {}))["artifacts"]
            assert [v["version"] for v in artifact["versions"]] == [model.goal.version]
    assert starts(hidden_marker) == 0
