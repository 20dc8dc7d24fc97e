"""The ``foreach`` node: a list mapped serially or concurrently, each item-error policy,
durable per item (SIGKILL of the owner mid-foreach, then adoption: no finished item's
call repeats, and an item whose call was under way is not called again), the bounds
(refused with placed issues at validation, and at run time naming the node), and a
deployment that checks the body's tool like a tool node's (the tenant's allow list).

The tool bodies call ``tests/deploy/runs/item_server.py`` (a small SDK server of these
tests: ``append_item`` is not idempotent and appends a line per call; ``shout`` is
read-only); the value bodies need no server."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from flowledger.deploy import (
    ArtifactValidationError,
    DeployService,
    compile_artifact,
    validate_artifact,
)
from flowledger.deploy.drafts.explain import explain
from flowledger.deploy.runs import errors as run_errors
from flowledger.storage import open_store
from flowledger.tools import WorkflowTools
from flowledger.workflows import Catalog
from flowledger.workflows.runtime.session import WorkflowSession

from .runs.app import item_source
from .servers import REPO
from .test_runs import APP, adopting, outcome, session, settle, start, trace_of


def shown_code(got: dict[str, Any]) -> str:
    """The code of the error type a failed run shows, with its explain entry."""
    code = str(getattr(run_errors, got["error"]["type"]).code)
    assert explain(code)["code"] == code
    return code


def artifact(nodes: dict[str, Any], **extra: Any) -> dict[str, Any]:
    """An artifact ``each`` of ``nodes``, with input ``{xs: array}`` and state fields
    ``out``/``more``, ending at ``done`` with output ``{out, more}``."""
    return {
        "format": "flowledger.artifact/v1",
        "name": "each",
        "version": "1",
        "input_schema": {
            "type": "object",
            "additionalProperties": False,
            "properties": {"xs": {"type": "array"}},
        },
        "output_schema": {
            "type": "object",
            "additionalProperties": False,
            "properties": {"out": {}, "more": {}},
        },
        "state": {"out": {}, "more": {}},
        "start": "first",
        "nodes": {
            **nodes,
            "done": {
                "kind": "end",
                "outcome": "done",
                "output": {"out": "${ state.out }", "more": "${ state.more }"},
            },
        },
        **extra,
    }


async def run_once(
    url: str, document: dict[str, Any], xs: Any, sources: dict[str, Any] | None = None
) -> tuple[dict[str, Any], dict[str, Any], list[Any]]:
    """Run ``document`` over ``xs``: (the run as workflow_run_get shows it, its final
    state, its trace entries)."""
    catalog = Catalog()
    catalog.register(compile_artifact(validate_artifact(document), sources=sources or {}))
    async with session(url, catalog) as (built, tools):
        run_id = await start(tools, "each", {"xs": xs})
        got = await settle(built, tools, run_id)
        state = await outcome(built, "each", run_id)
        page = await trace_of(built, "each", run_id)
    return got, state, list(page.entries)


def value_foreach(**fields: Any) -> dict[str, Any]:
    return {
        "kind": "foreach",
        "items": "${ input.xs }",
        "body": {"kind": "value", "value": {"i": "${ index }", "abs": "${ abs(item) }"}},
        "into": "out",
        "next": "done",
        **fields,
    }


@pytest.mark.parametrize("mode", ["serial", "concurrent"])
async def test_a_value_body_maps_the_list_in_item_order(tmp_path: Path, mode: str) -> None:
    """Results land in item order whatever the mode, across the 32-record chunks the
    records are kept in (70 items; batches of 3 straddle chunk boundaries); serial takes
    a super-step (one checkpoint) per item, concurrent one per ``max_concurrency``
    items; the bookkeeping keys are cleared when the node is done; an empty list gives
    ``[]``."""
    extra = {"max_concurrency": 3} if mode == "concurrent" else {}
    document = artifact({"first": value_foreach(mode=mode, **extra)})
    xs = [i if i % 2 else -i for i in range(70)]
    got, state, entries = await run_once(f"sqlite:///{tmp_path / 'v.db'}", document, xs)
    assert got["run_status"] == "completed", got
    assert state["$output"]["out"] == [{"i": i, "abs": abs(x)} for i, x in enumerate(xs)]
    steps = [e for e in entries if e.node == "first"]
    assert len(steps) == (70 if mode == "serial" else 24)
    assert all(e.kind == "foreach" and e.status == "ok" for e in steps)
    assert json.loads(steps[-1].result) == {"items": [69, 70]}
    each = {key: value for key, value in state.items() if key.startswith("$each/")}
    assert set(each) == {"$each/first/items", "$each/first/next"} | {
        f"$each/first/{chunk}" for chunk in range(3)
    }
    assert all(value is None for value in each.values()), each
    got, state, _ = await run_once(f"sqlite:///{tmp_path / 'e.db'}", document, [])
    assert state["$output"]["out"] == []


async def test_item_error_policies_of_a_value_body(tmp_path: Path) -> None:
    """An item whose body expression fails (``abs`` of a string): ``skip`` leaves it out,
    ``collect`` keeps ``{ok: false, error: {code, message}}`` in its place, ``fail``
    fails the run naming the node and the item."""
    document = artifact(
        {
            "first": value_foreach(on_item_error="skip", next="second"),
            "second": value_foreach(
                on_item_error="collect", into="more", mode="concurrent", max_concurrency=2
            ),
        }
    )
    url = f"sqlite:///{tmp_path / 'p.db'}"
    got, state, _ = await run_once(url, document, [-1, "x", 3])
    assert got["run_status"] == "completed", got
    assert state["$output"]["out"] == [{"i": 0, "abs": 1}, {"i": 2, "abs": 3}]
    more = state["$output"]["more"]
    assert more[0] == {"ok": True, "result": {"i": 0, "abs": 1}}
    assert more[2] == {"ok": True, "result": {"i": 2, "abs": 3}}
    assert more[1]["ok"] is False and more[1]["error"]["code"] == "expression_failed"
    assert "nodes.second.body.value" in more[1]["error"]["message"]
    failing = artifact({"first": value_foreach(on_item_error="fail")})
    got, _, entries = await run_once(f"sqlite:///{tmp_path / 'f.db'}", failing, [-1, "x", 3])
    assert got["run_status"] == "failed"
    assert got["error"]["type"] == "ForeachItemError"
    assert shown_code(got) == "foreach_item_failed"
    assert "node first: item 1 failed (expression_failed)" in got["error"]["message"]
    assert [e.status for e in entries if e.node == "first"] == ["ok", "error"]


async def test_item_error_policies_of_a_tool_body(tmp_path: Path, monkeypatch: Any) -> None:
    """A real tool's error results (``shout`` refuses texts starting with ``bad``):
    ``skip`` (serial) and ``collect`` (concurrent) in one run, ``fail`` in another."""
    monkeypatch.setenv("ITEM_DIR", str(tmp_path))
    body = {
        "kind": "tool",
        "dependency": "items",
        "tool": "shout",
        "arguments": {"text": "${ item }"},
    }
    deps = {"dependencies": {"items": {"tools": ["shout"]}}}
    document = artifact(
        {
            "first": {**value_foreach(on_item_error="skip", next="second"), "body": body},
            "second": {
                **value_foreach(on_item_error="collect", into="more", mode="concurrent"),
                "body": body,
            },
        },
        **deps,
    )
    sources = {"items": item_source()}
    url = f"sqlite:///{tmp_path / 't.db'}"
    got, state, _ = await run_once(url, document, ["a", "bad1", "b"], sources)
    assert got["run_status"] == "completed", got
    assert state["$output"]["out"] == [
        {"structured": {"text": "A"}, "text": "{'text': 'A'}"},
        {"structured": {"text": "B"}, "text": "{'text': 'B'}"},
    ]
    more = state["$output"]["more"]
    assert [m["ok"] for m in more] == [True, False, True]
    assert more[1]["error"]["code"] == "tool_error"
    assert "refused bad1" in more[1]["error"]["message"]
    failing = artifact({"first": {**value_foreach(), "body": body}}, **deps)
    got, _, _ = await run_once(f"sqlite:///{tmp_path / 'f.db'}", failing, ["a", "bad2"], sources)
    assert got["run_status"] == "failed"
    assert got["error"]["type"] == "ForeachItemError"
    assert "item 1 failed (tool_error)" in got["error"]["message"]
    # A tool that is not idempotent (its calls keep intents per item): same policies.
    append = {**body, "tool": "append_item"}
    counted = artifact(
        {"first": {**value_foreach(on_item_error="collect", mode="concurrent"), "body": append}},
        dependencies={"items": {"tools": ["append_item"]}},
    )
    url = f"sqlite:///{tmp_path / 'n.db'}"
    got, state, _ = await run_once(url, counted, ["x", "bad3", "y"], sources)
    assert got["run_status"] == "completed", got
    assert [m["ok"] for m in state["$output"]["out"]] == [True, False, True]
    assert sorted((tmp_path / "lines").read_text().splitlines()) == ["bad3", "x", "y"]


async def test_a_foreach_inside_a_parallel_branch_reaches_the_join_when_done(
    tmp_path: Path,
) -> None:
    """The join waits for the looping branch (it arrives only on its last step)."""
    document = artifact(
        {
            "first": {"kind": "parallel", "branches": ["loop", "quick"], "join": "joined"},
            "loop": value_foreach(into="out", next="joined"),
            "quick": {"kind": "set", "assign": {"more": "quick"}, "next": "joined"},
            "joined": {"kind": "set", "assign": {"more": "${ length(state.out) }"}, "next": "done"},
        }
    )
    got, state, entries = await run_once(f"sqlite:///{tmp_path / 'j.db'}", document, [1, 2, 3])
    assert got["run_status"] == "completed", got
    assert state["$output"] == {"out": [{"i": i, "abs": i + 1} for i in range(3)], "more": 3}
    assert [e.node for e in entries].count("joined") == 1


async def test_run_time_bounds_fail_the_run_naming_the_node(tmp_path: Path) -> None:
    """More than 1,000 items, or ``items`` that is no array: the run fails with
    ``foreach_items`` before any item runs."""
    for items, xs, expected in [
        ("${ input.xs }", list(range(1001)), "`items` gave 1001 elements; the limit is 1000"),
        ("${ input }", [], "`items` gave an object, not an array"),
    ]:
        document = artifact({"first": value_foreach(items=items)})
        url = f"sqlite:///{tmp_path / f'b{len(xs)}.db'}"
        got, state, _ = await run_once(url, document, xs)
        assert got["run_status"] == "failed"
        assert got["error"]["type"] == "ForeachItemsError"
        assert shown_code(got) == "foreach_items"
        assert got["error"]["message"].startswith(f"node first: {expected}")
        assert state.get("$each/first/items") is None


def test_bad_fields_are_refused_with_placed_issues() -> None:
    """Validation: every bad field of a foreach is an issue at its place, with a hint
    and an explain entry for the new codes."""
    bad = artifact(
        {
            "first": value_foreach(mode="concurrent", max_concurrency=17, next="second"),
            "second": value_foreach(max_concurrency=2, into="sums", next="third"),
            "third": {
                **value_foreach(items="input.xs", into="nowhere"),
                "body": {"kind": "tool", "dependency": "ghost", "tool": "t", "arguments": {}},
            },
            "fourth": value_foreach(body={"kind": "value", "value": "${ result }"}),
        },
        state={"out": {}, "more": {}, "sums": {"reduce": "append"}},
    )
    bad["nodes"]["third"]["next"] = "fourth"
    with pytest.raises(ArtifactValidationError) as raised:
        validate_artifact(bad)
    found = {(issue.place, issue.code) for issue in raised.value.issues}
    assert {
        ("nodes.first.max_concurrency", "foreach_concurrency"),
        ("nodes.second.max_concurrency", "foreach_concurrency"),
        ("nodes.second.into", "foreach_into"),
        ("nodes.third.items", "not_an_expression"),
        ("nodes.third.into", "unknown_state_field"),
        ("nodes.third.body.dependency", "unknown_dependency"),
    } <= found, found
    assert any(place == "nodes.fourth.body.value" for place, _ in found), found
    for issue in raised.value.issues:
        if issue.code.startswith("foreach_"):
            assert issue.hint
            assert explain(issue.code)["code"] == issue.code
    structure = artifact({"first": value_foreach(mode="sometimes", body={"kind": "shell"})})
    with pytest.raises(ArtifactValidationError) as raised:
        validate_artifact(structure)
    placed = {issue.place: issue for issue in raised.value.issues}
    assert placed["nodes.first.mode"].code == "bad_value"
    assert placed["nodes.first.body"].code == "bad_kind"
    assert placed["nodes.first.body"].hint == (
        "a body's kind is one of tool, value, workflow, sequence"
    )


# -- a crash mid-foreach --------------------------------------------------------------


async def test_a_crash_mid_foreach_never_repeats_an_item(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SIGKILL of the run's owner (a ``flowledger start`` process) while item d's call
    of ``append_item`` (not idempotent) is under way, in a foreach two items at a time;
    another process adopts the run. Items a and b finished in an earlier step (their
    records are state); c finished in the same step as d (its intent says done, with its
    result). No finished item is called again (the file holds each once), and d is not
    called again either: the run fails with tool_outcome_unknown. One case keeps CI
    lean (the adoption waits for the killed owner's lease): it covers both ways an item
    is known to be finished."""
    mode, held, done_before = "concurrent", "d", ["a", "b", "c"]
    db = f"sqlite:///{tmp_path / 'crash.db'}"
    monkeypatch.setenv("ITEM_DIR", str(tmp_path))
    (tmp_path / f"hold-{held}").touch()
    texts = ["a", "b", "c", "d", "e"]
    owner = subprocess.Popen(  # noqa: ASYNC220 - one child, killed below
        [
            sys.executable, "-m", "flowledger", "start", "foreach_write", "1",
            "--input", json.dumps({"texts": texts, "mode": mode}), "--db", db, *APP,
        ],
        cwd=REPO,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )  # fmt: skip
    lines = tmp_path / "lines"

    def called() -> list[str]:
        return lines.read_text().splitlines() if lines.exists() else []

    try:
        deadline = time.monotonic() + 300
        # The held item's call is under way, and every item before it has its result
        # recorded (in the concurrent case, c's intent is done in the held step).
        while not (
            (tmp_path / f"started-{held}").exists()
            and called() == done_before
            and await done_intents(db) == len(done_before)
        ):
            assert time.monotonic() < deadline, f"timed out waiting for item {held}'s call"
            await asyncio.sleep(0.05)
    finally:
        os.killpg(owner.pid, signal.SIGKILL)
        await asyncio.to_thread(owner.wait, 60)
    # The hold stays: the killed owner's server (a session of its own, so it outlives
    # the kill until it reads EOF) must not finish the held call (it did, now and then,
    # when the hold was removed here: the file then held d).
    (tmp_path / f"started-{held}").unlink()
    from .runs.app import catalog

    async with adopting(db, catalog()) as adopted:  # activation adopts the run
        assert await adopted.supervisor.wait_idle() is None
        [run] = (await adopted.registry.list(adopted.session_id)).runs
        final = await WorkflowTools.for_session(adopted).call(
            "workflow_run_get", {"run_id": run.id}
        )
    assert final["run_status"] == "failed", final
    assert final["error"]["type"] == "ToolOutcomeUnknownError"
    assert f"item {texts.index(held)}: a call of items.append_item" in final["error"]["message"]
    assert called() == done_before  # each finished item once, no more
    assert not (tmp_path / f"started-{held}").exists()  # not called again
    assert not (tmp_path / "started-e").exists()  # nothing after the held item ran


async def done_intents(db: str) -> int:
    """How many tool intents of the database's runs say ``done`` (read by another
    process while the owner writes)."""
    count = 0
    async with open_store(db) as store:
        for name in await store.ledger.names("deploy/intents/"):
            for record in await store.ledger.read(name, limit=1000):
                count += json.loads(record.payload)["state"] == "done"
    return count


# -- deployed: the body's tool is checked like a tool node's ---------------------------


def item_deployment(tmp_path: Path, allow: list[str]) -> dict[str, Any]:
    return {
        "format": "flowledger.deployment/v1",
        "name": "each_dep",
        "artifact": {"name": "each", "version": "1"},
        "sources": {
            "items": {
                "stdio": {
                    "command": sys.executable,
                    "args": ["-m", "tests.deploy.runs.item_server"],
                    "env": {"ITEM_DIR": str(tmp_path)},
                    "cwd": str(REPO),
                },
                "allow_tools": allow,
            }
        },
    }


async def test_a_deployment_must_allow_the_body_tool(tmp_path: Path) -> None:
    """A foreach body's tool is a call site of the artifact: a deployment that does not
    allow it is unrunnable (``tool_not_allowed``, no run, no call); once allowed, the
    run pins it and maps the list."""
    body = {
        "kind": "tool",
        "dependency": "items",
        "tool": "append_item",
        "arguments": {"text": "${ item }"},
    }
    document = artifact(
        {
            "first": {
                "kind": "tool",
                "dependency": "items",
                "tool": "shout",
                "arguments": {"text": "hi"},
                "next": "second",
            },
            "second": {**value_foreach(mode="concurrent", max_concurrency=2), "body": body},
        },
        dependencies={"items": {"tools": ["shout", "append_item"]}},
    )
    async with open_store(f"sqlite:///{tmp_path / 'd.db'}") as store:
        built = WorkflowSession.build(store, SESSION, Catalog())
        await built.supervisor.activate()
        try:
            deploy = DeployService(built, check_timeout=30)
            await deploy.artifacts.save(SESSION, json.dumps(document))
            await deploy.deployment_save(item_deployment(tmp_path, ["shout"]))
            refused = await deploy.run_deployment("each_dep", {"xs": ["a"]})
            assert refused["status"] == "unrunnable", refused
            assert [d["code"] for d in refused["diagnostics"]] == ["tool_not_allowed"]
            assert "items.append_item" in refused["diagnostics"][0]["message"]
            assert (await built.registry.list(SESSION)).runs == []
            assert not (tmp_path / "lines").exists()
            await deploy.deployment_save(item_deployment(tmp_path, ["shout", "append_item"]))
            done = await deploy.run_deployment("each_dep", {"xs": ["a", "b", "c"]})
            assert done["status"] == "completed", done
            lines = [item["structured"]["line"] for item in done["output"]["out"]]
            assert sorted(lines) == [1, 2, 3]
        finally:
            await built.supervisor.shutdown()


SESSION = str(uuid.UUID(int=12, version=4))
