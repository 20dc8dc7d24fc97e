"""A ``flowledger mcp`` server that is killed (SIGTERM) or whose client closes stdin
stops its run at the next step boundary and says what it left; ``workflow_run_get``
(through the SDK client) says nobody owns the run, and the next ``flowledger start``
adopts it and continues it from that checkpoint."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import signal
import subprocess
import sys
from collections.abc import AsyncIterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from mcp import Client
from mcp.client.stdio import stdio_client

from .conftest import REPO, http_client, http_server, payload, stdio_params

APP = "tests.mcp.gated_app:catalog"
LEFT = re.compile(r"run ([0-9a-f-]{36}) left running at revision (\d+); it continues when")


async def wait_for(predicate: Any, what: str) -> None:
    """Poll ``predicate`` (the deadline only catches a hang)."""
    try:
        async with asyncio.timeout(60):
            while True:
                if predicate():
                    return
                await asyncio.sleep(0.02)
    except TimeoutError:
        raise AssertionError(f"{what} never happened") from None


def text(path: Path) -> str:
    return path.read_text(encoding="utf-8") if path.exists() else ""


@contextlib.asynccontextmanager
async def server(db: str, errlog: Path, *options: str) -> AsyncIterator[Client]:
    with errlog.open("a", encoding="utf-8") as log:
        async with Client(stdio_client(stdio_params(db, "--app", APP, *options), errlog=log)) as c:
            yield c


async def start_held_run(client: Client, folder: Path) -> str:
    started = payload(
        await client.call_tool(
            "workflow_run_start",
            {
                "definition_name": "gated",
                "definition_version": "v1",
                "input": {"folder": str(folder)},
            },
        )
    )
    await wait_for(lambda: (folder / "pid").exists(), "the hold step")
    owned = payload(await client.call_tool("workflow_run_get", {"run_id": started["run_id"]}))
    assert owned["run_status"] == "running"
    assert owned["owner"]["live"] is True
    assert isinstance(owned["owner"]["lease_epoch"], int)
    return str(started["run_id"])


async def assert_left_then_adopted(db: str, tmp_path: Path, errlog: Path, run_id: str) -> None:
    found = LEFT.findall(text(errlog))
    assert [f[0] for f in found] == [run_id], text(errlog)
    revision = int(found[0][1])
    async with server(db, errlog, "--read-only") as reader:  # owns nothing: sees no owner
        left = payload(await reader.call_tool("workflow_run_get", {"run_id": run_id}))
        assert left["run_status"] == "running"
        assert left["checkpoint_revision"] == revision > 0
        assert left["owner"]["live"] is False
        assert datetime.fromisoformat(left["owner"]["since"]) >= datetime.fromisoformat(
            left["updated_at"]
        )

        env = {k: v for k, v in os.environ.items() if k != "FLOWLEDGER_DB"}
        nxt = await asyncio.to_thread(
            subprocess.run,
            [
                *(sys.executable, "-m", "flowledger", "start", "gated", "v1", "--app", APP),
                *("--input", json.dumps({"folder": str(tmp_path)}), "--db", db),
            ],
            cwd=REPO,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert nxt.returncode == 0, nxt.stderr
        assert f"continuing run {run_id}, left running at revision {revision}" in nxt.stderr

        adopted = payload(await reader.call_tool("workflow_run_get", {"run_id": run_id}))
        assert adopted["run_status"] == "interrupted"  # continued to the `ask` pause
        assert "owner" not in adopted
        history = payload(
            await reader.call_tool("workflow_run_history", {"run_id": run_id, "limit": 100})
        )
        done = [e["vertex_id"] for e in history["entries"] if e["kind"] == "vertex_completed"]
        assert done == ["hold", "mark"]  # `hold` ran once, in the first server


async def test_sigterm_to_the_server_leaves_the_run_for_the_next_start(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path}/m.db"
    errlog = tmp_path / "server.err"
    async with server(db, errlog) as client:
        run_id = await start_held_run(client, tmp_path)
        os.kill(int((tmp_path / "pid").read_text()), signal.SIGTERM)
        await wait_for(lambda: "stopping" in text(errlog), "the stop")
        (tmp_path / "open").touch()  # the step in flight finishes and commits
        await wait_for(lambda: "left running" in text(errlog), "the report")
    assert "Traceback" not in text(errlog), text(errlog)
    await assert_left_then_adopted(db, tmp_path, errlog, run_id)


async def test_a_closed_stdin_leaves_the_run_for_the_next_start(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path}/m.db"
    errlog = tmp_path / "server.err"
    done = asyncio.Event()
    release = asyncio.Event()

    async def serve() -> None:
        async with server(db, errlog) as client:
            run_ids.append(await start_held_run(client, tmp_path))
            done.set()
            await release.wait()
        # leaving the block closes the server's stdin

    run_ids: list[str] = []
    task = asyncio.create_task(serve())
    await asyncio.wait_for(done.wait(), 60)
    release.set()
    await wait_for(lambda: "stopping" in text(errlog), "the stop")
    (tmp_path / "open").touch()
    await asyncio.wait_for(task, 60)
    assert "left running" in text(errlog)
    assert "Traceback" not in text(errlog)
    await assert_left_then_adopted(db, tmp_path, errlog, run_ids[0])


async def test_a_stopping_http_server_leaves_the_run_at_the_step_boundary(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = f"sqlite:///{tmp_path}/m.db"
    said: list[str] = []

    def stderr() -> str:
        said.append(capsys.readouterr().err)
        return "".join(said)

    async def open_gate_once_stopping() -> None:
        await wait_for(lambda: "stopping" in stderr(), "the stop")
        (tmp_path / "open").touch()  # the step in flight finishes and commits

    async with http_server(db, app=APP) as url:
        async with http_client(url, None) as client:
            run_id = await start_held_run(client, tmp_path)
        gate = asyncio.create_task(open_gate_once_stopping())
        # leaving this block stops the server while the hold step is in flight
    await gate
    errlog = tmp_path / "server.err"
    errlog.write_text(stderr(), encoding="utf-8")
    await assert_left_then_adopted(db, tmp_path, errlog, run_id)
