"""Task status notifications (``notifications/tasks`` on a ``subscriptions/listen``
stream listing ``taskIds``), through a raw JSON-RPC client of ``flowledger mcp --http``
(in-process, two bearer tokens): the SDK client neither sends the extension's filter key
nor reads its notification."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from flowledger.mcp import session_for_token

from .conftest import http_server
from .raw_http import PLAIN, RawClient, raw_client

APP = "tests.mcp.watch_app:catalog"
TOKEN_A = "notify-token-a-0123456789"
TOKEN_B = "notify-token-b-0123456789"
TOKENS = {TOKEN_A: session_for_token(TOKEN_A), TOKEN_B: session_for_token(TOKEN_B)}
DEADLINE = 60.0  # catches a hang; never a performance bound


def db(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path}/n.db"


async def start_task(client: RawClient, folder: Path) -> str:
    arguments = {
        "definition_name": "watched",
        "definition_version": "v1",
        "input": {"folder": str(folder)},
    }
    answer = await client.call("workflow_run_start", arguments)
    assert answer["result"]["resultType"] == "task", answer
    return str(answer["result"]["taskId"])


async def next_notice(messages: AsyncIterator[Any], subscription: int) -> dict[str, Any]:
    """The next ``notifications/tasks`` of the stream (anything else fails the test)."""
    async with asyncio.timeout(DEADLINE):
        message = await anext(messages)
    assert message["method"] == "notifications/tasks", message
    params = dict(message["params"])
    assert params.pop("_meta") == {"io.modelcontextprotocol/subscriptionId": subscription}
    return params


async def acknowledged(messages: AsyncIterator[Any]) -> dict[str, Any]:
    async with asyncio.timeout(DEADLINE):
        message = await anext(messages)
    assert message["method"] == "notifications/subscriptions/acknowledged", message
    return dict(message["params"]["notifications"])


async def test_a_listener_hears_each_status_change_in_order(tmp_path: Path) -> None:
    async with (
        http_server(db(tmp_path), tokens=TOKENS, app=APP) as url,
        raw_client(url, TOKEN_A) as a,
    ):
        task_id = await start_task(a, tmp_path)  # held at its first vertex
        async with a.listen({"taskIds": [task_id, task_id]}) as messages:
            assert await acknowledged(messages) == {"taskIds": [task_id]}
            subscription = a.last_id
            seen = [await next_notice(messages, subscription)]
            assert seen[0]["status"] == "working" and seen[0]["taskId"] == task_id
            (tmp_path / "first").touch()
            seen.append(await next_notice(messages, subscription))
            paused = seen[-1]
            assert paused["status"] == "input_required"
            # the notice is what tasks/get answers, the pause's form included
            got = (await a.task("tasks/get", task_id))["result"]
            assert got.pop("resultType") == "complete"
            got.pop("_meta", None)
            assert paused == got
            (key,) = paused["inputRequests"]
            answer = {key: {"action": "accept", "content": {"note": "yes"}}}
            update = asyncio.create_task(a.task("tasks/update", task_id, inputResponses=answer))
            seen.append(await next_notice(messages, subscription))
            (tmp_path / "second").touch()
            seen.append(await next_notice(messages, subscription))
            assert (await update)["result"]["resultType"] == "complete"
        assert [n["status"] for n in seen] == [
            "working",
            "input_required",
            "working",
            "completed",
        ]
        result = seen[-1]["result"]
        assert (
            result["isError"] is False
            and '"run_status":"completed"' in (result["content"][0]["text"])
        )


async def test_a_cancel_is_heard(tmp_path: Path) -> None:
    async with (
        http_server(db(tmp_path), tokens=TOKENS, app=APP) as url,
        raw_client(url, TOKEN_A) as a,
    ):
        task_id = await start_task(a, tmp_path)
        async with a.listen({"taskIds": [task_id]}) as messages:
            subscription = a.last_id
            await acknowledged(messages)
            assert (await next_notice(messages, subscription))["status"] == "working"
            assert (await a.task("tasks/cancel", task_id))["result"]["resultType"] == "complete"
            cancelled = await next_notice(messages, subscription)
            assert cancelled["status"] == "cancelled"
            assert "result" not in cancelled and "error" not in cancelled


async def test_another_session_and_undeclared_clients_hear_nothing(tmp_path: Path) -> None:
    async with (
        http_server(db(tmp_path), tokens=TOKENS, app=APP) as url,
        raw_client(url, TOKEN_A) as a,
        raw_client(url, TOKEN_B) as b,
    ):
        task_id = await start_task(a, tmp_path)
        (tmp_path / "b").mkdir()
        own = await start_task(b, tmp_path / "b")
        unknown = "run-" + "0" * 8 + "-0000-4000-8000-" + "0" * 12
        # another session's task is refused exactly as an unknown one, before any ack
        refusals = []
        for ids in ([task_id], [unknown], [own, task_id], ["nonsense"]):
            async with b.listen({"taskIds": ids}) as messages:
                async with asyncio.timeout(DEADLINE):
                    refusals.append((await anext(messages))["error"])
        assert {r["code"] for r in refusals} == {-32602}
        assert all(r["message"].startswith("unknown task") for r in refusals)
        # a client that does not declare the extension may not ask for task notices
        async with a.listen({"taskIds": [task_id]}, capabilities=PLAIN) as messages:
            async with asyncio.timeout(DEADLINE):
                error = (await anext(messages))["error"]
        assert error["code"] == -32021
        assert error["data"] == {
            "requiredCapabilities": {"extensions": {"io.modelcontextprotocol/tasks": {}}}
        }
        # B's own stream hears its own task, and nothing of A's as A's run pauses
        async with b.listen({"taskIds": [own]}) as messages:
            await acknowledged(messages)
            assert (await next_notice(messages, b.last_id))["taskId"] == own
            (tmp_path / "first").touch()
            (tmp_path / "b" / "first").touch()
            paused = await next_notice(messages, b.last_id)
            assert (paused["taskId"], paused["status"]) == (own, "input_required")
