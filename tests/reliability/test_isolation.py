"""Isolation: a session never sees another session's runs, inputs or history through the
tools, the CLI (``--session``) or the MCP HTTP server (one session per token); odd or
traversal-like names never reach storage; private values (input, state, interrupt info,
resume payloads, error text) never appear in activities, tool results or INFO logs."""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from flowledger import flow
from flowledger.cli import app
from flowledger.examples import review
from flowledger.storage import Store, open_store
from flowledger.storage.names import validate_name
from flowledger.tools import ToolError, WorkflowTools
from flowledger.workflows.authoring.definition import TypedDefinition
from flowledger.workflows.authoring.metadata import Metadata, VertexMetadata
from flowledger.workflows.runtime.supervisor import Supervisor
from tests.mcp.conftest import APP, error_text, http_client, http_server, payload, wait_status
from tests.tools.conftest import (
    RESUME_SENTINEL,
    SENTINEL,
    STATE_SENTINEL,
    noter_definition,
)
from tests.workflows.conftest import Session, build_session

from ._harness import tools_for
from .faults import FaultyStore, faulty

ERROR_SENTINEL = "error_text-sentinel-77f3"
ODD_IDS = [
    "../x",
    "a/../b",
    "..",
    "/etc/passwd",
    "A" * 36,
    "RUN",
    "run\x00id",
    "00000000-0000-0000-0000-000000000000",
    "x" * 5000,
    "sessions/other/workflows/runs/1",
    "%2e%2e%2f",
    "",
]


@dataclass
class Pair:
    store: Store
    faults: FaultyStore
    a: Session
    b: Session
    sup_a: Supervisor
    sup_b: Supervisor

    @property
    def tools_a(self) -> WorkflowTools:
        return tools_for(self.a, self.sup_a)

    @property
    def tools_b(self) -> WorkflowTools:
        return tools_for(self.b, self.sup_b)


@pytest.fixture(params=["memory", "sqlite"])
async def pair(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Pair]:
    url = "memory://" if request.param == "memory" else f"sqlite:///{tmp_path}/iso.db"
    async with open_store(url) as real:
        store, faults = faulty(real)
        a, b = build_session(store), build_session(store)
        for session in (a, b):
            session.catalog.register(noter_definition(session.checkpoints))
        sup_a, sup_b = a.supervisor(), b.supervisor()
        await sup_a.activate()
        await sup_b.activate()
        try:
            yield Pair(store, faults, a, b, sup_a, sup_b)
        finally:
            await sup_a.shutdown()
            await sup_b.shutdown()


async def start(tools: WorkflowTools, name: str, document: dict[str, Any]) -> str:
    result = await tools.call(
        "workflow_run_start",
        {"definition_name": name, "definition_version": "v1", "input": document},
    )
    return str(result["run_id"])


async def snapshot(store: Store, session: Session) -> dict[str, Any]:
    """Every KV revision, blob and journal tip of ``session``."""
    prefix = f"sessions/{session.session_id}/"
    kv = {key: (await store.kv.get(key)).revision for key in await store.kv.keys(prefix)}
    blobs = await store.blobs.list(prefix)
    logs = {name: await store.ledger.tip(name) for name in await store.ledger.names(prefix)}
    return {"kv": kv, "blobs": blobs, "logs": logs}


async def test_tools_of_one_session_never_reach_another(pair: Pair) -> None:
    """Tools bound to A, given B's run ids, answer "not found" for get, resume, cancel and
    history, refuse B's run as a parent, list only A's runs - and change nothing of B."""
    b_asker = await start(pair.tools_b, "asker", {"count": 0})
    b_counter = await start(pair.tools_b, "counter", {"count": 0})
    a_run = await start(pair.tools_a, "counter", {"count": 0})
    assert await pair.sup_a.wait_idle() is None
    assert await pair.sup_b.wait_idle() is None
    before = await snapshot(pair.store, pair.b)
    for foreign in (b_asker, b_counter):
        calls: list[tuple[str, dict[str, Any]]] = [
            ("workflow_run_get", {"run_id": foreign}),
            ("workflow_run_resume", {"run_id": foreign, "resume": {"increment": 1}}),
            ("workflow_run_cancel", {"run_id": foreign}),
            ("workflow_run_history", {"run_id": foreign}),
            (
                "workflow_run_start",
                {
                    "definition_name": "counter",
                    "definition_version": "v1",
                    "input": {"count": 0},
                    "parent_run_id": foreign,
                },
            ),
        ]
        for name, arguments in calls:
            with pytest.raises(ToolError) as caught:
                await pair.tools_a.call(name, arguments)
            assert "not found" in str(caught.value), (name, str(caught.value))
    listed = await pair.tools_a.call("workflow_run_list", {})
    assert [run["run_id"] for run in listed["runs"]] == [a_run]
    assert await snapshot(pair.store, pair.b) == before
    assert (await pair.tools_b.call("workflow_run_get", {"run_id": b_asker}))[
        "run_status"
    ] == "interrupted"


async def test_inputs_are_session_private(pair: Pair) -> None:
    """The same input document in two sessions is stored twice, each under its own
    session's prefix; A's input store cannot read B's reference."""
    b_run = await start(pair.tools_b, "counter", {"count": 3})
    await start(pair.tools_a, "counter", {"count": 3})
    record = await pair.b.registry.get(pair.b.session_id, b_run)
    assert record.input.key.startswith(f"sessions/{pair.b.session_id}/")
    a_keys = await pair.store.blobs.list(f"sessions/{pair.a.session_id}/")
    b_keys = await pair.store.blobs.list(f"sessions/{pair.b.session_id}/")
    assert len(a_keys) == len(b_keys) == 1 and a_keys != b_keys
    with pytest.raises(Exception) as caught:
        await pair.a.inputs.get(pair.a.session_id, record.input)
    assert type(caught.value).__name__ in ("CorruptRecordError", "NotFoundError")


async def test_odd_names_never_reach_storage(pair: Pair) -> None:
    """Traversal-like, upper-case, NUL-carrying, empty and very long ids and names are
    refused with a typed error before any storage call; every name storage ever saw is a
    valid storage name."""
    await start(pair.tools_a, "asker", {"count": 0})
    assert await pair.sup_a.wait_idle() is None
    pair.faults.names.clear()
    for odd in ODD_IDS:
        calls: list[tuple[str, dict[str, Any]]] = [
            ("workflow_run_get", {"run_id": odd}),
            ("workflow_run_resume", {"run_id": odd, "resume": {"increment": 1}}),
            ("workflow_run_cancel", {"run_id": odd}),
            ("workflow_run_history", {"run_id": odd}),
            ("workflow_run_list", {"after": odd}),
            (
                "workflow_run_start",
                {"definition_name": odd, "definition_version": "v1", "input": {"count": 0}},
            ),
            (
                "workflow_run_start",
                {"definition_name": "counter", "definition_version": odd, "input": {"count": 0}},
            ),
            (
                "workflow_run_start",
                {
                    "definition_name": "counter",
                    "definition_version": "v1",
                    "input": {"count": 0},
                    "parent_run_id": odd,
                },
            ),
        ]
        for name, arguments in calls:
            if odd == "" and ("after" in arguments or "parent_run_id" in arguments):
                continue  # "" means "the first page" / "no parent"
            with pytest.raises(ToolError):
                await pair.tools_a.call(name, arguments)
        for call in (pair.sup_a.resume(odd, b"{}"), pair.sup_a.cancel(odd)):
            with pytest.raises(Exception):  # noqa: B017 - any refusal, as long as it is early
                await call
        with pytest.raises((ValueError, TypeError, ToolError)):
            WorkflowTools(
                odd,
                catalog=pair.a.catalog,
                registry=pair.a.registry,
                inputs=pair.a.inputs,
                supervisor=pair.sup_a,
            )
        with pytest.raises((ValueError, TypeError)):
            Supervisor(
                odd,
                catalog=pair.a.catalog,
                registry=pair.a.registry,
                inputs=pair.a.inputs,
                leases=pair.store.leases,
                publisher=pair.a.journal,
            )
    assert pair.faults.names == [], "an odd id reached storage"
    with pytest.raises(ToolError, match="not found"):  # the recorder is live
        await pair.tools_a.call("workflow_run_get", {"run_id": str(uuid.uuid4())})
    assert pair.faults.names
    for name in pair.faults.names:
        validate_name(name)
        assert ".." not in name and "\x00" not in name
    for odd in ODD_IDS:
        if odd:
            assert not any(odd in name for name in pair.faults.names), odd


def erring_definition(store: flow.CheckpointStore) -> TypedDefinition[dict[str, Any]]:
    """One vertex that fails with private text in its error (an errored interrupt)."""
    graph: flow.Graph[dict[str, Any]] = flow.Graph("erring", state=dict)

    @graph.vertex("boom")
    async def boom(state: dict[str, Any]) -> dict[str, Any]:
        raise RuntimeError(ERROR_SENTINEL + str(state))

    runner = graph.compile(entry="boom", finish="boom", store=store)
    metadata = Metadata(
        "erring",
        "v1",
        description="fails",
        input_schema={
            "type": "object",
            "additionalProperties": False,
            "properties": {"note": {"type": "string"}},
        },
        resume_schema={
            "type": "object",
            "additionalProperties": False,
            "properties": {"memo": {"type": "string"}},
        },
        vertices=[VertexMetadata("explode", "boom")],
    )
    return TypedDefinition(metadata, runner)


async def test_private_values_never_leak(pair: Pair, caplog: pytest.LogCaptureFixture) -> None:
    """Input, state, interrupt info, resume payloads and error text never appear in
    activities, tool results (start, get, list, resume, cancel, history) or logs at INFO."""
    caplog.set_level(logging.INFO)
    pair.a.catalog.register(erring_definition(pair.a.checkpoints))
    tools = pair.tools_a
    results: list[Any] = []
    noted = await tools.call(
        "workflow_run_start",
        {
            "definition_name": "noter",
            "definition_version": "v1",
            "input": {"count": 1, "note": SENTINEL},
        },
    )
    erring = await tools.call(
        "workflow_run_start",
        {"definition_name": "erring", "definition_version": "v1", "input": {"note": SENTINEL}},
    )
    results += [noted, erring]
    assert await pair.sup_a.wait_idle() is None
    # The one place the error text goes: workflow_run_get's pending, for the session that
    # owns the run (and whoever resumes it), never history, listings or logs.
    paused = await tools.call("workflow_run_get", {"run_id": erring["run_id"]})
    assert ERROR_SENTINEL in paused.pop("pending")["error"]["message"]
    results.append(paused)
    results.append(
        await tools.call(
            "workflow_run_resume", {"run_id": noted["run_id"], "resume": {"memo": RESUME_SENTINEL}}
        )
    )
    results.append(
        await tools.call(
            "workflow_run_resume",
            {"run_id": erring["run_id"]},  # a retry takes no payload
        )
    )
    results.append(
        await tools.call("workflow_run_cancel", {"run_id": erring["run_id"], "reason": "done"})
    )
    retried = results[-2]
    assert retried.pop("pending")["kind"] == "error"  # it raised again: still paused
    for run_id in (noted["run_id"], erring["run_id"]):
        results.append(await tools.call("workflow_run_get", {"run_id": run_id}))
        results.append(await tools.call("workflow_run_history", {"run_id": run_id}))
    results.append(await tools.call("workflow_run_list", {}))
    activities = [
        item.activity
        for run_id in (noted["run_id"], erring["run_id"])
        for item in await pair.a.journal.records(pair.a.session_id, run_id)
    ]
    assert {str(a.kind) for a in activities} >= {"run_started", "run_interrupted"}
    texts = {
        "tool results": json.dumps(results),
        "activities": repr(activities),
        "logs": "\n".join(
            record.getMessage() + repr(record.args) + str(record.exc_info)
            for record in caplog.records
        ),
    }
    for sentinel in (SENTINEL, STATE_SENTINEL, RESUME_SENTINEL, ERROR_SENTINEL):
        for where, text in texts.items():
            assert sentinel not in text, f"{sentinel} leaked into {where}"
    # the values are really stored (the checks above are not vacuous)
    record = await pair.a.registry.get(pair.a.session_id, noted["run_id"])
    latest = await pair.a.checkpoints.latest(record.graph_run_id)
    assert latest.state is not None and latest.state["memo"] == RESUME_SENTINEL


async def test_a_raising_summarizer_does_not_leak_state_into_logs(
    pair: Pair, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    graph: flow.Graph[dict[str, Any]] = flow.Graph("summed", state=dict)

    @graph.vertex("only")
    async def only(state: dict[str, Any]) -> dict[str, Any]:
        return {}

    def summarize(state: dict[str, Any]) -> str:
        raise ValueError(f"cannot summarise {state['note']}")

    runner = graph.compile(entry="only", finish="only", store=pair.a.checkpoints)
    metadata = Metadata(
        "summed",
        "v1",
        description="summarizer fails",
        input_schema={
            "type": "object",
            "additionalProperties": False,
            "properties": {"note": {"type": "string"}},
        },
        vertices=[VertexMetadata("only", "only")],
    )
    pair.a.catalog.register(TypedDefinition(metadata, runner, summarizer=summarize))
    await start(pair.tools_a, "summed", {"note": SENTINEL})
    assert await pair.sup_a.wait_idle() is None
    assert any("summarizer" in r.getMessage() for r in caplog.records)  # it was logged
    text = caplog.text + "".join(
        logging.Formatter().formatException(r.exc_info) for r in caplog.records if r.exc_info
    )
    assert SENTINEL not in text


# -- CLI and MCP ----------------------------------------------------------------------------

REVIEW_INPUT = {"title": "Notes", "document": "The first sentence. It mentions 3 numbers."}


def test_cli_session_option_isolates_sessions(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``--session A`` never shows or acts on session B's runs: show, history, resume and
    cancel of B's run fail with a one-line "not found" error, list is empty, and B's run
    stays as it was. Odd session values are refused before any run is touched."""
    monkeypatch.delenv("FLOWLEDGER_DB", raising=False)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(review, "STEP_SECONDS", 0.0)
    db = f"sqlite:///{tmp_path}/cli.db"
    a, b = str(uuid.uuid4()), str(uuid.uuid4())

    def cli(*args: str) -> Any:
        return CliRunner().invoke(app, [*args, "--db", db], catch_exceptions=False)

    started = cli(
        "start",
        "document_review",
        "v1",
        "--input",
        json.dumps(REVIEW_INPUT),
        "--session",
        b,
        "--json",
    )
    assert started.exit_code == 0, started.output
    run_b = json.loads(started.stdout)["run_id"]
    listed = cli("runs", "list", "--session", a, "--json")
    assert listed.exit_code == 0, listed.output
    assert json.loads(listed.stdout)["runs"] == []
    for args in (
        ("runs", "show", run_b),
        ("history", run_b),
        ("resume", run_b, "--payload", '{"approved": true}'),
        ("cancel", run_b),
    ):
        result = cli(*args, "--session", a)
        assert result.exit_code == 1, (args, result.output)
        assert "not found" in result.stderr, (args, result.stderr)
        assert "Traceback" not in result.output
    shown = cli("runs", "show", run_b, "--session", b, "--json")
    assert json.loads(shown.stdout)["run_status"] == "interrupted"
    for odd in ("../x", "A" * 36, "a/../b", "x" * 600):
        result = cli("runs", "list", "--session", odd)
        assert result.exit_code != 0, odd
        assert "Traceback" not in result.output
    assert json.loads(cli("runs", "list", "--session", b, "--json").stdout)["runs"]


async def test_mcp_tokens_isolate_sessions(tmp_path: Path) -> None:
    """Two bearer tokens, two sessions: token A cannot get, resume, cancel, read the history
    of, or parent a run on token B's run, odd run ids are tool errors, and B's paused run is
    unchanged afterwards."""
    from flowledger.mcp import session_for_token

    token_a, token_b = "token-a-" + "1" * 24, "token-b-" + "2" * 24
    tokens = {token_a: session_for_token(token_a), token_b: session_for_token(token_b)}
    start_arguments = {
        "definition_name": "relay",
        "definition_version": "v1",
        "input": {"secret": SENTINEL},
    }
    async with (
        http_server(f"sqlite:///{tmp_path}/mcp.db", tokens=tokens, app=APP) as url,
        http_client(url, token_a) as client_a,
        http_client(url, token_b) as client_b,
    ):
        run_b = payload(await client_b.call_tool("workflow_run_start", start_arguments))
        paused = await wait_status(client_b, run_b["run_id"], "interrupted")
        foreign = run_b["run_id"]
        for tool, arguments in [
            ("workflow_run_get", {"run_id": foreign}),
            ("workflow_run_history", {"run_id": foreign}),
            ("workflow_run_resume", {"run_id": foreign, "resume": {"note": "x"}}),
            ("workflow_run_cancel", {"run_id": foreign}),
            ("workflow_run_start", {**start_arguments, "parent_run_id": foreign}),
        ]:
            text = error_text(await client_a.call_tool(tool, arguments))
            assert "not found" in text, (tool, text)
            assert SENTINEL not in text
        assert payload(await client_a.call_tool("workflow_run_list", {}))["runs"] == []
        for odd in ODD_IDS:  # refused as tool errors; the server keeps serving
            for tool in ("workflow_run_get", "workflow_run_history", "workflow_run_cancel"):
                assert error_text(await client_a.call_tool(tool, {"run_id": odd}))
        after = payload(await client_b.call_tool("workflow_run_get", {"run_id": foreign}))
        assert after == paused
