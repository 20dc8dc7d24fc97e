"""Drafts checked against the catalog, through the MCP server (stdio, the operator's, the
``mcp`` SDK client), with the registered, probed mcp-server-time (``clock``) and
server-everything (``everything``): a literal argument of the wrong type, a missing
required argument, a traced expression of the wrong type, a result path the output
schema does not declare, a tool the probe does not list, and a contract changed since
the draft was checked. Each is a diagnostic at its place with next actions, applying the
next action fixes it where one can be derived, and nothing is published meanwhile."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mcp import Client

from flowledger.deploy import DeployService
from flowledger.deploy.drafts.record import timestamp
from flowledger.deploy.drafts.service import DraftService
from flowledger.deploy.registry.store import Probe, SourceRegistry
from flowledger.deploy.sources.tool_info import ToolInfo
from flowledger.storage import open_store
from flowledger.workflows import Catalog
from flowledger.workflows.runtime.session import WorkflowSession

from ...mcp.conftest import error_text, payload, stdio_params
from ..catalog_sources import clock, everything

WEATHER = "get-structured-content"
NODE = "get_structured_content"


async def registered(db: str) -> None:
    """The operator registers both servers and probes them."""
    async with open_store(db) as store:
        registry = SourceRegistry.over(store)
        for document in (clock(), everything()):
            await registry.add(document)
            probe = await registry.probe(document["name"], {}, seconds=60)
            assert probe.ok, probe.error


async def reprobed_with_a_new_output(db: str) -> str:
    """The operator's next probe of ``everything`` finds get-structured-content answering
    one more field (what an upgraded server would list); its new contract fingerprint."""
    async with open_store(db) as store:
        registry = SourceRegistry.over(store)
        last = await registry.last_probe("everything")
        assert last is not None
        tools = []
        for info in last.tools:
            entry = dict(info.entry)
            if info.name == WEATHER:
                output = dict(entry["outputSchema"])
                output["properties"] = {**output["properties"], "wind": {"type": "number"}}
                entry["outputSchema"] = output
            tools.append(ToolInfo.from_entry(entry))
        changed = Probe(last.revision, last.probed_at, True, None, last.server, tuple(tools))
        await registry.record_probe("everything", changed)
        return next(t.contract_fingerprint for t in tools if t.name == WEATHER)


def by_code(answer: dict[str, Any], code: str) -> dict[str, Any]:
    found = [item for item in answer["diagnostics"] if item["code"] == code]
    assert len(found) == 1, answer["diagnostics"]
    return found[0]


async def test_contract_checks_through_the_mcp_server(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'contracts.db'}"
    await registered(db)
    async with Client(stdio_params(db)) as client:

        async def call(name: str, arguments: dict[str, Any]) -> Any:
            return payload(await client.call_tool(name, arguments))

        async def patch(revision: int, *operations: dict[str, Any]) -> Any:
            return await call(
                "draft_patch",
                {"draft": "weather", "revision": revision, "operations": list(operations)},
            )

        async def refused(revision: int, code: str) -> None:
            answer = await client.call_tool(
                "draft_publish",
                {"draft": "weather", "revision": revision, "version": "1", "deploy": True},
            )
            assert "draft_publish: [draft_contract] " in error_text(answer)
            assert f"[{code}]" in error_text(answer)
            assert (await call("artifact_list", {}))["artifacts"] == []
            assert (await call("deployment_list", {}))["deployments"] == []

        made = await call(
            "draft_create", {"name": "weather", "from": {"source": "everything", "tool": WEATHER}}
        )
        assert made["valid"], made["diagnostics"]
        inspected = await call("capability_inspect", {"source": "everything", "tool": WEATHER})
        old = inspected["tool"]["contract_fingerprint"]
        assert made["capabilities"] == [
            {
                "dependency": "everything",
                "source": "everything",
                "probe_revision": 1,
                "tool": WEATHER,
                "contract_fingerprint": old,
            }
        ]

        # a literal of the wrong type: at the argument, fixed by the derived draft_patch
        wrong = await patch(
            1, {"op": "replace", "path": f"/nodes/{NODE}/arguments/location", "value": 42}
        )
        assert not wrong["valid"] and wrong["digest"] is None
        found = by_code(wrong, "argument_invalid")
        assert found["place"] == f"nodes.{NODE}.arguments.location"
        assert found["pointer"] == f"/nodes/{NODE}/arguments/location"
        assert "is not of type 'string'" in found["message"]
        fix = found["next_actions"][0]
        assert fix == {
            "tool": "draft_patch",
            "arguments": {
                "draft": "weather",
                "revision": 2,
                "operations": [
                    {
                        "op": "replace",
                        "path": f"/nodes/{NODE}/arguments/location",
                        "value": "${ input.location }",
                    }
                ],
            },
        }
        assert {"tool": "explain", "arguments": {"code": "argument_invalid"}} in found[
            "next_actions"
        ]
        assert (await call("draft_get", {"draft": "weather"}))["diagnostics"] == wrong[
            "diagnostics"
        ]
        await refused(2, "argument_invalid")
        fixed = await call(fix["tool"], fix["arguments"])
        assert fixed["valid"] and fixed["revision"] == 3, fixed["diagnostics"]

        # a required argument missing: named, placed where it goes, the add derived
        missing = await patch(3, {"op": "remove", "path": f"/nodes/{NODE}/arguments/location"})
        found = by_code(missing, "argument_missing")
        assert found["place"] == f"nodes.{NODE}.arguments.location"
        assert found["pointer"] == f"/nodes/{NODE}/arguments/location"
        assert "'location'" in found["message"]
        assert found["next_actions"][0]["arguments"]["operations"] == [
            {
                "op": "add",
                "path": f"/nodes/{NODE}/arguments/location",
                "value": "${ input.location }",
            }
        ]
        await refused(4, "argument_missing")
        fix = found["next_actions"][0]
        assert (await call(fix["tool"], fix["arguments"]))["valid"]

        # a result path the output schema does not declare; a traced type that cannot fit
        read = await patch(
            5,
            {"op": "add", "path": "/state/temperature", "value": {}},
            {"op": "add", "path": "/state/checks", "value": {"reduce": "sum"}},
            {
                "op": "add",
                "path": f"/nodes/{NODE}/assign",
                "value": {"temperature": "${ result.structured.temprature }"},
            },
        )
        found = by_code(read, "result_path_unknown")
        assert found["place"] == f"nodes.{NODE}.assign.temperature"
        assert found["pointer"] == f"/nodes/{NODE}/assign/temperature"
        assert "result.structured.temprature" in found["message"]
        assert "temperature" in found["hint"]  # the declared fields are named
        assert found["next_actions"][0] == {
            "tool": "capability_inspect",
            "arguments": {"source": "everything", "tool": WEATHER},
        }
        await refused(6, "result_path_unknown")
        read = await patch(
            6,
            {
                "op": "replace",
                "path": f"/nodes/{NODE}/assign/temperature",
                "value": "${ result.structured.temperature }",
            },
        )
        assert read["valid"], read["diagnostics"]

        # a clock step whose timezone reads a number (the sum field, then the temperature)
        added = await call(
            "draft_add_tool",
            {
                "draft": "weather",
                "revision": 7,
                "source": "clock",
                "tool": "get_current_time",
                "after": NODE,
            },
        )
        assert added["unmapped"] == ["timezone"]
        found = by_code(added, "argument_missing")
        assert found["next_actions"][0] == {
            "tool": "capability_inspect",
            "arguments": {"source": "clock", "tool": "get_current_time"},
        }  # no same-named field to map it from
        typed = await patch(
            8,
            {
                "op": "add",
                "path": "/nodes/get_current_time/arguments/timezone",
                "value": "${ state.checks }",
            },
        )
        found = by_code(typed, "argument_type")
        assert found["place"] == "nodes.get_current_time.arguments.timezone"
        assert "is number, but get_current_time of source 'clock' takes string" in found["message"]
        typed = await patch(
            9,
            {
                "op": "replace",
                "path": "/nodes/get_current_time/arguments/timezone",
                "value": "${ state.temperature }",
            },
        )
        assert "is null or number" in by_code(typed, "argument_type")["message"]
        await refused(10, "argument_type")
        fine = await patch(
            10,
            {
                "op": "replace",
                "path": "/nodes/get_current_time/arguments/timezone",
                "value": "Europe/Paris",
            },
        )
        assert fine["valid"], fine["diagnostics"]
        assert [(c["source"], c["tool"]) for c in fine["capabilities"]] == [
            ("clock", "get_current_time"),
            ("everything", WEATHER),
        ]

        # a tool the probe does not list
        absent = await patch(
            11,
            {"op": "replace", "path": f"/nodes/{NODE}/tool", "value": "get-weather"},
            {"op": "replace", "path": "/dependencies/everything/tools/0", "value": "get-weather"},
        )
        found = by_code(absent, "capability_missing")
        assert found["place"] == f"nodes.{NODE}.tool"
        assert found["pointer"] == f"/nodes/{NODE}/tool"
        assert found["next_actions"][0] == {
            "tool": "capability_list",
            "arguments": {"query": "get-weather"},
        }
        assert WEATHER in found["hint"]
        found_tools = await call("capability_list", {"query": "get-weather"})
        assert found_tools["results"]
        await refused(12, "capability_missing")
        back = await patch(
            12,
            {"op": "replace", "path": f"/nodes/{NODE}/tool", "value": WEATHER},
            {"op": "replace", "path": "/dependencies/everything/tools/0", "value": WEATHER},
        )
        assert back["valid"], back["diagnostics"]

        # the operator's next probe finds another contract: publishing names the change
        new = await reprobed_with_a_new_output(db)
        assert new != old
        checked = await call("draft_validate", {"draft": "weather"})
        found = by_code(checked, "contract_changed")
        assert found["place"] == f"nodes.{NODE}.tool"
        assert "'everything'" in found["message"] and repr(WEATHER) in found["message"]
        assert old in found["message"] and new in found["message"]
        assert not checked["valid"] and not checked["deployable"]
        await refused(13, "contract_changed")
        recheck = found["next_actions"][0]
        assert recheck == {
            "tool": "draft_patch",
            "arguments": {"draft": "weather", "revision": 13, "operations": []},
        }
        rechecked = await call(recheck["tool"], recheck["arguments"])
        assert rechecked["valid"], rechecked["diagnostics"]
        published = await call(
            "draft_publish", {"draft": "weather", "revision": 14, "version": "1", "deploy": True}
        )
        assert {c["tool"]: c["contract_fingerprint"] for c in published["checked"]} == {
            WEATHER: new,
            "get_current_time": next(
                c["contract_fingerprint"] for c in fine["capabilities"] if c["source"] == "clock"
            ),
        }
        assert published["deployment"]["checked_against"] == {
            "clock": {"source": "clock", "revision": 1},
            "everything": {"source": "everything", "revision": 1},
        }
        for code in (
            "argument_invalid",
            "argument_missing",
            "argument_type",
            "result_path_unknown",
            "contract_changed",
            "draft_contract",
        ):
            assert (await call("explain", {"code": code}))["fix"]


REMOTE_TOOL = {  # a $ref out of the schema: never fetched (nothing listens on port 9)
    "name": "remote",
    "inputSchema": {
        "type": "object",
        "properties": {"a": {"$ref": "http://127.0.0.1:9/a.json"}},
        "required": ["a"],
    },
}
CLOSED_TOOL = {
    "name": "label",
    "inputSchema": {
        "type": "object",
        "properties": {"text": {"type": "string"}, "count": {"type": "integer"}},
        "required": ["text"],
        "additionalProperties": False,
    },
}


async def test_a_closed_input_schema_names_arguments_it_does_not_take() -> None:
    """Through the Python API, with a source whose recorded probe has a closed input
    schema: an unknown argument is argument_invalid at it, literal or expression, with
    the draft_patch removing it; an integer-typed argument reading a string input is
    argument_type; an argument computed by a function is not traced (not reported). A
    schema whose $ref points out of it checks required arguments, fetches nothing, and
    leaves the given ones to the source. A source the operator disabled is
    source_disabled."""
    async with open_store("memory://") as store:
        registry = SourceRegistry.over(store)
        await registry.add(
            {"format": "flowledger.source/v1", "name": "labels", "stdio": {"command": "true"}}
        )
        tools = (ToolInfo.from_entry(CLOSED_TOOL), ToolInfo.from_entry(REMOTE_TOOL))
        probe = Probe(1, timestamp(), True, None, None, tools)
        await registry.record_probe("labels", probe)
        session = WorkflowSession.build(store, "0b7e3c1a-5d2f-4e6a-9b8c-1d2e3f4a5b6c", Catalog())
        drafts = DraftService(DeployService(session))
        made = await drafts.create("labelled", {"source": "labels", "tool": "label"})
        assert made["valid"], made["diagnostics"]
        node = "/nodes/label/arguments"
        edited = await drafts.patch(
            "labelled",
            1,
            [
                {"op": "add", "path": f"{node}/size", "value": 3},
                {"op": "add", "path": f"{node}/colour", "value": "${ input.text }"},
                {"op": "add", "path": f"{node}/count", "value": "${ input.text }"},
            ],
        )
        found = {(d["code"], d["place"]): d for d in edited["diagnostics"]}
        assert set(found) == {
            ("argument_invalid", "nodes.label.arguments.size"),
            ("argument_invalid", "nodes.label.arguments.colour"),
            ("argument_type", "nodes.label.arguments.count"),
        }
        size = found[("argument_invalid", "nodes.label.arguments.size")]
        assert "takes no argument 'size'" in size["message"] and "count, text" in size["hint"]
        assert size["next_actions"][0]["arguments"]["operations"] == [
            {"op": "remove", "path": f"{node}/size"}
        ]
        assert (
            "is string, but label of source 'labels' takes integer"
            in (found[("argument_type", "nodes.label.arguments.count")]["message"])
        )
        nested = await drafts.patch(
            "labelled",
            2,
            [
                {"op": "remove", "path": f"{node}/size"},
                {"op": "remove", "path": f"{node}/colour"},
                {"op": "replace", "path": f"{node}/count", "value": "${ length(input.text) }"},
            ],
        )
        assert nested["valid"], nested["diagnostics"]
        remote = await drafts.add_tool(
            "labelled", nested["revision"], "labels", "remote", after="label"
        )
        assert [(d["code"], d["place"]) for d in remote["diagnostics"]] == [
            ("argument_missing", "nodes.remote.arguments.a")
        ]
        given = await drafts.patch(
            "labelled",
            remote["revision"],
            [{"op": "add", "path": "/nodes/remote/arguments/a", "value": 1}],
        )
        assert given["valid"], given["diagnostics"]
        await registry.disable("labels")
        disabled = await drafts.validate("labelled")
        assert [(d["code"], d["place"]) for d in disabled["diagnostics"]] == [
            ("source_disabled", "dependencies.labels")
        ]
        assert disabled["diagnostics"][0]["next_actions"][0] == {
            "tool": "capability_list",
            "arguments": {"query": "label"},
        }
