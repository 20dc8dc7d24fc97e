"""A resume of a deployed run revalidates its pinned sources once, by the owner under the
run's lock, and the resumed segment calls the server that check started: a stdio resume
starts its server exactly once. Counted, not timed: the pinned command is a script of
the test's own that appends one line to ``starts`` each time it starts the env server
(``tests/deploy/runs/env_server.py``), through each front door that resumes - the
Python API (`DeployService`), the MCP server over stdio, and a ``--no-execute`` MCP
front door whose resumes a ``flowledger worker`` carries out (PostgreSQL). A resume
whose sources changed is still blocked with the diagnostic saying what changed, and
nothing is written; a readiness read right after a resume that paused the run again
reuses the owner's check and says so.
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml
from mcp import Client

from .._postgres import postgres_url
from ..mcp.conftest import payload, stdio_params
from .runs.app import HERE as RUNS
from .servers import REPO
from .test_deployed_runs import SESSION, codes, deployment, prepared, service, snapshot

ARTIFACT = (RUNS / "pinned_env.yaml").read_text()


def counting_script(folder: Path) -> Path:
    """An executable that appends a line to ``folder/starts``, then runs the env server."""
    script = folder / "env-server"
    starts = folder / "starts"
    script.write_text(
        f"#!/bin/sh\necho started >> {starts}\n"
        f"cd {REPO} && exec {sys.executable} -m tests.deploy.runs.env_server\n"
    )
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return script


def starts(folder: Path) -> int:
    found = folder / "starts"
    return len(found.read_text().splitlines()) if found.exists() else 0


async def test_a_resume_starts_its_stdio_server_once_and_a_changed_one_still_blocks(
    tmp_path: Path,
) -> None:
    """Python API: the resume to completion starts the server once (the check and both
    tool calls share it); with the tool's contract changed, the resume is blocked with
    ``schema_drift`` after one start and writes nothing; once repaired, a read checks
    now (a blocked check is never reused) and the resume completes."""
    script = counting_script(tmp_path)
    shape = tmp_path / "shape"
    document = deployment(script, env={"SHAPE_FILE": str(shape)})
    async with service(f"sqlite:///{tmp_path / 'once.db'}") as (deploy, store):
        await prepared(deploy, document)
        first = await deploy.run_deployment("env_dep", {})
        second = await deploy.run_deployment("env_dep", {})
        assert (first["status"], second["status"]) == ("interrupted", "interrupted")

        before = starts(tmp_path)
        done = await deploy.resume_run(first["run_id"], {"go": True})
        assert (done["status"], done["output"]["label"]) == ("completed", "one"), done
        assert starts(tmp_path) == before + 1

        shape.write_text("optional")  # whoami's input schema changes: drift under block
        untouched = await snapshot(store)
        before = starts(tmp_path)
        blocked = await deploy.resume_run(second["run_id"], {"go": True})
        assert (blocked["resumed"], blocked["status"]) == (False, "interrupted")
        assert codes(blocked) == [("schema_drift", "error")]
        assert starts(tmp_path) == before + 1
        assert await snapshot(store) == untouched

        shape.write_text("")  # repaired: a read checks now (a blocked check is not kept)
        read = await deploy.inspect_run(second["run_id"])
        assert read["resume_readiness"] == {"status": "ready"}, read
        assert starts(tmp_path) == before + 2
        resumed = await deploy.resume_run(second["run_id"], {"go": True})
        assert resumed["status"] == "completed", resumed
        assert starts(tmp_path) == before + 3


def twice_paused() -> dict[str, Any]:
    """pinned_env with a second pause after the first tool call."""
    document: dict[str, Any] = yaml.safe_load(ARTIFACT)
    document["name"], nodes = "paused_twice", document["nodes"]
    nodes["who"]["next"] = "again"
    nodes["again"] = {**nodes["ask"], "label": "Once more", "assign": {}, "next": "digest"}
    return document


async def test_a_read_right_after_a_resume_reuses_its_check_and_says_so(tmp_path: Path) -> None:
    """A resume that pauses the run again: reads reuse the owner's check while it is
    younger than the bound (``reused: true``, ``validated_at``) and start nothing;
    ``validate_run`` checks now; with no reuse (bound 0) a read checks now. The bound is
    set through the door's `Revalidations`, so nothing here depends on how long a step
    takes."""
    script = counting_script(tmp_path)
    document = deployment(script)
    document["name"], document["artifact"]["name"] = "twice_dep", "paused_twice"
    async with service(f"sqlite:///{tmp_path / 'reuse.db'}") as (deploy, _):
        await deploy.artifacts.save(SESSION, twice_paused())
        await deploy.deployment_save(document)
        started = await deploy.run_deployment("twice_dep", {})
        run_id = started["run_id"]
        checks = deploy.environment.revalidations
        checks.reuse_seconds = 3600.0
        before = starts(tmp_path)
        again = await deploy.resume_run(run_id, {"go": True})
        assert (again["status"], again["interrupt"]["vertex_id"]) == ("interrupted", "again")
        assert starts(tmp_path) == before + 1
        for _ in range(2):
            read = await deploy.inspect_run(run_id)
            readiness = read["resume_readiness"]
            assert (readiness["status"], readiness["reused"]) == ("ready", True), read
            assert readiness["validated_at"].endswith("Z")
        assert starts(tmp_path) == before + 1
        now = (await deploy.validate_run(run_id))["resume_readiness"]
        assert now == {"status": "ready"}, now
        assert starts(tmp_path) == before + 2
        checks.reuse_seconds = 0.0
        assert (await deploy.inspect_run(run_id))["resume_readiness"] == {"status": "ready"}
        assert starts(tmp_path) == before + 3
        done = await deploy.resume_run(run_id, {"go": True})
        assert done["status"] == "completed", done
        assert starts(tmp_path) == before + 4


async def test_a_refused_payload_starts_no_server(tmp_path: Path) -> None:
    """The payload is still checked up front: a payload the resume schema refuses is an
    error before the owner is asked, and no server is started for it."""
    from flowledger.tools import ToolError

    script = counting_script(tmp_path)
    async with service(f"sqlite:///{tmp_path / 'payload.db'}") as (deploy, _):
        await prepared(deploy, deployment(script))
        started = await deploy.run_deployment("env_dep", {})
        before = starts(tmp_path)
        try:
            await deploy.resume_run(started["run_id"], {"go": "yes"})
        except ToolError as exc:
            assert "resume" in str(exc)
        else:
            raise AssertionError("a payload the resume schema refuses was accepted")
        assert starts(tmp_path) == before
        record = await deploy.session.registry.get(SESSION, started["run_id"])
        assert record.status.value == "interrupted"


async def test_an_mcp_resume_over_stdio_starts_the_server_once(tmp_path: Path) -> None:
    """The MCP server over stdio (it executes the runs itself): one start per resume."""
    script = counting_script(tmp_path)
    async with Client(stdio_params(f"sqlite:///{tmp_path / 'mcp.db'}")) as client:
        payload(await client.call_tool("artifact_save", {"document": ARTIFACT}))
        payload(await client.call_tool("deployment_save", {"document": deployment(script)}))
        started = payload(
            await client.call_tool(
                "run_deployment", {"deployment": "env_dep", "input": {}, "wait_seconds": 120}
            )
        )
        assert started["status"] == "interrupted", started
        before = starts(tmp_path)
        done = payload(
            await client.call_tool(
                "resume_run",
                {"run_id": started["run_id"], "payload": {"go": True}, "wait_seconds": 120},
            )
        )
        assert (done["status"], done["output"]["label"]) == ("completed", "one"), done
        assert starts(tmp_path) == before + 1


async def test_a_front_door_resume_is_checked_once_by_the_worker(tmp_path: Path) -> None:
    """A ``--no-execute`` front door hands the resume to a worker: the front door checks
    the payload and the graph only, the worker checks the sources under the run's lock
    and calls the server it started - one start. A blocked one still answers the
    diagnostics (the front door checks again to say them, since the request carries only
    the refusal) and leaves the run interrupted."""
    script = counting_script(tmp_path)
    shape = tmp_path / "shape"
    env = {k: v for k, v in os.environ.items() if k != "FLOWLEDGER_DB"}
    with postgres_url() as db:
        worker = subprocess.Popen(  # noqa: ASYNC220 - started once, stopped in finally
            [sys.executable, "-m", "flowledger", "worker", "--db", db, "--poll", "0.05"],
            cwd=REPO,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            async with Client(stdio_params(db, "--no-execute")) as client:

                async def call(tool: str, arguments: dict[str, Any]) -> Any:
                    return payload(await client.call_tool(tool, arguments))

                await call("artifact_save", {"document": ARTIFACT})
                document = deployment(script, env={"SHAPE_FILE": str(shape)})
                await call("deployment_save", {"document": document})
                run = {"deployment": "env_dep", "input": {}, "wait_seconds": 120}
                first, second = await call("run_deployment", run), await call("run_deployment", run)
                assert (first["status"], second["status"]) == ("interrupted", "interrupted")

                before = starts(tmp_path)
                resume = {"payload": {"go": True}, "wait_seconds": 120}
                done = await call("resume_run", {"run_id": first["run_id"], **resume})
                assert (done["status"], done["output"]["label"]) == ("completed", "one"), done
                assert starts(tmp_path) == before + 1

                shape.write_text("optional")
                paused = await call("workflow_run_get", {"run_id": second["run_id"]})
                before = starts(tmp_path)
                blocked = await call("resume_run", {"run_id": second["run_id"], **resume})
                assert (blocked["resumed"], blocked["status"]) == (False, "interrupted")
                assert codes(blocked) == [("schema_drift", "error")]
                # the worker's check, and the front door's to say the diagnostics
                assert starts(tmp_path) == before + 2
                got = await call("workflow_run_get", {"run_id": second["run_id"]})
                assert got["run_status"] == "interrupted"
                assert got["checkpoint_revision"] == paused["checkpoint_revision"]
        finally:
            worker.terminate()
            worker.wait(timeout=30)
