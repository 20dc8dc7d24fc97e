"""An OpenAPI capability end to end through the CLI, against a real local HTTP service
that serves its own document (tests/deploy/openapi_service.py): registered (``source add
--openapi DOC --base-url URL``, a credential by secret reference), probed, called by an
artifact's tool nodes (a POST that appends an item, a GET that lists them, a GET by
path parameter), deployed and run until it pauses; then the document's ``getItem``
operation changes and a resume, in a new process, is blocked with ``schema_drift``; with
the operation removed ``tool_missing``; with the document not served
``source_unreachable``; with the document restored the run completes. The pin records
the document's digest and each operation's method and path; every request carried the
credential; the service saw each POST once."""

from __future__ import annotations

import asyncio
import copy
import json
from pathlib import Path
from typing import Any

import pytest

from flowledger.deploy.deployments.pin import PinStore
from flowledger.storage import open_store

from ..deploy.openapi_service import item_service
from .conftest import Cli

ARTIFACT = """
format: flowledger.artifact/v1
name: items_flow
version: "1"
input_schema:
  type: object
  additionalProperties: false
  required: [name]
  properties: {name: {type: string}}
output_schema:
  type: object
  additionalProperties: false
  required: [id, count, name]
  properties: {id: {type: integer}, count: {type: integer}, name: {type: string}}
dependencies:
  items: {tools: [addItem, listItems, getItem]}
state: {id: {}, count: {}, name: {}}
start: add
nodes:
  add:
    kind: tool
    dependency: items
    tool: addItem
    arguments: {body: {name: "${ input.name }"}}
    assign: {id: "${ result.structured.id }"}
    next: list
  list:
    kind: tool
    dependency: items
    tool: listItems
    arguments: {limit: 10}
    assign: {count: "${ length(result.structured.result) }"}
    next: ask
  ask:
    kind: interrupt
    label: Go ahead
    request: {question: "Go?"}
    resume_schema: {type: object, additionalProperties: false, properties: {go: {type: boolean}}}
    next: fetch
  fetch:
    kind: tool
    dependency: items
    tool: getItem
    arguments: {item_id: "${ state.id }"}
    assign: {name: "${ result.structured.name }"}
    next: done
  done:
    kind: end
    outcome: done
    output: {id: "${ state.id }", count: "${ state.count }", name: "${ state.name }"}
"""

DEPLOYMENT = """
format: flowledger.deployment/v1
name: items_dep
artifact: {name: items_flow, version: "1"}
sources:
  items: {source: items, allow_tools: [addItem, listItems, getItem]}
"""


def test_an_openapi_capability_is_registered_run_pinned_blocked_and_resumed(
    cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ITEMS_KEY", "k-123")
    with item_service("3.1.0") as service:
        url = service.url
        alone = cli("source", "add", "bad", "--url", url, "--base-url", url)
        assert alone.exit_code == 2 and "go with --openapi" in alone.output
        added = cli.json(
            "source", "add", "items", "--openapi", f"{url}/openapi.json", "--base-url", url,
            "--operation", "addItem", "--operation", "listItems", "--operation", "getItem",
            "--secret", "items_key=ITEMS_KEY", "--auth-header", "X-Key=items_key",
        )  # fmt: skip
        assert added["document"]["openapi"] == {
            "document": f"{url}/openapi.json",
            "base_url": url,
            "operations": ["addItem", "listItems", "getItem"],
            "auth": {"header": "X-Key", "secret": "items_key"},
        }
        probed = cli.json("source", "probe", "items")
        assert probed["server"]["protocol_version"] == "openapi/3.1.0"
        assert probed["server"]["document"].startswith("sha256:")
        tools = {tool["name"]: tool for tool in probed["tools"]}
        assert sorted(tools) == ["addItem", "getItem", "listItems"]
        assert [(t["read_only"], t["idempotent"]) for t in tools.values()] == [
            (False, False),
            (True, True),
            (True, True),
        ]
        assert tools["addItem"]["input_schema"]["required"] == ["body"]
        assert tools["getItem"]["input_schema"]["properties"]["item_id"] == {"type": "integer"}
        listed = {s["name"]: s["transport"] for s in cli.json("source", "list")["sources"]}
        assert listed == {"items": "openapi"}

        (tmp_path / "artifact.yaml").write_text(ARTIFACT)
        (tmp_path / "deployment.yaml").write_text(DEPLOYMENT)
        cli.json("artifact", "save", "artifact.yaml")
        cli.json("deploy", "set", "deployment.yaml")
        started = cli.json("deploy", "run", "items_dep", "--input", '{"name": "apple"}')
        assert started["status"] == "interrupted", started
        run_id = started["run_id"]
        assert service.items == [{"id": 1, "name": "apple"}]

        pin = asyncio.run(_pin(cli.db, run_id))["sources"]["items"]
        assert pin["identity"] == {
            "source": "items",
            "revision": 1,
            "transport": "openapi",
            "document": f"{url}/openapi.json",
            "base_url": url,
            "operations": ["addItem", "getItem", "listItems"],
            "auth": {"header": "X-Key", "secret": "items_key"},
            "secrets": ["items_key"],
        }
        assert "k-123" not in json.dumps(pin)
        assert pin["server"]["document"] == probed["server"]["document"]
        assert pin["tools"]["addItem"]["openapi"] == {"method": "POST", "path": "/items"}
        assert pin["tools"]["getItem"]["openapi"] == {"method": "GET", "path": "/items/{item_id}"}

        original = copy.deepcopy(service.document)
        operation = service.document["paths"]["/items/{item_id}"]["get"]
        operation["parameters"][0]["schema"] = {"type": "string"}
        child = cli.process("deploy", "resume", run_id, "--payload", '{"go": true}', "--json",
                            "--db", cli.db, timeout=120)  # fmt: skip
        blocked = json.loads(child.stdout)
        assert (child.returncode, blocked["resumed"]) == (1, False), child.stderr
        found = {(d["code"], d["severity"]) for d in blocked["resume_readiness"]["diagnostics"]}
        assert found == {("schema_drift", "error"), ("server_changed", "warning")}

        def resume() -> tuple[int, Any]:
            done = cli("deploy", "resume", run_id, "--payload", '{"go": true}', "--json")
            return done.exit_code, json.loads(done.stdout)

        del service.document["paths"]["/items/{item_id}"]
        code, blocked = resume()
        assert (code, blocked["resumed"]) == (1, False)
        errors = [d for d in blocked["resume_readiness"]["diagnostics"] if d["severity"] == "error"]
        assert [d["code"] for d in errors] == ["tool_missing"]

        service.document = original
        service.serving = False
        code, blocked = resume()
        assert (code, blocked["resumed"]) == (1, False)
        [gone] = blocked["resume_readiness"]["diagnostics"]
        assert gone["code"] == "source_unreachable"
        assert "answered HTTP 503" in gone["message"]

        service.serving = True
        code, done = resume()
        assert code == 0, done
        assert (done["status"], done["output"]) == (
            "completed",
            {"id": 1, "count": 1, "name": "apple"},
        )
        assert service.count("POST", "/items") == 1
        assert service.count("GET", "/items/1") == 1
        assert set(service.keys[i] for i, r in enumerate(service.requests) if r[1] != "/"
                   and r[1] != "/openapi.json") == {"k-123"}  # fmt: skip

        trace = cli.json("trace", run_id)
        calls = [(e["node"], e.get("tool")) for e in trace["entries"] if e.get("tool")]
        assert calls[:2] == [("add", "addItem"), ("list", "listItems")]
        assert ("fetch", "getItem") in calls


async def _pin(url: str, run_id: str) -> dict[str, Any]:
    async with open_store(url) as store:
        for name in await store.ledger.names("deploy/pins/"):
            pin = await PinStore(store.ledger).read(name.rpartition("/")[2])
            assert pin is not None
            document = dict(pin.document)
            if document.get("run_id") == run_id:
                return document
    raise AssertionError(f"no pin of run {run_id}")
