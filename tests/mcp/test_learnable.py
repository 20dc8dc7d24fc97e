"""What a model learns from the server alone (issue #26 items 3 and 5), through the SDK
client: the instructions describe the authoring loop with tools the server lists; the
document formats' JSON Schemas are resources (the same schemas the CLI prints and the
tools' ``document`` argument is typed with); every diagnostic of every layer (artifact
issues, a refused save, a draft, an unrunnable start, a blocked resume) is ``{place, code,
message, hint, next_actions}`` whose actions are calls of listed tools with arguments
their schemas accept; docs/mcp.md documents every listed tool with each argument. Over
HTTP a tenant reads the schemas (and its own runs) and nothing else."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import jsonschema
import mcp_types as types
import pytest
import yaml
from mcp import Client
from mcp.shared.exceptions import MCPError

from flowledger.deploy.artifacts.schema import artifact_json_schema
from flowledger.deploy.drafts.explain import EXPLANATIONS
from flowledger.deploy.schemas import SCHEMAS
from flowledger.mcp import session_for_token
from flowledger.workflows.authoring.guidance import CONTEXT_KEYS, RULES, next_actions

from ..deploy.runs.app import HERE as RUNS
from ..deploy.test_deployed_runs import deployment, server_script
from .conftest import REPO, error_text, http_client, http_server, payload, stdio_params

DOCS = REPO / "docs" / "mcp.md"
SHAPE = {"place", "code", "message", "hint", "next_actions"}
URIS = {f"flowledger://schemas/{name}" for name in ("artifact", "deployment", "source")}


class Actions:
    """Every next action seen, checked against the server's tools as it is collected."""

    def __init__(self, tools: dict[str, types.Tool]) -> None:
        self.tools = tools
        self.codes: set[str] = set()

    def check(self, diagnostic: dict[str, Any]) -> dict[str, Any]:
        assert set(diagnostic) >= SHAPE, diagnostic
        explain = {"tool": "explain", "arguments": {"code": diagnostic["code"]}}
        tail = diagnostic["next_actions"][-2:]  # explain last, or before a draft's draft_get
        assert tail[-1] == explain or (tail[0] == explain and tail[1]["tool"] == "draft_get")
        for action in diagnostic["next_actions"]:
            assert set(action) == {"tool", "arguments"}
            tool = self.tools.get(action["tool"])
            assert tool is not None, f"{diagnostic['code']}: {action['tool']} is not listed"
            jsonschema.validate(action["arguments"], tool.input_schema)
        self.codes.add(diagnostic["code"])
        return diagnostic


def _tools_of(diagnostic: dict[str, Any]) -> list[str]:
    return [action["tool"] for action in diagnostic["next_actions"]]


def _listed_diagnostics(text: str) -> list[dict[str, Any]]:
    """The diagnostics a refused save lists after its message."""
    _, _, listed = text.partition("\ndiagnostics: ")
    assert listed, text
    found = json.loads(listed)
    assert isinstance(found, list) and found
    return found


def test_every_rule_names_known_context_and_every_code_has_an_explanation() -> None:
    for code, rules in RULES.items():
        assert code in EXPLANATIONS, code
        for tool, mapped in rules:
            assert tool, code
            assert set(mapped.values()) <= CONTEXT_KEYS, code
    # an action needing what is not known is left out; explain comes last (a draft's
    # diagnostics then read the draft)
    assert next_actions("tool_missing") == [
        {"tool": "explain", "arguments": {"code": "tool_missing"}}
    ]
    assert next_actions("tool_missing", {"tool": "get_time", "source": "clock"})[:2] == [
        {"tool": "capability_list", "arguments": {"query": "get_time"}},
        {"tool": "capability_list", "arguments": {"source": "clock"}},
    ]
    assert next_actions("no_such_code", {"draft": "d1x"}) == [
        {"tool": "explain", "arguments": {"code": "no_such_code"}},
        {"tool": "draft_get", "arguments": {"draft": "d1x"}},
    ]


async def test_a_model_learns_the_formats_and_follows_every_layers_next_actions(
    tmp_path: Path,
) -> None:
    db = f"sqlite:///{tmp_path / 'learn.db'}"
    script = server_script(tmp_path)
    text = (RUNS / "pinned_env.yaml").read_text()
    async with Client(stdio_params(db)) as client:
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
        seen = Actions(tools)

        # -- every rule's tools are listed, and explain answers every code the rules know
        for rules in RULES.values():
            for tool, _ in rules:
                assert tool in tools, tool
        for code in sorted(RULES):
            explained = payload(await client.call_tool("explain", {"code": code}))
            assert explained["code"] == code

        # -- the instructions: the loop's tools are listed, its resources readable
        instructions = client.instructions or ""
        loop = [
            "capability_list",
            "draft_create",
            "draft_validate",
            "draft_publish",
            "run_deployment",
            "resume_run",
        ]
        positions = [instructions.index(name) for name in loop]
        assert positions == sorted(positions), instructions  # described in the loop's order
        mentioned = set(re.findall(r"\b[a-z]+_[a-z_]+\b|\bexplain\b", instructions))
        assert mentioned - {"next_actions", "run_id"} <= set(tools), mentioned - set(tools)
        assert "next_actions" in instructions
        assert set(re.findall(r"flowledger://schemas/[a-z]+", instructions)) == URIS

        # -- the schemas as resources: the CLI's, and what the tools' document is typed with
        listed = (await client.list_resources()).resources
        assert {str(item.uri) for item in listed} == URIS
        assert all(item.mime_type == "application/schema+json" for item in listed)
        schemas = {}
        for uri in sorted(URIS):
            [content] = (await client.read_resource(uri)).contents
            assert isinstance(content, types.TextResourceContents)
            schemas[uri.rsplit("/", 1)[1]] = json.loads(content.text)
        assert schemas["artifact"] == artifact_json_schema()
        assert schemas == {name: item.build() for name, item in SCHEMAS.items()}
        jsonschema.Draft202012Validator.check_schema(schemas["deployment"])
        jsonschema.validate(yaml.safe_load(text), schemas["artifact"])
        jsonschema.validate(deployment(script), schemas["deployment"])
        for name, kind in [
            ("artifact_save", "artifact"),
            ("artifact_validate", "artifact"),
            ("deployment_save", "deployment"),
        ]:
            schema = tools[name].input_schema
            typed = schema["$defs"]["document"]
            assert typed["properties"] == schemas[kind]["properties"], name
            assert f"flowledger://schemas/{kind}" in schema["properties"]["document"]["description"]
        jsonschema.validate({"document": yaml.safe_load(text)}, tools["artifact_save"].input_schema)
        for uri in ["flowledger://schemas/nothing", "file:///etc/passwd", "flowledger://runs"]:
            with pytest.raises(MCPError) as refused:
                await client.read_resource(uri)
            assert refused.value.code == types.INVALID_PARAMS
            assert "flowledger://schemas/artifact" in refused.value.message

        # -- artifact issues: a document off the schema still reaches the tool, every
        # issue guided; a refused save lists its diagnostics after the message
        broken = {**yaml.safe_load(text), "start": "nowhere"}
        del broken["nodes"]["who"]["tool"]
        validated = payload(await client.call_tool("artifact_validate", {"document": broken}))
        assert validated["valid"] is False
        for issue in validated["issues"]:
            seen.check(issue)
        refused_save = error_text(await client.call_tool("artifact_save", {"document": broken}))
        assert refused_save.startswith("workflow tools: artifact_save: invalid artifact: ")
        assert [seen.check(d)["code"] for d in _listed_diagnostics(refused_save)] == [
            issue["code"] for issue in validated["issues"]
        ]

        # -- a deployment document's issues
        payload(await client.call_tool("artifact_save", {"document": text}))
        bad_deployment = {**deployment(script), "sources": {"env": {"allow_tools": ["whoami"]}}}
        refused_deployment = error_text(
            await client.call_tool("deployment_save", {"document": bad_deployment})
        )
        for diagnostic in _listed_diagnostics(refused_deployment):
            seen.check(diagnostic)

        # -- an unrunnable start: the place is the dependency's tool
        payload(
            await client.call_tool(
                "deployment_save", {"document": deployment(script, allow=("whoami",))}
            )
        )
        refused = payload(
            await client.call_tool("run_deployment", {"deployment": "env_dep", "input": {}})
        )
        [not_allowed] = refused["diagnostics"]
        seen.check(not_allowed)
        assert (not_allowed["code"], not_allowed["place"]) == (
            "tool_not_allowed",
            "env.secret_digest",
        )
        assert not_allowed["next_actions"][0] == {
            "tool": "deployment_show",
            "arguments": {"name": "env_dep"},
        }
        shown = payload(await client.call_tool("deployment_show", {"name": "env_dep"}))
        assert shown["revision"] == 1  # the action answers what it was offered for

        # -- a blocked resume: the dependency's source is gone; the actions name the run
        payload(await client.call_tool("deployment_save", {"document": deployment(script)}))
        started = payload(
            await client.call_tool("run_deployment", {"deployment": "env_dep", "input": {}})
        )
        run_id = started["run_id"]
        script.unlink()
        blocked = payload(
            await client.call_tool("resume_run", {"run_id": run_id, "payload": {"go": True}})
        )
        assert blocked["resumed"] is False
        [unreachable] = blocked["resume_readiness"]["diagnostics"]
        seen.check(unreachable)
        assert (unreachable["code"], unreachable["place"]) == ("source_unreachable", "env")
        assert {"tool": "validate_run", "arguments": {"run_id": run_id}} in unreachable[
            "next_actions"
        ]
        assert {"tool": "deployment_check", "arguments": {"name": "env_dep"}} in unreachable[
            "next_actions"
        ]
        for tool in ("inspect_run", "validate_run"):
            readiness = payload(await client.call_tool(tool, {"run_id": run_id}))
            for diagnostic in readiness["resume_readiness"]["diagnostics"]:
                assert seen.check(diagnostic) == unreachable
        server_script(tmp_path)  # the action, once the cause is repaired, reads ready
        assert payload(await client.call_tool("validate_run", {"run_id": run_id}))[
            "resume_readiness"
        ] == {"status": "ready"}

        # -- a draft left invalid by an edit
        draft = payload(await client.call_tool("draft_create", {"name": "learn_draft"}))
        patched = payload(
            await client.call_tool(
                "draft_patch",
                {
                    "draft": "learn_draft",
                    "revision": draft["revision"],
                    "operations": [{"op": "replace", "path": "/start", "value": "nowhere"}],
                },
            )
        )
        assert patched["valid"] is False
        for diagnostic in patched["diagnostics"]:
            seen.check(diagnostic)
            assert "draft_get" in _tools_of(diagnostic)

        assert {"unknown_node", "tool_not_allowed", "source_unreachable"} <= seen.codes

        # -- docs/mcp.md documents every listed tool with each of its arguments
        rows = _documented_rows(DOCS.read_text(encoding="utf-8"))
        for name, tool in tools.items():
            assert name in rows, f"docs/mcp.md has no row for {name}"
            for argument in tool.input_schema.get("properties", {}):
                assert f"`{argument}`" in rows[name], f"docs/mcp.md: {name} lacks `{argument}`"


def _documented_rows(text: str) -> dict[str, str]:
    """Tool -> its arguments cell, from the doc's tables (``| `tool` | arguments | ...``)."""
    rows: dict[str, str] = {}
    for line in text.splitlines():
        found = re.match(r"\|\s*`([a-z_]+)`\s*\|([^|]*)\|", line)
        if found:
            rows.setdefault(found.group(1), found.group(2))
    return rows


TOKEN_A = "token-a-learnable-0123456789"
TOKEN_B = "token-b-learnable-0123456789"


async def test_a_tenant_reads_the_schemas_and_nothing_else(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'tenants.db'}"
    tokens = {TOKEN_A: session_for_token(TOKEN_A), TOKEN_B: session_for_token(TOKEN_B)}
    async with (
        http_server(url, tokens=tokens) as served,
        http_client(served, TOKEN_A) as a,
        http_client(served, TOKEN_B) as b,
    ):
        draft = payload(await a.call_tool("draft_create", {"name": "tenant_secret_draft"}))
        assert draft["revision"] == 1
        assert "flowledger://schemas/artifact" in (b.instructions or "")
        assert {str(item.uri) for item in (await b.list_resources()).resources} == URIS
        [content] = (await b.read_resource("flowledger://schemas/deployment")).contents
        assert isinstance(content, types.TextResourceContents)
        assert json.loads(content.text) == SCHEMAS["deployment"].build()
        escapes = [
            "file:///etc/passwd",
            f"file://{tmp_path / 'tenants.db'}",
            "flowledger://schemas/../drafts/tenant_secret_draft",
            "flowledger://schemas/artifact/../../drafts",
            f"flowledger://sessions/{session_for_token(TOKEN_A)}",
            "flowledger://drafts/tenant_secret_draft",
            "http://127.0.0.1:9/",
        ]
        for uri in escapes:
            with pytest.raises(MCPError) as refused:
                await b.read_resource(uri)
            assert refused.value.code == types.INVALID_PARAMS, uri
            # the answer quotes the URI asked for and names the schemas, nothing else
            rest = refused.value.message.replace(repr(uri[:64]), "")
            assert "tenant_secret_draft" not in rest and str(tmp_path) not in rest, uri
            assert rest.endswith(", ".join(sorted(URIS))), rest
        # the only templates are the session's own runs (tests/mcp/test_run_resources.py)
        templates = (await b.list_resource_templates()).resource_templates
        assert [t.uri_template for t in templates] == [
            "flowledger://runs/{run_id}",
            "flowledger://runs/{run_id}/history",
            "flowledger://runs/{run_id}/trace",
        ]
        listed_b = payload(await b.call_tool("draft_list", {}))
        assert "tenant_secret_draft" not in json.dumps(listed_b)
