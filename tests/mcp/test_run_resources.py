"""Runs as MCP resources (``flowledger://runs/{run_id}``, ``/history``, ``/trace``) and
subscriptions to them (``subscriptions/listen``), through the SDK client against
``flowledger mcp --http`` run in-process with two bearer tokens (two sessions)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest
from mcp import Client
from mcp.client.subscriptions import ResourceUpdated, Subscription
from mcp.shared.exceptions import MCPError

from flowledger.mcp import WorkflowMcpServer, session_for_token
from flowledger.mcp._session import load_app, open_served_session
from flowledger.mcp.run_resources import MAX_URI
from flowledger.mcp.run_watch import MAX_STREAMS, MAX_URIS

from ..deploy.runs.app import HERE as RUNS
from ..deploy.test_deployed_runs import deployment, server_script
from .conftest import http_client, http_server, payload, stdio_params, wait_status

APP = "tests.mcp.watch_app:catalog"
TOKEN_A = "token-a-0123456789abcdef"
TOKEN_B = "token-b-0123456789abcdef"
SESSION_A = "7c9e6679-7425-40de-944b-e07fc1f90ae7"
TOKENS = {TOKEN_A: SESSION_A, TOKEN_B: session_for_token(TOKEN_B)}
DEADLINE = 60.0  # catches a hang; never a performance bound


def db(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path}/r.db"


async def start(client: Client, folder: Path) -> str:
    started = payload(
        await client.call_tool(
            "workflow_run_start",
            {
                "definition_name": "watched",
                "definition_version": "v1",
                "input": {"folder": str(folder)},
            },
        )
    )
    return str(started["run_id"])


async def read_json(client: Client, uri: str) -> Any:
    result = await client.read_resource(uri)
    assert len(result.contents) == 1
    content = result.contents[0]
    assert isinstance(content, types.TextResourceContents)
    assert content.uri == uri and content.mime_type == "application/json"
    return json.loads(content.text)


async def status_after_next(client: Client, events: AsyncIterator[Any], uri: str) -> str:
    """Wait for the next update of ``uri`` and read the run's status then."""
    async with asyncio.timeout(DEADLINE):
        async for event in events:
            if isinstance(event, ResourceUpdated) and event.uri == uri:
                return str((await read_json(client, uri))["run_status"])
    raise AssertionError("the subscription ended")


async def next_status_change(
    client: Client, events: AsyncIterator[Any], uri: str, current: str
) -> str:
    """Updates of ``uri`` until the run's status is no longer ``current``."""
    while True:
        status = await status_after_next(client, events, uri)
        if status != current:
            return status


async def until(condition: Callable[[], bool]) -> None:
    """Wait (within the hang deadline) until ``condition`` holds."""
    async with asyncio.timeout(DEADLINE):
        while True:
            if condition():
                return
            await asyncio.sleep(0.01)


async def test_templates_and_reads(tmp_path: Path) -> None:
    async with (
        http_server(db(tmp_path), tokens=TOKENS, app=APP) as url,
        http_client(url, TOKEN_A) as a,
    ):
        templates = (await a.list_resource_templates()).resource_templates
        assert [t.uri_template for t in templates] == [
            "flowledger://runs/{run_id}",
            "flowledger://runs/{run_id}/history",
            "flowledger://runs/{run_id}/trace",
        ]
        # resources/list stays the schemas
        listed = [str(r.uri) for r in (await a.list_resources()).resources]
        assert all(uri.startswith("flowledger://schemas/") for uri in listed)

        (tmp_path / "first").touch()
        run_id = await start(a, tmp_path)
        await wait_status(a, run_id, "interrupted")
        run = await read_json(a, f"flowledger://runs/{run_id}")
        got = payload(await a.call_tool("workflow_run_get", {"run_id": run_id}))
        assert run == {**got, "owner": None}  # a paused run needs no owner
        assert run["run_status"] == "interrupted"
        assert run["pending"]["info"] == {"question": "go on?"}
        history = await read_json(a, f"flowledger://runs/{run_id}/history")
        assert history == payload(
            await a.call_tool("workflow_run_history", {"run_id": run_id, "limit": 100})
        )
        assert history["entries"] and "question" not in json.dumps(history)
        # not a deployed run: no trace resource
        with pytest.raises(MCPError) as refused:
            await a.read_resource(f"flowledger://runs/{run_id}/trace")
        assert refused.value.error.code == types.INVALID_PARAMS
        assert "not a deployed run" in refused.value.error.message


async def test_the_run_resource_says_whether_an_owner_executes_the_run(tmp_path: Path) -> None:
    """``owner`` is the run's own session lease as ``workflow_run_get`` reports it: held by
    the server executing the run, or held by nobody behind a front door without a worker
    (never the holder's identity)."""
    async with (
        http_server(db(tmp_path), tokens=TOKENS, app=APP) as url,
        http_client(url, TOKEN_A) as a,
    ):
        run_id = await start(a, tmp_path)  # held at its first vertex by this server
        run = await read_json(a, f"flowledger://runs/{run_id}")
        got = payload(await a.call_tool("workflow_run_get", {"run_id": run_id}))
        assert run["run_status"] == "running"
        assert run["owner"] == got["owner"]
        assert set(run["owner"]) == {"live", "lease_epoch", "until"}
        assert run["owner"]["live"] is True
    # the server stopped, leaving the run running; a front door executes nothing
    async with (
        http_server(db(tmp_path), tokens=TOKENS, app=APP, no_execute=True) as url,
        http_client(url, TOKEN_A) as a,
    ):
        run = await read_json(a, f"flowledger://runs/{run_id}")
        assert run["run_status"] == "running"
        assert run["owner"]["live"] is False and set(run["owner"]) == {"live", "since"}


BAD_URIS = [
    "flowledger://runs/",
    "flowledger://runs/not-a-uuid",
    "flowledger://runs/../schemas/artifact",
    "flowledger://runs/%2e%2e/secrets",
    "flowledger://runs/{run}/../../etc/passwd",
    "flowledger://runs/{run}/history/../trace",
    "flowledger://runs/{run}/",
    "flowledger://runs/{run}/checkpoints",
    "flowledger://runs/{upper}",
    "flowledger://runs/{run}?x=1",
    "flowledger://runs/{run}/history" + "/x" * 200,
    "file:///etc/passwd",
]


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_sessions_cannot_read_each_others_runs(tmp_path: Path, mode: str) -> None:
    (tmp_path / "first").touch()
    async with (
        http_server(db(tmp_path), tokens=TOKENS, app=APP) as url,
        http_client(url, TOKEN_A, mode=mode) as a,
        http_client(url, TOKEN_B, mode=mode) as b,
    ):
        # subscriptions are served in both eras (subscriptions/listen, resources/subscribe)
        resources = a.server_capabilities.resources
        assert resources is not None
        assert resources.subscribe is True
        run_a = await start(a, tmp_path)
        await wait_status(a, run_a, "interrupted")
        missing = "00000000-0000-4000-8000-000000000000"
        for view in ("", "/history", "/trace"):
            foreign = f"flowledger://runs/{run_a}{view}"
            nonexistent = f"flowledger://runs/{missing}{view}"
            answers = []
            for uri in (foreign, nonexistent):
                with pytest.raises(MCPError) as refused:
                    await b.read_resource(uri)
                assert refused.value.error.code == types.INVALID_PARAMS
                answers.append(refused.value.error.message.replace(run_a, missing))
            assert answers[0] == answers[1]  # another session's run is no resource
        for bad in BAD_URIS:
            uri = bad.replace("{run}", run_a).replace("{upper}", run_a.upper())
            with pytest.raises(MCPError) as refused:
                await a.read_resource(uri)
            assert refused.value.error.code == types.INVALID_PARAMS
            message = refused.value.error.message
            assert message.startswith("no resource")
            assert len(message) < 400  # a bounded quote, never the whole URI
        # the run is untouched, and still readable by its own session
        assert (await read_json(a, f"flowledger://runs/{run_a}"))["run_status"] == "interrupted"


async def test_a_subscription_follows_a_run_in_order(tmp_path: Path) -> None:
    async with (
        http_server(db(tmp_path), tokens=TOKENS, app=APP) as url,
        http_client(url, TOKEN_A) as a,
    ):
        run_id = await start(a, tmp_path)  # held at its first vertex
        uri = f"flowledger://runs/{run_id}"
        async with a.listen(resource_subscriptions=[uri]) as sub:
            assert sub.honored.resource_subscriptions == [uri]
            events = aiter(sub)
            seen = [(await read_json(a, uri))["run_status"]]
            (tmp_path / "first").touch()
            seen.append(await next_status_change(a, events, uri, seen[-1]))
            resume = asyncio.create_task(
                a.call_tool("workflow_run_resume", {"run_id": run_id, "resume": {"note": "x"}})
            )
            seen.append(await next_status_change(a, events, uri, seen[-1]))
            (tmp_path / "second").touch()
            seen.append(await next_status_change(a, events, uri, seen[-1]))
            assert payload(await resume)["run_status"] == "completed"
        assert seen == ["running", "interrupted", "running", "completed"]


async def test_unsubscribing_stops_notifications(tmp_path: Path) -> None:
    """In-process (the SDK's in-memory transport) so the server's watches can be seen."""
    async with (
        open_served_session(db(tmp_path), load_app(APP)) as served,
    ):
        mcp = WorkflowMcpServer(
            served.tools,
            journal=served.session.journal,
            session_id=served.session_id,
            registry=served.session.registry,
        )
        assert mcp.listen is not None
        async with Client(mcp.server) as client:
            run_id = await start(client, tmp_path)
            uri = f"flowledger://runs/{run_id}"
            async with client.listen(resource_subscriptions=[uri]) as first:
                async with client.listen(resource_subscriptions=[uri]):
                    assert mcp.listen.watches[run_id].users == 2
                # the server sees the stream close
                await until(lambda: mcp.listen.watches[run_id].users == 1)
                (tmp_path / "first").touch()
                assert await next_status_change(client, aiter(first), uri, "running") == (
                    "interrupted"
                )
            await until(lambda: not mcp.listen.watches)
            # nothing follows the run any more: a change notifies nobody
            (tmp_path / "second").touch()
            resumed = await client.call_tool(
                "workflow_run_resume", {"run_id": run_id, "resume": {"note": "x"}}
            )
            assert payload(resumed)["run_status"] == "completed"
            assert not mcp.listen.watches


async def test_sessions_cannot_subscribe_to_each_others_runs(tmp_path: Path) -> None:
    async with (
        http_server(db(tmp_path), tokens=TOKENS, app=APP) as url,
        http_client(url, TOKEN_A) as a,
        http_client(url, TOKEN_B) as b,
    ):
        run_a = await start(a, tmp_path)
        for uri in [
            f"flowledger://runs/{run_a}",
            f"flowledger://runs/{run_a}/history",
            "flowledger://runs/../" + run_a,
            "flowledger://runs/" + "a" * (MAX_URI + 1),
        ]:
            with pytest.raises(MCPError) as refused:
                async with b.listen(resource_subscriptions=[uri]):
                    pass
            assert refused.value.error.code == types.INVALID_PARAMS
            assert refused.value.error.message.startswith("no resource")
        # one bad URI refuses the whole request, its good ones included
        own = await start(b, tmp_path / "b")
        with pytest.raises(MCPError):
            async with b.listen(
                resource_subscriptions=[f"flowledger://runs/{own}", f"flowledger://runs/{run_a}"]
            ):
                pass
        too_many = [f"flowledger://runs/{own}"] * (MAX_URIS + 1)
        with pytest.raises(MCPError) as refused:
            async with b.listen(resource_subscriptions=too_many):
                pass
        assert refused.value.error.code == types.INVALID_REQUEST
        assert f"at most {MAX_URIS}" in refused.value.error.message
        # the schemas are the same for everyone and may be listened to
        async with b.listen(resource_subscriptions=["flowledger://schemas/artifact"]) as sub:
            assert isinstance(sub, Subscription)
        # A's own subscription still works
        async with a.listen(resource_subscriptions=[f"flowledger://runs/{run_a}"]) as sub:
            (tmp_path / "first").touch()
            changed = await next_status_change(
                a, aiter(sub), f"flowledger://runs/{run_a}", "running"
            )
            assert changed == "interrupted"


async def test_a_server_that_does_not_execute_follows_the_journal(tmp_path: Path) -> None:
    """A front door or read-only server hears no live activities: its watches follow the
    run's durable journal (the same path, in-process, with ``executes=False``)."""
    async with open_served_session(db(tmp_path), load_app(APP)) as served:
        mcp = WorkflowMcpServer(
            served.tools,
            journal=served.session.journal,
            session_id=served.session_id,
            registry=served.session.registry,
            executes=False,
        )
        async with Client(mcp.server) as client:
            run_id = await start(client, tmp_path)
            uri = f"flowledger://runs/{run_id}"
            async with client.listen(resource_subscriptions=[uri]) as sub:
                events = aiter(sub)
                (tmp_path / "first").touch()
                assert await next_status_change(client, events, uri, "running") == "interrupted"
                (tmp_path / "second").touch()
                resumed = await client.call_tool(
                    "workflow_run_resume", {"run_id": run_id, "resume": {"note": "x"}}
                )
                assert payload(resumed)["run_status"] == "completed"
                assert await next_status_change(client, events, uri, "interrupted") == ("completed")


async def test_a_deployed_runs_resources_never_revalidate(tmp_path: Path) -> None:
    """Over stdio (``flowledger mcp``): a deployed run reads as ``inspect_run`` without
    revalidation - with its source gone, the resource still reads (it starts nothing)
    while ``validate_run`` finds the run blocked - and its trace is a resource."""
    script = server_script(tmp_path)
    async with Client(stdio_params(f"sqlite:///{tmp_path / 'd.db'}")) as client:
        text = (RUNS / "pinned_env.yaml").read_text()
        payload(await client.call_tool("artifact_save", {"document": text}))
        payload(await client.call_tool("deployment_save", {"document": deployment(script)}))
        started = payload(
            await client.call_tool("run_deployment", {"deployment": "env_dep", "input": {}})
        )
        assert started["status"] == "interrupted", started
        run_id = started["run_id"]
        script.unlink()  # any attempt to start the source would now fail
        run = await read_json(client, f"flowledger://runs/{run_id}")
        assert run == {
            **payload(
                await client.call_tool("inspect_run", {"run_id": run_id, "revalidate": False})
            ),
            "owner": None,
        }
        assert run["resume_readiness"]["revalidated"] is False
        assert run["deployment"]["name"] == "env_dep"
        blocked = payload(await client.call_tool("validate_run", {"run_id": run_id}))
        assert blocked["resume_readiness"]["status"] == "blocked"
        trace = await read_json(client, f"flowledger://runs/{run_id}/trace")
        assert trace == payload(
            await client.call_tool("read_run_trace", {"run_id": run_id, "start": 0, "limit": 100})
        )
        assert trace["total"] >= 1 and trace["entries"]


async def test_the_number_of_listen_streams_is_bounded(tmp_path: Path) -> None:
    async with open_served_session(db(tmp_path), load_app(APP)) as served:
        mcp = WorkflowMcpServer(
            served.tools,
            journal=served.session.journal,
            session_id=served.session_id,
            registry=served.session.registry,
        )
        async with Client(mcp.server) as client, AsyncExitStack() as streams:
            run_id = await start(client, tmp_path)
            uri = f"flowledger://runs/{run_id}"
            for _ in range(MAX_STREAMS):
                await streams.enter_async_context(client.listen(resource_subscriptions=[uri]))
            with pytest.raises(MCPError) as refused:
                async with client.listen(resource_subscriptions=[uri]):
                    pass
            assert refused.value.error.code == types.INVALID_REQUEST
            assert f"{MAX_STREAMS} open streams" in refused.value.error.message
            assert mcp.listen is not None and mcp.listen.watches[run_id].users == MAX_STREAMS
