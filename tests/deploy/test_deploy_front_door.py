"""The deploy tools on a ``--no-execute`` MCP front door over PostgreSQL: two
``flowledger worker`` processes execute the deployed run (they register the session's
deployed definitions when they claim it); the front door validates the environment and
writes the pin. Through the SDK client: save, run (it pauses), inspect, trace, resume;
a revision saved while a worker owns the session runs there too."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from mcp import Client

from .._postgres import postgres_url
from ..mcp.conftest import payload, stdio_params
from .runs.app import HERE as RUNS
from .servers import REPO
from .test_deployed_runs import deployment, server_script


async def test_a_front_door_serves_deployed_runs_that_workers_execute(tmp_path: Path) -> None:
    script = server_script(tmp_path)
    env = {k: v for k, v in os.environ.items() if k != "FLOWLEDGER_DB"}
    with postgres_url() as db:
        options = ["--db", db, "--lease-ttl", "2", "--poll", "0.05"]
        workers = [
            subprocess.Popen(  # noqa: ASYNC220 - started once each, stopped in finally
                [sys.executable, "-m", "flowledger", "worker", *options],
                cwd=REPO,
                env=env,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            for _ in range(2)
        ]
        try:
            async with Client(stdio_params(db, "--no-execute")) as client:
                names = {tool.name for tool in (await client.list_tools()).tools}
                assert {"run_deployment", "resume_run", "inspect_run", "read_run_trace"} <= names
                text = (RUNS / "pinned_env.yaml").read_text()
                payload(await client.call_tool("artifact_save", {"document": text}))
                saved = payload(
                    await client.call_tool("deployment_save", {"document": deployment(script)})
                )
                assert saved["revision"] == 1
                started = payload(
                    await client.call_tool(
                        "run_deployment",
                        {"deployment": "env_dep", "input": {}, "wait_seconds": 120},
                    )
                )
                assert started["status"] == "interrupted", started
                assert started["pin"]
                run_id = started["run_id"]
                got = payload(await client.call_tool("workflow_run_get", {"run_id": run_id}))
                assert got["run_status"] == "interrupted"
                inspected = payload(await client.call_tool("inspect_run", {"run_id": run_id}))
                assert inspected["status"] == "interrupted"
                assert inspected["resume_readiness"] == {"status": "ready"}
                trace = payload(await client.call_tool("read_run_trace", {"run_id": run_id}))
                assert trace["total"] >= 1

                # Regression: a revision saved after a worker took the session (it holds
                # it while the first run is paused) used to stay unknown to that worker.
                again = deployment(script, label="two")
                saved = payload(await client.call_tool("deployment_save", {"document": again}))
                assert saved["revision"] == 2
                second = payload(
                    await client.call_tool(
                        "run_deployment",
                        {"deployment": "env_dep", "input": {}, "wait_seconds": 120},
                    )
                )
                assert second["status"] == "interrupted", second
                assert second["deployment"] == {"name": "env_dep", "revision": 2}
                finished = payload(
                    await client.call_tool(
                        "resume_run",
                        {"run_id": second["run_id"], "payload": {"go": True}, "wait_seconds": 120},
                    )
                )
                assert (finished["status"], finished["output"]["label"]) == ("completed", "two")
                done = payload(
                    await client.call_tool(
                        "resume_run",
                        {"run_id": run_id, "payload": {"go": True}, "wait_seconds": 120},
                    )
                )
                assert (done["status"], done["output"]["label"]) == ("completed", "one"), done
                got = payload(await client.call_tool("workflow_run_get", {"run_id": run_id}))
                assert got["run_status"] == "completed"
                page = payload(await client.call_tool("read_run_trace", {"run_id": run_id}))
                assert page["total"] == 5
        finally:
            for worker in workers:
                worker.terminate()
            for worker in workers:
                worker.wait(timeout=30)
