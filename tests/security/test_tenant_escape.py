"""The adversarial tenant suite (issue #25): a shared HTTP MCP server with two tokens,
each a tenant with its own session, tries every way a tool can name a source to make the
server start a process, open a connection or read a secret the operator did not grant.

Traps, checked after every attempt:

* ``forbidden``: a command line that would create a marker file; it must never exist;
* ``listener``: a real listening socket on loopback; it must never be connected to;
* the registered source (the env server behind a script that counts its starts) is
  started only for what the operator granted, and never by a read-only server.

What works: the operator's registered source, visible to tenant A only, runs through a
deployment, pauses, and resumes; tenant B sees none of it.
"""

from __future__ import annotations

import asyncio
import json
import socket
import sys
import threading
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from flowledger.deploy import DeployService
from flowledger.deploy.registry.store import SourceRegistry
from flowledger.mcp import session_for_token
from flowledger.storage import open_store
from flowledger.workflows import Catalog
from flowledger.workflows.runtime.session import WorkflowSession

from ..deploy.runs.app import HERE as RUNS
from ..deploy.test_registered_runs import marked_server, starts
from ..mcp.conftest import error_text, http_client, http_server, payload

TOKEN_A = "tenant-a-token-0123456789"
TOKEN_B = "tenant-b-token-0123456789"
SESSION_A = session_for_token(TOKEN_A)
SESSION_B = session_for_token(TOKEN_B)
TOKENS = {TOKEN_A: SESSION_A, TOKEN_B: SESSION_B}
ARTIFACT = (RUNS / "pinned_env.yaml").read_text()
LOOT = "operator-only-value-0451"
#: how a refusal reads: a command line or URL is the operator's; FLOWLEDGER_* never resolves
REFUSALS = ("registered by the operator", "server's own configuration")


class Listener:
    """A loopback socket that records every connection made to it (and what was sent)."""

    def __init__(self) -> None:
        self.socket = socket.create_server(("127.0.0.1", 0))
        self.socket.settimeout(0.2)
        self.port: int = self.socket.getsockname()[1]
        self.connections: list[bytes] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                connection, _ = self.socket.accept()
            except TimeoutError:
                continue
            with connection:
                connection.settimeout(1.0)
                try:
                    self.connections.append(connection.recv(65536))
                except OSError:
                    self.connections.append(b"")

    def close(self) -> None:
        self._stop.set()
        self._thread.join(10)
        self.socket.close()


@contextmanager
def listening() -> Iterator[Listener]:
    listener = Listener()
    try:
        yield listener
    finally:
        listener.close()


def registered(script: Path) -> dict[str, Any]:
    return {
        "format": "flowledger.source/v1",
        "name": "env",
        "description": "Tells who it is.",
        "stdio": {
            "command": str(script),
            "env": {"LABEL": "registered", "SECRET_TOKEN": {"secret": "token"}},
        },
        "secrets": {"token": {"env": "TENANT_SUITE_TOKEN", "sessions": [SESSION_A]}},
        "sessions": [SESSION_A],
    }


def binding(**spec: Any) -> dict[str, Any]:
    return {
        "format": "flowledger.deployment/v1",
        "name": "env_dep",
        "artifact": {"name": "pinned_env", "version": "1"},
        "sources": {"env": {"allow_tools": ["whoami", "secret_digest"], **spec}},
    }


@pytest.fixture
def world(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, Any]]:
    """The operator's database: the registered source (A only), and in A's session an
    inline deployment of the forbidden command with a run pinned to it, paused (as a
    database from before the registry would hold)."""
    monkeypatch.setenv("TENANT_SUITE_TOKEN", "granted-secret")
    monkeypatch.setenv("FLOWLEDGER_SUITE_LOOT", LOOT)
    marker = tmp_path / "forbidden-ran"
    forbidden = {"command": "sh", "args": ["-c", f"id > {marker}"]}
    script, counter = marked_server(tmp_path)
    db = f"sqlite:///{tmp_path / 'shared.db'}"

    async def prepare() -> str:
        async with open_store(db) as store:
            await SourceRegistry.over(store).add(registered(script))
            session = WorkflowSession.build(store, SESSION_A, Catalog())
            await session.supervisor.activate()
            try:
                operator = DeployService(session, check_timeout=30)
                await operator.artifacts.save(SESSION_A, ARTIFACT)
                # the operator's own inline deployment of a real server, paused...
                saved = binding(stdio={"command": str(script), "env": {"LABEL": "inline"}})
                saved["name"] = "legacy_dep"
                await operator.deployment_save(saved)
                paused = await operator.run_deployment("legacy_dep", {})
                assert paused["status"] == "interrupted", paused
                # ...and one of the forbidden command, never run
                saved = binding(stdio=forbidden)
                saved["name"] = "forbidden_dep"
                await operator.deployment_save(saved)
                return str(paused["run_id"])
            finally:
                await session.supervisor.shutdown()

    legacy_run = asyncio.run(prepare())
    with listening() as listener:
        yield {
            "db": db,
            "marker": marker,
            "forbidden": forbidden,
            "counter": counter,
            "listener": listener,
            "legacy_run": legacy_run,
            "operator_starts": starts(counter),
        }


@asynccontextmanager
async def tenants(db: str, **options: Any) -> AsyncIterator[tuple[Client, Client]]:
    async with (
        http_server(db, tokens=TOKENS, **options) as url,
        http_client(url, TOKEN_A) as a,
        http_client(url, TOKEN_B) as b,
    ):
        yield a, b


def untouched(world: dict[str, Any], registered_starts: int | None = None) -> None:
    assert not world["marker"].exists(), "a tenant made the server run a command"
    assert world["listener"].connections == [], "a tenant made the server connect"
    if registered_starts is not None:
        assert starts(world["counter"]) == registered_starts


def inline_attempts(world: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """Every tool call that names a command line, a URL or a variable itself."""
    listener: Listener = world["listener"]
    loot = {"X-Loot": {"secret": "FLOWLEDGER_SUITE_LOOT"}}
    tokens = {"Authorization": {"secret": "FLOWLEDGER_MCP_TOKENS"}}
    return [
        ("source_probe", {"stdio": world["forbidden"]}),
        ("source_probe", {"http": {"url": listener.url}}),
        ("source_probe", {"http": {"url": listener.url, "headers": loot}}),
        ("source_probe", {"http": {"url": listener.url, "headers": tokens}}),
        ("source_probe", {"stdio": {"command": "sh", "env": {"L": {"secret": "HOME"}}}}),
        ("deployment_save", {"document": binding(stdio=world["forbidden"])}),
        ("deployment_save", {"document": binding(http={"url": listener.url, "headers": loot})}),
    ]


async def test_no_tool_reaches_an_unregistered_command_address_or_variable(
    world: dict[str, Any],
) -> None:
    async with tenants(world["db"]) as (a, b):
        for client in (a, b):
            for tool, arguments in inline_attempts(world):
                refused = error_text(await client.call_tool(tool, arguments))
                assert any(why in refused for why in REFUSALS), (tool, refused)
                assert LOOT not in refused
                untouched(world, world["operator_starts"])
        assert [
            d["name"] for d in payload(await a.call_tool("deployment_list", {}))["deployments"]
        ] == ["forbidden_dep", "legacy_dep"]  # nothing was saved
        assert payload(await b.call_tool("deployment_list", {})) == {
            "deployments": [],
            "next": None,
        }

        # The operator's inline deployments and pinned run in A's session: refused to A
        for name in ("forbidden_dep", "legacy_dep"):
            refused = payload(
                await a.call_tool("run_deployment", {"deployment": name, "input": {}})
            )
            assert refused["status"] == "unrunnable"
            assert [d["code"] for d in refused["diagnostics"]] == ["inline_source_refused"]
        legacy = world["legacy_run"]
        for tool, arguments in [
            ("inspect_run", {"run_id": legacy}),
            ("validate_run", {"run_id": legacy}),
            ("resume_run", {"run_id": legacy, "payload": {"go": True}}),
        ]:
            answer = payload(await a.call_tool(tool, arguments))
            readiness = answer["resume_readiness"]
            assert readiness["status"] == "blocked", (tool, answer)
            assert [d["code"] for d in readiness["diagnostics"]] == ["inline_source_refused"]
        run = payload(await a.call_tool("workflow_run_get", {"run_id": legacy}))
        assert run["run_status"] == "interrupted"
        # B cannot even see A's runs, deployments or source
        assert "not found" in error_text(await b.call_tool("inspect_run", {"run_id": legacy}))
        hidden = error_text(await b.call_tool("source_probe", {"source": "env"}))
        assert "not registered" in hidden
        untouched(world, world["operator_starts"])


async def test_the_registered_source_works_for_its_tenant_only(world: dict[str, Any]) -> None:
    async with tenants(world["db"]) as (a, b):
        probed = payload(await a.call_tool("source_probe", {"source": "env"}))
        assert [tool["name"] for tool in probed["tools"]] == ["whoami", "secret_digest"]
        assert "granted-secret" not in json.dumps(probed)
        payload(await a.call_tool("deployment_save", {"document": binding(source="env")}))
        started = payload(
            await a.call_tool(
                "run_deployment", {"deployment": "env_dep", "input": {}, "wait_seconds": 120}
            )
        )
        assert started["status"] == "interrupted", started
        done = payload(
            await a.call_tool(
                "resume_run",
                {"run_id": started["run_id"], "payload": {"go": True}, "wait_seconds": 120},
            )
        )
        assert done["status"] == "completed", done
        assert done["output"]["label"] == "registered"

        # B binds the same name in its own session: the source does not exist for B
        payload(await b.call_tool("artifact_save", {"document": ARTIFACT}))
        payload(await b.call_tool("deployment_save", {"document": binding(source="env")}))
        before = starts(world["counter"])
        hidden = payload(
            await b.call_tool("run_deployment", {"deployment": "env_dep", "input": {}})
        )
        assert [d["code"] for d in hidden["diagnostics"]] == ["source_missing"]
        untouched(world, before)


async def test_a_read_only_server_starts_nothing(world: dict[str, Any]) -> None:
    async with tenants(world["db"], read_only=True) as (a, _):
        listed = {tool.name for tool in (await a.list_tools()).tools}
        assert "source_probe" not in listed and "run_deployment" not in listed
        answer = payload(await a.call_tool("validate_run", {"run_id": world["legacy_run"]}))
        assert answer["resume_readiness"]["status"] == "blocked"
        untouched(world, world["operator_starts"])


async def test_a_front_door_refuses_as_the_owner_does(world: dict[str, Any]) -> None:
    async with tenants(world["db"], no_execute=True) as (a, _):
        for tool, arguments in inline_attempts(world):
            refused = error_text(await a.call_tool(tool, arguments))
            assert any(why in refused for why in REFUSALS), (tool, refused)
        refused = payload(
            await a.call_tool("run_deployment", {"deployment": "forbidden_dep", "input": {}})
        )
        assert refused["status"] == "unrunnable"
        untouched(world, world["operator_starts"])


async def test_the_operator_may_open_inline_sources_explicitly(world: dict[str, Any]) -> None:
    """With --allow-inline-sources, a tenant may name a command line (the documented
    opt-in); the server's own configuration still never resolves as a secret."""
    async with tenants(world["db"], allow_inline_sources=True) as (a, _):
        time = str(Path(sys.executable).parent / "mcp-server-time")
        probed = payload(await a.call_tool("source_probe", {"stdio": {"command": time}}))
        assert "get_current_time" in [tool["name"] for tool in probed["tools"]]
        refused = error_text(
            await a.call_tool(
                "source_probe",
                {
                    "http": {
                        "url": world["listener"].url,
                        "headers": {"X-Loot": {"secret": "FLOWLEDGER_SUITE_LOOT"}},
                    }
                },
            )
        )
        assert "server's own configuration" in refused and LOOT not in refused
        untouched(world)
