"""Pauses answered through the client's own elicitation (`flowledger.mcp.elicit`), through
the SDK client over streamable HTTP (2026-07-28): its elicitation callback is the person;
the SDK drives the multi round-trip (``InputRequiredResult``, retry with the response and
the sealed ``requestState``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx2
import mcp_types as types
import pytest
from mcp.client.context import ClientRequestContext
from mcp.shared.exceptions import MCPError

from flowledger.mcp import session_for_token
from flowledger.mcp.forms import form_schema

from .conftest import APP, http_client, http_server, payload, wait_status

START = {"definition_name": "relay", "definition_version": "v1", "input": {"secret": "s-1"}}
TOKEN_A = "elicit-token-a-0123456789"
TOKEN_B = "elicit-token-b-0123456789"
NOTE_FORM = {"type": "object", "properties": {"note": {"type": "string"}}}


class Person:
    """An elicitation callback answering with ``answers`` in turn, recording each form."""

    def __init__(self, *answers: types.ElicitResult) -> None:
        self.answers = list(answers)
        self.asked: list[types.ElicitRequestFormParams] = []

    async def __call__(
        self, context: ClientRequestContext, params: types.ElicitRequestParams
    ) -> types.ElicitResult:
        assert isinstance(params, types.ElicitRequestFormParams)
        self.asked.append(params)
        return self.answers.pop(0)


def accept(content: dict[str, Any]) -> types.ElicitResult:
    return types.ElicitResult(action="accept", content=content)


async def paused_run(client: Any) -> str:
    started = payload(await client.call_tool("workflow_run_start", START))
    run_id: str = started["run_id"]
    return run_id


async def test_a_pause_is_answered_through_elicitation_after_an_invalid_answer(
    tmp_path: Path,
) -> None:
    person = Person(accept({"note": 5}), accept({"note": "ship it"}))
    async with (
        http_server(f"sqlite:///{tmp_path}/e.db", app=APP) as url,
        http_client(url, None) as plain,
        http_client(url, None, elicitation_callback=person) as client,
    ):
        run_id = await paused_run(plain)
        await wait_status(plain, run_id, "interrupted")
        done = payload(await client.call_tool("workflow_run_get", {"run_id": run_id}))
        assert done["run_id"] == run_id
        final = await wait_status(plain, run_id, "completed")
        assert final["run_status"] == "completed"
        first, second = person.asked
        assert first.message == "deliver?"
        assert first.requested_schema == NOTE_FORM
        assert second.message.startswith("workflow tools: invalid resume")
        assert second.message.endswith("\n\ndeliver?")
        history = payload(await plain.call_tool("workflow_run_history", {"run_id": run_id}))
        assert "ship it" not in json.dumps(history)  # state stays out of the history


async def test_decline_leaves_the_run_paused(tmp_path: Path) -> None:
    person = Person(types.ElicitResult(action="decline"))
    async with (
        http_server(f"sqlite:///{tmp_path}/e.db", app=APP) as url,
        http_client(url, None) as plain,
        http_client(url, None, elicitation_callback=person) as client,
    ):
        run_id = await paused_run(plain)
        before = await wait_status(plain, run_id, "interrupted")
        answer = payload(await client.call_tool("workflow_run_get", {"run_id": run_id}))
        assert answer["run_status"] == "interrupted"
        after = payload(await plain.call_tool("workflow_run_get", {"run_id": run_id}))
        assert after["checkpoint_revision"] == before["checkpoint_revision"]


async def test_clients_without_elicitation_get_todays_answers(tmp_path: Path) -> None:
    person = Person()
    async with (
        http_server(f"sqlite:///{tmp_path}/e.db", app=APP) as url,
        http_client(url, None) as plain,
        http_client(url, None, mode="legacy", elicitation_callback=person) as legacy,
    ):
        run_id = await paused_run(plain)
        await wait_status(plain, run_id, "interrupted")
        for client in (plain, legacy):
            answer = payload(await client.call_tool("workflow_run_get", {"run_id": run_id}))
            assert answer["pending"]["resume_schema"]["properties"] == {"note": {"type": "string"}}
        assert person.asked == []


async def _input_required(client: Any, run_id: str) -> types.InputRequiredResult:
    result = await client.session.call_tool(
        "workflow_run_get", {"run_id": run_id}, allow_input_required=True
    )
    assert isinstance(result, types.InputRequiredResult), result
    return result


async def test_tampered_foreign_and_malformed_answers_are_protocol_errors(tmp_path: Path) -> None:
    tokens = {TOKEN_A: session_for_token(TOKEN_A), TOKEN_B: session_for_token(TOKEN_B)}
    person = Person()
    async with (
        http_server(f"sqlite:///{tmp_path}/e.db", tokens=tokens, app=APP) as url,
        http_client(url, TOKEN_A) as plain,
        http_client(url, TOKEN_A, elicitation_callback=person) as a,
        http_client(url, TOKEN_B, elicitation_callback=person) as b,
    ):
        run_id = await paused_run(plain)
        before = await wait_status(plain, run_id, "interrupted")
        asked = await _input_required(a, run_id)
        assert asked.request_state is not None and asked.input_requests is not None
        state = asked.request_state
        good = {"resume": accept({"note": "x"})}
        tampered = state[:-4] + ("AAAA" if not state.endswith("AAAA") else "BBBB")
        attempts: list[tuple[Any, dict[str, Any], dict[str, Any], str]] = [
            (a, {"run_id": run_id}, good, tampered),  # tampered state
            (b, {"run_id": run_id}, good, state),  # another session's server
            (a, {"run_id": run_id.upper()}, good, state),  # bound to the arguments
            (a, {"run_id": run_id}, {}, state),  # no answer
            (a, {"run_id": run_id}, {"other": accept({"note": "x"})}, state),
        ]
        for index, (client, arguments, responses, sent) in enumerate(attempts):
            with pytest.raises(MCPError) as raised:
                await client.session.call_tool(
                    "workflow_run_get",
                    arguments,
                    input_responses=responses,
                    request_state=sent,
                    allow_input_required=True,
                )
            assert raised.value.error.code == types.INVALID_PARAMS
            if index < 3:  # the SDK's sealed state: one frozen message, the reason logged
                assert raised.value.error.message == "Invalid or expired requestState"
            else:
                assert "'resume'" in raised.value.error.message
        after = payload(await plain.call_tool("workflow_run_get", {"run_id": run_id}))
        assert after["run_status"] == "interrupted"
        assert after["checkpoint_revision"] == before["checkpoint_revision"]
        # a state answered once resumes nothing twice
        answered = await a.session.call_tool(
            "workflow_run_get",
            {"run_id": run_id},
            input_responses=good,
            request_state=state,
            allow_input_required=True,
        )
        assert isinstance(answered, types.CallToolResult) and not answered.is_error
        done = await wait_status(plain, run_id, "completed")
        again = await a.session.call_tool(
            "workflow_run_get",
            {"run_id": run_id},
            input_responses={"resume": accept({"note": "twice"})},
            request_state=state,
            allow_input_required=True,
        )
        assert isinstance(again, types.CallToolResult)
        assert payload(again)["checkpoint_revision"] == done["checkpoint_revision"]
        assert person.asked == []


@pytest.mark.parametrize(
    ("schema", "form"),
    [
        (
            {
                "type": "object",
                "properties": {
                    "ok": {"type": "boolean", "description": "approve?"},
                    "n": {"type": "integer", "minimum": 1},
                    "level": {"type": "string", "enum": ["low", "high"]},
                },
                "required": ["ok"],
                "additionalProperties": False,
            },
            {
                "type": "object",
                "properties": {
                    "ok": {"type": "boolean", "description": "approve?"},
                    "n": {"type": "integer", "minimum": 1},
                    "level": {"type": "string", "enum": ["low", "high"]},
                },
                "required": ["ok"],
            },
        ),
        ({"type": "object", "properties": {"nested": {"type": "object"}}}, None),
        ({"type": "object", "properties": {"tags": {"type": "array"}}}, None),
        ({"type": "object", "properties": {"s": {"type": "string", "pattern": "^a"}}}, None),
        ({"type": "object", "properties": {"n": {"type": "integer", "enum": [1, 2]}}}, None),
        ({"type": "object", "properties": {}}, None),
        ({"type": "object", "properties": {"a": {"type": "string"}}, "required": ["b"]}, None),
        ({"type": "string"}, None),
        (None, None),
    ],
)
def test_form_schema_is_the_elicitation_subset(schema: object, form: object) -> None:
    assert form_schema(schema) == form


async def _raw_call(url: str, arguments: dict[str, Any], extra: dict[str, Any]) -> Any:
    """One raw 2026-07-28 ``tools/call`` of ``workflow_run_get`` (JSON-RPC over HTTP)."""
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {
            "name": "workflow_run_get",
            "arguments": arguments,
            "_meta": {
                "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "1"},
                "io.modelcontextprotocol/clientCapabilities": {"elicitation": {"form": {}}},
            },
            **extra,
        },
    }
    headers = {
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": "2026-07-28",
        "Mcp-Method": "tools/call",
        "Mcp-Name": "workflow_run_get",
    }
    async with httpx2.AsyncClient(timeout=30) as http:
        answer = await http.post(url, json=body, headers=headers)
    return answer.json()


async def test_a_malformed_elicitation_response_is_a_protocol_error(tmp_path: Path) -> None:
    """A response that is no elicitation result never reaches the run: raw JSON-RPC
    (the SDK client refuses to send most of them), and through the SDK a response of
    another kind (a roots list)."""
    async with (
        http_server(f"sqlite:///{tmp_path}/e.db", app=APP) as url,
        http_client(url, None) as plain,
        http_client(url, None, elicitation_callback=Person()) as client,
    ):
        run_id = await paused_run(plain)
        before = await wait_status(plain, run_id, "interrupted")
        arguments = {"run_id": run_id}
        asked = await _raw_call(url, arguments, {})
        assert asked["result"]["resultType"] == "input_required", asked
        state = asked["result"]["requestState"]
        form = asked["result"]["inputRequests"]["resume"]
        assert form["method"] == "elicitation/create"
        assert form["params"]["requestedSchema"] == NOTE_FORM
        for response in ({"action": "maybe"}, {"action": "accept", "content": [1]}, "yes"):
            extra = {"inputResponses": {"resume": response}, "requestState": state}
            refused = await _raw_call(url, arguments, extra)
            assert refused["error"]["code"] == types.INVALID_PARAMS, refused
        with pytest.raises(MCPError) as raised:
            await client.session.call_tool(
                "workflow_run_get",
                arguments,
                input_responses={"resume": types.ListRootsResult(roots=[])},
                request_state=state,
                allow_input_required=True,
            )
        assert raised.value.error.code == types.INVALID_PARAMS
        assert "not an elicitation result" in raised.value.error.message
        after = payload(await plain.call_tool("workflow_run_get", {"run_id": run_id}))
        assert after["checkpoint_revision"] == before["checkpoint_revision"]
        assert after["run_status"] == "interrupted"
