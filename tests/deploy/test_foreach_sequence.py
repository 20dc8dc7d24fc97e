"""A ``foreach`` whose body is an inline node sequence (``body: {kind: sequence, state,
start, nodes}``): per item, the nodes run from ``start`` to an ``end`` node, with
``item``, ``index``, the run's ``input`` and the item's own ``state`` in scope; the
item's result is the end's ``{outcome, output}``.

Through the front doors: the Python API (`compile_artifact` + the ``workflow_*`` tools),
a deployment (`DeployService`: the sequence's tools allowed, retry-checked and pinned
like any call site) and the CLI (``artifact save``, ``artifact list``, ``deploy set``
and ``deploy run`` as subprocesses). Tools are those of ``tests/deploy/runs/item_server.py`` (the
tests' own SDK server: ``append_item`` is not idempotent and appends a line per call to
``ITEM_DIR/lines``, waiting while ``ITEM_DIR/hold-<text>`` exists; ``shout`` is
read-only; a text starting with ``bad`` is answered with an error result)."""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from flowledger.deploy import (
    ArtifactValidationError,
    DeployService,
    validate_artifact,
)
from flowledger.deploy.artifacts.schema import artifact_json_schema
from flowledger.deploy.drafts.explain import explain
from flowledger.storage import open_store
from flowledger.workflows import Catalog
from flowledger.workflows.runtime.session import WorkflowSession

from .runs.app import item_source
from .servers import REPO
from .test_foreach import artifact, item_deployment, run_once

SESSION = str(uuid.UUID(int=2727, version=4))


def sequence(nodes: dict[str, Any], start: str, **fields: Any) -> dict[str, Any]:
    return {"kind": "sequence", "start": start, "nodes": nodes, **fields}


def foreach(body: dict[str, Any], **fields: Any) -> dict[str, Any]:
    return {
        "kind": "foreach",
        "items": "${ input.xs }",
        "body": body,
        "into": "out",
        "next": "done",
        **fields,
    }


# Per item: its own `seen` (append: shows a fresh state per item), a switch on the item,
# a nested foreach over the item's parts (its `item` shadows the outer one), two ends.
SIZED = sequence(
    {
        "note": {
            "kind": "set",
            "assign": {
                "seen": ["${ item.n }"],
                "label": "${ join('/', [item.name, to_string(length(input.xs))]) }",
            },
            "next": "parts",
        },
        "parts": {
            "kind": "foreach",
            "items": "${ item.parts }",
            "body": {"kind": "value", "value": "${ length(item) }"},
            "into": "sizes",
            "next": "pick",
        },
        "pick": {
            "kind": "switch",
            "cases": [{"when": "${ item.n > `1` }", "next": "big"}],
            "default": "small",
        },
        "big": {
            "kind": "end",
            "outcome": "big",
            "output": {
                "index": "${ index }",
                "seen": "${ state.seen }",
                "label": "${ state.label }",
                "sizes": "${ state.sizes }",
            },
        },
        "small": {"kind": "end", "outcome": "small", "output": {"index": "${ index }"}},
    },
    "note",
    state={"seen": {"reduce": "append"}, "label": {}, "sizes": {}},
)


@pytest.mark.parametrize("mode", ["serial", "concurrent"])
async def test_a_sequence_body_maps_the_list_in_item_order(tmp_path: Path, mode: str) -> None:
    """Each item runs the sequence once, with its own fresh state, ``item``, ``index``
    and the run's ``input`` in scope; results are the ends' ``{outcome, output}`` in item
    order; the trace names every node of every item ``first[<i>]/<node>`` (a nested
    foreach inside adds its own entries); serial takes one parent super-step per item,
    concurrent one per batch of ``max_concurrency``."""
    extra = {"mode": "concurrent", "max_concurrency": 2} if mode == "concurrent" else {}
    document = artifact({"first": foreach(SIZED, **extra)})
    xs = [{"name": f"x{n}", "n": n, "parts": ["ab", "c"][: n % 3]} for n in range(5)]
    url = f"sqlite:///{tmp_path / 's.db'}"
    got, state, entries = await run_once(url, document, xs)
    assert got["run_status"] == "completed", got
    assert (
        state["$output"]["out"]
        == [
            {"outcome": "small", "output": {"index": 0}},
            {"outcome": "small", "output": {"index": 1}},
            *(
                {
                    "outcome": "big",
                    "output": {
                        "index": n,
                        "seen": [n],  # not the earlier items' writes: a fresh state per item
                        "label": f"x{n}/5",
                        "sizes": [2, 1][: n % 3],
                    },
                }
                for n in range(2, 5)
            ),
        ]
    )
    names = [e.node for e in entries]
    for n in range(5):
        assert f"first[{n}]/note" in names and f"first[{n}]/pick" in names
    assert names.count("first[2]/parts") == 2  # the nested foreach (serial): a step per part
    assert {e.kind for e in entries if e.node == "first[4]/big"} == {"end"}
    steps = [e for e in entries if e.node == "first"]
    assert len(steps) == (5 if mode == "serial" else 3)
    assert all(e.status == "ok" for e in entries), [(e.node, e.status) for e in entries]


async def test_an_expression_failing_inside_a_sequence_is_the_items_failure(tmp_path: Path) -> None:
    """A sequence whose end output fails an expression at run time
    (``abs`` of a string) is the item's ``expression_failed``: each policy decides."""
    body = sequence(
        {"calc": {"kind": "end", "outcome": "ok", "output": {"abs": "${ abs(item) }"}}}, "calc"
    )
    document = artifact(
        {
            "first": foreach(body, on_item_error="skip", next="second"),
            "second": foreach(body, on_item_error="collect", into="more"),
        }
    )
    got, state, _ = await run_once(f"sqlite:///{tmp_path / 'e.db'}", document, [-1, "x", 2])
    assert got["run_status"] == "completed", got
    assert [r["output"]["abs"] for r in state["$output"]["out"]] == [1, 2]
    more = state["$output"]["more"]
    assert [m["ok"] for m in more] == [True, False, True]
    assert more[1]["error"]["code"] == "expression_failed"
    assert more[1]["error"]["message"].startswith("node second: item 1: its sequence failed")
    failing = artifact({"first": foreach(body)})
    got, _, _ = await run_once(f"sqlite:///{tmp_path / 'f.db'}", failing, [-1, "x", 2])
    assert got["run_status"] == "failed"
    assert got["error"]["type"] == "ForeachItemError"
    assert "node first: item 1 failed (expression_failed)" in got["error"]["message"]


def calling(**second: Any) -> dict[str, Any]:
    """A sequence: ``shout`` (read-only) the item, then ``append_item`` (not idempotent)
    its upper-cased text; ends with both answers."""
    return sequence(
        {
            "loud": {
                "kind": "tool",
                "dependency": "items",
                "tool": "shout",
                "arguments": {"text": "${ item }"},
                "assign": {"loud": "${ result.structured.text }"},
                "next": "write",
            },
            "write": {
                "kind": "tool",
                "dependency": "items",
                "tool": "append_item",
                "arguments": {"text": "${ state.loud }"},
                "assign": {"line": "${ result.structured.line }"},
                "next": "written",
                **second,
            },
            "written": {
                "kind": "end",
                "outcome": "written",
                "output": {"loud": "${ state.loud }", "line": "${ state.line }"},
            },
        },
        "loud",
        state={"loud": {}, "line": {}},
    )


ITEMS = {"dependencies": {"items": {"tools": ["shout", "append_item"]}}}


async def test_item_error_policies_of_a_sequence_calling_real_tools(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A tool node of the sequence failing (``shout`` answers ``bad1`` with an error
    result) is the item's failure (``tool_error``), and the sequence stops there (no
    ``append_item`` for it): ``skip`` (serial) leaves the item out, ``collect``
    (concurrent) keeps its record, ``fail`` fails the run naming the item. Every other
    item's non-idempotent call is made exactly once per foreach (the file)."""
    monkeypatch.setenv("ITEM_DIR", str(tmp_path))
    document = artifact(
        {
            "first": foreach(calling(), on_item_error="skip", next="second"),
            "second": foreach(calling(), on_item_error="collect", into="more", mode="concurrent"),
        },
        **ITEMS,
    )
    sources = {"items": item_source()}
    url = f"sqlite:///{tmp_path / 't.db'}"
    got, state, entries = await run_once(url, document, ["a", "bad1", "b"], sources)
    assert got["run_status"] == "completed", got
    out = state["$output"]["out"]
    assert [(r["outcome"], r["output"]["loud"]) for r in out] == [
        ("written", "A"),
        ("written", "B"),
    ]
    more = state["$output"]["more"]
    assert [m["ok"] for m in more] == [True, False, True]
    assert more[1]["error"]["code"] == "tool_error"
    assert "item 1: its sequence failed" in more[1]["error"]["message"]
    assert "refused bad1" in more[1]["error"]["message"]
    assert sorted((tmp_path / "lines").read_text().splitlines()) == ["A", "A", "B", "B"]
    failed = [e for e in entries if e.status == "error"]
    assert {(e.node, e.failure) for e in failed} == {
        ("first[1]/loud", "tool_error"),
        ("second[1]/loud", "tool_error"),
    }
    failing = artifact({"first": foreach(calling())}, **ITEMS)
    got, _, _ = await run_once(f"sqlite:///{tmp_path / 'f.db'}", failing, ["c", "bad2"], sources)
    assert got["run_status"] == "failed"
    assert got["error"]["type"] == "ForeachItemError"
    assert "item 1 failed (tool_error)" in got["error"]["message"]
    assert sorted((tmp_path / "lines").read_text().splitlines()) == ["A", "A", "B", "B", "C"]


# -- a timeout inside a foreach body ---------------------------------------------------


async def test_a_timeout_of_a_foreach_body_call_in_the_trace_and_how_an_item_handles_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``append_item`` of ``slow`` does not answer (its hold file stays) within the
    body's ``timeout``. A tool body's timeout is not an item error (its effect is
    unknown): the run fails whatever ``on_item_error`` says (here ``collect``), and the
    trace's foreach entry has kind ``timeout``. In a sequence body the tool node's own
    ``on_error`` routes it per item: the item ends at the author's ``late`` end with
    ``error.kind`` ``timeout`` as its result, the trace's entry of that node says
    ``routed`` with kind ``timeout``, and the foreach goes on with the next item."""
    monkeypatch.setenv("ITEM_DIR", str(tmp_path))
    (tmp_path / "hold-slow").touch()
    sources = {"items": item_source()}
    deps = {"dependencies": {"items": {"tools": ["append_item"]}}}
    try:
        tool_body = {
            "kind": "tool",
            "dependency": "items",
            "tool": "append_item",
            "arguments": {"text": "${ item }"},
            "timeout": 1,
        }
        document = artifact({"first": foreach(tool_body, on_item_error="collect")}, **deps)
        url = f"sqlite:///{tmp_path / 'tool.db'}"
        got, _, entries = await run_once(url, document, ["a", "slow", "b"], sources)
        assert got["run_status"] == "failed", got
        assert got["error"]["type"] == "ToolCallTimeoutError"
        [timed_out] = [e for e in entries if e.status == "error"]
        assert (timed_out.node, timed_out.failure) == ("first", "timeout")

        body = sequence(
            {
                "call": {
                    "kind": "tool",
                    "dependency": "items",
                    "tool": "append_item",
                    "arguments": {"text": "${ item }"},
                    "timeout": 1,
                    "assign": {"line": "${ result.structured.line }"},
                    "on_error": {"next": "late", "assign": {"why": "${ error.kind }"}},
                    "next": "written",
                },
                "written": {
                    "kind": "end",
                    "outcome": "written",
                    "output": {"line": "${ state.line }"},
                },
                "late": {"kind": "end", "outcome": "late", "output": {"why": "${ state.why }"}},
            },
            "call",
            state={"line": {}, "why": {}},
        )
        document = artifact({"first": foreach(body, on_item_error="fail")}, **deps)
        url = f"sqlite:///{tmp_path / 'sequence.db'}"
        got, state, entries = await run_once(url, document, ["c", "slow", "d"], sources)
        assert got["run_status"] == "completed", got
        assert [r["outcome"] for r in state["$output"]["out"]] == ["written", "late", "written"]
        assert state["$output"]["out"][1]["output"] == {"why": "timeout"}
        [routed] = [e for e in entries if e.node == "first[1]/call"]
        assert (routed.status, routed.failure) == ("routed", "timeout")
    finally:
        (tmp_path / "hold-slow").unlink()


# -- deployed: the sequence's tools are call sites of the artifact ----------------------


async def test_a_deployment_checks_allows_and_pins_the_tools_of_a_sequence(
    tmp_path: Path,
) -> None:
    """``append_item`` is called only inside the sequence: a deployment that does not
    allow it is unrunnable (``tool_not_allowed``); a retry the failure table forbids on a
    tool node inside the sequence (``timeout`` of a tool that is not idempotent) is
    ``retry_not_allowed`` placed at that node; neither starts a run or calls a tool.
    Allowed, the deployed run maps the list over the real server, pinned."""
    document = artifact({"first": foreach(calling())}, **ITEMS)
    retried = copy.deepcopy(document)
    write = retried["nodes"]["first"]["body"]["nodes"]["write"]
    write["retry"] = {"attempts": 2, "on": ["timeout"]}
    retried["version"] = "2"
    async with open_store(f"sqlite:///{tmp_path / 'd.db'}") as store:
        built = WorkflowSession.build(store, SESSION, Catalog())
        await built.supervisor.activate()
        try:
            deploy = DeployService(built, check_timeout=30)
            await deploy.artifacts.save(SESSION, json.dumps(document))
            await deploy.artifacts.save(SESSION, json.dumps(retried))
            await deploy.deployment_save(item_deployment(tmp_path, ["shout"]))
            refused = await deploy.run_deployment("each_dep", {"xs": ["a"]})
            assert refused["status"] == "unrunnable", refused
            assert [d["code"] for d in refused["diagnostics"]] == ["tool_not_allowed"]
            assert "items.append_item" in refused["diagnostics"][0]["message"]
            two = item_deployment(tmp_path, ["shout", "append_item"])
            two["artifact"]["version"] = "2"
            await deploy.deployment_save(two)
            refused = await deploy.run_deployment("each_dep", {"xs": ["a"]})
            assert refused["status"] == "unrunnable", refused
            assert [d["code"] for d in refused["diagnostics"]] == ["retry_not_allowed"]
            assert refused["diagnostics"][0]["message"].startswith(
                "each.nodes.first.body.nodes.write.retry.on: timeout"
            )
            assert (await built.registry.list(SESSION)).runs == []
            assert not (tmp_path / "lines").exists()
            await deploy.deployment_save(item_deployment(tmp_path, ["shout", "append_item"]))
            done = await deploy.run_deployment("each_dep", {"xs": ["a", "b"]})
            assert done["status"] == "completed", done
            assert [r["output"] for r in done["output"]["out"]] == [
                {"loud": "A", "line": 1},
                {"loud": "B", "line": 2},
            ]
            assert (tmp_path / "lines").read_text().splitlines() == ["A", "B"]
        finally:
            await built.supervisor.shutdown()


def flowledger(*args: str, db: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "flowledger", *args, "--db", db, "--json"],
        cwd=REPO,
        env=dict(os.environ),
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )


def test_the_cli_refuses_a_bad_sequence_then_deploys_and_runs_a_good_one(tmp_path: Path) -> None:
    """``flowledger artifact save`` of a sequence holding an interrupt node is refused
    with placed issues and saves nothing; the good artifact saved, ``deploy set`` and
    ``deploy run`` map the list in new processes."""
    db = f"sqlite:///{tmp_path / 'cli.db'}"
    bad = artifact({"first": foreach(calling())}, **ITEMS)
    bad["nodes"]["first"]["body"]["nodes"]["ask"] = {
        "kind": "interrupt",
        "resume_schema": {"type": "object", "additionalProperties": False},
        "next": "written",
    }
    bad["nodes"]["first"]["body"]["nodes"]["loud"]["next"] = "ask"
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(bad))
    refused = flowledger("artifact", "save", str(path), db=db)
    assert refused.returncode == 1
    assert refused.stderr.startswith(
        "error: invalid artifact: nodes.first.body.nodes.ask.kind: a sequence body cannot "
        "hold interrupt nodes"
    ), refused.stderr
    listed = flowledger("artifact", "list", db=db)
    assert json.loads(listed.stdout)["artifacts"] == [], listed.stdout
    path.write_text(json.dumps(artifact({"first": foreach(calling())}, **ITEMS)))
    assert flowledger("artifact", "save", str(path), db=db).returncode == 0
    deployment = tmp_path / "dep.json"
    deployment.write_text(json.dumps(item_deployment(tmp_path, ["shout", "append_item"])))
    assert flowledger("deploy", "set", str(deployment), db=db).returncode == 0
    ran = flowledger("deploy", "run", "each_dep", "--input", '{"xs": ["p", "q"]}', db=db)
    assert ran.returncode == 0, ran.stderr
    answer = json.loads(ran.stdout)
    assert answer["status"] == "completed"
    assert [r["output"]["loud"] for r in answer["output"]["out"]] == ["P", "Q"]


# -- validation -----------------------------------------------------------------------


def test_bad_sequence_bodies_are_refused_with_placed_issues() -> None:
    """Every problem inside a sequence is an issue placed under the foreach's body (the
    checks of a whole artifact apply to it, with ``item`` and ``index`` in scope and the
    item's own state), and what an item cannot do (pause, run a child artifact) is
    ``foreach_sequence_node`` with a hint and an explain entry."""
    nodes = {
        "go": {"kind": "set", "assign": {"x": "${ state.nope }", "ghost": 1}, "next": "ask"},
        "ask": {
            "kind": "interrupt",
            "resume_schema": {"type": "object", "additionalProperties": False},
            "next": "sub",
        },
        "sub": {"kind": "workflow", "workflow": "stamp", "next": "each"},
        "each": {
            "kind": "foreach",
            "items": "${ item }",
            "body": {"kind": "workflow", "workflow": "stamp"},
            "into": "x",
            "next": "call",
        },
        "call": {
            "kind": "tool",
            "dependency": "ghost",
            "tool": "t",
            "arguments": {"v": "${ result }"},
            "next": "nowhere",
        },
        "end": {"kind": "end", "outcome": "ok", "output": {"v": "${ input.missing }"}},
        "stuck": {"kind": "set", "assign": {"x": "${ index }"}, "next": "stuck"},
    }
    document = artifact({"first": foreach(sequence(nodes, "go", state={"x": {}}))})
    with pytest.raises(ArtifactValidationError) as raised:
        validate_artifact(document)
    found = {(issue.place, issue.code) for issue in raised.value.issues}
    base = "nodes.first.body"
    assert {
        (f"{base}.nodes.go.assign.x", "unknown_field"),
        (f"{base}.nodes.go.assign.ghost", "unknown_state_field"),
        (f"{base}.nodes.ask.kind", "foreach_sequence_node"),
        (f"{base}.nodes.sub.kind", "foreach_sequence_node"),
        (f"{base}.nodes.sub.workflow", "unknown_child"),
        (f"{base}.nodes.each.body.kind", "foreach_sequence_node"),
        (f"{base}.nodes.call.dependency", "unknown_dependency"),
        (f"{base}.nodes.call.arguments.v", "not_in_scope"),
        (f"{base}.nodes.call.next", "unknown_node"),
        (f"{base}.nodes.end.output.v", "unknown_field"),
    } <= found, found
    for issue in raised.value.issues:
        if issue.code == "foreach_sequence_node":
            assert issue.hint
            assert explain(issue.code)["code"] == issue.code
    # With the references repaired, the graph checks: a loop with no way to an end.
    repaired = {
        "go": {"kind": "set", "assign": {"x": "${ index }"}, "next": "stuck"},
        "stuck": {"kind": "set", "assign": {"x": "${ item }"}, "next": "stuck"},
        "end": {"kind": "end", "outcome": "ok"},
    }
    with pytest.raises(ArtifactValidationError) as raised:
        validate_artifact(artifact({"first": foreach(sequence(repaired, "go", state={"x": {}}))}))
    found = {(issue.place, issue.code) for issue in raised.value.issues}
    assert (f"{base}.nodes.end", "unreachable_node") in found, found
    # Structure: an unknown node kind inside, a missing start, an unknown field.
    broken = sequence({"a": {"kind": "shell", "next": "a"}}, "a", extra=1)
    del broken["start"]
    with pytest.raises(ArtifactValidationError) as raised:
        validate_artifact(artifact({"first": foreach(broken)}))
    placed = {issue.place: issue for issue in raised.value.issues}
    assert placed[f"{base}.nodes.a"].code == "bad_kind"
    assert placed[f"{base}.start"].code == "field_missing"
    assert placed[f"{base}.extra"].code == "field_unknown"
    # An unknown body kind names every kind, the sequence included.
    with pytest.raises(ArtifactValidationError) as raised:
        validate_artifact(artifact({"first": foreach({"kind": "shell"})}))
    [issue] = raised.value.issues
    assert issue.hint == "a body's kind is one of tool, value, workflow, sequence"


def test_unused_tools_count_the_sequences_calls_and_the_json_schema_has_the_body() -> None:
    """A tool called only inside a sequence is used (no ``unused_tool``); one called
    nowhere still is refused. The artifact JSON Schema (``flowledger artifact schema``,
    the MCP resource) accepts a sequence body and refuses one without ``start``."""
    document = artifact({"first": foreach(calling())}, **ITEMS)
    validated = validate_artifact(document)
    assert set(validated.sequences) == {"first"}
    extra = copy.deepcopy(document)
    extra["dependencies"]["items"]["tools"].append("other")
    with pytest.raises(ArtifactValidationError) as raised:
        validate_artifact(extra)
    assert [(i.place, i.code) for i in raised.value.issues] == [
        ("dependencies.items.tools[2]", "unused_tool")
    ]
    schema = artifact_json_schema()
    jsonschema.validate(document, schema)
    broken = copy.deepcopy(document)
    del broken["nodes"]["first"]["body"]["start"]
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(broken, schema)


async def test_a_tenant_cannot_hide_a_forbidden_call_inside_a_sequence(tmp_path: Path) -> None:
    """A tenant (`SourceAccess.TENANT`, what an MCP-over-HTTP client gets) binds a
    registered source whose operator allows deployments only ``shout``, and calls
    ``append_item`` of it from inside a sequence body (its own deployment allowing
    both): the run is unrunnable with ``tool_not_allowed`` naming the source, no run
    starts and nothing is called. An inline command instead is refused to a tenant."""
    from flowledger.deploy.registry.access import SourceAccess
    from flowledger.deploy.registry.errors import InlineSourceRefusedError
    from flowledger.deploy.registry.store import SourceRegistry

    from .test_registered_runs import SESSION as TENANT_SESSION
    from .test_registered_runs import service

    registered = {
        "format": "flowledger.source/v1",
        "name": "items",
        "stdio": {
            "command": sys.executable,
            "args": ["-m", "tests.deploy.runs.item_server"],
            "env": {"ITEM_DIR": str(tmp_path)},
            "cwd": str(REPO),
        },
        "allow_tools": ["shout"],
    }
    deployment = {
        "format": "flowledger.deployment/v1",
        "name": "each_dep",
        "artifact": {"name": "each", "version": "1"},
        "sources": {"items": {"source": "items", "allow_tools": ["shout", "append_item"]}},
    }
    url = f"sqlite:///{tmp_path / 'tenant.db'}"
    async with service(url) as (_, store):
        await SourceRegistry.over(store).add(registered)
    async with service(url, access=SourceAccess.TENANT) as (tenant, _):
        await tenant.artifacts.save(
            TENANT_SESSION, json.dumps(artifact({"first": foreach(calling())}, **ITEMS))
        )
        await tenant.deployment_save(deployment)
        refused = await tenant.run_deployment("each_dep", {"xs": ["a"]})
        assert refused["status"] == "unrunnable", refused
        assert [d["code"] for d in refused["diagnostics"]] == ["tool_not_allowed"]
        assert "source 'items' does not allow" in refused["diagnostics"][0]["message"]
        assert (await tenant.session.registry.list(TENANT_SESSION)).runs == []
        inline = {**deployment, "sources": item_deployment(tmp_path, ["append_item"])["sources"]}
        with pytest.raises(InlineSourceRefusedError):
            await tenant.deployment_save(inline)
    assert not (tmp_path / "lines").exists()
