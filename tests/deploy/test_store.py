"""The artifact store on every backend: immutable, content-addressed versions, children
pinned at save time, references that block deletion, and nothing written on refusal."""

from __future__ import annotations

import asyncio
import copy
import hashlib
import itertools
import json
import uuid
from typing import Any

import pytest
import rfc8785

from flowledger.deploy import (
    ArtifactConflictError,
    ArtifactCorruptError,
    ArtifactInUseError,
    ArtifactNotFoundError,
    ArtifactStore,
    ArtifactValidationError,
    Referrer,
    load_artifact,
)
from flowledger.deploy.artifacts.limits import MAX_CHILD_DEPTH, MAX_CLOSURE_ARTIFACTS
from flowledger.storage import Store

from .conftest import APPROVAL, BRIEFING, approval_data, briefing_data, minimal

SESSION = str(uuid.uuid4())


async def everything(store: Store) -> tuple[dict[str, bytes], dict[str, bytes]]:
    keys = {k: (await store.kv.get(k)).value for k in await store.kv.keys("")}
    blobs = {k: await store.blobs.get(k) for k in await store.blobs.list("")}
    return keys, blobs


async def test_save_get_list_round_trip(store: Store) -> None:
    artifacts = ArtifactStore.over(store)
    child = await artifacts.save(SESSION, APPROVAL)
    parent = await artifacts.save(SESSION, BRIEFING)
    assert child.digest == load_artifact(APPROVAL).digest
    assert child.size == len(load_artifact(APPROVAL).canonical)
    assert child.children == () and child.height == 0
    (pin,) = parent.children
    assert (pin.name, pin.version, pin.digest) == ("approval", "1.0.0", child.digest)
    assert pin.closure_digest == child.closure_digest
    assert parent.height == 1 and parent.closure_digest != parent.digest
    got = await artifacts.get(SESSION, "city_briefing", "1.0.0")
    assert got.record == parent
    assert got.canonical == load_artifact(BRIEFING).canonical
    assert hashlib.sha256(got.canonical).hexdigest() == parent.digest
    assert [(r.name, r.version) for r in await artifacts.list(SESSION)] == [
        ("approval", "1.0.0"),
        ("city_briefing", "1.0.0"),
    ]
    assert [r.name for r in await artifacts.list(SESSION, "approval")] == ["approval"]
    closure = await artifacts.closure(SESSION, "city_briefing", "1.0.0")
    assert set(closure) == {"city_briefing@1.0.0", "approval@1.0.0"}
    assert await artifacts.references(SESSION, "approval", "1.0.0") == [
        Referrer.artifact("city_briefing", "1.0.0", parent.digest)
    ]


async def test_same_bytes_again_is_a_no_op(store: Store) -> None:
    artifacts = ArtifactStore.over(store)
    first = await artifacts.save(SESSION, APPROVAL)
    before = await everything(store)
    # The same artifact in JSON, with a default spelled out: the same canonical bytes.
    data = approval_data()
    data["description"] = data["description"]
    data["nodes"]["done"]["label"] = None
    again = await artifacts.save(SESSION, json.dumps(data))
    assert again == first
    assert await everything(store) == before


async def test_other_bytes_under_a_saved_version_conflict(store: Store) -> None:
    artifacts = ArtifactStore.over(store)
    first = await artifacts.save(SESSION, APPROVAL)
    before = await everything(store)
    changed = approval_data()
    changed["description"] = "Something else."
    with pytest.raises(ArtifactConflictError) as caught:
        await artifacts.save(SESSION, changed)
    assert caught.value.place == "version" and caught.value.code == "artifact_conflict"
    assert caught.value.stored_digest == first.digest
    assert await everything(store) == before
    assert (await artifacts.get(SESSION, "approval", "1.0.0")).record == first


async def test_a_bad_artifact_writes_nothing(store: Store) -> None:
    artifacts = ArtifactStore.over(store)
    await artifacts.save(SESSION, APPROVAL)
    before = await everything(store)
    bad = briefing_data()
    bad["nodes"]["decide"]["cases"][0]["when"] = "${ state.approved == }"
    with pytest.raises(ArtifactValidationError) as caught:
        await artifacts.save(SESSION, bad)
    assert caught.value.place == "nodes.decide.cases[0].when"
    with pytest.raises(ArtifactValidationError):
        await artifacts.save(SESSION, "nodes: [unclosed")
    assert await everything(store) == before


async def test_children_must_exist_and_fit_their_use(store: Store) -> None:
    artifacts = ArtifactStore.over(store)
    with pytest.raises(ArtifactValidationError) as caught:
        await artifacts.save(SESSION, BRIEFING)
    assert [(i.place, i.code) for i in caught.value.issues] == [
        ("children.approval", "child_missing")
    ]
    assert await everything(store) == ({}, {})
    await artifacts.save(SESSION, APPROVAL)
    wrong = briefing_data()
    wrong["nodes"]["review"]["input"] = {"txt": "${ state.briefing }"}
    wrong["nodes"]["review"]["assign"]["approved"] = "${ result.output.aproved }"
    with pytest.raises(ArtifactValidationError) as caught:
        await artifacts.save(SESSION, wrong)
    found = {(i.place, i.code) for i in caught.value.issues}
    assert found == {
        ("nodes.review.input.txt", "unknown_field"),
        ("nodes.review.input", "field_missing"),
        ("nodes.review.assign.approved", "unknown_field"),
    }
    literal = briefing_data()
    literal["nodes"]["review"]["input"] = {"text": 5}
    with pytest.raises(ArtifactValidationError) as caught:
        await artifacts.save(SESSION, literal)
    assert [(i.place, i.code) for i in caught.value.issues] == [
        ("nodes.review.input", "input_invalid")
    ]


def chain_link(name: str, child: str | None) -> dict[str, Any]:
    """An artifact that runs ``child`` (if any) and ends."""
    if child is None:
        return minimal(name=name)
    return minimal(
        name=name,
        children={child: "1"},
        start="run",
        nodes={
            "run": {"kind": "workflow", "workflow": child, "next": "done"},
            "done": {"kind": "end", "outcome": "ok"},
        },
    )


async def test_cycles_and_depth_are_refused(store: Store) -> None:
    artifacts = ArtifactStore.over(store)
    with pytest.raises(ArtifactValidationError) as caught:
        await artifacts.save(SESSION, chain_link("selfish", "selfish"))
    assert caught.value.issues[0].code == "child_cycle"
    assert caught.value.issues[0].place == "children.selfish"
    names = [f"level{i}" for i in range(MAX_CHILD_DEPTH + 2)]
    await artifacts.save(SESSION, chain_link(names[0], None))
    for below, name in itertools.pairwise(names[: MAX_CHILD_DEPTH + 1]):
        record = await artifacts.save(SESSION, chain_link(name, below))
    assert record.height == MAX_CHILD_DEPTH
    before = await everything(store)
    with pytest.raises(ArtifactValidationError) as caught:
        await artifacts.save(SESSION, chain_link(names[-1], names[-2]))
    assert [(i.place, i.code) for i in caught.value.issues] == [
        (f"children.{names[-2]}", "child_too_deep")
    ]
    assert await everything(store) == before


async def test_a_cycle_in_damaged_records_is_refused(store: Store) -> None:
    """Saved artifacts cannot form a cycle; a store whose records were edited to hold one
    is still refused rather than walked forever."""
    artifacts = ArtifactStore.over(store)
    a = await artifacts.save(SESSION, chain_link("aaa", None))
    b = await artifacts.save(SESSION, chain_link("bbb", "aaa"))
    key = f"sessions/{SESSION}/deploy/artifacts/versions/aaa/1"
    entry = await store.kv.get(key)
    body = json.loads(entry.value)
    body["artifact"]["children"] = [
        {"name": "bbb", "version": "1", "digest": b.digest, "closure_digest": b.closure_digest}
    ]
    await store.kv.put(key, rfc8785.dumps(body), expected=entry.revision)
    with pytest.raises(ArtifactValidationError) as caught:
        await artifacts.save(SESSION, chain_link("ccc", "bbb"))
    assert caught.value.issues[0].code == "child_cycle"
    assert a.digest


async def test_referenced_artifacts_cannot_be_deleted(store: Store) -> None:
    artifacts = ArtifactStore.over(store)
    await artifacts.save(SESSION, APPROVAL)
    await artifacts.save(SESSION, BRIEFING)
    with pytest.raises(ArtifactInUseError) as caught:
        await artifacts.delete(SESSION, "approval", "1.0.0")
    assert "city_briefing" in str(caught.value)
    assert (caught.value.code, caught.value.place) == ("artifact_in_use", "$")
    run = Referrer("run", str(uuid.uuid4()))
    await artifacts.add_reference(SESSION, "city_briefing", "1.0.0", run)
    await artifacts.add_reference(SESSION, "city_briefing", "1.0.0", run)  # idempotent
    deployment = Referrer("deployment", "briefing-prod")
    await artifacts.add_reference(SESSION, "city_briefing", "1.0.0", deployment)
    with pytest.raises(ArtifactInUseError) as caught:
        await artifacts.delete(SESSION, "city_briefing", "1.0.0")
    assert set(caught.value.referrers) == {f"run {run.id}", "deployment briefing-prod"}
    await artifacts.remove_reference(SESSION, "city_briefing", "1.0.0", run)
    await artifacts.remove_reference(SESSION, "city_briefing", "1.0.0", run)  # idempotent
    await artifacts.remove_reference(SESSION, "city_briefing", "1.0.0", deployment)
    await artifacts.delete(SESSION, "city_briefing", "1.0.0")
    with pytest.raises(ArtifactNotFoundError):
        await artifacts.get(SESSION, "city_briefing", "1.0.0")
    # The parent's reference went with it: the child can go now.
    assert await artifacts.references(SESSION, "approval", "1.0.0") == []
    await artifacts.delete(SESSION, "approval", "1.0.0")
    assert await artifacts.list(SESSION) == []
    assert await store.blobs.list("") == []
    await artifacts.delete(SESSION, "approval", "1.0.0")  # finishing again is harmless
    with pytest.raises(ArtifactNotFoundError) as missing:
        await artifacts.delete(SESSION, "never", "1")
    assert missing.value.code == "artifact_missing" and "never@1" in str(missing.value)
    with pytest.raises(ArtifactNotFoundError):
        await artifacts.add_reference(SESSION, "approval", "1.0.0", run)


async def test_a_deleted_version_is_never_reused(store: Store) -> None:
    artifacts = ArtifactStore.over(store)
    await artifacts.save(SESSION, APPROVAL)
    await artifacts.delete(SESSION, "approval", "1.0.0")
    for document in (APPROVAL, json.dumps({**approval_data(), "description": "new"})):
        with pytest.raises(ArtifactConflictError) as caught:
            await artifacts.save(SESSION, document)
        assert caught.value.deleted


async def test_references_and_deletes_race_safely(store: Store) -> None:
    """Whatever the interleaving, a reference is never left on a deleted artifact: either
    the delete fails (in use) or the reference does (not found)."""
    artifacts = ArtifactStore.over(store)
    for round_ in range(12):
        version = f"r{round_}"
        await artifacts.save(SESSION, minimal(name="racer", version=version))
        referrer = Referrer("run", str(uuid.uuid4()))
        results = await asyncio.gather(
            artifacts.delete(SESSION, "racer", version),
            artifacts.add_reference(SESSION, "racer", version, referrer),
            return_exceptions=True,
        )
        deleted, referenced = (not isinstance(r, BaseException) for r in results)
        assert deleted != referenced, results
        for result in results:
            assert result is None or isinstance(
                result, ArtifactInUseError | ArtifactNotFoundError
            ), result
        refs = await artifacts.references(SESSION, "racer", version)
        assert (refs == [referrer]) == referenced
        if deleted:
            with pytest.raises(ArtifactNotFoundError):
                await artifacts.get(SESSION, "racer", version)
        else:
            assert (await artifacts.get(SESSION, "racer", version)).record.name == "racer"


async def test_concurrent_saves_of_one_version_agree(store: Store) -> None:
    artifacts = ArtifactStore.over(store)
    await artifacts.save(SESSION, APPROVAL)
    one = briefing_data()
    other = briefing_data()
    other["description"] = "The other one."
    results = await asyncio.gather(
        artifacts.save(SESSION, one), artifacts.save(SESSION, other), return_exceptions=True
    )
    winners = [r for r in results if not isinstance(r, BaseException)]
    losers = [r for r in results if isinstance(r, BaseException)]
    assert len(winners) == 1 and len(losers) == 1
    assert isinstance(losers[0], ArtifactConflictError)
    refs = await artifacts.references(SESSION, "approval", "1.0.0")
    assert refs == [Referrer.artifact("city_briefing", "1.0.0", winners[0].digest)]
    blobs = await store.blobs.list("")
    assert len(blobs) == 2  # the child's and the winner's: the loser's is gone


async def test_sessions_do_not_see_each_other(store: Store) -> None:
    artifacts = ArtifactStore.over(store)
    await artifacts.save(SESSION, APPROVAL)
    other = str(uuid.uuid4())
    assert await artifacts.list(other) == []
    with pytest.raises(ArtifactNotFoundError):
        await artifacts.get(other, "approval", "1.0.0")
    changed = approval_data()
    changed["description"] = "Another session may use the same version for its own content."
    await artifacts.save(other, changed)
    with pytest.raises(ValueError, match="UUID"):
        await artifacts.list("not-a-session")


async def test_tampered_data_is_detected(store: Store) -> None:
    artifacts = ArtifactStore.over(store)
    record = await artifacts.save(SESSION, APPROVAL)
    blob = f"sessions/{SESSION}/deploy/artifacts/blobs/sha256/{record.digest}"
    await store.blobs.delete(blob)
    with pytest.raises(ArtifactCorruptError) as caught:
        await artifacts.get(SESSION, "approval", "1.0.0")
    assert caught.value.code == "artifact_corrupt"
    assert caught.value.key == blob and "blob is missing" in str(caught.value)
    await store.blobs.put(blob, load_artifact(APPROVAL).canonical.replace(b"approve", b"APPROVE"))
    with pytest.raises(ArtifactCorruptError, match="digest"):
        await artifacts.get(SESSION, "approval", "1.0.0")
    key = f"sessions/{SESSION}/deploy/artifacts/versions/approval/1.0.0"
    entry = await store.kv.get(key)
    await store.kv.put(key, b'{"record": 1}', expected=entry.revision)
    with pytest.raises(ArtifactCorruptError):
        await artifacts.list(SESSION)


async def test_the_closure_is_bounded(store: Store) -> None:
    """A parent whose children's trees hold more than the bound is refused."""
    artifacts = ArtifactStore.over(store)
    per_child = 4  # each child: itself and a chain of three below it
    count = -(-MAX_CLOSURE_ARTIFACTS // per_child)  # enough children to exceed the bound
    names = []
    for index in range(count):
        below = None
        for level in range(per_child):
            name = f"c{index}_l{level}"
            await artifacts.save(SESSION, chain_link(name, below))
            below = name
        names.append(below)
    parent = minimal(
        name="wide",
        children=dict.fromkeys(names, "1"),
        start=f"run_{names[0]}",
        nodes={
            **{
                f"run_{name}": {
                    "kind": "workflow",
                    "workflow": name,
                    "next": f"run_{names[i + 1]}" if i + 1 < len(names) else "done",
                }
                for i, name in enumerate(names)
            },
            "done": {"kind": "end", "outcome": "ok"},
        },
    )
    before = await everything(store)
    with pytest.raises(ArtifactValidationError) as caught:
        await artifacts.save(SESSION, parent)
    assert "closure_too_large" in {i.code for i in caught.value.issues}
    assert await everything(store) == before


async def test_referrers_of_the_longest_names_fit(store: Store) -> None:
    artifacts = ArtifactStore.over(store)
    long_name, long_version = "a" * 64, "9" * 64
    await artifacts.save(SESSION, chain_link(long_name, None) | {"version": long_version})
    parent = chain_link("b" * 64, long_name)
    parent["children"] = {long_name: long_version}
    parent["version"] = "v" * 64
    record = await artifacts.save(SESSION, parent)
    assert await artifacts.references(SESSION, long_name, long_version) == [
        Referrer.artifact("b" * 64, "v" * 64, record.digest)
    ]
    assert (await artifacts.record(SESSION, "b" * 64, "v" * 64)) == record
    with pytest.raises(ValueError, match="referrer id"):
        Referrer("run", "Not/A/Segment")
    with pytest.raises(ValueError, match="referrer kind"):
        Referrer("user", "x")  # type: ignore[arg-type]


async def test_concurrent_saves_of_the_same_content_keep_the_child_references(
    store: Store,
) -> None:
    """Regression: the loser of a race between two identical saves took back the
    references it had added, which were the winner's too, leaving the child deletable."""
    artifacts = ArtifactStore.over(store)
    await artifacts.save(SESSION, APPROVAL)
    for round_ in range(4):
        data = {**briefing_data(), "version": f"same{round_}"}
        first, second = await asyncio.gather(
            artifacts.save(SESSION, data), artifacts.save(SESSION, copy.deepcopy(data))
        )
        assert first == second
        assert Referrer.artifact("city_briefing", f"same{round_}", first.digest) in (
            await artifacts.references(SESSION, "approval", "1.0.0")
        )
    with pytest.raises(ArtifactInUseError):
        await artifacts.delete(SESSION, "approval", "1.0.0")


class _Contended:
    """A KV whose version records always change between a read and a rewrite."""

    def __init__(self, kv: Any) -> None:
        self._kv = kv

    async def get(self, key: str) -> Any:
        return await self._kv.get(key)

    async def put(self, key: str, value: bytes, *, expected: int) -> int:
        if "/versions/" in key and expected:
            current = await self._kv.get(key)
            await self._kv.put(key, current.value, expected=current.revision)
        return int(await self._kv.put(key, value, expected=expected))

    async def delete(self, key: str) -> None:
        await self._kv.delete(key)

    async def keys(self, prefix: str = "") -> list[str]:
        return list(await self._kv.keys(prefix))


async def test_endless_contention_is_a_typed_error_that_leaves_no_reference(
    store: Store,
) -> None:
    await ArtifactStore.over(store).save(SESSION, APPROVAL)
    contended = ArtifactStore(_Contended(store.kv), store.blobs)  # type: ignore[arg-type]
    referrer = Referrer("run", str(uuid.uuid4()))
    with pytest.raises(ArtifactConflictError, match="concurrently"):
        await contended.add_reference(SESSION, "approval", "1.0.0", referrer)
    assert await contended.references(SESSION, "approval", "1.0.0") == []
    with pytest.raises(ArtifactConflictError, match="concurrently"):
        await contended.delete(SESSION, "approval", "1.0.0")
    assert (await contended.get(SESSION, "approval", "1.0.0")).record.name == "approval"
