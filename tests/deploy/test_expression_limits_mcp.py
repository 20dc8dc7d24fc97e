"""Bounded evaluation through the front door: over the HTTP MCP server with two bearer
tokens (one session each, through the SDK client), tenant A saves and runs an artifact
whose `set` node evaluates an exploding expression (``to_string`` of 22 doublings). The
run fails with the typed limit error; tenant B's requests issued while A's evaluation is
running are answered meanwhile, because evaluation runs on a worker thread, not on the
event loop serving both sessions.

The evaluation is made observable (and held) by wrapping `Template.evaluate`: when it
evaluates A's node, it says so and waits until B's answers have arrived. Were it on the
event loop, B could not be answered before it returned: the wait gives up after a
deadline meant only to catch that hang, and the test fails on the flag, not on time."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

import pytest

from flowledger.deploy.artifacts.expressions import Template
from flowledger.deploy.artifacts.limits import MAX_BUILT_VALUES
from flowledger.deploy.runs.offload import THREAD_NAME_PREFIX
from flowledger.mcp import session_for_token

from ..mcp.conftest import http_client, http_server, payload

TOKEN_A = "token-a-limits-0123456789"
TOKEN_B = "token-b-limits-0123456789"
# Only to turn a blocked event loop into a failure instead of a hang; shorter than the
# HTTP client's 30 s timeout, so that failure is the assertion below, not a timeout.
HANG: float = 25.0

# 22 doublings of one character: 4,194,304 leaves as JSON text, 2**22 list nodes built
# by the unbounded interpreter.
EXPLODING = "input.s" + " | [@, @]" * 22 + " | to_string(@)"
ARTIFACT = {
    "format": "flowledger.artifact/v1",
    "name": "explode",
    "version": "1",
    "input_schema": {
        "type": "object",
        "additionalProperties": False,
        "required": ["s"],
        "properties": {"s": {"type": "string"}},
    },
    "output_schema": {
        "type": "object",
        "additionalProperties": False,
        "properties": {"blob": {"type": "string"}},
    },
    "state": {"blob": {}},
    "start": "boom",
    "nodes": {
        "boom": {"kind": "set", "assign": {"blob": f"${{ {EXPLODING} }}"}, "next": "done"},
        "done": {"kind": "end", "outcome": "done", "output": {"blob": "${ state.blob }"}},
    },
}
DEPLOYMENT = {
    "format": "flowledger.deployment/v1",
    "name": "explode_dep",
    "artifact": {"name": "explode", "version": "1"},
}
HELD_PLACE = "nodes.boom.assign.blob"


async def test_an_exploding_expression_fails_its_run_and_never_holds_up_another_tenant(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    evaluating = threading.Event()  # A's node is being evaluated (on some thread)
    b_answered = threading.Event()  # B's calls have been answered
    seen: dict[str, Any] = {}
    original = Template.evaluate

    def held(self: Template, scope: Any, budget: Any = None) -> Any:
        if self.place == HELD_PLACE and not evaluating.is_set():
            seen["thread"] = threading.current_thread().name
            seen["on_loop"] = _on_a_running_loop()
            evaluating.set()
            seen["b_answered_meanwhile"] = b_answered.wait(HANG)
        return original(self, scope, budget)

    monkeypatch.setattr(Template, "evaluate", held)
    tokens = {TOKEN_A: session_for_token(TOKEN_A), TOKEN_B: session_for_token(TOKEN_B)}
    async with (
        http_server(f"sqlite:///{tmp_path / 'limits.db'}", tokens=tokens) as url,
        http_client(url, TOKEN_A) as a,
        http_client(url, TOKEN_B) as b,
    ):
        payload(await a.call_tool("artifact_save", {"document": ARTIFACT}))
        payload(await a.call_tool("deployment_save", {"document": DEPLOYMENT}))
        run = asyncio.create_task(
            a.call_tool(
                "run_deployment",
                {"deployment": "explode_dep", "input": {"s": "x"}, "wait_seconds": 120},
            )
        )
        assert await asyncio.to_thread(evaluating.wait, HANG), "A's node was never evaluated"

        # A's evaluation is under way (held): B is answered all the same.
        definitions = payload(await b.call_tool("workflow_definition_list", {}))
        artifacts = payload(await b.call_tool("artifact_list", {}))
        b_answered.set()
        assert "explode" not in str(definitions)
        assert artifacts["artifacts"] == []

        answer = await run
    assert seen["b_answered_meanwhile"] is True, "B was not answered while A evaluated"
    assert seen["on_loop"] is False
    assert seen["thread"].startswith(THREAD_NAME_PREFIX)
    failed = payload(answer)
    assert failed["status"] == "failed", failed
    error = failed["error"]
    assert error["type"] == "ExpressionLimitError"
    assert error["message"].startswith(f"{HELD_PLACE}: evaluation stopped at a multi-select list")
    assert f"more than {MAX_BUILT_VALUES:,} JSON values" in error["message"]


def _on_a_running_loop() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True
