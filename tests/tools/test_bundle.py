"""The bundle: construction rules and tool descriptions (workflows-spec §7.1, §12.72-75)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from flowledger.tools import (
    MUTATING_TOOLS,
    READ_ONLY_TOOLS,
    TOOL_NAMES,
    ToolError,
    ToolInfo,
    WorkflowTools,
)

from .conftest import Env, refused

ORDER = [
    "workflow_definition_list",
    "workflow_run_start",
    "workflow_run_get",
    "workflow_run_list",
    "workflow_run_resume",
    "workflow_run_cancel",
    "workflow_run_history",
]

SCHEMAS: dict[str, dict[str, Any]] = {
    "workflow_definition_list": {"type": "object", "additionalProperties": False},
    "workflow_run_start": {
        "type": "object",
        "properties": {
            "definition_name": {"type": "string"},
            "definition_version": {"type": "string"},
            "input": {"type": "object"},
            "parent_run_id": {"type": "string"},
        },
        "required": ["definition_name", "definition_version", "input"],
        "additionalProperties": False,
    },
    "workflow_run_get": {
        "type": "object",
        "properties": {"run_id": {"type": "string"}},
        "required": ["run_id"],
        "additionalProperties": False,
    },
    "workflow_run_list": {
        "type": "object",
        "properties": {
            "after": {"type": "string"},
            "limit": {"type": "integer", "minimum": 1, "maximum": 100},
            # Beyond the reference: the dashboard's newest-first, filtered pages.
            "order": {"type": "string", "enum": ["run_id", "newest"]},
            "status": {"type": "string"},
            "definition": {"type": "string"},
            "run_id_prefix": {"type": "string"},
        },
        "additionalProperties": False,
    },
    # Divergence from the reference: resume is optional, because an errored pause is
    # resumed (retried) without a payload.
    "workflow_run_resume": {
        "type": "object",
        "properties": {"run_id": {"type": "string"}, "resume": {"type": "object"}},
        "required": ["run_id"],
        "additionalProperties": False,
    },
    "workflow_run_cancel": {
        "type": "object",
        "properties": {
            "run_id": {"type": "string"},
            "reason": {"type": "string", "maxLength": 512},
        },
        "required": ["run_id"],
        "additionalProperties": False,
    },
    "workflow_run_history": {
        "type": "object",
        "properties": {
            "run_id": {"type": "string"},
            "after_revision": {"type": "integer", "minimum": 0},
            "after_event_id": {"type": "string"},
            "limit": {"type": "integer", "minimum": 1, "maximum": 100},
        },
        "required": ["run_id"],
        "additionalProperties": False,
    },
}


def compact(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"))


async def test_names_order_descriptions_and_closed_schemas(env: Env) -> None:
    """§12.72: the seven names in order; descriptions non-empty and <= 256 bytes; schemas
    closed objects; no legacy terms."""
    infos = env.tools.infos()
    assert [info.name for info in infos] == ORDER == list(TOOL_NAMES)
    for info in infos:
        assert isinstance(info, ToolInfo)
        assert info.description.strip()
        assert len(info.description.encode()) <= 256
        assert info.schema["type"] == "object"
        assert info.schema["additionalProperties"] is False
        text = info.name + info.description + compact(info.schema)
        for legacy in ("WorkflowStart", "clause", '"name":"status"'):
            assert legacy not in text


async def test_schemas_are_verbatim(env: Env) -> None:
    """§7.3-§7.9: every schema is exactly the one the spec gives."""
    for info in env.tools.infos():
        assert info.schema == SCHEMAS[info.name], info.name


async def test_full_bundle_has_seven_tools_and_mutating_flags(env: Env) -> None:
    """§12.73: a bundle with all dependencies has 7 tools; start/resume/cancel mutate."""
    infos = env.tools.infos()
    assert len(infos) == 7
    assert {info.name for info in infos if info.mutating} == set(MUTATING_TOOLS)
    assert {"workflow_run_start", "workflow_run_resume", "workflow_run_cancel"} == MUTATING_TOOLS
    assert {info.name for info in infos if not info.mutating} == set(READ_ONLY_TOOLS)
    assert len(READ_ONLY_TOOLS) == 4


async def test_infos_are_fresh_copies(env: Env) -> None:
    """§7.1: info() returns a fresh copy; changing one changes nothing else."""
    first = env.tools.infos()
    first[1].schema["properties"]["input"]["type"] = "string"
    first[1].schema["required"].append("evil")
    again = env.tools.infos()
    assert again[1].schema == SCHEMAS["workflow_run_start"]
    assert env.tools.info("workflow_run_start").schema == SCHEMAS["workflow_run_start"]
    copy = again[2].schema_copy()
    copy["properties"].clear()
    assert again[2].schema == SCHEMAS["workflow_run_get"]
    # The bundle's own decoding is unaffected: input must still be an object.
    error = await refused(
        env.tools.call(
            "workflow_run_start",
            {"definition_name": "counter", "definition_version": "v1", "input": "x"},
        )
    )
    assert "field 'input' must be a JSON object" in str(error)


def test_info_of_unknown_tool(env: Env) -> None:
    """§7.1: looking up an unknown tool name is a ToolError."""
    with pytest.raises(ToolError, match="unknown tool 'nope'"):
        env.tools.info("nope")


class NoStart:
    async def resume(self, run_id: str, payload: bytes) -> None: ...

    async def cancel(self, run_id: str, reason: str) -> None: ...

    async def history(self, run_id: str, **kw: Any) -> None: ...


class NoHistory:
    async def start(self, run_id: str) -> None: ...

    async def resume(self, run_id: str, payload: bytes) -> None: ...

    async def cancel(self, run_id: str, reason: str) -> None: ...


class NoCancel:
    async def start(self, run_id: str) -> None: ...

    async def resume(self, run_id: str, payload: bytes) -> None: ...

    async def history(self, run_id: str, **kw: Any) -> None: ...


def build(env: Env, session_id: Any = None, **overrides: Any) -> WorkflowTools:
    kwargs: dict[str, Any] = {
        "catalog": env.session.catalog,
        "registry": env.session.registry,
        "inputs": env.session.inputs,
        "supervisor": env.supervisor,
    }
    kwargs.update(overrides)
    return WorkflowTools(env.session.session_id if session_id is None else session_id, **kwargs)


def test_missing_start_controller(env: Env) -> None:
    """§12.74: a supervisor lacking start fails construction, naming the session-owned
    start controller."""
    with pytest.raises(TypeError, match="session-owned start controller"):
        build(env, supervisor=NoStart())


def test_missing_history_controller(env: Env) -> None:
    """§7.1: a supervisor lacking history fails, naming the projected history controller."""
    with pytest.raises(TypeError, match="projected history controller"):
        build(env, supervisor=NoHistory())


def test_missing_resume_or_cancel(env: Env) -> None:
    """§7.1: the supervisor needs resume and cancel."""
    with pytest.raises(TypeError, match="resume and cancel"):
        build(env, supervisor=NoCancel())


@pytest.mark.parametrize("missing", ["catalog", "registry", "inputs", "supervisor"])
def test_missing_dependency(env: Env, missing: str) -> None:
    """§7.1: every required dependency; the message lists them all."""
    with pytest.raises(ValueError) as caught:
        build(env, **{missing: None})
    assert "session, catalog, registry, input store, and supervisor are required" in str(
        caught.value
    )


@pytest.mark.parametrize(
    "session_id",
    [
        "",
        "00000000-0000-0000-0000-000000000000",
        "not-a-uuid",
        "6F9619FF-8B86-D011-B42D-00C04FC964FF",
    ],
)
def test_session_must_be_nonzero_canonical_uuid(env: Env, session_id: str) -> None:
    """§7.1: session_id is required and nonzero (and canonical, as the registry keys it)."""
    with pytest.raises(ValueError):
        build(env, session_id=session_id)


def test_dependencies_without_methods(env: Env) -> None:
    """§7.1: the registry needs create/get/compare_and_swap/list; inputs needs put."""
    with pytest.raises(TypeError, match="compare_and_swap"):
        build(env, registry=object())
    with pytest.raises(TypeError, match="put"):
        build(env, inputs=object())
    with pytest.raises(TypeError, match="resolve and list"):
        build(env, catalog=object())


@pytest.mark.parametrize("timeout", [0, -1, float("nan"), float("inf"), True])
def test_start_timeout_must_be_positive(env: Env, timeout: Any) -> None:
    """§7.3 step 12 (ours): the seed wait is bounded by a positive, finite timeout."""
    with pytest.raises(ValueError, match="start_timeout"):
        build(env, start_timeout=timeout)


def test_hooks_must_be_callable(env: Env) -> None:
    """§7.1: now, new_id and prepare_run must be callables."""
    with pytest.raises(TypeError):
        build(env, now="later")
    with pytest.raises(TypeError):
        build(env, new_id=3)
    with pytest.raises(TypeError):
        build(env, prepare_run="hook")


UNEXPECTED: dict[str, dict[str, Any]] = {
    "workflow_definition_list": {},
    "workflow_run_start": {
        "definition_name": "counter",
        "definition_version": "v1",
        "input": {"count": 0},
    },
    "workflow_run_get": {"run_id": "00000000-0000-0000-0000-0000000000aa"},
    "workflow_run_list": {},
    "workflow_run_resume": {
        "run_id": "00000000-0000-0000-0000-0000000000aa",
        "resume": {"increment": 1},
    },
    "workflow_run_cancel": {"run_id": "00000000-0000-0000-0000-0000000000aa"},
    "workflow_run_history": {"run_id": "00000000-0000-0000-0000-0000000000aa"},
}


@pytest.mark.parametrize("name", ORDER)
async def test_every_tool_rejects_unknown_fields(env: Env, name: str) -> None:
    """§12.75: every tool rejects {"unexpected":true} with an "unknown field" error, as
    text and as a mapping, also next to otherwise valid arguments; nothing is written."""
    before = await env.registry_snapshot()
    for arguments in (
        '{"unexpected":true}',
        {"unexpected": True},
        {**UNEXPECTED[name], "unexpected": True},
    ):
        error = await refused(env.tools.call(name, arguments))
        # Every violation is named: alone, the missing required fields follow.
        assert str(error).startswith(
            "workflow tools: invalid arguments: unknown field 'unexpected'"
        )
    assert str(error) == "workflow tools: invalid arguments: unknown field 'unexpected'"
    assert env.registry.created == []
    assert env.recorder.calls == []
    assert await env.registry_snapshot() == before


async def test_unknown_tool(env: Env) -> None:
    """§7.1: a name that is not one of the seven is a ToolError naming it."""
    for name in ("workflow_run_delete", "", "WORKFLOW_RUN_GET"):
        error = await refused(env.tools.call(name, {}))
        assert str(error).startswith("workflow tools: unknown tool ")
    error = await refused(env.tools.call(42, {}))  # type: ignore[arg-type]
    assert "unknown tool" in str(error)


async def test_session_binding(env: Env) -> None:
    """§7.1: every tool is bound to the bundle's session; another session's runs are not
    found, and no argument names a session."""
    started = await env.start()
    await env.settle()
    other = build(env, session_id="11111111-2222-4333-8444-555555555555")
    error = await refused(other.call("workflow_run_get", {"run_id": started["run_id"]}))
    assert f"run {started['run_id']} not found" in str(error)
    assert env.session.session_id not in str(error)
    assert "11111111-2222-4333-8444-555555555555" not in str(error)
    listed = await other.call("workflow_run_list", {})
    assert listed == {"runs": []}
    for info in env.tools.infos():
        assert not any("session" in key for key in info.schema.get("properties", {}))
