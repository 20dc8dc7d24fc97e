"""Who answered a pause, over MCP (issue #31): a resume sent over streamable HTTP is
recorded as ``mcp-http`` in the token's session, one sent over stdio as ``mcp-stdio``,
each with its payload, which no tool result or history entry carries."""

from __future__ import annotations

import json
from pathlib import Path

from mcp import Client

from flowledger.storage import open_store
from flowledger.workflows.records.answers import Answer, AnswerStore
from flowledger.workflows.runtime.session import default_session_id

from .conftest import REVIEW_INPUT, http_client, http_server, payload, stdio_params, wait_status

TOKEN = "token-a-0123456789abcdef"
SESSION = "7c9e6679-7425-40de-944b-e07fc1f90ae7"
START = {"definition_name": "document_review", "definition_version": "v1", "input": REVIEW_INPUT}
ANSWER = {"approved": True, "note": "answered over MCP"}


async def _pause_and_answer(client: Client) -> str:
    run_id = str(payload(await client.call_tool("workflow_run_start", START))["run_id"])
    await wait_status(client, run_id, "interrupted")
    resumed = payload(
        await client.call_tool("workflow_run_resume", {"run_id": run_id, "resume": ANSWER})
    )
    assert ANSWER["note"] not in json.dumps(resumed)
    history = payload(await client.call_tool("workflow_run_history", {"run_id": run_id}))
    assert ANSWER["note"] not in json.dumps(history)
    return run_id


async def _answers(db: str, session_id: str | None, run_id: str) -> list[Answer]:
    async with open_store(db) as store:
        session = session_id or await default_session_id(store)
        found = await AnswerStore(store.kv).get(session, run_id)
    assert found is not None
    return found


async def test_a_resume_over_http_is_recorded_as_mcp_http(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path}/h.db"
    async with (
        http_server(db, tokens={TOKEN: SESSION}) as url,
        http_client(url, TOKEN) as client,
    ):
        run_id = await _pause_and_answer(client)
    [answer] = await _answers(db, SESSION, run_id)
    assert (answer.kind, answer.transport, answer.session_id) == ("request", "mcp-http", SESSION)
    assert answer.payload == ANSWER


async def test_a_resume_over_stdio_is_recorded_as_mcp_stdio(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path}/s.db"
    async with Client(stdio_params(db)) as client:
        run_id = await _pause_and_answer(client)
    [answer] = await _answers(db, None, run_id)
    assert (answer.kind, answer.transport) == ("request", "mcp-stdio")
    assert answer.payload == ANSWER
