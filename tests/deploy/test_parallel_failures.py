"""When both branches of a parallel fail in the same step, the failed run names every
failed branch: the status summary, and the ``errors`` of ``workflow_run_get`` and of a
deployed run's description (``error`` stays the first, as before). A real stdio server
of the tests' own (``banner_server.py``: ``refuse`` answers an error result)."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from flowledger.cli import app
from flowledger.deploy import DeployService
from flowledger.storage import open_store
from flowledger.workflows import Catalog
from flowledger.workflows.runtime.session import WorkflowSession

from .runs.app import HERE as RUNS

SESSION = "55555555-5555-4555-8555-555555555555"
ARTIFACT = """
format: flowledger.artifact/v1
name: two_refusals
version: "1"
input_schema: {type: object, additionalProperties: false, properties: {}}
output_schema: {type: object, additionalProperties: false, properties: {}}
dependencies:
  banner: {tools: [refuse]}
start: fork
nodes:
  fork: {kind: parallel, branches: [left, right], join: done}
  left:
    kind: tool
    label: Left branch
    dependency: banner
    tool: refuse
    arguments: {reason: left says no}
    next: done
  right:
    kind: tool
    label: Right branch
    dependency: banner
    tool: refuse
    arguments: {reason: right says no}
    next: done
  done: {kind: end, outcome: done}
"""


def test_every_failed_branch_is_named(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'p.db'}"
    done, summary = asyncio.run(failed_run(url))
    assert done["status"] == "failed", done
    errors = {item["vertex_id"]: item for item in done["errors"]}
    assert sorted(errors) == ["left", "right"]
    assert errors["left"]["vertex_label"] == "Left branch"
    assert "left says no" in errors["left"]["error"]["message"]
    assert "right says no" in errors["right"]["error"]["message"]
    assert done["error"] == done["errors"][0]["error"]  # the first, as before
    assert "Left branch: " in summary and "Right branch: " in summary
    assert "says no" not in summary  # a summary never carries a message

    # the CLI's summaries show each failed branch with its message
    for command in (
        ["inspect", done["run_id"], "--no-revalidate"],
        ["runs", "show", done["run_id"]],
    ):
        shown = CliRunner().invoke(
            app, [*command, "--db", url, "--session", SESSION], env={"COLUMNS": "200"}
        )
        assert shown.exit_code == 0, shown.output
        text = " ".join(shown.stdout.split())
        assert "Left branch: ToolErrorResult" in text and "left says no" in text, text
        assert "Right branch: ToolErrorResult" in text and "right says no" in text, text


async def failed_run(url: str) -> tuple[dict[str, Any], str]:
    """Run the deployment until it fails; its description and status summary."""
    deployment = {
        "format": "flowledger.deployment/v1",
        "name": "two_refusals",
        "artifact": {"name": "two_refusals", "version": "1"},
        "sources": {
            "banner": {
                "stdio": {"command": sys.executable, "args": [str(RUNS / "banner_server.py")]},
                "allow_tools": ["refuse"],
            }
        },
    }
    async with open_store(url) as store:
        session = WorkflowSession.build(store, SESSION, Catalog())
        await session.supervisor.activate()
        try:
            deploy = DeployService(session, check_timeout=30)
            await deploy.artifacts.save(SESSION, ARTIFACT)
            await deploy.deployment_save(deployment)
            done = await deploy.run_deployment("two_refusals", {}, wait_seconds=60)
            run = await session.registry.get(SESSION, done["run_id"])
        finally:
            await session.supervisor.shutdown()
    return done, run.status_summary
