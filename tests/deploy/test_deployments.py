"""Deployment documents (``flowledger.deployment/v1``) and the `DeploymentStore`:
strict validation with places, secrets by reference (names only in identities),
immutable revisions, the ``live`` pointer by compare-and-swap, rollback, and the
artifact reference a deployment holds. The store runs on memory, SQLite and PostgreSQL."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest

from flowledger.deploy import (
    ArtifactInUseError,
    ArtifactNotFoundError,
    ArtifactStore,
    CredentialMissingError,
    DeploymentConflictError,
    DeploymentNotFoundError,
    DeploymentStore,
    DeploymentValidationError,
    HttpSource,
    StdioSource,
    load_deployment,
    validate_deployment,
)
from flowledger.storage import Store

from .conftest import minimal

SESSION = str(uuid.UUID(int=21, version=4))


def document(**changes: Any) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "format": "flowledger.deployment/v1",
        "name": "weather_prod",
        "artifact": {"name": "minimal", "version": "1"},
        "sources": {
            "weather": {
                "http": {
                    "url": "https://weather.example/mcp",
                    "headers": {"Authorization": {"secret": "WEATHER_TOKEN"}, "X-Team": "ops"},
                },
                "allow_tools": ["get_forecast"],
            },
            "clock": {
                "stdio": {
                    "command": "mcp-server-time",
                    "args": ["--local-timezone", "Etc/UTC"],
                    "env": {"API_KEY": {"secret": "CLOCK_KEY"}, "MODE": "plain"},
                },
                "allow_tools": ["get_current_time"],
            },
        },
    }
    doc.update(changes)
    return doc


def places(exc: DeploymentValidationError) -> list[tuple[str, str]]:
    return [(issue.place, issue.code) for issue in exc.issues]


def test_a_deployment_resolves_secrets_only_when_a_source_is_made() -> None:
    validated = validate_deployment(document())
    bindings = validated.bindings()
    assert bindings["weather"].secret_names() == ("WEATHER_TOKEN",)
    environ = {"WEATHER_TOKEN": "Bearer t0ken", "CLOCK_KEY": "k3y"}
    assert bindings["weather"].source(environ) == HttpSource(
        "https://weather.example/mcp", {"authorization": "Bearer t0ken", "x-team": "ops"}
    )
    assert bindings["clock"].source(environ) == StdioSource(
        "mcp-server-time",
        ["--local-timezone", "Etc/UTC"],
        env={"API_KEY": "k3y", "MODE": "plain"},
    )
    with pytest.raises(CredentialMissingError, match="CLOCK_KEY"):
        bindings["clock"].source({"WEATHER_TOKEN": "x"})
    identity = bindings["weather"].identity()
    assert identity == {
        "transport": "http",
        "url": "https://weather.example/mcp",
        "headers": ["authorization", "x-team"],
        "secrets": ["WEATHER_TOKEN"],
    }
    assert b"t0ken" not in validated.canonical and b"k3y" not in validated.canonical


def test_yaml_and_json_give_the_same_canonical_bytes() -> None:
    as_json = load_deployment(json.dumps(document()))
    as_yaml = load_deployment(
        "format: flowledger.deployment/v1\nname: weather_prod\n"
        "artifact: {name: minimal, version: '1'}\ndrift: block\n"
        + "sources:\n"
        + "  clock:\n    stdio:\n      command: mcp-server-time\n"
        + "      args: [--local-timezone, Etc/UTC]\n"
        + "      env: {API_KEY: {secret: CLOCK_KEY}, MODE: plain}\n"
        + "    allow_tools: [get_current_time]\n"
        + "  weather:\n    http:\n      url: https://weather.example/mcp\n"
        + "      headers: {Authorization: {secret: WEATHER_TOKEN}, X-Team: ops}\n"
        + "    allow_tools: [get_forecast]\n"
    )
    assert as_yaml.canonical == as_json.canonical
    assert as_yaml.digest == as_json.digest


@pytest.mark.parametrize(
    ("changes", "expected"),
    [
        ({"artifact": {"name": "minimal"}}, [("artifact.version", "field_missing")]),
        ({"drift": "sometimes"}, [("drift", "bad_value")]),
        ({"latest": True}, [("latest", "field_unknown")]),
        (
            {"sources": {"w": {"allow_tools": ["x"]}}},
            [("sources.w", "bad_binding")],
        ),
        (
            {"sources": {"w": {"http": {"url": "ftp://x"}, "allow_tools": ["x"]}}},
            [("sources.w", "bad_source")],
        ),
        (
            {"sources": {"w": {"http": {"url": "http://x"}, "allow_tools": ["x", "x"]}}},
            [("sources.w.allow_tools", "duplicate_tool")],
        ),
        (
            {
                "sources": {
                    "w": {
                        "stdio": {"command": "x", "env": {"K": {"secret": "bad name"}}},
                        "allow_tools": ["x"],
                    }
                }
            },
            [("sources.w.stdio.env.K.secret", "bad_name")],
        ),
    ],
)
def test_bad_documents_name_every_problem(changes: dict[str, Any], expected: Any) -> None:
    with pytest.raises(DeploymentValidationError) as caught:
        validate_deployment(document(**changes))
    found = places(caught.value)
    assert [place for place, _ in found] == [place for place, _ in expected], found
    assert str(caught.value).startswith("invalid deployment")


async def test_revisions_are_immutable_and_live_moves_by_compare_and_swap(store: Store) -> None:
    artifacts = ArtifactStore.over(store)
    deployments = DeploymentStore.over(store)
    with pytest.raises(ArtifactNotFoundError):
        await deployments.save(SESSION, document())
    assert await store.kv.keys(f"sessions/{SESSION}/deploy/deployments") == []
    await artifacts.save(SESSION, minimal())
    first = await deployments.save(SESSION, document())
    second = await deployments.save(SESSION, document(drift="warn"))
    assert (first.revision, second.revision) == (1, 2)
    assert (await deployments.get(SESSION, "weather_prod")).revision == 2
    assert (await deployments.get(SESSION, "weather_prod", 1)).validated.deployment.drift == "block"
    assert await deployments.revisions(SESSION, "weather_prod") == [1, 2]
    with pytest.raises(DeploymentConflictError):
        await deployments.set_live(SESSION, "weather_prod", 1, expected=1)
    rolled = await deployments.rollback(SESSION, "weather_prod")
    assert (rolled.revision, rolled.live) == (1, True)
    with pytest.raises(DeploymentNotFoundError):
        await deployments.rollback(SESSION, "weather_prod")  # nothing below revision 1
    moved = await deployments.set_live(SESSION, "weather_prod", 2, expected=1)
    assert moved.live and moved.revision == 2
    with pytest.raises(DeploymentNotFoundError):
        await deployments.get(SESSION, "weather_prod", 7)
    with pytest.raises(DeploymentNotFoundError):
        await deployments.get(SESSION, "nothing_here")
    listed = await deployments.list(SESSION)
    assert listed == [{"name": "weather_prod", "live": 2, "revisions": 2}]
    with pytest.raises(ArtifactInUseError):
        await artifacts.delete(SESSION, "minimal", "1")
    shown = second.to_json()
    assert shown["document"]["drift"] == "warn" and shown["artifact"]["version"] == "1"
