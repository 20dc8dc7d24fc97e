"""The operator's source registry: the document, the store on every backend (revisions
under compare-and-swap, enable/disable, removal guarded by pinned runs, tombstones that
never reuse a revision), and what a session may see and which secrets it is granted."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest

from flowledger.deploy.registry.access import SessionSources, SourceAccess
from flowledger.deploy.registry.document import validate_source
from flowledger.deploy.registry.errors import (
    InlineSourceRefusedError,
    LaunchRefusedError,
    RegistryConflictError,
    RegistryCorruptError,
    SourceDisabledError,
    SourceExistsError,
    SourceInUseError,
    SourceNotRegisteredError,
)
from flowledger.deploy.registry.spec import CredentialMissingError, SourceSpecValidationError
from flowledger.deploy.registry.store import SourceRegistry
from flowledger.deploy.sources.spec import StdioSource
from flowledger.storage import Store

from .servers import time_command

A = str(uuid.UUID(int=1, version=4))
B = str(uuid.UUID(int=2, version=4))


def clock(**changes: Any) -> dict[str, Any]:
    document: dict[str, Any] = {
        "format": "flowledger.source/v1",
        "name": "clock",
        "description": "The time, anywhere.",
        "stdio": {"command": time_command(), "args": ["--local-timezone", "Etc/UTC"]},
    }
    document.update(changes)
    return document


def places(exc: SourceSpecValidationError) -> list[tuple[str, str]]:
    return [(issue.place, issue.code) for issue in exc.issues]


# -- the document ----------------------------------------------------------------------------


def test_a_document_is_canonical_and_its_bad_parts_are_named() -> None:
    spelled = validate_source({**clock(), "call_tools": [], "description": "The time, anywhere."})
    assert spelled.digest == validate_source(clock()).digest
    with pytest.raises(SourceSpecValidationError) as caught:
        validate_source(clock(http={"url": "http://127.0.0.1:1/mcp"}))
    assert places(caught.value) == [("$", "bad_binding")]
    with pytest.raises(SourceSpecValidationError) as caught:
        validate_source(
            clock(
                stdio={"command": "x", "env": {"K": {"secret": "key"}, "T": {"secret": "tok"}}},
                secrets={"key": {"env": "FLOWLEDGER_MCP_TOKENS"}},
            )
        )
    assert sorted(places(caught.value)) == [
        ("secrets", "secret_undeclared"),
        ("secrets.key.env", "secret_reserved"),
    ]
    with pytest.raises(SourceSpecValidationError) as caught:
        validate_source(clock(name="Bad Name", sessions=["nope"], allow_tools=[]))
    assert {place for place, _ in places(caught.value)} == {"name", "sessions[0]", "allow_tools"}
    # a secret may be granted only to sessions that see the source at all
    with pytest.raises(SourceSpecValidationError) as caught:
        validate_source(
            clock(
                stdio={"command": "x", "env": {"K": {"secret": "key"}}},
                sessions=[A],
                secrets={"key": {"env": "CLOCK_KEY", "sessions": [A, B]}},
            )
        )
    assert places(caught.value) == [("secrets.key.sessions", "secret_sessions")]
    assert caught.value.issues[0].message.startswith("1 session(s) may use the secret")


def test_a_session_gets_only_the_secrets_granted_to_it() -> None:
    source = validate_source(
        clock(
            stdio={"command": "x", "env": {"KEY": {"secret": "key"}}},
            secrets={"key": {"env": "CLOCK_KEY", "sessions": [A]}},
        )
    )
    environ = {"CLOCK_KEY": "s3cret"}
    concrete = source.source(A, environ)
    assert isinstance(concrete, StdioSource) and concrete.env["KEY"] == "s3cret"
    assert source.missing_secret(B, environ) == ("key", "which is not granted to this session")
    with pytest.raises(CredentialMissingError):
        source.source(B, environ)  # not granted to B: B's source has no value for it
    assert source.missing_secret(A, {}) == (
        "key",
        "whose variable CLOCK_KEY is not set in this process",
    )
    assert "s3cret" not in json.dumps(source.identity())


# -- the store -------------------------------------------------------------------------------


async def test_revisions_enable_disable_and_remove(store: Store) -> None:
    registry = SourceRegistry.over(store)
    first = await registry.add(clock())
    assert (first.revision, first.latest, first.enabled) == (1, 1, True)
    with pytest.raises(SourceExistsError) as exists:
        await registry.add(clock(description="again"))
    assert exists.value.code == "source_exists" and exists.value.source == "clock"
    assert (await registry.set(clock())).revision == 1  # unchanged: nothing written
    second = await registry.set(clock(description="v2"), expected=1)
    assert second.revision == 2
    with pytest.raises(RegistryConflictError):
        await registry.set(clock(description="v3"), expected=1)
    assert (await registry.get("clock")).source.document.description == "v2"
    assert (await registry.get("clock", 1)).source.document.description == "The time, anywhere."
    with pytest.raises(SourceNotRegisteredError):
        await registry.get("clock", 3)

    await registry.disable("clock")
    with pytest.raises(SourceDisabledError):
        await registry.enabled("clock")
    await registry.enable("clock")
    assert (await registry.enabled("clock")).revision == 2

    run = str(uuid.uuid4())
    await registry.add_use("clock", A, run, 2)
    await registry.add_use("clock", A, run, 2)  # idempotent
    unfinished = {run}

    async def is_unfinished(session_id: str, run_id: str) -> bool:
        assert session_id == A
        return run_id in unfinished

    with pytest.raises(SourceInUseError) as caught:
        await registry.remove("clock", is_unfinished)
    assert caught.value.runs == (run,)
    assert caught.value.code == "source_in_use" and run in str(caught.value)
    assert (await registry.get("clock")).revision == 2  # nothing changed
    unfinished.clear()
    await registry.remove("clock", is_unfinished)
    assert await registry.uses("clock") == []
    with pytest.raises(SourceNotRegisteredError):
        await registry.get("clock")
    assert await registry.list() == []
    # A new registration under the same name never reuses a revision number.
    again = await registry.add(clock(description="back"))
    assert again.revision == 3


async def test_a_damaged_record_is_corrupt_not_missing(store: Store) -> None:
    registry = SourceRegistry.over(store)
    await registry.add(clock())
    key = "deploy/registry/revisions/clock/1"
    entry = await store.kv.get(key)
    record = json.loads(entry.value)
    record["document"]["stdio"]["command"] = "sh"
    await store.kv.put(key, json.dumps(record).encode(), expected=entry.revision)
    with pytest.raises(RegistryCorruptError) as caught:
        await registry.get("clock")
    assert caught.value.code == "registry_corrupt"
    assert "revisions/clock/1" in str(caught.value)


# -- what a session sees ---------------------------------------------------------------------


async def test_a_session_sees_only_what_it_is_given(store: Store) -> None:
    registry = SourceRegistry.over(store)
    await registry.add(clock(sessions=[A]))
    await registry.add(clock(name="other"))
    seen_by_a = SessionSources(registry, A, SourceAccess.TENANT)
    seen_by_b = SessionSources(registry, B, SourceAccess.TENANT)
    assert [s.name for s in await seen_by_a.list()] == ["clock", "other"]
    assert [s.name for s in await seen_by_b.list()] == ["other"]
    with pytest.raises(SourceNotRegisteredError) as hidden:
        await seen_by_b.get("clock")
    with pytest.raises(SourceNotRegisteredError) as absent:
        await seen_by_b.get("nothing")
    # B cannot tell a hidden source from one that does not exist
    assert str(hidden.value).replace("clock", "X") == str(absent.value).replace("nothing", "X")
    with pytest.raises(InlineSourceRefusedError):
        seen_by_b.check_inline("source_probe")
    SessionSources(registry, B, SourceAccess.OPERATOR).check_inline("source_probe")
    read_only = SessionSources(registry, A, SourceAccess.TENANT.read_only())
    with pytest.raises(LaunchRefusedError):
        await read_only.probe("clock", seconds=5)
    await registry.disable("other")
    assert [s.name for s in await seen_by_b.list()] == []
    assert [s.name for s in await seen_by_b.list(include_disabled=True)] == ["other"]


async def test_a_probe_is_recorded_and_a_failure_is_its_answer(store: Store) -> None:
    registry = SourceRegistry.over(store)
    await registry.add(clock())
    await registry.add(clock(name="broken", stdio={"command": "/nonexistent/mcp-server"}))
    found = await registry.probe("clock", {}, seconds=30)
    assert found.ok and found.revision == 1
    assert "get_current_time" in [tool.name for tool in found.tools]
    recorded = await registry.last_probe("clock")
    assert recorded is not None
    assert [t.contract_fingerprint for t in recorded.tools] == [
        t.contract_fingerprint for t in found.tools
    ]
    failed = await registry.probe("broken", {}, seconds=10)
    assert (failed.ok, failed.tools) == (False, ())
    assert failed.error and "unreachable" in failed.error
