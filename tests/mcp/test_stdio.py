"""End to end over stdio: ``python -m flowledger.mcp`` (the command ``flowledger mcp``
runs) driven by the SDK's own client."""

from __future__ import annotations

import asyncio
import json
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from flowledger.mcp.__main__ import main
from flowledger.storage import open_store
from flowledger.workflows.records.run import owner_lease_name
from flowledger.workflows.runtime.session import default_session_id

from .conftest import (
    BAD_IDS,
    READ_ONLY_NAMES,
    REPO,
    REVIEW_INPUT,
    TOOL_NAMES,
    bad_id_answer,
    error_text,
    payload,
    stdio_params,
    wait_status,
)


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_stdio_end_to_end(tmp_path: Path, mode: str) -> None:
    db = f"sqlite:///{tmp_path}/m.db"
    async with Client(stdio_params(db), mode=mode) as client:
        # tools/list: exactly the workflow and deploy tools, with closed-object schemas
        listed = await client.list_tools()
        assert [tool.name for tool in listed.tools] == TOOL_NAMES
        for tool in listed.tools:
            assert tool.description
            assert tool.input_schema["type"] == "object"
            assert tool.input_schema["additionalProperties"] is False

        definitions = payload(await client.call_tool("workflow_definition_list", {}))
        assert definitions["truncated"] is False
        assert [(d["name"], d["version"]) for d in definitions["definitions"]] == [
            ("document_review", "v1")
        ]
        assert definitions["definitions"][0]["resume_supported"] is True

        # start, get, list
        started = payload(
            await client.call_tool(
                "workflow_run_start",
                {
                    "definition_name": "document_review",
                    "definition_version": "v1",
                    "input": REVIEW_INPUT,
                },
            )
        )
        run_id = started["run_id"]
        assert started["definition_name"] == "document_review"
        assert started["run_status"] in {"running", "interrupted"}
        assert "session_id" not in started

        got = payload(await client.call_tool("workflow_run_get", {"run_id": run_id}))
        assert got["run_id"] == run_id
        listed_runs = payload(await client.call_tool("workflow_run_list", {"limit": 10}))
        assert [run["run_id"] for run in listed_runs["runs"]] == [run_id]

        # bad arguments are tool errors; the server keeps working
        unknown = error_text(
            await client.call_tool("workflow_run_get", {"run_id": run_id, "colour": "red"})
        )
        assert "unknown field" in unknown
        bad_id = error_text(await client.call_tool("workflow_run_get", {"run_id": "not-a-uuid"}))
        assert "run_id" in bad_id and "UUID" in bad_id
        missing = error_text(
            await client.call_tool("workflow_run_get", {"run_id": str(uuid.uuid4())})
        )
        assert "not found" in missing
        no_tool = error_text(await client.call_tool("workflow_run_explode", {}))
        assert "unknown tool" in no_tool
        bad_input = error_text(
            await client.call_tool(
                "workflow_run_start",
                {
                    "definition_name": "document_review",
                    "definition_version": "v1",
                    "input": {"title": "x"},
                },
            )
        )
        assert bad_input.startswith("workflow tools:")

        interrupted = await wait_status(client, run_id, "interrupted")
        assert interrupted["checkpoint_revision"] > 0

        # resume to completion
        resumed = payload(
            await client.call_tool(
                "workflow_run_resume", {"run_id": run_id, "resume": {"approved": True}}
            )
        )
        assert resumed["run_status"] == "completed"
        assert resumed["status_summary"] == "published"
        wrong = error_text(
            await client.call_tool(
                "workflow_run_resume", {"run_id": run_id, "resume": {"approved": True}}
            )
        )
        assert "interrupted" in wrong

        # history, paged with both cursors, equals the one-page history
        full = payload(
            await client.call_tool("workflow_run_history", {"run_id": run_id, "limit": 100})
        )
        assert "next_revision" not in full
        paged: list[dict[str, object]] = []
        cursor: dict[str, object] = {}
        used_event_cursor = False
        for _ in range(50):
            page = payload(
                await client.call_tool(
                    "workflow_run_history", {"run_id": run_id, "limit": 1, **cursor}
                )
            )
            assert len(page["entries"]) <= 1
            paged.extend(page["entries"])
            if "next_revision" not in page:
                break
            # a lossless reader passes both cursors back (the event one may be absent)
            cursor = {"after_revision": page["next_revision"]}
            if "next_event_id" in page:
                cursor["after_event_id"] = page["next_event_id"]
                used_event_cursor = True
        assert paged == full["entries"]
        assert used_event_cursor
        kinds = [entry["kind"] for entry in paged]
        assert kinds[0] == "run_started" and kinds[-1] == "run_completed"
        assert {"run_interrupted", "run_resumed", "vertex_completed"} <= set(kinds)
        assert len({entry["event_id"] for entry in paged}) == len(paged)

        # cancel a second run, then again (idempotent)
        second = payload(
            await client.call_tool(
                "workflow_run_start",
                {
                    "definition_name": "document_review",
                    "definition_version": "v1",
                    "input": REVIEW_INPUT,
                },
            )
        )
        cancelled = payload(
            await client.call_tool(
                "workflow_run_cancel", {"run_id": second["run_id"], "reason": "changed my mind"}
            )
        )
        assert cancelled == {
            "run_id": second["run_id"],
            "run_status": "cancelled",
            "idempotent": False,
        }
        again = payload(await client.call_tool("workflow_run_cancel", {"run_id": second["run_id"]}))
        assert again["idempotent"] is True
        final = payload(await client.call_tool("workflow_run_list", {}))
        statuses = {run["run_id"]: run["run_status"] for run in final["runs"]}
        assert statuses == {run_id: "completed", second["run_id"]: "cancelled"}


async def test_session_owned_elsewhere_is_served_read_only_with_a_notice(
    tmp_path: Path,
) -> None:
    """Usability 6: a second server on an owned session does not exit (the client would
    see only "Connection closed"): it serves the reading tools and says why."""
    db = f"sqlite:///{tmp_path}/m.db"
    async with Client(stdio_params(db)) as client:
        assert len((await client.list_tools()).tools) == len(TOOL_NAMES)
        async with Client(stdio_params(db)) as second:
            assert second.instructions is not None
            assert "This server is read-only because workflow session" in second.instructions
            assert "is owned by another process" in second.instructions
            tools = [tool.name for tool in (await second.list_tools()).tools]
            assert tools == READ_ONLY_NAMES
            refused = error_text(
                await second.call_tool(
                    "workflow_run_start",
                    {
                        "definition_name": "document_review",
                        "definition_version": "v1",
                        "input": REVIEW_INPUT,
                    },
                )
            )
            assert refused.startswith(
                "workflow tools: workflow_run_start is not available: this server is "
                "read-only because workflow session "
            )
            assert refused.endswith("or serve another --session")
            assert payload(await second.call_tool("workflow_run_list", {}))["runs"] == []
        # the first server is unaffected
        assert payload(await client.call_tool("workflow_run_list", {}))["runs"] == []


async def test_read_only_server_runs_beside_the_owner(tmp_path: Path) -> None:
    """A read-only server only reads, so it starts while another server owns the session,
    and sees that server's runs."""
    db = f"sqlite:///{tmp_path}/m.db"
    async with Client(stdio_params(db)) as owner:
        started = payload(
            await owner.call_tool(
                "workflow_run_start",
                {
                    "definition_name": "document_review",
                    "definition_version": "v1",
                    "input": {"title": "t", "document": "One. Two."},
                },
            )
        )
        async with Client(stdio_params(db, "--read-only")) as reader:
            names = {tool.name for tool in (await reader.list_tools()).tools}
            assert "workflow_run_start" not in names
            listed = payload(await reader.call_tool("workflow_run_list", {}))
            assert [r["run_id"] for r in listed["runs"]] == [started["run_id"]]
            history = payload(
                await reader.call_tool("workflow_run_history", {"run_id": started["run_id"]})
            )
            assert history["entries"][0]["kind"] == "run_started"


@pytest.mark.parametrize(
    ("options", "expected"),
    [
        (["--app", "no_such_module_xyz:catalog"], "cannot import"),
        (["--app", "flowledger:__version__"], "not a workflows.Catalog"),
        (["--session", "not-a-uuid"], "--session must be a UUID"),
        (["--http", "--host", "0.0.0.0"], "without tokens"),
        (["--tokens-file", "/nonexistent"], "needs --http"),
        (["--http", "--tokens-file", "/nonexistent/tokens"], "cannot read the tokens file"),
    ],
)
def test_bad_options_fail_with_one_line(
    tmp_path: Path,
    options: list[str],
    expected: str,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("FLOWLEDGER_MCP_TOKENS", raising=False)
    code = main(["--db", f"sqlite:///{tmp_path}/m.db", *options])
    captured = capsys.readouterr()
    assert code == 2
    assert captured.out == ""
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and expected in lines[0], captured.err
    assert lines[0].startswith("flowledger mcp: error: ")


async def test_sigterm_releases_the_session_at_once(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path}/m.db"
    server = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "flowledger.mcp",
        "--db",
        db,
        cwd=str(REPO),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    assert server.stdin is not None and server.stdout is not None
    ping = b'{"jsonrpc":"2.0","id":1,"method":"ping"}\n'
    server.stdin.write(ping)
    await server.stdin.drain()
    answer = await asyncio.wait_for(server.stdout.readline(), 30)  # serving: the lease is held
    assert b'"id":1' in answer
    server.terminate()
    _, stderr = await asyncio.wait_for(server.communicate(), 30)
    assert server.returncode == 0, stderr
    # Released, not left to run out its 15 s TTL: the lease is free now, and another server
    # owns the session at once (the deadline only catches a hang).
    async with open_store(db) as store:
        session_id = await default_session_id(store)
        status = await store.leases.status(owner_lease_name(session_id))
    assert not status.held
    async with asyncio.timeout(120), Client(stdio_params(db)) as client:
        assert len((await client.list_tools()).tools) == len(TOOL_NAMES)


async def test_requests_sent_before_stdin_closes_are_answered(tmp_path: Path) -> None:
    requests = [
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "pipe", "version": "0"},
            },
        },
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}},
        {
            "jsonrpc": "2.0",
            "id": 3,
            "method": "tools/call",
            "params": {"name": "workflow_run_list", "arguments": {"limit": 101}},
        },
    ]
    server = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "flowledger.mcp",
        "--db",
        f"sqlite:///{tmp_path}/m.db",
        cwd=str(REPO),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    piped = "".join(json.dumps(r) + "\n" for r in requests).encode()
    stdout, stderr = await asyncio.wait_for(server.communicate(piped), 30)
    assert server.returncode == 0, stderr
    replies = {reply["id"]: reply for reply in map(json.loads, stdout.decode().splitlines())}
    assert sorted(replies) == [1, 2, 3]
    assert len(replies[2]["result"]["tools"]) == len(TOOL_NAMES)
    assert replies[3]["result"]["isError"] is True  # limit 101 is out of range


class _Pipe:
    """A stdio server driven line by line: raw bytes in, decoded replies out."""

    def __init__(self, server: asyncio.subprocess.Process) -> None:
        self.server = server
        self.replies: dict[Any, list[dict[str, Any]]] = {}

    async def send(self, line: bytes) -> None:
        assert self.server.stdin is not None
        self.server.stdin.write(line + b"\n")
        await self.server.stdin.drain()

    async def reply(self, request_id: Any) -> dict[str, Any]:
        """The next reply for ``request_id`` (``None`` for id-less errors); a hang fails."""
        assert self.server.stdout is not None
        async with asyncio.timeout(60):
            while not self.replies.get(request_id):
                line = await self.server.stdout.readline()
                assert line, "the server closed stdout"
                reply = json.loads(line)
                self.replies.setdefault(reply.get("id"), []).append(reply)
        return self.replies[request_id].pop(0)


async def _pipe_server(tmp_path: Path) -> _Pipe:
    server = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "flowledger.mcp",
        "--db",
        f"sqlite:///{tmp_path}/m.db",
        cwd=str(REPO),
        limit=1 << 20,  # one line is one message; tools/list is over asyncio's 64 KiB default
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    pipe = _Pipe(server)
    initialize = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "pipe", "version": "0"},
        },
    }
    await pipe.send(json.dumps(initialize).encode())
    assert "result" in await pipe.reply(1)
    await pipe.send(b'{"jsonrpc":"2.0","method":"notifications/initialized"}')
    return pipe


async def _close(pipe: _Pipe) -> None:
    assert pipe.server.stdin is not None
    pipe.server.stdin.close()
    await asyncio.wait_for(pipe.server.wait(), 60)


def _call(request_id: int, arguments: str) -> bytes:
    return (
        f'{{"jsonrpc":"2.0","id":{request_id},"method":"tools/call",'
        f'"params":{{"name":"workflow_run_list","arguments":{arguments}}}}}'
    ).encode()


async def test_every_unreadable_line_is_answered(tmp_path: Path) -> None:
    """Reliability II item 5: lines the SDK cannot parse get a JSON-RPC error with their id
    (or null), never silence; the server keeps serving."""
    pipe = await _pipe_server(tmp_path)
    try:
        cases: list[tuple[bytes, Any, int, str]] = [
            (_call(10, '{"after":"\\ud800"}'), 10, -32700, "Parse error"),
            (_call(11, '{"limit":' + "7" * 5000 + "}"), 11, -32700, "too many digits"),
            (_call(12, '{"x":' + "[" * 250 + "]" * 250 + "}"), 12, -32700, "Parse error"),
            (_call(13, '{"x":' + "[" * 5000 + "]" * 5000 + "}"), 13, -32700, "Parse error"),
            (_call(14, '{"after":"x"}').replace(b'"x"', b'"\xff"'), 14, -32700, "not UTF-8"),
            (b'{"jsonrpc":"2.0","id":15}', 15, -32600, "Invalid Request"),
            (
                b'{"jsonrpc":"2.0","id":"s-16","method":"tools/list","params":{',
                "s-16",
                -32700,
                "Parse error",
            ),
            (b"{not json", None, -32700, "Parse error"),
            (b"[1, 2]", None, -32600, "Invalid Request"),
        ]
        for line, request_id, code, fragment in cases:
            await pipe.send(line)
            reply = await pipe.reply(request_id)
            assert reply["error"]["code"] == code, (request_id, reply)
            assert fragment in reply["error"]["message"], (request_id, reply)
        await pipe.send(b"   ")  # a blank line is no message: nothing to answer
        await pipe.send(b'{"jsonrpc":"2.0","id":20,"method":"tools/list","params":{}}')
        assert len((await pipe.reply(20))["result"]["tools"]) == len(TOOL_NAMES)
        assert pipe.replies == {None: [], 1: [], **{c[1]: [] for c in cases}, 20: []}
    finally:
        await _close(pipe)


async def test_repeated_json_keys_are_refused_with_their_pointer(tmp_path: Path) -> None:
    """Reliability II item 6: ``{"n":3,"n":4}`` over stdio starts nothing; the error names
    the key's JSON pointer and the request's id."""
    pipe = await _pipe_server(tmp_path)
    try:
        start = (
            '{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"workflow_run_start",'
            '"arguments":{"definition_name":"document_review","definition_version":"v1",'
            '"input":{"title":"t","document":"d","title":"u"}}}}'
        )
        await pipe.send(start.encode())
        assert (await pipe.reply(2))["error"] == {
            "code": -32700,
            "message": "Parse error: duplicate key 'title' at /params/arguments/input/title",
        }
        await pipe.send(_call(3, "{}"))
        listed = await pipe.reply(3)
        assert json.loads(listed["result"]["content"][0]["text"])["runs"] == []
    finally:
        await _close(pipe)


async def test_a_request_with_a_bad_id_gets_invalid_request(tmp_path: Path) -> None:
    """Issue #25 item 9d: a request whose id is an object, array, fraction, boolean or
    null was taken for a notification and never answered; now each one is answered
    -32600 with id null, and the request (a run start) did nothing."""
    pipe = await _pipe_server(tmp_path)
    try:
        for bad, kind in BAD_IDS:
            start = (
                f'{{"jsonrpc":"2.0","id":{bad},"method":"tools/call","params":'
                '{"name":"workflow_run_start","arguments":{"definition_name":"document_review",'
                '"definition_version":"v1","input":{"title":"t","document":"d"}}}}'
            )
            await pipe.send(start.encode())
            assert await pipe.reply(None) == bad_id_answer(kind), bad
        await pipe.send(_call(3, "{}"))
        listed = await pipe.reply(3)
        assert json.loads(listed["result"]["content"][0]["text"])["runs"] == []
        assert pipe.replies == {None: [], 1: [], 3: []}
    finally:
        await _close(pipe)
