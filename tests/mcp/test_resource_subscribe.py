"""``resources/subscribe`` / ``resources/unsubscribe`` for handshake-era (2025-11-25)
clients: through the SDK client in ``legacy`` mode against ``flowledger mcp --http``
(in-process, two bearer tokens), and in-process to see the server's watches released."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError

from flowledger.mcp import WorkflowMcpServer, resource_subscribe
from flowledger.mcp._session import load_app, open_served_session

from .conftest import http_client, http_server, payload
from .test_run_resources import APP, DEADLINE, TOKEN_A, TOKEN_B, TOKENS, db, read_json, start, until

# the SDK warns that 2026-07-28 removed these methods; this module tests the 2025-11-25 ones
pytestmark = pytest.mark.filterwarnings("ignore::mcp.shared.exceptions.MCPDeprecationWarning")


class Updates:
    """A client's ``notifications/resources/updated``, in arrival order."""

    def __init__(self) -> None:
        self.uris: list[str] = []
        self.arrived = asyncio.Event()

    async def __call__(self, message: Any) -> None:
        if isinstance(message, types.ResourceUpdatedNotification):
            self.uris.append(message.params.uri)
            self.arrived.set()

    async def next_status(self, client: Client, uri: str, current: str) -> str:
        """Updates of ``uri`` until the run's status is no longer ``current``."""
        async with asyncio.timeout(DEADLINE):
            while True:
                await self.arrived.wait()
                self.arrived.clear()
                if uri in self.uris:
                    status = str((await read_json(client, uri))["run_status"])
                    if status != current:
                        return status


async def test_a_subscription_follows_a_run_in_order(tmp_path: Path) -> None:
    updates = Updates()
    async with (
        http_server(db(tmp_path), tokens=TOKENS, app=APP) as url,
        http_client(url, TOKEN_A, mode="legacy", message_handler=updates) as a,
    ):
        assert a.protocol_version == "2025-11-25"
        capabilities = a.session.server_capabilities
        assert capabilities.resources is not None and capabilities.resources.subscribe
        run_id = await start(a, tmp_path)  # held at its first vertex
        uri = f"flowledger://runs/{run_id}"
        await a.subscribe_resource(uri)
        await a.subscribe_resource(uri)  # twice is once
        seen = [(await read_json(a, uri))["run_status"]]
        (tmp_path / "first").touch()
        seen.append(await updates.next_status(a, uri, seen[-1]))
        resume = asyncio.create_task(
            a.call_tool("workflow_run_resume", {"run_id": run_id, "resume": {"note": "x"}})
        )
        seen.append(await updates.next_status(a, uri, seen[-1]))
        (tmp_path / "second").touch()
        seen.append(await updates.next_status(a, uri, seen[-1]))
        assert payload(await resume)["run_status"] == "completed"
        assert seen == ["running", "interrupted", "running", "completed"]
        assert set(updates.uris) == {uri}  # only what was subscribed


async def test_another_sessions_run_is_no_resource_and_delivers_nothing(tmp_path: Path) -> None:
    heard_by_b = Updates()
    heard_by_a = Updates()
    async with (
        http_server(db(tmp_path), tokens=TOKENS, app=APP) as url,
        http_client(url, TOKEN_A, mode="legacy", message_handler=heard_by_a) as a,
        http_client(url, TOKEN_B, mode="legacy", message_handler=heard_by_b) as b,
    ):
        run_a = await start(a, tmp_path)
        unknown = "00000000-0000-4000-8000-000000000000"
        answers = []
        for run_id in (run_a, unknown):
            with pytest.raises(MCPError) as refused:
                await b.subscribe_resource(f"flowledger://runs/{run_id}")
            error = refused.value.error
            answers.append((error.code, error.message.replace(run_id, "{run}")))
        assert answers[0] == answers[1]
        assert answers[0][0] == types.INVALID_PARAMS and answers[0][1].startswith("no resource")
        # A's run moves through a pause and on: A hears it, B nothing
        uri = f"flowledger://runs/{run_a}"
        await a.subscribe_resource(uri)
        (tmp_path / "first").touch()
        assert await heard_by_a.next_status(a, uri, "running") == "interrupted"
        assert heard_by_b.uris == []


async def test_watches_are_released_on_unsubscribe_and_at_the_connections_end(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(resource_subscribe, "MAX_URIS", 3)
    async with open_served_session(db(tmp_path), load_app(APP)) as served:
        mcp = WorkflowMcpServer(
            served.tools,
            journal=served.session.journal,
            session_id=served.session_id,
            registry=served.session.registry,
        )
        assert mcp.listen is not None
        async with Client(mcp.server, mode="legacy") as client:
            run_id = await start(client, tmp_path)
            uri = f"flowledger://runs/{run_id}"
            await client.subscribe_resource(uri)
            await client.subscribe_resource(uri + "/history")
            assert mcp.listen.watches[run_id].users == 1  # one watch for the connection
            await client.unsubscribe_resource(uri)
            assert mcp.listen.watches[run_id].users == 1  # the history still names the run
            await client.unsubscribe_resource(uri + "/history")
            assert not mcp.listen.watches
            await client.unsubscribe_resource(uri)  # not subscribed: acknowledged
            # bounded per connection (3 here)
            await client.subscribe_resource("flowledger://schemas/artifact")
            await client.subscribe_resource("flowledger://schemas/deployment")
            await client.subscribe_resource(uri)
            with pytest.raises(MCPError) as refused:
                await client.subscribe_resource(uri + "/history")
            assert refused.value.error.code == types.INVALID_REQUEST
            assert "3 subscriptions, the limit" in refused.value.error.message
            assert mcp.listen.watches[run_id].users == 1
        # the connection ended: its watch is released
        await until(lambda: not mcp.listen.watches)


async def test_a_subscription_whose_connection_ends_meanwhile_holds_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The connection's release ran while a subscribe was still acquiring its watch:
    the watch must not stay with nobody left to release it."""
    subscribers: list[Any] = []
    made = resource_subscribe._Subscriber.__init__

    def recorded(self: Any, *args: Any) -> None:
        made(self, *args)
        subscribers.append(self)

    monkeypatch.setattr(resource_subscribe._Subscriber, "__init__", recorded)
    async with open_served_session(db(tmp_path), load_app(APP)) as served:
        mcp = WorkflowMcpServer(
            served.tools,
            journal=served.session.journal,
            session_id=served.session_id,
            registry=served.session.registry,
        )
        listen = mcp.listen
        assert listen is not None
        acquire = listen.acquire

        async def acquire_as_the_connection_ends(run_id: str) -> Any:
            watch = await acquire(run_id)
            for subscriber in subscribers:
                subscriber.close()
            return watch

        async with Client(mcp.server, mode="legacy") as client:
            run_id = await start(client, tmp_path)
            await client.subscribe_resource("flowledger://schemas/artifact")
            monkeypatch.setattr(listen, "acquire", acquire_as_the_connection_ends)
            with pytest.raises(MCPError) as refused:
                await client.subscribe_resource(f"flowledger://runs/{run_id}")
            assert refused.value.error.code == types.INTERNAL_ERROR
            assert not listen.watches
