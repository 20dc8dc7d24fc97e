"""A deployed run for the dashboard tests: ``clock_sign_off`` (pauses for an approval,
then reads ``mcp-server-time``'s clock) deployed as ``clock_dep``, bound to the registered
source ``clock`` with a declared secret in its environment (its name is pinned, never its
value)."""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import subprocess
import sys
from pathlib import Path
from typing import Any, Final

from flowledger.deploy.registry.store import SourceRegistry
from flowledger.storage import open_store
from tests.deploy.servers import time_command

from .servers import REPO

ARTIFACT: Final = (Path(__file__).parent / "clock_sign_off.yaml").read_text()
SECRET_NAME: Final = "WEB_TEST_SECRET"  # the variable the operator declared the secret in
SECRET: Final = "web_token"  # the secret's name in the registry (pinned, shown)
SECRET_VALUE: Final = "web-s3cr3t-value-never-shown"


def source(command: str | None = None) -> dict[str, Any]:
    """The registered source ``clock``: mcp-server-time with a secret in its environment."""
    return {
        "format": "flowledger.source/v1",
        "name": "clock",
        "stdio": {
            "command": command or time_command(),
            "args": ["--local-timezone", "Etc/UTC"],
            "env": {"WEB_TOKEN": {"secret": SECRET}},
        },
        "secrets": {SECRET: {"env": SECRET_NAME}},
    }


def register(db: Path, command: str | None = None) -> None:
    """The operator registers ``clock`` in the database file ``db``."""

    async def add() -> None:
        async with open_store(f"sqlite:///{db}") as store:
            await SourceRegistry.over(store).put(source(command))

    # in a thread of its own: some callers (the browser tests) run inside an event loop
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        pool.submit(asyncio.run, add()).result()


def deployment() -> dict[str, Any]:
    return {
        "format": "flowledger.deployment/v1",
        "name": "clock_dep",
        "artifact": {"name": "clock_sign_off", "version": "1"},
        "sources": {"clock": {"source": "clock", "allow_tools": ["get_current_time"]}},
        "drift": "block",
    }


def flowledger_json(db: Path, *args: str) -> dict[str, Any]:
    """``flowledger ARGS --db DB --json`` as a subprocess, its answer read."""
    done = subprocess.run(
        [sys.executable, "-m", "flowledger", *args, "--db", f"sqlite:///{db}", "--json"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=180,  # only catches a hang
        check=False,
    )
    assert done.returncode == 0, (done.stdout, done.stderr)
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def paused_deployed_run(db: Path) -> str:
    """``clock_dep`` saved, deployed and run through the CLI into ``db`` (next to which
    its artifact and deployment files are written): the paused run's id. The caller sets
    ``SECRET_NAME`` in the environment first (the CLI and the server both read it)."""
    artifact = db.with_name("artifact.yaml")
    artifact.write_text(ARTIFACT)
    document = db.with_name("deployment.json")
    document.write_text(json.dumps(deployment()))
    register(db)
    flowledger_json(db, "artifact", "save", str(artifact))
    flowledger_json(db, "deploy", "set", str(document))
    started = flowledger_json(db, "deploy", "run", "clock_dep", "--input", "{}")
    assert started["status"] == "interrupted", started
    return str(started["run_id"])
