"""Registered sources for the Sources pages' tests, written to the database file before a
dashboard opens it (as the operator would): the real ``mcp-server-time`` as ``clock``
(probed for real), and sources whose probes are recorded.

Every source's environment or headers hold `SENTINEL`, a literal value, and a secret
whose value is `SECRET_VALUE`: neither may ever reach a page.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Final, TypeVar

from flowledger.deploy.registry.store import Probe, SourceRegistry
from flowledger.deploy.sources.tool_info import ToolInfo
from flowledger.storage import open_store
from tests.deploy.servers import time_command

SENTINEL: Final = "literal-env-value-sentinel-7f3a"
SECRET_VAR: Final = "WEB_SOURCES_TEST_SECRET"
SECRET_VALUE: Final = "web-sources-s3cr3t-never-shown"
SCRIPT: Final = "<script>alert('source')</script>"
PROBED_AT: Final = "2025-01-02T03:04:05.000006Z"

T = TypeVar("T")


def run(work: Coroutine[Any, Any, T]) -> T:
    """``work`` in an event loop of its own thread: the caller may be inside one already
    (Playwright's sync API runs one in the test's thread)."""
    with ThreadPoolExecutor(1) as thread:
        return thread.submit(asyncio.run, work).result()


def clock(*, sessions: list[str] | None = None, name: str = "clock") -> dict[str, Any]:
    """``mcp-server-time``; deployments may bind its ``get_current_time`` only."""
    document: dict[str, Any] = {
        "format": "flowledger.source/v1",
        "name": name,
        "description": "The time server's clock.",
        "stdio": {
            "command": time_command(),
            "args": ["--local-timezone", "Etc/UTC"],
            "env": {"CLOCK_MODE": SENTINEL, "WEB_TOKEN": {"secret": "token"}},
        },
        "secrets": {"token": {"env": SECRET_VAR}},
        "allow_tools": ["get_current_time"],
    }
    if sessions is not None:
        document["sessions"] = sessions
    return document


def hostile() -> dict[str, Any]:
    """An HTTP source with markup in its description, credentials in its URL and a
    literal and a secret header (never contacted: its probe is recorded)."""
    return {
        "format": "flowledger.source/v1",
        "name": "hostile",
        "description": SCRIPT,
        "http": {
            "url": "http://user:hunter2@127.0.0.1:9/mcp",
            "headers": {"X-Mode": SENTINEL, "Authorization": {"secret": "api"}},
        },
        "secrets": {"api": {"env": SECRET_VAR}},
    }


def launcher(marker: Path, *, name: str = "launcher") -> dict[str, Any]:
    """A source that, if anything ever started it, would create ``marker``."""
    return {
        "format": "flowledger.source/v1",
        "name": name,
        "description": "Never started by a page.",
        "stdio": {"command": "/bin/sh", "args": ["-c", f"touch {marker}"]},
    }


def failed_probe(revision: int, error: str) -> Probe:
    return Probe(revision, PROBED_AT, False, error, None, ())


def listing_probe(revision: int, tools: Iterable[Mapping[str, Any]]) -> Probe:
    server = {"name": "recorded", "version": "0.1", "title": None, "protocol_version": None}
    return Probe(
        revision, PROBED_AT, True, None, server, tuple(ToolInfo.from_entry(t) for t in tools)
    )


async def _register(
    db: Path,
    documents: Iterable[Mapping[str, Any]],
    *,
    probe: Iterable[str] = (),
    recorded: Mapping[str, Probe] | None = None,
    disabled: Iterable[str] = (),
) -> None:
    async with open_store(f"sqlite:///{db}") as store:
        registry = SourceRegistry.over(store)
        for document in documents:
            await registry.add(dict(document))
        for name in probe:
            found = await registry.probe(name, {SECRET_VAR: SECRET_VALUE}, seconds=60)
            assert found.ok, found.error
        for name, recorded_probe in (recorded or {}).items():
            await registry.record_probe(name, recorded_probe)
        for name in disabled:
            await registry.disable(name)


def register(
    db: Path,
    documents: Iterable[Mapping[str, Any]],
    *,
    probe: Iterable[str] = (),
    recorded: Mapping[str, Probe] | None = None,
    disabled: Iterable[str] = (),
) -> None:
    """Register ``documents`` in the database file ``db``, probe the sources named in
    ``probe`` for real, record the ``recorded`` probes and disable ``disabled``."""
    run(_register(db, documents, probe=probe, recorded=recorded, disabled=disabled))


def last_probe(db: Path, name: str) -> Probe:
    async def read() -> Probe:
        async with open_store(f"sqlite:///{db}") as store:
            found = await SourceRegistry.over(store).last_probe(name)
        assert found is not None
        return found

    return run(read())


def deployment() -> dict[str, Any]:
    """``clock_sign_off`` (tests/web/clock_sign_off.yaml) bound to the registered
    ``clock``."""
    return {
        "format": "flowledger.deployment/v1",
        "name": "clock_reg",
        "artifact": {"name": "clock_sign_off", "version": "1"},
        "sources": {"clock": {"source": "clock", "allow_tools": ["get_current_time"]}},
    }
