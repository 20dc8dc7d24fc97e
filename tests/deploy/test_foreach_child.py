"""A ``foreach`` whose body is a saved child artifact (``body: {kind: workflow,
workflow, input}``): one child run per item, serial or concurrent, each item-error
policy with a child that fails for some items, the child's tool calls allowed, pinned
and traced through the parent's deployment, and the save-time refusals (an undeclared
child, an input the child's schema refuses, a child whose closure can pause).

The child ``stamp`` calls ``append_item`` of ``tests/deploy/runs/item_server.py`` (not
idempotent: one line per call in ``ITEM_DIR/lines``; a text starting with ``bad`` is
answered with an error result), so the file counts the child's calls. The crash test
runs ``foreach_child_write`` of ``tests/deploy/runs/app.py`` (child ``item_write``:
two calls per item) in a ``flowledger start`` process and SIGKILLs it mid-item."""

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
    StdioSource,
    compile_artifact,
    validate_artifact,
)
from flowledger.deploy.drafts.explain import explain
from flowledger.storage import open_store
from flowledger.tools import WorkflowTools
from flowledger.workflows import Catalog
from flowledger.workflows.runtime.session import WorkflowSession

from .servers import REPO
from .test_foreach import artifact, done_intents, item_deployment
from .test_runs import APP, adopting, outcome, session, settle, start

SESSION = str(uuid.UUID(int=27, version=4))

TEXT_INPUT = {
    "type": "object",
    "additionalProperties": False,
    "properties": {"text": {"type": "string"}, "index": {"type": "integer"}},
    "required": ["text", "index"],
}


def stamp(version: str = "1", **nodes: Any) -> dict[str, Any]:
    """The child: append ``input.text`` (a real non-idempotent call), end ``stamped``
    with ``{text, line}``."""
    return {
        "format": "flowledger.artifact/v1",
        "name": "stamp",
        "version": version,
        "input_schema": TEXT_INPUT,
        "output_schema": {
            "type": "object",
            "additionalProperties": False,
            "properties": {"text": {}, "line": {}},
        },
        "dependencies": {"items": {"tools": ["append_item"]}},
        "state": {"line": {}},
        "start": "call",
        "nodes": {
            "call": {
                "kind": "tool",
                "dependency": "items",
                "tool": "append_item",
                "arguments": {"text": "${ input.text }"},
                "assign": {"line": "${ result.structured.line }"},
                "next": "stamped",
            },
            "stamped": {
                "kind": "end",
                "outcome": "stamped",
                "output": {"text": "${ input.text }", "line": "${ state.line }"},
            },
            **nodes,
        },
    }


def child_foreach(**fields: Any) -> dict[str, Any]:
    return {
        "kind": "foreach",
        "items": "${ input.xs }",
        "body": {
            "kind": "workflow",
            "workflow": "stamp",
            "input": {"text": "${ item }", "index": "${ index }"},
        },
        "into": "out",
        "next": "done",
        **fields,
    }


def parent(version: str, nodes: dict[str, Any], child: str = "1") -> dict[str, Any]:
    return {**artifact(nodes), "version": version, "children": {"stamp": child}}


async def test_child_bodies_serial_and_concurrent_with_each_item_error_policy(
    tmp_path: Path,
) -> None:
    """Deployed runs over a real server: a serial ``skip`` foreach and a concurrent
    ``collect`` one (two items at a time) in one run, then a ``fail`` one. An item's
    result is the child's ``{outcome, output}``; a child that fails (its tool answers
    an error, or the item does not match the child's input schema) is the item's
    failure. Each child's call is made once (the file), the trace names each child
    node per item, and a deployment that does not allow the child's tool is
    unrunnable (the child's calls are call sites of the parent)."""
    lines = tmp_path / "lines"
    async with open_store(f"sqlite:///{tmp_path / 'c.db'}") as store:
        built = WorkflowSession.build(store, SESSION, Catalog())
        await built.supervisor.activate()
        try:
            deploy = DeployService(built, check_timeout=30)
            await deploy.artifacts.save(SESSION, json.dumps(stamp()))
            both = parent(
                "1",
                {
                    "first": child_foreach(on_item_error="skip", next="second"),
                    "second": child_foreach(
                        mode="concurrent", max_concurrency=2, on_item_error="collect", into="more"
                    ),
                },
            )
            await deploy.artifacts.save(SESSION, json.dumps(both))
            # The tenant's deployment allows no tool the child calls: nothing runs.
            await deploy.deployment_save(item_deployment(tmp_path, ["shout"]))
            refused = await deploy.run_deployment("each_dep", {"xs": ["a"]})
            assert refused["status"] == "unrunnable", refused
            assert [d["code"] for d in refused["diagnostics"]] == ["tool_not_allowed"]
            assert "items.append_item" in refused["diagnostics"][0]["message"]
            assert not lines.exists()

            await deploy.deployment_save(item_deployment(tmp_path, ["append_item"]))
            xs = ["a", "bad1", 7, "b", "c"]
            done = await deploy.run_deployment("each_dep", {"xs": xs})
            assert done["status"] == "completed", done.get("error")
            out = done["output"]["out"]  # serial, skip: a, b, c (lines 1, 3, 4)
            assert out == [
                {"outcome": "stamped", "output": {"text": "a", "line": 1}},
                {"outcome": "stamped", "output": {"text": "b", "line": 3}},
                {"outcome": "stamped", "output": {"text": "c", "line": 4}},
            ]
            more = done["output"]["more"]  # concurrent, collect: a record per item
            assert [m["ok"] for m in more] == [True, False, False, True, True]
            assert [m["result"]["output"]["text"] for m in more if m["ok"]] == ["a", "b", "c"]
            assert more[1]["error"]["code"] == "tool_error"
            assert "item 1: child stamp@1 failed" in more[1]["error"]["message"]
            assert "refused bad1" in more[1]["error"]["message"]
            assert more[2]["error"]["code"] == "schema_mismatch"
            assert "item 2" in more[2]["error"]["message"]
            # Every child call once per foreach (the schema-mismatched item never ran).
            assert sorted(lines.read_text().splitlines()) == sorted(["a", "bad1", "b", "c"] * 2)

            trace = await deploy.read_run_trace(done["run_id"])
            nodes = [entry["node"] for entry in trace["entries"]]
            for index in (0, 1, 3, 4):
                assert f"first[{index}]/call" in nodes and f"second[{index}]/call" in nodes
            assert "first[2]/call" not in nodes
            assert nodes.count("first[0]/stamped") == 1
            failed = [e for e in trace["entries"] if e["node"] == "second[1]/call"]
            assert [e["status"] for e in failed] == ["error"]

            # fail: the run fails at the first failed item, naming it and its code.
            failing = parent("2", {"first": child_foreach()})
            await deploy.artifacts.save(SESSION, json.dumps(failing))
            deployment = item_deployment(tmp_path, ["append_item"])
            deployment["artifact"]["version"] = "2"
            await deploy.deployment_save(deployment)
            failed_run = await deploy.run_deployment("each_dep", {"xs": ["d", "bad2", "e"]})
            assert failed_run["status"] == "failed", failed_run
            assert failed_run["error"]["type"] == "ForeachItemError"
            assert "item 1 failed (tool_error)" in failed_run["error"]["message"]
            assert lines.read_text().splitlines()[-2:] == ["d", "bad2"]  # e never ran
        finally:
            await built.supervisor.shutdown()


async def test_a_failure_inside_the_child_that_is_no_item_error_fails_the_run(
    tmp_path: Path,
) -> None:
    """Whatever ``on_item_error`` says (here ``collect``), a child whose tool's server
    cannot be reached (``unavailable``: not the item's fault) fails the run with the
    source's error, as a tool body's would. An empty list runs no child and gives
    ``[]``."""
    document = parent("1", {"first": child_foreach(on_item_error="collect")})
    catalog = Catalog()
    missing = StdioSource(str(tmp_path / "no-such-server"))
    catalog.register(
        compile_artifact(
            validate_artifact(document),
            children={"stamp": validate_artifact(stamp())},
            sources={"items": missing},
        )
    )
    async with session(f"sqlite:///{tmp_path / 'u.db'}", catalog) as (built, tools):
        run_id = await start(tools, "each", {"xs": ["a"]})
        got = await settle(built, tools, run_id)
        assert got["run_status"] == "failed", got
        assert got["error"]["type"] == "SourceUnreachableError", got["error"]
        run_id = await start(tools, "each", {"xs": []})
        assert (await settle(built, tools, run_id))["run_status"] == "completed"
        assert (await outcome(built, "each", run_id))["$output"]["out"] == []


async def test_the_child_is_pinned_in_the_closure(tmp_path: Path) -> None:
    """The foreach's child is part of the parent's closure: the saved record pins it
    (name, version, digest), so deployments and drift checks cover it like a workflow
    node's child; another session cannot reach it."""
    async with open_store(f"sqlite:///{tmp_path / 'p.db'}") as store:
        built = WorkflowSession.build(store, SESSION, Catalog())
        deploy = DeployService(built, check_timeout=30)
        child = await deploy.artifacts.save(SESSION, json.dumps(stamp()))
        saved = await deploy.artifacts.save(
            SESSION, json.dumps(parent("1", {"first": child_foreach()}))
        )
        [pin] = saved.children
        assert (pin.name, pin.version, pin.digest) == ("stamp", "1", child.digest)
        closure = await deploy.artifacts.closure(SESSION, "each", "1")
        assert set(closure) == {"each@1", "stamp@1"}
        # Another tenant's session cannot run this session's child in a foreach: the
        # child is resolved in the saving session only, and nothing is saved.
        other = str(uuid.UUID(int=28, version=4))
        with pytest.raises(ArtifactValidationError) as raised:
            await deploy.artifacts.save(other, json.dumps(parent("1", {"first": child_foreach()})))
        assert [(i.place, i.code) for i in raised.value.issues] == [
            ("children.stamp", "child_missing")
        ]
        assert await deploy.artifacts.list(other) == []


async def test_save_refuses_bad_child_bodies_with_placed_issues(tmp_path: Path) -> None:
    """An undeclared child and a body template reading what its scope lacks (validation,
    no store); at save: input keys the child's closed schema does not have, a missing
    required input, and a child whose closure holds an interrupt node (directly, or in
    a grandchild). Nothing is saved; every new code has an explain entry."""
    undeclared = artifact(
        {
            "first": {
                **child_foreach(),
                "body": {"kind": "workflow", "workflow": "ghost", "input": {"x": "${ result }"}},
            }
        }
    )
    with pytest.raises(ArtifactValidationError) as raised:
        validate_artifact(undeclared)
    found = {(issue.place, issue.code) for issue in raised.value.issues}
    assert ("nodes.first.body.workflow", "unknown_child") in found, found
    assert any(place == "nodes.first.body.input.x" for place, _ in found), found

    asking = {
        "kind": "interrupt",
        "request": {},
        "resume_schema": {"type": "object", "additionalProperties": False, "properties": {}},
        "next": "stamped",
    }
    async with open_store(f"sqlite:///{tmp_path / 'v.db'}") as store:
        built = WorkflowSession.build(store, SESSION, Catalog())
        deploy = DeployService(built, check_timeout=30)
        await deploy.artifacts.save(SESSION, json.dumps(stamp()))
        pausing = stamp("2", ask=asking)
        pausing["nodes"]["call"]["next"] = "ask"
        await deploy.artifacts.save(SESSION, json.dumps(pausing))
        # A wrapper whose own child (stamp@2) can pause: the grandchild counts too.
        wrapper = {
            **stamp("1"),
            "name": "wrapper",
            "dependencies": {},
            "children": {"stamp": "2"},
            "state": {},
            "start": "inner",
            "nodes": {
                "inner": {
                    "kind": "workflow",
                    "workflow": "stamp",
                    "input": {"text": "${ input.text }", "index": "${ input.index }"},
                    "next": "stamped",
                },
                "stamped": {"kind": "end", "outcome": "stamped", "output": {}},
            },
        }
        await deploy.artifacts.save(SESSION, json.dumps(wrapper))

        mismatched = parent(
            "1",
            {
                "first": {
                    **child_foreach(next="second"),
                    "body": {
                        "kind": "workflow",
                        "workflow": "stamp",
                        "input": {"text": "${ item }", "size": 3},
                    },
                },
                "second": child_foreach(),
            },
        )
        for document, expected in [
            (
                mismatched,
                {
                    ("nodes.first.body.input.size", "unknown_field"),
                    ("nodes.first.body.input", "field_missing"),
                },
            ),
            (
                parent("2", {"first": child_foreach()}, child="2"),
                {("nodes.first.body.workflow", "foreach_child_interrupt")},
            ),
            (
                {
                    **parent("3", {"first": {**child_foreach(), "body": {
                        **child_foreach()["body"], "workflow": "wrapper"}}}),
                    "children": {"wrapper": "1"},
                },
                {("nodes.first.body.workflow", "foreach_child_interrupt")},
            ),
        ]:  # fmt: skip
            with pytest.raises(ArtifactValidationError) as raised:
                await deploy.artifacts.save(SESSION, json.dumps(document))
            found = {(issue.place, issue.code) for issue in raised.value.issues}
            assert found == expected, found
            for issue in raised.value.issues:
                assert explain(issue.code)["code"] == issue.code
                if issue.code == "foreach_child_interrupt":
                    assert "interrupt node 'ask'" in issue.message and issue.hint
        assert [r.name for r in await deploy.artifacts.list(SESSION, "each")] == []


async def test_a_crash_mid_item_never_repeats_a_finished_item_or_call(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SIGKILL of the run's owner while item b's child is in its second call
    (``b2``, held open by the server), in a serial foreach whose child makes two calls
    of ``append_item`` (not idempotent) per item; another process adopts the run. Item
    a finished in an earlier step (its record is state) and is not run again; item b's
    child runs again under the same nested run id: its first call returned before the
    kill (its intent says done), so it is not made again, and its second call was under
    way, so the run fails with tool_outcome_unknown rather than call it twice."""
    db = f"sqlite:///{tmp_path / 'crash.db'}"
    monkeypatch.setenv("ITEM_DIR", str(tmp_path))
    (tmp_path / "hold-b2").touch()
    owner = subprocess.Popen(  # noqa: ASYNC220 - one child, killed below
        [
            sys.executable, "-m", "flowledger", "start", "foreach_child_write", "1",
            "--input", json.dumps({"texts": ["a", "b", "c"]}), "--db", db, *APP,
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
        while not (
            (tmp_path / "started-b2").exists()
            and called() == ["a", "a2", "b"]
            and await done_intents(db) == 3
        ):
            assert time.monotonic() < deadline, "timed out waiting for item b's second call"
            await asyncio.sleep(0.05)
    finally:
        os.killpg(owner.pid, signal.SIGKILL)
        await asyncio.to_thread(owner.wait, 60)
    # The hold stays: the killed owner's server (a session of its own, so it outlives
    # the kill until it reads EOF) must not finish the held call; a new call of b2 by
    # the adopter would show as a new started-b2.
    (tmp_path / "started-b2").unlink()
    from .runs.app import catalog

    async with adopting(db, catalog()) as adopted:  # activation adopts the run
        assert await adopted.supervisor.wait_idle() is None
        [run] = (await adopted.registry.list(adopted.session_id)).runs
        final = await WorkflowTools.for_session(adopted).call(
            "workflow_run_get", {"run_id": run.id}
        )
    assert final["run_status"] == "failed", final
    assert final["error"]["type"] == "ToolOutcomeUnknownError"
    assert "a call of items.append_item was under way" in final["error"]["message"]
    assert called() == ["a", "a2", "b"]  # no finished item or call again
    assert not (tmp_path / "started-b2").exists()  # the held call was not made again
    assert not (tmp_path / "started-c").exists()  # nothing after the held call ran
