"""Drafts through the Python API on every backend: created from nothing, kept invalid
with diagnostics, edited under compare-and-swap (a stale revision changes nothing), JSON
Patch failures named by operation, focused edits answering their patch, deleted with a
tombstone, published (invalid: nothing saved)."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest

from flowledger.deploy import DeployService
from flowledger.deploy.artifacts.errors import ArtifactConflictError, ArtifactNotFoundError
from flowledger.deploy.drafts.diagnostics import pointer_of
from flowledger.deploy.drafts.errors import (
    DraftConflictError,
    DraftCorruptError,
    DraftExistsError,
    DraftInvalidError,
    DraftNotFoundError,
    DraftUnstorableError,
    EditInvalidError,
    PatchError,
    PatchInvalidError,
    PatchTestFailedError,
)
from flowledger.deploy.drafts.service import DraftService
from flowledger.deploy.drafts.store import DraftStore
from flowledger.storage import Store
from flowledger.workflows import Catalog
from flowledger.workflows.runtime.session import WorkflowSession

SESSION = str(uuid.UUID(int=7, version=4))
OTHER = str(uuid.UUID(int=8, version=4))


def service_of(store: Store, session: str = SESSION) -> DraftService:
    return DraftService(DeployService(WorkflowSession.build(store, session, Catalog())))


def codes(answer: dict[str, Any]) -> list[tuple[str, str]]:
    return [(item["pointer"], item["code"]) for item in answer["diagnostics"]]


async def test_the_draft_loop(store: Store) -> None:
    drafts = service_of(store)
    created = await drafts.create("greeter")
    assert created["revision"] == 1 and created["valid"] and created["diagnostics"] == []
    assert created["document"]["name"] == "greeter"

    # an edit that breaks the document is kept, with its diagnostics
    broken = await drafts.patch(
        "greeter",
        1,
        [{"op": "add", "path": "/nodes/greet", "value": {"kind": "set", "next": "nowhere"}}],
    )
    assert broken["revision"] == 2 and not broken["valid"]
    assert ("/nodes/greet/assign", "field_missing") in codes(broken)
    first = broken["diagnostics"][0]
    assert {"tool": "explain", "arguments": {"code": first["code"]}} in first["next_actions"]
    stored = await drafts.get("greeter")
    assert stored["revision"] == 2 and stored["diagnostics"] == broken["diagnostics"]

    # a stale revision changes nothing
    with pytest.raises(DraftConflictError) as caught:
        await drafts.patch("greeter", 1, [{"op": "remove", "path": "/nodes/greet"}])
    assert caught.value.current == 2 and caught.value.code == "revision_conflict"
    assert await drafts.get("greeter") == stored

    # publishing it is refused with every issue, nothing saved
    with pytest.raises(DraftInvalidError) as invalid:
        await drafts.publish("greeter", 2, "1.0.0")
    assert {issue.code for issue in invalid.value.issues} >= {"field_missing"}
    with pytest.raises(ArtifactNotFoundError):
        await drafts.deploy.artifacts.get(SESSION, "greeter", "1.0.0")

    fixed = await drafts.patch(
        "greeter",
        2,
        [
            {"op": "add", "path": "/state", "value": {"text": {}}},
            {"op": "replace", "path": "/nodes/greet/next", "value": "done"},
            {"op": "add", "path": "/nodes/greet/assign", "value": {"text": "hello"}},
            {"op": "replace", "path": "/start", "value": "greet"},
        ],
    )
    assert fixed["revision"] == 3 and fixed["valid"], fixed["diagnostics"]
    out = await drafts.set_output(
        "greeter",
        3,
        {"text": "${ state.text }"},
        output_schema={
            "type": "object",
            "additionalProperties": False,
            "required": ["text"],
            "properties": {"text": {"type": "string"}},
        },
    )
    assert out["revision"] == 4 and out["valid"], out["diagnostics"]
    assert out["applied"][0] == {
        "op": "add",
        "path": "/nodes/done/output",
        "value": {"text": "${ state.text }"},
    }
    published = await drafts.publish("greeter", 4, "1.0.0")
    saved = await drafts.deploy.artifacts.get(SESSION, "greeter", "1.0.0")
    assert published["artifact"]["digest"] == saved.record.digest
    assert saved.artifact.nodes["greet"].kind == "set"
    assert (await drafts.get("greeter"))["revision"] == 4  # publishing does not edit

    # a draft from the saved version: the next version of the same artifact
    again = await drafts.create("greeter_next", {"artifact": "greeter", "version": "1.0.0"})
    assert again["origin"]["digest"] == saved.record.digest and again["valid"]
    assert again["document"] == {**out["document"], "version": "1.0.0"}
    changed = await drafts.patch(
        "greeter_next", 1, [{"op": "add", "path": "/description", "value": "second"}]
    )
    with pytest.raises(ArtifactConflictError):  # a version is immutable
        await drafts.publish("greeter_next", 2, "1.0.0")
    second = await drafts.publish("greeter_next", changed["revision"], "1.0.1")
    assert second["artifact"]["version"] == "1.0.1"
    assert (await drafts.deploy.artifacts.get(SESSION, "greeter", "1.0.1")).artifact.description


async def test_patch_failures_name_the_operation_and_write_nothing(store: Store) -> None:
    drafts = service_of(store)
    await drafts.create("patched")
    before = await drafts.get("patched")
    failing = [
        ([{"op": "add", "path": "/a", "value": 1}, {"op": "remove", "path": "/zz"}], PatchError, 1),
        ([{"op": "test", "path": "/start", "value": "x"}], PatchTestFailedError, 0),
        ([{"op": "frobnicate", "path": "/a"}], PatchInvalidError, 0),
        ([{"op": "add", "path": "nodes", "value": 1}], PatchInvalidError, 0),
        ([{"op": "replace", "path": "/nodes/done/kind"}], PatchInvalidError, 0),
    ]
    for operations, error, index in failing:
        with pytest.raises(error) as caught:
            await drafts.patch("patched", 1, operations)
        assert caught.value.index == index
        assert f"operation {index}" in str(caught.value)
    with pytest.raises(DraftUnstorableError):
        await drafts.patch(
            "patched", 1, [{"op": "add", "path": "/big", "value": "x" * (600 << 10)}]
        )
    assert await drafts.get("patched") == before


async def test_names_sessions_delete_and_tombstones(store: Store) -> None:
    drafts, other = service_of(store), service_of(store, OTHER)
    await drafts.create("first")
    with pytest.raises(DraftExistsError):
        await drafts.create("first")
    with pytest.raises(ValueError, match="draft name"):
        await drafts.create("Bad Name")
    assert [d["draft"] for d in (await drafts.list())["drafts"]] == ["first"]
    assert (await other.list())["drafts"] == []
    with pytest.raises(DraftNotFoundError):
        await other.get("first")
    await drafts.patch("first", 1, [{"op": "add", "path": "/description", "value": "one"}])
    with pytest.raises(DraftConflictError):
        await drafts.delete("first", 1)
    assert (await drafts.delete("first", 2))["revision"] == 2
    with pytest.raises(DraftNotFoundError):
        await drafts.get("first")
    assert (await drafts.list())["drafts"] == []
    again = await drafts.create("first")
    assert again["revision"] == 1 and "description" not in again["document"]

    # an edit read from the deleted draft cannot land on the new one of that name
    store_ = DraftStore(store.kv)
    old_reader = await store_.get(SESSION, "first")
    await drafts.delete("first")
    await drafts.create("first")

    def stale(draft: Any) -> tuple[Any, dict[str, str]]:
        return {**old_reader.document, "description": "stale"}, {}

    # the same revision number, a different draft: the KV revision kept growing
    entry = await store.kv.get(f"sessions/{SESSION}/deploy/drafts/first")
    assert entry.revision > 1
    edited = await store_.edit(SESSION, "first", 1, stale)
    assert edited.revision == 2


async def test_focused_edits_refuse_what_does_not_fit(store: Store) -> None:
    drafts = service_of(store)
    await drafts.create("routes")
    with pytest.raises(EditInvalidError, match="'nowhere' is not in the draft"):
        await drafts.connect("routes", 1, "done", "nowhere")
    with pytest.raises(EditInvalidError, match="continues nowhere"):
        await drafts.connect("routes", 1, "done", "done")
    routed = await drafts.patch(
        "routes",
        1,
        [
            {"op": "add", "path": "/state", "value": {"ok": {}}},
            {
                "op": "add",
                "path": "/nodes/check",
                "value": {
                    "kind": "switch",
                    "cases": [{"when": "${ state.ok }", "next": "done"}],
                    "default": "done",
                },
            },
            {"op": "add", "path": "/nodes/other", "value": {"kind": "end", "outcome": "other"}},
            {"op": "replace", "path": "/start", "value": "check"},
        ],
    )
    assert codes(routed) == [("/nodes/other", "unreachable_node")]
    case = await drafts.connect("routes", 2, "check", "other", "${ !state.ok }")
    assert case["applied"] == [
        {
            "op": "add",
            "path": "/nodes/check/cases/-",
            "value": {"when": "${ !state.ok }", "next": "other"},
        }
    ]
    assert case["document"]["nodes"]["check"]["cases"][1]["next"] == "other"
    assert case["valid"], case["diagnostics"]
    default = await drafts.connect("routes", 3, "check", "other")
    assert default["document"]["nodes"]["check"]["default"] == "other"
    with pytest.raises(EditInvalidError, match="2 end nodes"):
        await drafts.set_output("routes", 4, {})
    with pytest.raises(DraftConflictError):
        await drafts.connect("routes", 3, "check", "done")


def test_places_become_pointers() -> None:
    assert pointer_of("$") == ""
    assert pointer_of("nodes.decide.cases[0].when") == "/nodes/decide/cases/0/when"
    assert pointer_of('nodes.call.arguments["a/b.c"]') == "/nodes/call/arguments/a~1b.c"


async def test_a_record_without_capabilities_reads_as_none(store: Store) -> None:
    """A draft stored before capabilities were recorded still reads (with none), and is
    checked again by its next edit; a malformed capabilities list is draft_corrupt."""
    drafts = service_of(store)
    await drafts.create("older")
    key = f"sessions/{SESSION}/deploy/drafts/older"
    entry = await store.kv.get(key)
    record = json.loads(entry.value)
    assert record["capabilities"] == []
    del record["capabilities"]
    revision = await store.kv.put(key, json.dumps(record).encode(), expected=entry.revision)
    shown = await drafts.get("older")
    assert shown["capabilities"] == [] and shown["valid"]
    edited = await drafts.patch("older", 1, [])
    assert edited["revision"] == 2 and edited["capabilities"] == []
    record = json.loads((await store.kv.get(key)).value)
    for wrong in ([{"tool": "x"}], {"tool": "x"}, [{**CAPABILITY, "probe_revision": "1"}]):
        record["capabilities"] = wrong
        revision = await store.kv.put(
            key, json.dumps(record).encode(), expected=(await store.kv.get(key)).revision
        )
        with pytest.raises(DraftCorruptError, match="malformed capabilities"):
            await drafts.get("older")
    record["capabilities"] = [CAPABILITY]
    await store.kv.put(key, json.dumps(record).encode(), expected=revision)
    assert (await drafts.get("older"))["capabilities"] == [CAPABILITY]


CAPABILITY = {
    "dependency": "clock",
    "source": "clock",
    "probe_revision": 1,
    "tool": "get_current_time",
    "contract_fingerprint": "sha256:" + "0" * 64,
}
