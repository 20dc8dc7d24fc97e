"""A deployed run for the dashboard tests: ``clock_sign_off`` (pauses for an approval,
then reads ``mcp-server-time``'s clock) deployed as ``clock_dep``, bound to the registered
source ``clock`` with a declared secret in its environment (its name is pinned, never its
value)."""

from __future__ import annotations

import asyncio
import concurrent.futures
from pathlib import Path
from typing import Any, Final

from flowledger.deploy.registry.store import SourceRegistry
from flowledger.storage import open_store
from tests.deploy.servers import time_command

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
