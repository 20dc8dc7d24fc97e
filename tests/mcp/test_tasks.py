"""Runs as MCP tasks (``io.modelcontextprotocol/tasks``, `flowledger.mcp.tasks`), through
the SDK client over streamable HTTP: the client declares the extension and receives the
claimed ``resultType: "task"`` shape itself (``allow_claimed``); ``tasks/get`` and
``tasks/cancel`` are sent as the extension's requests (with their ``Mcp-Name``)."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any, Literal

import httpx
import mcp_types as types
import pytest
from mcp import Client
from mcp.client.extension import ClaimContext, ClientExtension, ResultClaim
from mcp.shared.exceptions import MCPError
from pydantic import ConfigDict, TypeAdapter

from flowledger.deploy.registry.store import SourceRegistry
from flowledger.mcp import session_for_token
from flowledger.mcp.tasks import TASKS_EXTENSION, UpdateTaskRequestParams
from flowledger.storage import open_store

from ..deploy.runs.app import HERE as RUNS
from ..deploy.test_deployed_runs import deployment, server_script
from .conftest import APP, REPO, http_client, http_server, payload

SECRET = "task-secret-7f3a"
START = {"definition_name": "relay", "definition_version": "v1", "input": {"secret": SECRET}}
RESUME = {"note": "ok"}
TOKEN_A = "tasks-token-a-0123456789"
TOKEN_B = "tasks-token-b-0123456789"
PINNED = RUNS / "pinned_env.yaml"
_ANY = TypeAdapter(dict[str, Any])


class TaskHandle(types.Result):
    """The ``CreateTaskResult`` a task-answered call returns."""

    model_config = ConfigDict(extra="allow")
    result_type: Literal["task"]
    task_id: str
    status: str


class TasksGet(types.Request[types.GetTaskRequestParams, Literal["tasks/get"]]):
    method: Literal["tasks/get"] = "tasks/get"
    params: types.GetTaskRequestParams
    name_param = "taskId"


class TasksCancel(types.Request[types.CancelTaskRequestParams, Literal["tasks/cancel"]]):
    method: Literal["tasks/cancel"] = "tasks/cancel"
    params: types.CancelTaskRequestParams
    name_param = "taskId"


async def _finish(handle: TaskHandle, ctx: ClaimContext) -> types.CallToolResult:
    """A transparent client: poll until the task ends; its result is the call's answer."""
    async with asyncio.timeout(60):
        while True:
            request = TasksGet(params=types.GetTaskRequestParams(task_id=handle.task_id))
            task = await ctx.session.send_request(request, _ANY)
            if task["status"] == "completed":
                return types.CallToolResult.model_validate(task["result"])
            if task["status"] != "working":
                raise AssertionError(f"task {handle.task_id} is {task['status']}")
            await asyncio.sleep(0.05)


class TasksClient(ClientExtension):
    """The client side of the extension: declares it, and claims ``resultType: "task"``."""

    identifier = TASKS_EXTENSION

    def claims(self) -> list[ResultClaim[Any]]:
        return [ResultClaim(result_type="task", model=TaskHandle, resolve=_finish)]


WITH_TASKS = [TasksClient()]


class TasksUpdate(types.Request[UpdateTaskRequestParams, Literal["tasks/update"]]):
    method: Literal["tasks/update"] = "tasks/update"
    params: UpdateTaskRequestParams
    name_param = "taskId"


async def update_task(client: Client, task_id: str, responses: dict[str, Any]) -> dict[str, Any]:
    """The acknowledgement, without the SDK's ``serverInfo`` stamp."""
    params = UpdateTaskRequestParams(task_id=task_id, input_responses=responses)
    answer = await client.session.send_request(TasksUpdate(params=params), _ANY)
    answer.pop("_meta", None)
    return answer


async def call_as_task(client: Client, name: str, arguments: dict[str, Any]) -> TaskHandle:
    result = await client.session.call_tool(name, arguments, allow_claimed=True)
    assert isinstance(result, TaskHandle), result
    return result


async def get_task(client: Client, task_id: str) -> dict[str, Any]:
    request = TasksGet(params=types.GetTaskRequestParams(task_id=task_id))
    return await client.session.send_request(request, _ANY)


async def cancel_task(client: Client, task_id: str) -> dict[str, Any]:
    """The acknowledgement, without the SDK's ``serverInfo`` stamp."""
    request = TasksCancel(params=types.CancelTaskRequestParams(task_id=task_id))
    answer = await client.session.send_request(request, _ANY)
    answer.pop("_meta", None)
    return answer


async def wait_task(client: Client, task_id: str, status: str) -> dict[str, Any]:
    """Poll ``tasks/get`` until the task has ``status`` (a generous deadline: hangs only)."""
    async with asyncio.timeout(60):
        while True:
            task = await get_task(client, task_id)
            if task["status"] == status:
                return task
            assert task["status"] in ("working", "input_required"), task
            await asyncio.sleep(0.05)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def _launch(db: str, options: tuple[str, ...]) -> tuple[str, subprocess.Popen[bytes]] | None:
    """Start the server; its URL once it listens, or ``None`` if it exited (a killed
    owner's session lease has not expired yet)."""
    port = _free_port()
    env = {
        k: v for k, v in os.environ.items() if k not in ("FLOWLEDGER_DB", "FLOWLEDGER_MCP_TOKENS")
    }
    command = [sys.executable, "-m", "flowledger.mcp", "--http", "--port", str(port)]
    process = subprocess.Popen(
        [*command, "--db", db, "--app", APP, *options],
        cwd=REPO,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    url = f"http://127.0.0.1:{port}/mcp"
    while process.poll() is None:
        try:
            httpx.get(url, timeout=2.0)
            return url, process
        except httpx.TransportError:
            time.sleep(0.1)
    return None


@contextmanager
def server_process(db: str, *options: str) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """``python -m flowledger.mcp --http`` on loopback (the default session), started
    again until it serves (a hang guard of two minutes, not a timing bound)."""
    deadline = time.monotonic() + 120
    while (launched := _launch(db, options)) is None:
        assert time.monotonic() < deadline, "flowledger mcp --http did not serve"
        time.sleep(0.5)
    url, process = launched
    try:
        yield url, process
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
        process.wait(30)


@asynccontextmanager
async def task_client(url: str, token: str | None = None, **options: Any) -> AsyncIterator[Client]:
    async with http_client(url, token, extensions=WITH_TASKS, **options) as client:
        yield client


async def test_a_task_survives_a_killed_server_and_is_polled_to_completion(
    tmp_path: Path,
) -> None:
    db = f"sqlite:///{tmp_path}/t.db"
    with server_process(db) as (url, process):
        async with task_client(url) as client:
            handle = await call_as_task(client, "workflow_run_start", START)
            run_id = handle.task_id.removeprefix("run-")
            assert handle.task_id == f"run-{run_id}"
            assert handle.status in ("working", "input_required")
            dumped = handle.model_dump(by_alias=True)
            assert "result" not in dumped and "inputRequests" not in dumped
            paused = await wait_task(client, handle.task_id, "input_required")
            assert paused["inputRequests"] == {}
            assert "workflow_run_resume" in paused["statusMessage"]
            assert paused["resultType"] == "complete"
            assert SECRET not in json.dumps(paused)  # the interrupt's info stays owner-only
        os.killpg(process.pid, signal.SIGKILL)  # a crash: nothing is shut down
        process.wait(30)
    # another server process of the session (a read-only one, beside the dead owner's
    # lease) answers for the task: everything is read from the run registry
    with server_process(db, "--read-only") as (url, _):
        async with task_client(url) as client:
            beside = await get_task(client, handle.task_id)
            assert beside["status"] == "input_required"
            with pytest.raises(MCPError) as refused:
                await cancel_task(client, handle.task_id)
            assert "read-only" in refused.value.error.message
    with server_process(db) as (url, _):
        async with task_client(url) as client:
            again = await get_task(client, handle.task_id)
            assert again["status"] == "input_required"
            assert again["createdAt"] == paused["createdAt"]
            resumed = await call_as_task(
                client, "workflow_run_resume", {"run_id": run_id, "resume": RESUME}
            )
            assert resumed.task_id == handle.task_id  # a task is its run
            done = await wait_task(client, handle.task_id, "completed")
            answer = json.loads(done["result"]["content"][0]["text"])
            assert done["result"]["isError"] is False
            assert answer["run_id"] == run_id and answer["run_status"] == "completed"
            # the task's result is the reading tool's ordinary answer
            read = payload(await client.call_tool("workflow_run_get", {"run_id": run_id}))
            assert read == answer


async def test_tasks_cancel_is_the_durable_cancel(tmp_path: Path) -> None:
    async with (
        http_server(f"sqlite:///{tmp_path}/t.db", app=APP) as url,
        task_client(url) as client,
    ):
        handle = await call_as_task(client, "workflow_run_start", START)
        await wait_task(client, handle.task_id, "input_required")
        assert await cancel_task(client, handle.task_id) == {"resultType": "complete"}
        cancelled = await wait_task(client, handle.task_id, "cancelled")
        assert "result" not in cancelled and "error" not in cancelled
        run_id = handle.task_id.removeprefix("run-")
        read = payload(await client.call_tool("workflow_run_get", {"run_id": run_id}))
        assert read["run_status"] == "cancelled"
        # cancelling a finished task changes nothing and is acknowledged
        assert await cancel_task(client, handle.task_id) == {"resultType": "complete"}
        assert (await get_task(client, handle.task_id))["status"] == "cancelled"


async def test_a_failed_call_keeps_its_ordinary_answer(tmp_path: Path) -> None:
    async with (
        http_server(f"sqlite:///{tmp_path}/t.db", app=APP) as url,
        task_client(url) as client,
    ):
        result = await client.session.call_tool(
            "workflow_run_start", {**START, "definition_version": "v9"}, allow_claimed=True
        )
        assert isinstance(result, types.CallToolResult) and result.is_error
        listed = payload(await client.call_tool("workflow_run_list", {}))
        assert listed["runs"] == []  # no run, so no task


async def test_clients_without_the_extension_get_todays_answers(tmp_path: Path) -> None:
    async with http_server(f"sqlite:///{tmp_path}/t.db", app=APP) as url:
        for options in ({}, {"mode": "legacy", "extensions": WITH_TASKS}):
            async with http_client(url, None, **options) as client:
                started = payload(await client.call_tool("workflow_run_start", START))
                assert started["run_status"] in ("running", "interrupted")
                assert "taskId" not in started
        async with task_client(url) as client:
            # a tool that starts no run is answered as always
            listed = payload(await client.call_tool("workflow_run_list", {}))
            assert len(listed["runs"]) == 2
            handle = await call_as_task(client, "workflow_run_start", START)
            before = await wait_task(client, handle.task_id, "input_required")
            # the extension's own methods answer only clients that declared it, and the
            # refused cancel and update change nothing
            async with http_client(url, None) as plain:
                for send in (get_task, cancel_task):
                    with pytest.raises(MCPError) as raised:
                        await send(plain, handle.task_id)
                    assert raised.value.error.code == types.MISSING_REQUIRED_CLIENT_CAPABILITY
                with pytest.raises(MCPError) as raised:
                    await update_task(plain, handle.task_id, {})
                assert raised.value.error.code == types.MISSING_REQUIRED_CLIENT_CAPABILITY
            assert await get_task(client, handle.task_id) == before


BAD_TASK_IDS = [
    "",
    "run-",
    "run-not-a-uuid",
    "deployed-run-",
    "task-7c9e6679-7425-40de-944b-e07fc1f90ae7",
    "run-7C9E6679-7425-40DE-944B-E07FC1F90AE7",  # not the canonical spelling
    "run-7c9e6679-7425-40de-944b-e07fc1f90ae7",  # no such run
    "run-00000000-0000-0000-0000-000000000000",  # the nil UUID is no run ID
    "run-" + "x" * 10_000,
]


async def test_unknown_foreign_and_malformed_task_ids_are_protocol_errors(tmp_path: Path) -> None:
    session_a, session_b = session_for_token(TOKEN_A), session_for_token(TOKEN_B)
    tokens = {TOKEN_A: session_a, TOKEN_B: session_b}
    async with (
        http_server(f"sqlite:///{tmp_path}/t.db", tokens=tokens, app=APP) as url,
        task_client(url, TOKEN_A) as a,
        task_client(url, TOKEN_B) as b,
    ):
        handle = await call_as_task(a, "workflow_run_start", START)
        await wait_task(a, handle.task_id, "input_required")
        foreign = handle.task_id
        for task_id in [*BAD_TASK_IDS, foreign]:
            for send in (get_task, cancel_task):
                with pytest.raises(MCPError) as raised:
                    await send(b, task_id)
                assert raised.value.error.code == types.INVALID_PARAMS
                assert raised.value.error.message.startswith("unknown task ")
                assert len(raised.value.error.message) < 100
        # the foreign task is untouched, and B sees no run
        assert (await get_task(a, foreign))["status"] == "input_required"
        assert payload(await b.call_tool("workflow_run_list", {}))["runs"] == []


async def test_a_deployed_run_is_a_task_whose_result_is_inspect_run(tmp_path: Path) -> None:
    script = server_script(tmp_path)
    session_a = session_for_token(TOKEN_A)
    db = f"sqlite:///{tmp_path / 'd.db'}"
    async with open_store(db) as store:  # the operator registers the source
        await SourceRegistry.over(store).add(
            {
                "format": "flowledger.source/v1",
                "name": "env",
                "stdio": {"command": str(script), "env": {"LABEL": "one"}},
                "sessions": [session_a],
            }
        )
    registered = deployment(
        script, sources={"env": {"source": "env", "allow_tools": ["whoami", "secret_digest"]}}
    )
    async with (
        http_server(db, tokens={TOKEN_A: session_a}) as url,
        task_client(url, TOKEN_A) as client,
    ):
        payload(await client.call_tool("artifact_save", {"document": PINNED.read_text()}))
        payload(await client.call_tool("deployment_save", {"document": registered}))
        # a refused start names no run: its ordinary answer
        refused = await client.session.call_tool(
            "run_deployment", {"deployment": "nope", "input": {}}, allow_claimed=True
        )
        assert isinstance(refused, types.CallToolResult)
        assert payload(refused)["status"] == "unrunnable"
        handle = await call_as_task(
            client, "run_deployment", {"deployment": "env_dep", "input": {}, "wait_seconds": 120}
        )
        assert handle.task_id.startswith("deployed-run-")
        run_id = handle.task_id.removeprefix("deployed-run-")
        paused = await wait_task(client, handle.task_id, "input_required")
        assert "resume_run" in paused["statusMessage"]
        resumed = await call_as_task(
            client, "resume_run", {"run_id": run_id, "payload": {"go": True}, "wait_seconds": 120}
        )
        assert resumed.task_id == handle.task_id
        done = await wait_task(client, handle.task_id, "completed")
        answer = json.loads(done["result"]["content"][0]["text"])
        assert answer["run_id"] == run_id and answer["status"] == "completed"
        inspected = payload(
            await client.call_tool("inspect_run", {"run_id": run_id, "revalidate": False})
        )
        assert inspected == answer
        # a deployed run's pause answered through elicitation: the form is its resume
        # schema, the answer goes through resume_run's payload
        second = await call_as_task(
            client, "run_deployment", {"deployment": "env_dep", "input": {}, "wait_seconds": 120}
        )
        await wait_task(client, second.task_id, "input_required")
        asked: list[types.ElicitRequestFormParams] = []

        async def person(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
            assert isinstance(params, types.ElicitRequestFormParams)
            asked.append(params)
            return types.ElicitResult(action="accept", content={"go": True})

        async with http_client(url, TOKEN_A, elicitation_callback=person) as elicited:
            second_id = second.task_id.removeprefix("deployed-run-")
            await elicited.call_tool("inspect_run", {"run_id": second_id, "revalidate": False})
        assert [a.message for a in asked] == ["Go?"]
        assert asked[0].requested_schema == {
            "type": "object",
            "properties": {"go": {"type": "boolean"}},
            "required": ["go"],
        }
        await wait_task(client, second.task_id, "completed")


async def test_a_tasks_pause_is_answered_through_tasks_update(tmp_path: Path) -> None:
    async def no_round_trips(context: Any, params: Any) -> types.ElicitResult:
        raise AssertionError("a task's form is asked in tasks/get, not by the call")

    ack = {"resultType": "complete"}
    async with (
        http_server(f"sqlite:///{tmp_path}/t.db", app=APP) as url,
        task_client(url, elicitation_callback=no_round_trips) as client,
    ):
        handle = await call_as_task(client, "workflow_run_start", START)
        paused = await wait_task(client, handle.task_id, "input_required")
        ((key, form),) = paused["inputRequests"].items()
        assert key.startswith("resume-")
        assert form == {
            "method": "elicitation/create",
            "params": {
                "mode": "form",
                "message": "deliver?",
                "requestedSchema": {"type": "object", "properties": {"note": {"type": "string"}}},
            },
        }
        assert "tasks/update" in paused["statusMessage"]
        invalid = types.ElicitResult(action="accept", content={"note": 5})
        with pytest.raises(MCPError) as raised:
            await update_task(client, handle.task_id, {key: invalid})
        assert raised.value.error.code == types.INVALID_PARAMS
        assert raised.value.error.message.startswith("workflow tools: invalid resume")
        other = types.ListRootsResult(roots=[])
        with pytest.raises(MCPError) as raised:
            await update_task(client, handle.task_id, {key: other})
        assert raised.value.error.code == types.INVALID_PARAMS
        # nothing changed: the same form is outstanding; keys not outstanding are ignored
        again = await get_task(client, handle.task_id)
        assert again["inputRequests"] == paused["inputRequests"]
        good = types.ElicitResult(action="accept", content={"note": "ok"})
        assert await update_task(client, handle.task_id, {"resume-999": good}) == ack
        assert (await get_task(client, handle.task_id))["status"] == "input_required"
        declined = types.ElicitResult(action="decline")
        assert await update_task(client, handle.task_id, {key: declined}) == ack
        assert (await get_task(client, handle.task_id))["status"] == "input_required"
        assert await update_task(client, handle.task_id, {key: good}) == ack
        done = await wait_task(client, handle.task_id, "completed")
        # answered: the key is no longer outstanding, a second answer resumes nothing
        assert await update_task(client, handle.task_id, {key: good}) == ack
        assert (await get_task(client, handle.task_id))["lastUpdatedAt"] == done["lastUpdatedAt"]
