"""get, list, resume, cancel, history and definition_list (workflows-spec §7.4-§7.9,
§12.78, §12.79), and a whole conversation through the tools."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from flowledger import flow
from flowledger.workflows.authoring.definition import TypedDefinition
from flowledger.workflows.authoring.metadata import Metadata
from flowledger.workflows.errors import ConflictError, InvalidInputError, NotFoundError
from flowledger.workflows.records.run import RunStatus
from flowledger.workflows.runtime.catalog import Catalog
from tests.workflows.conftest import Counter

from .conftest import (
    FORBIDDEN,
    NOTER_INPUT,
    NOTER_RESUME,
    RESUME_SENTINEL,
    SENTINEL,
    STATE_SENTINEL,
    Env,
    refused,
)

MISSING = "99999999-9999-4999-8999-999999999999"
TIME = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,6})?Z")


async def interrupted_run(env: Env, name: str = "asker", document: Any = None) -> str:
    started = await env.start(name, {"count": 1} if document is None else document)
    await env.settle()
    assert (await env.record(started["run_id"])).status is RunStatus.INTERRUPTED
    return str(started["run_id"])


# -- get (§7.4) --------------------------------------------------------------------------------


async def test_get_returns_the_run(env: Env) -> None:
    """§7.4: get parses the ID, reads this session's record and returns run_result with
    RFC 3339 UTC times."""
    started = await env.start()
    await env.settle()
    got = await env.call("workflow_run_get", {"run_id": started["run_id"].upper()})
    assert got["run_id"] == started["run_id"]
    assert got["run_status"] == "completed"
    assert got["status_summary"] == "count=2"
    assert got["checkpoint_revision"] == (await env.record(started["run_id"])).checkpoint_revision
    assert TIME.fullmatch(got["created_at"]) and TIME.fullmatch(got["updated_at"])


async def test_get_unknown_run(env: Env) -> None:
    """§7.4: an unknown run is not found; the message has the run ID, not the session."""
    error = await refused(env.tools.call("workflow_run_get", {"run_id": MISSING}))
    assert str(error) == f"workflow tools: get run: run {MISSING} not found"
    assert isinstance(error.cause, NotFoundError)
    assert env.session.session_id not in str(error)


# -- list (§7.5) -------------------------------------------------------------------------------


async def test_list_pages_with_next(env: Env) -> None:
    """§7.5: runs in ID order; next names the following page and is omitted at the end;
    limit 0 or absent means 50."""
    ids = [(await env.start())["run_id"] for _ in range(5)]
    await env.settle()
    seen: list[str] = []
    after: dict[str, Any] = {}
    pages = []
    while True:
        page = await env.call("workflow_run_list", {"limit": 2, **after})
        pages.append(len(page["runs"]))
        seen.extend(run["run_id"] for run in page["runs"])
        if "next" not in page:
            break
        assert page["next"] == page["runs"][-1]["run_id"]
        after = {"after": page["next"]}
    assert pages == [2, 2, 1]
    assert seen == sorted(ids)
    assert [
        r["run_id"] for r in (await env.call("workflow_run_list", {"limit": 0}))["runs"]
    ] == seen
    whole = await env.call("workflow_run_list", None)
    assert [r["run_id"] for r in whole["runs"]] == seen and "next" not in whole
    tail = await env.call("workflow_run_list", {"after": seen[2]})
    assert [r["run_id"] for r in tail["runs"]] == seen[3:]
    beyond = await env.call("workflow_run_list", {"after": "ffffffff-ffff-4fff-8fff-ffffffffffff"})
    assert beyond == {"runs": []}


@pytest.mark.parametrize("limit", [-1, 101, 1 << 40])
async def test_list_limit_out_of_range(env: Env, limit: int) -> None:
    """§7.5: an out-of-range limit is refused."""
    error = await refused(env.tools.call("workflow_run_list", {"limit": limit}))
    assert str(error) == "workflow tools: list runs: limit must be in 1..100 (0 or absent means 50)"


@pytest.mark.parametrize(
    "after", ["x", "00000000-0000-0000-0000-000000000000", "6F9619FF-8B86-D011-B42D-00C04FC964FF"]
)
async def test_list_bad_cursor(env: Env, after: str) -> None:
    """§7.5: a cursor that is not a run ID is refused."""
    error = await refused(env.tools.call("workflow_run_list", {"after": after}))
    assert "after must be empty or a run ID" in str(error)


# -- definition_list (§7.9) --------------------------------------------------------------------


async def test_definition_list(env: Env) -> None:
    """§7.9: catalog order; name, version, description, raw input schema, whether resume
    is supported; not truncated. Beyond the reference: the resume schema (so a model knows
    what to send) and the error policy."""
    result = await env.call("workflow_definition_list", {})
    names = [(d["name"], d["version"]) for d in result["definitions"]]
    assert names == [("asker", "v1"), ("counter", "v1"), ("noter", "v1"), ("pair", "v1")]
    noter = result["definitions"][2]
    assert noter == {
        "name": "noter",
        "version": "v1",
        "description": "keeps a private note",
        "input_schema": NOTER_INPUT,
        "resume_supported": True,
        "resume_schema": NOTER_RESUME,
        "on_error": "pause",
    }
    assert result["definitions"][1]["resume_supported"] is False
    assert "resume_schema" not in result["definitions"][1]
    assert result["truncated"] is False
    listed_without_schemas = [
        {k: v for k, v in d.items() if k != "resume_schema"} for d in result["definitions"]
    ]
    assert "memo" not in json.dumps(listed_without_schemas)  # only the resume schema has it
    error = await refused(env.tools.call("workflow_definition_list", {"limit": 1}))
    assert "unknown field 'limit'" in str(error)


async def test_definition_list_truncates_at_100(env: Env) -> None:
    """§7.9: at most 100 entries; truncated is true when more exist."""
    graph: flow.Graph[Counter] = flow.Graph("many", state=Counter)

    @graph.vertex("noop")
    async def noop(state: Counter) -> dict[str, Any]:
        return {}

    runner = graph.compile(entry="noop", finish="noop", store=env.session.checkpoints)
    catalog = Catalog()
    for index in range(101):
        schema = {"type": "object", "additionalProperties": False}
        catalog.register(
            TypedDefinition(Metadata(f"wf_{index:03d}", "v1", input_schema=schema), runner)
        )
    result = await env.bundle(catalog=catalog).call("workflow_definition_list", None)
    assert len(result["definitions"]) == 100
    assert result["truncated"] is True
    assert result["definitions"][-1]["name"] == "wf_099"


# -- resume (§7.6) -----------------------------------------------------------------------------


async def test_resume_interrupted_run(env: Env) -> None:
    """§7.6: resume validates the payload, runs the segment synchronously and returns the
    re-read run_result."""
    run_id = await interrupted_run(env)
    result = await env.call("workflow_run_resume", {"run_id": run_id, "resume": {"increment": 4}})
    assert result["run_id"] == run_id
    assert result["run_status"] == "completed"
    assert ("resume", run_id) in env.recorder.calls
    state = await env.session.catalog.resolve("asker", "v1").get(
        (await env.record(run_id)).graph_run_id
    )
    assert state.state["count"] == 5


async def test_resume_of_non_interrupted_run(env: Env) -> None:
    """§7.6 step 2: only an interrupted run resumes; otherwise the error wraps the record
    conflict kind and the supervisor is not called."""
    env.session.gates.close("one")
    running = (await env.start())["run_id"]
    error = await refused(
        env.tools.call("workflow_run_resume", {"run_id": running, "resume": {"increment": 1}})
    )
    assert str(error) == (
        f"workflow tools: resume run: resume requires interrupted run; run {running} is running"
    )
    assert isinstance(error.cause, ConflictError)
    assert error.cause.reason == "resume requires interrupted run"
    env.session.gates.open("one")
    await env.settle()
    error = await refused(
        env.tools.call("workflow_run_resume", {"run_id": running, "resume": {"increment": 1}})
    )
    assert "resume requires interrupted run; run" in str(error) and "is completed" in str(error)
    assert [c for c in env.recorder.calls if c[0] == "resume"] == []


@pytest.mark.parametrize(
    ("payload", "message"),
    [
        ({"increment": 0}, "$.increment: 0 is less than the minimum 1"),
        ({"increment": SENTINEL}, "$.increment: expected an integer, got a string"),
        ({}, "$.increment: required property missing"),
        ({"increment": 1, "surplus": True}, "$.surplus: additional property not allowed"),
        (
            {"surplus": SENTINEL, "increment": "x"},
            "$.increment: expected an integer, got a string; "
            "$.surplus: additional property not allowed",
        ),
    ],
)
async def test_resume_with_invalid_payload(env: Env, payload: dict[str, Any], message: str) -> None:
    """§7.6 step 4: the payload is canonicalised and validated before the supervisor is
    called; the run stays interrupted; the message names every violation with its path
    (the payload's keys) and never quotes the payload's strings."""
    run_id = await interrupted_run(env)
    before = await env.registry_snapshot()
    error = await refused(
        env.tools.call("workflow_run_resume", {"run_id": run_id, "resume": payload})
    )
    assert str(error) == f"workflow tools: invalid resume: {message}"
    assert isinstance(error.cause, InvalidInputError)
    assert SENTINEL not in str(error)
    assert [c for c in env.recorder.calls if c[0] == "resume"] == []
    assert await env.registry_snapshot() == before


async def test_resume_unknown_run_and_unregistered_definition(env: Env) -> None:
    """§7.6 steps 1 and 3: an unknown run is not found; a run whose definition is no longer
    registered cannot resume."""
    error = await refused(
        env.tools.call("workflow_run_resume", {"run_id": MISSING, "resume": {"increment": 1}})
    )
    assert str(error) == f"workflow tools: resume run: run {MISSING} not found"
    run_id = await interrupted_run(env)
    tools = env.bundle(catalog=Catalog())
    error = await refused(
        tools.call("workflow_run_resume", {"run_id": run_id, "resume": {"increment": 1}})
    )
    assert (
        str(error) == "workflow tools: resume run: unknown workflow definition 'asker' version 'v1'"
    )


async def test_resume_of_a_run_whose_checkpoint_is_missing_fails_it(env: Env) -> None:
    """An interrupted record without any checkpoint is a definite problem: the resume goes
    to the supervisor, which fails the run ("workflow checkpoint missing"); the tool
    returns the failed record."""
    interrupted = await env.session.create_run("counter", status=RunStatus.INTERRUPTED)
    result = await env.call(
        "workflow_run_resume", {"run_id": interrupted.id, "resume": {"increment": 1}}
    )
    assert (result["run_status"], result["status_summary"]) == (
        "failed",
        "workflow checkpoint missing",
    )


# -- cancel (§7.7) -----------------------------------------------------------------------------


async def test_cancel_of_cancelled_run_is_idempotent(env: Env) -> None:
    """§12.78: cancelling an already cancelled run returns idempotent true and status
    cancelled, and makes no supervisor call."""
    run_id = await interrupted_run(env)
    first = await env.call("workflow_run_cancel", {"run_id": run_id})
    assert first == {"run_id": run_id, "run_status": "cancelled", "idempotent": False}
    calls = list(env.recorder.calls)
    again = await env.call("workflow_run_cancel", {"run_id": run_id, "reason": "again"})
    assert again == {"run_id": run_id, "run_status": "cancelled", "idempotent": True}
    assert env.recorder.calls == calls


async def test_cancel_of_completed_run_fails(env: Env) -> None:
    """§12.79: cancelling a completed run fails (record conflict kind), without calling
    the supervisor; a failed run likewise."""
    run_id = (await env.start())["run_id"]
    await env.settle()
    before = await env.registry_snapshot()
    error = await refused(env.tools.call("workflow_run_cancel", {"run_id": run_id}))
    assert str(error) == (
        f"workflow tools: cancel run: terminal run cannot be cancelled; run {run_id} is completed"
    )
    assert isinstance(error.cause, ConflictError)
    assert error.cause.reason == "terminal run cannot be cancelled"
    failed = await env.session.create_run("counter", status=RunStatus.FAILED)
    error = await refused(env.tools.call("workflow_run_cancel", {"run_id": failed.id}))
    assert str(error).endswith(f"run {failed.id} is failed")
    assert [c for c in env.recorder.calls if c[0] == "cancel"] == []
    assert (await env.registry_snapshot())[
        f"sessions/{env.session.session_id}/workflows/runs/{run_id}"
    ] == (before[f"sessions/{env.session.session_id}/workflows/runs/{run_id}"])


async def test_cancel_running_run_and_reason_handling(env: Env) -> None:
    """§7.7 steps 5-7: the reason is trimmed (empty means "cancel requested"); the
    supervisor cancels; the re-read status is returned with idempotent false."""
    env.session.gates.close("one")
    running = (await env.start())["run_id"]
    result = await env.call("workflow_run_cancel", {"run_id": running, "reason": "  stop it \n"})
    assert result == {"run_id": running, "run_status": "cancelled", "idempotent": False}
    env.session.gates.open("one")
    waiting = await interrupted_run(env)
    await env.call("workflow_run_cancel", {"run_id": waiting, "reason": " \t "})
    assert env.recorder.reasons == ["stop it", "cancel requested"]
    await env.settle()
    assert (await env.record(running)).status is RunStatus.CANCELLED


async def test_cancel_reason_limit_in_bytes(env: Env) -> None:
    """§7.7 step 1: a raw reason over 512 bytes (not characters, and before trimming) is
    refused before anything is read or called; exactly 512 bytes is fine."""
    run_id = await interrupted_run(env)
    for reason in ("é" * 257, "x" * 513, " " * 513):
        error = await refused(
            env.tools.call("workflow_run_cancel", {"run_id": run_id, "reason": reason})
        )
        assert str(error) == (
            f"workflow tools: cancel run: reason is {len(reason.encode())} bytes; the limit is 512"
        )
    assert env.recorder.calls == [("start", run_id)]
    result = await env.call("workflow_run_cancel", {"run_id": run_id, "reason": "é" * 256})
    assert result["run_status"] == "cancelled"


async def test_cancel_unknown_run(env: Env) -> None:
    """§7.7 step 2: an unknown run is not found."""
    error = await refused(env.tools.call("workflow_run_cancel", {"run_id": MISSING}))
    assert str(error) == f"workflow tools: cancel run: run {MISSING} not found"


async def test_cancel_pending_run(env: Env) -> None:
    """§7.7 step 6: a pending run (created, not yet started) is cancelled directly."""
    pending = await env.session.create_run("counter")
    result = await env.call("workflow_run_cancel", {"run_id": pending.id})
    assert result == {"run_id": pending.id, "run_status": "cancelled", "idempotent": False}


# -- history (§7.8) ----------------------------------------------------------------------------


async def read_history(env: Env, run_id: str, limit: int) -> tuple[list[dict[str, Any]], int]:
    """Every entry, one page at a time, passing both cursors back; returns the pages."""
    entries: list[dict[str, Any]] = []
    cursor: dict[str, Any] = {}
    pages = 0
    while True:
        page = await env.call("workflow_run_history", {"run_id": run_id, "limit": limit, **cursor})
        pages += 1
        assert page["run_id"] == run_id
        entries.extend(page["entries"])
        if "next_revision" not in page:
            assert "next_event_id" not in page
            return entries, pages
        cursor = {"after_revision": page["next_revision"]}
        if "next_event_id" in page:
            cursor["after_event_id"] = page["next_event_id"]


async def test_history_with_both_cursors(env: Env) -> None:
    """§7.8: a reader that passes next_revision and next_event_id back reads every entry
    exactly once, also when a page splits a revision (limit 1 over the resumed revision
    with two activities)."""
    run_id = await interrupted_run(env)
    await env.call("workflow_run_resume", {"run_id": run_id, "resume": {"increment": 1}})
    whole = await env.call("workflow_run_history", {"run_id": run_id})
    assert "next_revision" not in whole
    kinds = [entry["kind"] for entry in whole["entries"]]
    assert kinds == [
        "run_started",
        "run_interrupted",
        "run_resumed",
        "vertex_completed",
        "run_completed",
    ]
    for limit in (1, 2, 3, 100):
        entries, pages = await read_history(env, run_id, limit)
        assert entries == whole["entries"]
        assert pages >= -(-len(entries) // limit)
    first = await env.call(
        "workflow_run_history", {"run_id": run_id, "limit": 1, "after_revision": 3}
    )
    assert first["entries"][0]["kind"] == "run_resumed"
    assert first["next_revision"] == 3
    assert "next_event_id" in first
    assert first["next_event_id"] == first["entries"][0]["event_id"]
    entry = whole["entries"][3]
    assert entry["vertex_id"] == "ask" and entry["vertex_label"] == "ask for increment"
    assert entry["completed_vertices"] == 1 and entry["total_vertices"] == 1
    assert TIME.fullmatch(entry["occurred_at"])
    started = whole["entries"][0]
    assert "vertex_id" not in started and "completed_vertices" not in started
    assert started["run_status"] == "running" and started["message"] == "Workflow started"


@pytest.mark.parametrize("limit", [-1, 101])
async def test_history_limit_out_of_range(env: Env, limit: int) -> None:
    """§7.8 step 1: limit must be 1..100 (0 or absent means 50)."""
    run_id = await interrupted_run(env)
    error = await refused(
        env.tools.call("workflow_run_history", {"run_id": run_id, "limit": limit})
    )
    assert (
        str(error) == "workflow tools: read history: limit must be in 1..100 (0 or absent means 50)"
    )
    page = await env.call("workflow_run_history", {"run_id": run_id, "limit": 0})
    assert len(page["entries"]) == 2


@pytest.mark.parametrize(
    ("cursor", "message"),
    [
        ({"after_event_id": "nope"}, "workflow tools: after_event_id must be a nonzero UUID"),
        (
            {"after_event_id": "00000000-0000-0000-0000-000000000000"},
            "workflow tools: after_event_id must be a nonzero UUID",
        ),
        (
            {"after_revision": -1},
            "workflow tools: invalid arguments: field 'after_revision' must be an integer in "
            "0..18446744073709551615",
        ),
        (
            {"after_revision": "1"},
            "workflow tools: invalid arguments: field 'after_revision' must be an integer, not a "
            "string",
        ),
    ],
)
async def test_history_bad_cursors(env: Env, cursor: dict[str, Any], message: str) -> None:
    """§7.8 step 1: after_revision is unsigned; after_event_id, if given, a nonzero UUID."""
    run_id = await interrupted_run(env)
    error = await refused(env.tools.call("workflow_run_history", {"run_id": run_id, **cursor}))
    assert str(error) == message
    assert [c for c in env.recorder.calls if c[0] == "history"] == []


async def test_history_cursor_edges(env: Env) -> None:
    """§7.8: an empty after_event_id means no event cursor; a revision beyond the end
    gives an empty page; an unknown run is not found."""
    run_id = await interrupted_run(env)
    page = await env.call("workflow_run_history", {"run_id": run_id, "after_event_id": ""})
    assert len(page["entries"]) == 2
    empty = await env.call(
        "workflow_run_history", {"run_id": run_id, "after_revision": (1 << 64) - 1}
    )
    assert empty == {"run_id": run_id, "entries": []}
    error = await refused(env.tools.call("workflow_run_history", {"run_id": MISSING}))
    assert str(error) == f"workflow tools: read history: run {MISSING} not found"
    assert env.session.session_id not in str(error)


# -- a whole conversation ----------------------------------------------------------------------


async def test_full_flow_never_leaks(env: Env) -> None:
    """§7.2-§7.9: start -> get -> list (paging with next) -> history (both cursors) ->
    resume -> cancel; every result is JSON and no sentinel from input, state or resume
    payload (nor any private field name) appears in any of them."""
    first = await env.start("noter", {"count": 1, "note": SENTINEL})
    second = await env.start("noter", {"count": 2, "note": SENTINEL})
    await env.settle()
    got = await env.call("workflow_run_get", {"run_id": first["run_id"]})
    assert got["run_status"] == "interrupted"
    page = await env.call("workflow_run_list", {"limit": 1})
    rest = await env.call("workflow_run_list", {"limit": 1, "after": page["next"]})
    assert "next" not in rest
    assert {page["runs"][0]["run_id"], rest["runs"][0]["run_id"]} == {
        first["run_id"],
        second["run_id"],
    }
    entries, _ = await read_history(env, first["run_id"], 1)
    assert [e["kind"] for e in entries] == ["run_started", "run_interrupted"]
    resumed = await env.call(
        "workflow_run_resume", {"run_id": first["run_id"], "resume": {"memo": RESUME_SENTINEL}}
    )
    assert resumed["run_status"] == "completed"
    assert resumed["status_summary"] == "count=1"
    entries, _ = await read_history(env, first["run_id"], 1)
    assert [e["kind"] for e in entries][-1] == "run_completed"
    cancelled = await env.call(
        "workflow_run_cancel", {"run_id": second["run_id"], "reason": SENTINEL}
    )
    assert cancelled == {"run_id": second["run_id"], "run_status": "cancelled", "idempotent": False}
    entries, _ = await read_history(env, second["run_id"], 2)
    assert [e["kind"] for e in entries][-1] == "run_cancelled"
    final = await env.call("workflow_run_list", {})
    assert {r["run_status"] for r in final["runs"]} == {"completed", "cancelled"}
    definitions = await env.call("workflow_definition_list", {})
    # The private data really is in the durable state, so the checks below can fail.
    state = await env.session.catalog.resolve("noter", "v1").get(
        (await env.record(first["run_id"])).graph_run_id
    )
    assert state.state["memo"] == RESUME_SENTINEL
    assert state.state["derived"] == STATE_SENTINEL + SENTINEL
    assert len(env.results) >= 12
    # The one thing beyond run_result a get shows: the question the task asked (noter asks
    # with the state sentinel), addressed to whoever resumes; checked, then left out.
    assert got.pop("pending")["info"] == {"question": STATE_SENTINEL}
    for result in env.results:
        text = json.dumps(result, allow_nan=False)
        for marker in (SENTINEL, STATE_SENTINEL, RESUME_SENTINEL):
            assert marker not in text
        if result is not definitions:
            for marker in FORBIDDEN:
                assert marker not in text, (marker, text)


async def test_history_cursor_not_in_its_revision_is_a_typed_error(env: Env) -> None:
    """Reliability II item 7: an after_event_id that is not an activity of after_revision
    is refused, naming both, instead of silently skipping that revision."""
    run_id = await interrupted_run(env)
    await env.call("workflow_run_resume", {"run_id": run_id, "resume": {"increment": 1}})
    whole = (await env.call("workflow_run_history", {"run_id": run_id}))["entries"]
    started = whole[0]["event_id"]  # an activity of revision 0
    resumed = next(e for e in whole if e["kind"] == "run_resumed")
    error = await refused(
        env.tools.call(
            "workflow_run_history",
            {"run_id": run_id, "after_revision": resumed["revision"], "after_event_id": started},
        )
    )
    assert str(error) == (
        f"workflow tools: read history: after_event_id {started} is not an activity of "
        f"revision {resumed['revision']}"
    )
    # the matching cursor still pages on from just after its event
    page = await env.call(
        "workflow_run_history",
        {
            "run_id": run_id,
            "after_revision": resumed["revision"],
            "after_event_id": resumed["event_id"],
        },
    )
    assert page["entries"] == whole[whole.index(resumed) + 1 :]
