"""A deployed run left running by an MCP server that crashed is adopted by the server
restarted on the same database, before any deploy tool is called (the server registers
every deployed definition before it owns the session)."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx2

from flowledger.deploy.registry.store import SourceRegistry
from flowledger.storage import open_store
from flowledger.workflows.records.run import owner_lease_name
from flowledger.workflows.runtime.session import default_session_id

from ..mcp.conftest import http_client, payload, wait_status
from .runs.app import HERE as RUNS
from .servers import REPO
from .test_runs import wait_for


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@contextmanager
def _server(db: str, port: int) -> Iterator[subprocess.Popen[bytes]]:
    """``flowledger mcp --http`` on loopback (no tokens: the default session), in its own
    process group so a SIGKILL also takes the MCP servers it started."""
    env = {
        k: v for k, v in os.environ.items() if k not in ("FLOWLEDGER_DB", "FLOWLEDGER_MCP_TOKENS")
    }
    process = subprocess.Popen(
        [sys.executable, "-m", "flowledger.mcp", "--http", "--port", str(port), "--db", db],
        cwd=REPO,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        yield process
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
        process.wait(60)


def _listening(url: str) -> bool:
    try:
        httpx2.get(url, timeout=2.0)
    except httpx2.TransportError:
        return False
    return True


async def _register(db: str, work: Path) -> None:
    """The operator registers the slow server (a client of an HTTP server names
    registered sources only)."""
    async with open_store(db) as store:
        await SourceRegistry.over(store).add(
            {
                "format": "flowledger.source/v1",
                "name": "slow",
                "stdio": {
                    "command": sys.executable,
                    "args": ["-m", "tests.deploy.runs.slow_server"],
                    "env": {"SLOW_DIR": str(work)},
                    "cwd": str(REPO),
                },
            }
        )


async def _wait_until_the_session_is_free(db: str) -> None:
    """Until the default session's owner lease is no longer held (a crashed owner's runs
    out after its TTL); fails after 300 s, a hang."""
    async with open_store(db) as store:
        name = owner_lease_name(await default_session_id(store))
        deadline = time.monotonic() + 300
        while (await store.leases.status(name)).held:
            assert time.monotonic() < deadline, "the crashed server's lease never ran out"
            await asyncio.sleep(0.1)


def _deployment() -> dict[str, Any]:
    return {
        "format": "flowledger.deployment/v1",
        "name": "slow_dep",
        "artifact": {"name": "slow_write", "version": "1"},
        "sources": {"slow": {"source": "slow", "allow_tools": ["append_line", "count_lines"]}},
        "drift": "block",
    }


async def test_a_restarted_server_adopts_the_deployed_run_a_crash_left_running(
    tmp_path: Path,
) -> None:
    db = f"sqlite:///{tmp_path / 'restart.db'}"
    work = tmp_path / "slow"
    work.mkdir()
    port = _free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    await _register(db, work)
    with _server(db, port) as first:
        await asyncio.to_thread(wait_for, lambda: _listening(url), "the first server")
        async with http_client(url, None) as client:
            text = (RUNS / "slow_write.yaml").read_text()
            payload(await client.call_tool("artifact_save", {"document": text}))
            payload(await client.call_tool("deployment_save", {"document": _deployment()}))
            started = payload(
                await client.call_tool(
                    "run_deployment",
                    {
                        "deployment": "slow_dep",
                        "input": {"tool": "count_lines", "text": ""},
                        "wait_seconds": 0,
                    },
                )
            )
            run_id = started["run_id"]
            await asyncio.to_thread(wait_for, lambda: any(work.glob("started-*")), "the call")
            os.killpg(first.pid, signal.SIGKILL)
            await asyncio.to_thread(first.wait, 60)
    (work / "release").touch()
    # The killed server's session lease has to expire first: until then a server started
    # on the session refuses to start (it exits). Wait for that, then start it once.
    await _wait_until_the_session_is_free(db)
    with _server(db, port) as second:
        await asyncio.to_thread(
            wait_for, lambda: _listening(url) or second.poll() is not None, "a server"
        )
        assert second.poll() is None, "the second server exited"
        async with http_client(url, None) as client:
            # only workflow_* tools: the adoption must not wait for a deploy tool
            done = await wait_status(client, run_id, "completed", within=300)
            assert done["status_summary"] == "outcome done", done
            inspected = payload(
                await client.call_tool("inspect_run", {"run_id": run_id, "revalidate": False})
            )
            assert inspected["status"] == "completed"
            assert inspected["output"] == {"answer": "0"}
        assert second.poll() is None
    assert len(list(work.glob("started-*"))) == 2  # the read-only call was made again
