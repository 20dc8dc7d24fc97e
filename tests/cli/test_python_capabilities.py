"""A Python function and a built-in transform, end to end through the CLI: registered
(``source add --python`` / ``--builtin``), probed, called by an artifact's tool nodes,
deployed and run until it pauses; then the function's signature changes (the module is
rewritten on ``PYTHONPATH``) and a resume, in a new process, is blocked with
``schema_drift``; with the module gone it is blocked with ``source_unreachable``; with
the module restored the run completes. The pin records the function's module, qualified
name and distribution, and the trace its calls.

The CLI runs in this process, except the first resume: a child process, the way a module
changed on disk reaches a process (by starting one); the later resumes make this process
forget the module first, as a new process would not have it."""

from __future__ import annotations

import asyncio
import json
import sys
import textwrap
import uuid
from pathlib import Path
from typing import Any

import pytest

from flowledger.deploy.deployments.pin import PinStore
from flowledger.storage import open_store

from .conftest import Cli

ARTIFACT = """
format: flowledger.artifact/v1
name: calc_flow
version: "1"
input_schema:
  type: object
  additionalProperties: false
  required: [a]
  properties: {a: {type: integer}}
output_schema:
  type: object
  additionalProperties: false
  required: [text, total]
  properties: {text: {type: string}, total: {type: integer}}
dependencies:
  calc: {tools: [add_up]}
  std: {tools: [template]}
state: {sum: {}, text: {}, total: {}}
start: add
nodes:
  add:
    kind: tool
    dependency: calc
    tool: add_up
    arguments: {a: "${ input.a }", b: 2}
    assign: {sum: "${ result.structured.result }"}
    next: say
  say:
    kind: tool
    dependency: std
    tool: template
    arguments: {text: "sum is {{s}}", values: {s: "${ state.sum }"}}
    assign: {text: "${ result.structured.result }"}
    next: ask
  ask:
    kind: interrupt
    label: Go ahead
    request: {question: "Go?"}
    resume_schema: {type: object, additionalProperties: false, properties: {go: {type: boolean}}}
    next: again
  again:
    kind: tool
    dependency: calc
    tool: add_up
    arguments: {a: "${ state.sum }", b: 10}
    assign: {total: "${ result.structured.result }"}
    next: done
  done:
    kind: end
    outcome: done
    output: {text: "${ state.text }", total: "${ state.total }"}
"""

DEPLOYMENT = """
format: flowledger.deployment/v1
name: calc_dep
artifact: {name: calc_flow, version: "1"}
sources:
  calc: {source: calc, allow_tools: [add_up]}
  std: {source: std, allow_tools: [template]}
"""

V1 = '''
def add_up(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b
'''
V2 = '''
def add_up(a: int, b: int, c: int) -> int:
    """Add three numbers."""
    return a + b + c
'''


def test_a_python_capability_is_registered_run_pinned_blocked_and_resumed(
    cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    modules = tmp_path / "modules"
    modules.mkdir()
    name = f"fl_calc_{uuid.uuid4().hex[:10]}"
    module = modules / f"{name}.py"
    module.write_text(textwrap.dedent(V1))
    monkeypatch.syspath_prepend(str(modules))
    monkeypatch.setenv("PYTHONPATH", str(modules))

    flags = cli("source", "add", "bad", "--builtin", "--read-only", "x")
    assert flags.exit_code == 2 and "annotate functions of --python" in flags.output
    added = cli.json("source", "add", "calc", "--python", f"{name}:add_up", "--read-only", "add_up")
    assert added["document"]["python"] == {
        "module": name,
        "functions": ["add_up"],
        "read_only": ["add_up"],
    }
    assert cli.json("source", "add", "std", "--builtin")["document"]["builtin"] == {}
    probed = cli.json("source", "probe", "calc")
    assert probed["server"]["protocol_version"] == "flowledger-python/1"
    [tool] = probed["tools"]
    assert (tool["name"], tool["read_only"], tool["idempotent"]) == ("add_up", True, False)
    assert tool["input_schema"]["required"] == ["a", "b"]
    listed = {s["name"]: s["transport"] for s in cli.json("source", "list")["sources"]}
    assert listed == {"calc": "python", "std": "builtin"}

    (tmp_path / "artifact.yaml").write_text(ARTIFACT)
    (tmp_path / "deployment.yaml").write_text(DEPLOYMENT)
    cli.json("artifact", "save", "artifact.yaml")
    cli.json("deploy", "set", "deployment.yaml")
    started = cli.json("deploy", "run", "calc_dep", "--input", '{"a": 3}')
    assert started["status"] == "interrupted", started
    run_id = started["run_id"]

    pin = asyncio.run(_pin(cli.db, run_id))
    pinned = pin["sources"]["calc"]
    assert pinned["identity"] == {
        "source": "calc",
        "revision": 1,
        "transport": "python",
        "module": name,
        "functions": ["add_up"],
        "read_only": ["add_up"],
        "idempotent": [],
        "secrets": [],
    }
    assert pinned["tools"]["add_up"]["python"] == {
        "module": name,
        "qualname": "add_up",
        "distribution": None,
        "version": None,
    }
    assert pin["sources"]["std"]["identity"]["transport"] == "builtin"

    # a changed signature, seen by a new process
    module.write_text(textwrap.dedent(V2))
    child = cli.process("deploy", "resume", run_id, "--payload", '{"go": true}', "--json",
                        "--db", cli.db, timeout=120)  # fmt: skip
    blocked = json.loads(child.stdout)
    assert (child.returncode, blocked["resumed"]) == (1, False)
    assert [d["code"] for d in blocked["resume_readiness"]["diagnostics"]] == ["schema_drift"]

    def resume() -> tuple[int, Any]:
        # this process forgets the module, as a new process has not imported it
        sys.modules.pop(name, None)
        done = cli("deploy", "resume", run_id, "--payload", '{"go": true}', "--json")
        return done.exit_code, json.loads(done.stdout)

    module.unlink()
    code, blocked = resume()
    assert (code, blocked["resumed"]) == (1, False)
    [gone] = blocked["resume_readiness"]["diagnostics"]
    assert gone["code"] == "source_unreachable"
    assert f"module {name} not found" in gone["message"]

    module.write_text(textwrap.dedent(V1))
    code, done = resume()
    assert code == 0, done
    assert (done["status"], done["output"]) == ("completed", {"text": "sum is 5", "total": 15})

    trace = cli.json("trace", run_id)
    calls = [(e["node"], e.get("dependency"), e.get("tool")) for e in trace["entries"]]
    assert calls[:2] == [("add", "calc", "add_up"), ("say", "std", "template")]
    assert ("again", "calc", "add_up") in calls


async def _pin(url: str, run_id: str) -> dict[str, Any]:
    async with open_store(url) as store:
        for name in await store.ledger.names("deploy/pins/"):
            pin = await PinStore(store.ledger).read(name.rpartition("/")[2])
            assert pin is not None
            document = dict(pin.document)
            if document.get("run_id") == run_id:
                return document
    raise AssertionError(f"no pin of run {run_id}")
