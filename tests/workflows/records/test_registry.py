"""`RunRegistry` over every storage backend (spec §3.7, checklist §12.16-§12.27)."""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from flowledger import storage
from flowledger.storage import Entry, Store, open_store, validate_name
from flowledger.workflows.activities.journal import ActivityJournal, journal_name
from flowledger.workflows.errors import ConflictError, CorruptRecordError, NotFoundError
from flowledger.workflows.records.inputs import InputStore, canonical_json
from flowledger.workflows.records.registry import RunPage, RunRegistry, order_prefix
from flowledger.workflows.records.run import (
    ArtifactReference,
    InputReference,
    Run,
    RunStatus,
    encode_run,
    input_key,
    pruning_key,
    run_key,
    runs_prefix,
)

SID = "a0000000-0000-4000-8000-000000000001"
OTHER_SID = "b0000000-0000-4000-8000-000000000001"
ZERO = "00000000-0000-0000-0000-000000000000"
T0 = datetime(2026, 8, 10, 16, 0, tzinfo=UTC)
DIGEST = hashlib.sha256(b'{"count":1}').hexdigest()


def rid(n: int) -> str:
    return f"{n:08x}-0000-4000-8000-000000000000"


def make_run(session_id: str = SID, run_id: str | None = None, **changes: Any) -> Run:
    run_id = run_id or rid(1)
    run = Run(
        session_id=session_id,
        tool_execution_id="c0000000-0000-4000-8000-000000000001",
        definition_name="counter",
        definition_version="v1",
        id=run_id,
        graph_run_id="d0000000-0000-4000-8000-000000000001",
        input=InputReference(DIGEST, input_key(session_id, DIGEST), 11),
        ledger_locator="flow/runs/d0000000-0000-4000-8000-000000000001",
        created_at=T0,
        updated_at=T0,
    )
    return dataclasses.replace(run, **changes)


@pytest.fixture(params=["memory", "sqlite"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    url = "memory://" if request.param == "memory" else f"sqlite:///{tmp_path}/w.db"
    async with open_store(url) as opened:
        yield opened


@pytest.fixture
def registry(store: Store) -> RunRegistry:
    return RunRegistry(store.kv)


async def advance(registry: RunRegistry, run: Run, *statuses: RunStatus) -> Run:
    for status in statuses:
        run = await registry.compare_and_swap(run.revision, dataclasses.replace(run, status=status))
    return run


def test_registry_requires_a_kv() -> None:
    """§3.7: construction requires a KV."""
    with pytest.raises(TypeError):
        RunRegistry(None)  # type: ignore[arg-type]


# -- create / get --------------------------------------------------------------------------------


async def test_create_returns_revision_one_and_all_fields(registry: RunRegistry) -> None:
    """§12.16: create returns revision 1 and preserves every correlation field; get agrees."""
    run = make_run(
        parent_run_id=rid(99),
        status_summary="starting",
        artifacts=(ArtifactReference("report", "markdown", DIGEST, 3),),
    )
    created = await registry.create(run)
    assert created.revision == 1
    assert created == dataclasses.replace(
        run, revision=1, artifact_session_id=SID, artifact_run_id=run.id
    )
    fetched = await registry.get(SID, run.id)
    assert fetched == created
    assert fetched.tool_execution_id == run.tool_execution_id
    assert fetched.graph_run_id == run.graph_run_id
    assert fetched.ledger_locator == run.ledger_locator


async def test_returned_records_are_independent_copies(registry: RunRegistry) -> None:
    """§12.16: changing a returned record's artifacts never changes the store."""
    artifact = ArtifactReference("report", "markdown", DIGEST, 3)
    created = await registry.create(make_run(artifacts=(artifact,)))
    with pytest.raises(AttributeError):
        created.artifacts.append(artifact)  # type: ignore[attr-defined]
    with pytest.raises(dataclasses.FrozenInstanceError):
        created.artifacts[0].size = 4  # type: ignore[misc]
    first = await registry.get(SID, created.id)
    second = await registry.get(SID, created.id)
    assert first == second == created
    assert first is not second
    assert first.artifacts == (artifact,)


async def test_raw_value_holds_reference_not_input_text(store: Store) -> None:
    """§12.17: the stored record holds the input digest and key, never the input text."""
    sentinel = "SENTINEL-7f3a-do-not-store"
    inputs = InputStore(store.blobs)
    ref = await inputs.put(SID, canonical_json({"note": sentinel, "zq_input_field": 1}))
    registry = RunRegistry(store.kv)
    run = await registry.create(make_run(input=ref))
    await registry.compare_and_swap(
        run.revision, dataclasses.replace(run, status=RunStatus.RUNNING, status_summary="2 steps")
    )
    entry = await store.kv.get(run_key(SID, run.id))
    assert ref.digest.encode() in entry.value
    assert ref.key.encode() in entry.value
    assert sentinel.encode() not in entry.value
    assert b"zq_input_field" not in entry.value
    assert (await inputs.get(SID, ref)).count(sentinel.encode()) == 1


async def test_create_is_absent_only_and_cas_advances(registry: RunRegistry) -> None:
    """§12.18: duplicate create conflicts; CAS at the current revision gives 2; reuse conflicts."""
    created = await registry.create(make_run())
    with pytest.raises(ConflictError) as dup:
        await registry.create(make_run())
    assert dup.value.reason == "run already exists"
    assert (dup.value.session_id, dup.value.run_id, dup.value.expected) == (SID, rid(1), 0)
    assert dup.value.actual == 1
    running = dataclasses.replace(created, status=RunStatus.RUNNING)
    swapped = await registry.compare_and_swap(1, running)
    assert swapped.revision == 2
    assert swapped == dataclasses.replace(running, revision=2)
    with pytest.raises(ConflictError) as stale:
        await registry.compare_and_swap(1, running)
    assert stale.value.reason == "stale revision"
    assert (stale.value.expected, stale.value.actual) == (1, 2)
    assert await registry.get(SID, rid(1)) == swapped


async def test_cas_rejects_mismatched_and_zero_revisions(registry: RunRegistry) -> None:
    """§3.7 steps 1-2: zero expected revision is a plain error; a differing carried revision
    conflicts before anything is read."""
    created = await registry.create(make_run())
    with pytest.raises(ValueError, match="nonzero"):
        await registry.compare_and_swap(0, dataclasses.replace(created, revision=0))
    with pytest.raises(ConflictError) as info:
        await registry.compare_and_swap(1, dataclasses.replace(created, revision=7))
    assert info.value.reason == "record carries a different revision"
    assert (info.value.expected, info.value.actual) == (1, 7)
    missing = make_run(run_id=rid(2), revision=1)
    with pytest.raises(NotFoundError):
        await registry.compare_and_swap(1, missing)


@pytest.mark.parametrize(
    ("field", "reason"),
    [
        ("checkpoint_revision", "checkpoint revision moved backwards"),
        ("activity_cursor", "activity cursor moved backwards"),
        ("updated_at", "updated_at moved backwards"),
    ],
)
async def test_cas_rejects_counters_moving_backwards(
    registry: RunRegistry, field: str, reason: str
) -> None:
    """§12.19: decreasing checkpoint revision / activity cursor / updated_at conflicts, with
    the reason naming the field, and the stored record is unchanged."""
    created = await registry.create(make_run())
    later = T0 + timedelta(seconds=5)
    ahead = await registry.compare_and_swap(
        1,
        dataclasses.replace(
            created,
            status=RunStatus.RUNNING,
            checkpoint_revision=3,
            activity_cursor=3,
            updated_at=later,
        ),
    )
    back: dict[str, Any] = {
        "checkpoint_revision": 2,
        "activity_cursor": 2,
        "updated_at": later - timedelta(microseconds=1),
    }
    with pytest.raises(ConflictError) as info:
        await registry.compare_and_swap(2, dataclasses.replace(ahead, **{field: back[field]}))
    assert info.value.reason == reason
    assert (info.value.expected, info.value.actual) == (2, 2)
    assert await registry.get(SID, created.id) == ahead
    same = await registry.compare_and_swap(2, ahead)  # equal values are not "backwards"
    assert same.revision == 3


# Shortest legal path from pending to each status.
PATHS: dict[RunStatus, tuple[RunStatus, ...]] = {
    RunStatus.PENDING: (),
    RunStatus.RUNNING: (RunStatus.RUNNING,),
    RunStatus.INTERRUPTED: (RunStatus.RUNNING, RunStatus.INTERRUPTED),
    RunStatus.COMPLETED: (RunStatus.RUNNING, RunStatus.COMPLETED),
    RunStatus.CANCELLED: (RunStatus.CANCELLED,),
    RunStatus.FAILED: (RunStatus.FAILED,),
}
LEGAL = {
    ("pending", "pending"),
    ("pending", "running"),
    ("pending", "cancelled"),
    ("pending", "failed"),
    ("running", "running"),
    ("running", "interrupted"),
    ("running", "completed"),
    ("running", "cancelled"),
    ("running", "failed"),
    ("interrupted", "interrupted"),
    ("interrupted", "running"),
    ("interrupted", "cancelled"),
    ("interrupted", "failed"),
    ("completed", "completed"),
    ("cancelled", "cancelled"),
    ("failed", "failed"),
}
PAIRS = [(a, b) for a in RunStatus for b in RunStatus]


@pytest.mark.parametrize(("current", "target"), PAIRS, ids=[f"{a}-{b}" for a, b in PAIRS])
async def test_cas_enforces_transition_table(
    registry: RunRegistry, current: RunStatus, target: RunStatus
) -> None:
    """§12.20: all 36 (from, to) pairs: legal ones persist, illegal ones conflict unchanged."""
    run = await advance(registry, await registry.create(make_run()), *PATHS[current])
    assert run.status is current
    proposed = dataclasses.replace(run, status=target)
    if (current.value, target.value) in LEGAL:
        swapped = await registry.compare_and_swap(run.revision, proposed)
        assert (await registry.get(SID, run.id)).status is target
        assert swapped.revision > run.revision
    else:
        with pytest.raises(ConflictError) as info:
            await registry.compare_and_swap(run.revision, proposed)
        assert info.value.reason == f"illegal status transition {current} -> {target}"
        assert await registry.get(SID, run.id) == run


OTHER_ID = "e0000000-0000-4000-8000-000000000001"
OTHER_DIGEST = hashlib.sha256(b"{}").hexdigest()
IMMUTABLE: list[tuple[str, Any]] = [
    ("tool_execution_id", OTHER_ID),
    ("definition_name", "other"),
    ("definition_version", "v2"),
    ("graph_run_id", OTHER_ID),
    ("parent_run_id", OTHER_ID),
    ("artifact_session_id", OTHER_ID),
    ("artifact_run_id", OTHER_ID),
    ("input", InputReference(OTHER_DIGEST, input_key(SID, OTHER_DIGEST), 2)),
    ("input", InputReference(DIGEST, input_key(SID, DIGEST), 12)),
    ("ledger_locator", "flow/runs/other"),
    ("created_at", T0 - timedelta(seconds=1)),
    ("trace_parent", "00-" + "a" * 32 + "-" + "b" * 16 + "-01"),
]


@pytest.mark.parametrize(
    ("field", "value"), IMMUTABLE, ids=[f"{f}-{i}" for i, (f, _) in enumerate(IMMUTABLE)]
)
async def test_cas_rejects_identity_changes(registry: RunRegistry, field: str, value: Any) -> None:
    """§12.20 / §12.26: changing an immutable field (input digest, artifact_run_id, ...)
    conflicts and leaves the stored record unchanged."""
    created = await registry.create(make_run())
    with pytest.raises(ConflictError) as info:
        await registry.compare_and_swap(1, dataclasses.replace(created, **{field: value}))
    assert info.value.reason == "immutable run identity changed"
    assert await registry.get(SID, created.id) == created


async def test_cas_rejects_artifact_input_descriptor_change(registry: RunRegistry) -> None:
    """§12.26: the artifact input descriptor is part of the immutable identity."""
    bootstrap = await registry.create(
        make_run(
            run_id=rid(2),
            artifact_session_id=SID,
            artifact_run_id=rid(2),
            artifact_input_kind="bootstrap",
            artifact_input_session_id=OTHER_ID,
            artifact_input_run_id=OTHER_ID,
        )
    )
    with pytest.raises(ConflictError, match="immutable run identity changed"):
        await registry.compare_and_swap(
            1, dataclasses.replace(bootstrap, artifact_input_kind="parent")
        )
    created = await registry.create(make_run())
    with pytest.raises(ConflictError, match="immutable run identity changed"):
        await registry.compare_and_swap(
            1,
            dataclasses.replace(
                created,
                artifact_input_kind="parent",
                artifact_input_session_id=OTHER_ID,
                artifact_input_run_id=OTHER_ID,
            ),
        )


async def test_cas_accepts_created_at_as_same_instant(registry: RunRegistry) -> None:
    """§3.7 step 5: created_at is compared as an instant (an equal instant is no change)."""
    created = await registry.create(make_run())
    same = dataclasses.replace(created, created_at=datetime.fromtimestamp(T0.timestamp(), UTC))
    assert (await registry.compare_and_swap(1, same)).revision == 2


async def test_cas_allows_mutable_fields(registry: RunRegistry) -> None:
    """§3.2: status summary, cancel intent, counters, artifacts and updated_at may change."""
    created = await registry.create(make_run())
    changed = dataclasses.replace(
        created,
        status=RunStatus.RUNNING,
        status_summary="step 2",
        cancel_requested=True,
        checkpoint_revision=2,
        activity_cursor=1,
        artifacts=(ArtifactReference("out", "json", DIGEST, 1),),
        updated_at=T0 + timedelta(minutes=1),
    )
    swapped = await registry.compare_and_swap(1, changed)
    assert (
        await registry.get(SID, created.id) == swapped == dataclasses.replace(changed, revision=2)
    )


async def test_cas_invalid_next_is_plain_error(registry: RunRegistry) -> None:
    """§3.7 step 10: an invalid next record is a plain error and nothing is written."""
    created = await registry.create(make_run())
    with pytest.raises(ValueError, match="status_summary"):
        await registry.compare_and_swap(1, dataclasses.replace(created, status_summary="x" * 1025))
    assert await registry.get(SID, created.id) == created


class RacingKV:
    """A KV that lets another writer win just before the registry's compare-and-swap put."""

    def __init__(self, inner: storage.KV) -> None:
        self.inner = inner
        self.race: tuple[str, bytes] | None = None

    async def get(self, key: str) -> Entry:
        return await self.inner.get(key)

    async def put(self, key: str, value: bytes, *, expected: int) -> int:
        if self.race is not None and expected != 0:
            race_key, race_value = self.race
            self.race = None
            await self.inner.put(race_key, race_value, expected=expected)
        return await self.inner.put(key, value, expected=expected)

    async def delete(self, key: str) -> None:
        await self.inner.delete(key)

    async def keys(self, prefix: str = "") -> list[str]:
        return await self.inner.keys(prefix)


async def test_cas_lost_race_is_stale_revision(store: Store) -> None:
    """§3.7 step 10: a storage conflict on the final put is ConflictError("stale revision")."""
    kv = RacingKV(store.kv)
    registry = RunRegistry(kv)
    created = await registry.create(make_run())
    winner = dataclasses.replace(created, status=RunStatus.FAILED, status_summary="winner")
    kv.race = (run_key(SID, created.id), encode_run(winner))
    with pytest.raises(ConflictError) as info:
        await registry.compare_and_swap(1, dataclasses.replace(created, status=RunStatus.RUNNING))
    assert info.value.reason == "stale revision"
    assert (info.value.expected, info.value.actual) == (1, 2)
    assert await registry.get(SID, created.id) == dataclasses.replace(winner, revision=2)


class BrokenKV(RacingKV):
    async def get(self, key: str) -> Entry:
        raise OSError("disk on fire")

    async def put(self, key: str, value: bytes, *, expected: int) -> int:
        raise OSError("disk on fire")

    async def keys(self, prefix: str = "") -> list[str]:
        raise OSError("disk on fire")


async def test_other_storage_errors_propagate(store: Store) -> None:
    """§3.7: storage failures other than conflict / not-found propagate (transient for callers)."""
    registry = RunRegistry(BrokenKV(store.kv))
    with pytest.raises(OSError, match="disk on fire") as created:
        await registry.create(make_run())
    assert "create run metadata" in (created.value.__notes__ or [])
    with pytest.raises(OSError, match="disk on fire"):
        await registry.get(SID, rid(1))
    with pytest.raises(OSError, match="disk on fire"):
        await registry.list(SID)


# -- list ----------------------------------------------------------------------------------------


async def test_list_is_session_scoped_sorted_and_paged(registry: RunRegistry) -> None:
    """§12.21: session-scoped, sorted by run UUID, limit 2 over five runs pages 1,2 / 5,7 / 9;
    a limit of 101 is rejected."""
    for n in (7, 2, 9, 1, 5):
        await registry.create(make_run(run_id=rid(n)))
    await registry.create(make_run(session_id=OTHER_SID, run_id=rid(3)))
    pages: list[RunPage] = []
    after = ""
    while True:
        page = await registry.list(SID, after=after, limit=2)
        pages.append(page)
        if not page.next:
            break
        after = page.next
    assert [[r.id for r in p.runs] for p in pages] == [
        [rid(1), rid(2)],
        [rid(5), rid(7)],
        [rid(9)],
    ]
    assert [p.next for p in pages] == [rid(2), rid(7), ""]
    assert all(r.revision == 1 for p in pages for r in p.runs)
    everything = await registry.list(SID)
    assert [r.id for r in everything.runs] == [rid(n) for n in (1, 2, 5, 7, 9)]
    assert everything.next == ""
    assert [r.id for r in (await registry.list(OTHER_SID)).runs] == [rid(3)]
    with pytest.raises(ValueError, match=r"1\.\.100"):
        await registry.list(SID, limit=101)
    with pytest.raises(ValueError, match=r"1\.\.100"):
        await registry.list(SID, limit=-1)


async def test_list_exact_page_end_has_no_next(registry: RunRegistry) -> None:
    """§3.7: next is empty when no keys remain after a full page."""
    for n in (1, 2):
        await registry.create(make_run(run_id=rid(n)))
    page = await registry.list(SID, limit=2)
    assert [r.id for r in page.runs] == [rid(1), rid(2)]
    assert page.next == ""


async def test_list_cursor_need_not_exist_and_must_be_an_id(registry: RunRegistry) -> None:
    """§3.7: the page starts strictly after the cursor, which need not exist; a malformed or
    zero cursor is a plain error."""
    for n in (1, 4, 6):
        await registry.create(make_run(run_id=rid(n)))
    page = await registry.list(SID, after=rid(3), limit=1)
    assert [r.id for r in page.runs] == [rid(4)]
    assert page.next == rid(4)
    assert (await registry.list(SID, after=rid(6))).runs == []
    for bad in ("nope", ZERO, OTHER_SID.upper(), " " + rid(1)):
        with pytest.raises(ValueError, match="invalid run page cursor"):
            await registry.list(SID, after=bad)


async def test_list_default_limit_is_fifty(registry: RunRegistry) -> None:
    """§3.7: limit 0 means 50."""
    for n in range(1, 52):
        await registry.create(make_run(run_id=rid(n)))
    page = await registry.list(SID)
    assert len(page.runs) == 50
    assert page.next == rid(50)
    rest = await registry.list(SID, after=page.next, limit=100)
    assert [r.id for r in rest.runs] == [rid(51)]


async def test_list_nested_or_corrupt_key_aborts_page(store: Store) -> None:
    """§3.7: a key under the prefix that is not a run ID, or a corrupt record, fails the page."""
    registry = RunRegistry(store.kv)
    await registry.create(make_run(run_id=rid(1)))
    nested = runs_prefix(SID) + rid(1) + "/x"
    await store.kv.put(nested, b"{}", expected=0)
    with pytest.raises(CorruptRecordError) as info:
        await registry.list(SID)
    assert info.value.key == nested
    assert [r.id for r in (await registry.list(SID, limit=1)).runs] == [rid(1)]
    await store.kv.delete(nested)
    await store.kv.put(run_key(SID, rid(2)), b"{}", expected=0)
    with pytest.raises(CorruptRecordError):
        await registry.list(SID)


# -- corrupt records, isolation, validation -------------------------------------------------------


def _doc(run: Run) -> dict[str, Any]:
    run = dataclasses.replace(run, artifact_session_id=run.session_id, artifact_run_id=run.id)
    value: dict[str, Any] = json.loads(encode_run(run))
    return value


def _bytes(doc: Any) -> bytes:
    return json.dumps(doc, separators=(",", ":")).encode()


def _unknown_envelope() -> bytes:
    doc = _doc(make_run())
    doc["extra"] = True
    return _bytes(doc)


def _unknown_run_field() -> bytes:
    doc = _doc(make_run())
    doc["run"]["output"] = "secret"
    return _bytes(doc)


def _version_99() -> bytes:
    doc = _doc(make_run())
    doc["version"] = 99
    return _bytes(doc)


def _no_artifact_namespace() -> bytes:
    doc = _doc(make_run())
    del doc["run"]["artifact_session_id"]
    del doc["run"]["artifact_run_id"]
    return _bytes(doc)


STORED: dict[str, Any] = {
    "unknown envelope field": _unknown_envelope,
    "unknown run field": _unknown_run_field,
    "version 99": _version_99,
    "trailing JSON": lambda: (
        encode_run(make_run(artifact_session_id=SID, artifact_run_id=rid(1))) + b'{"version":2}'
    ),
    "oversized": lambda: b"{" + b" " * 65536 + b"}",
    "version 2 without artifact namespace": _no_artifact_namespace,
}


@pytest.mark.parametrize("name", list(STORED))
async def test_get_rejects_corrupt_stored_records(store: Store, name: str) -> None:
    """§12.22 / §12.27: unknown envelope/run fields, version 99, trailing JSON, >64 KiB and a
    v2 record without artifact session/run IDs all read back as CorruptRecordError."""
    key = run_key(SID, rid(1))
    await store.kv.put(key, STORED[name](), expected=0)
    with pytest.raises(CorruptRecordError) as info:
        await RunRegistry(store.kv).get(SID, rid(1))
    assert info.value.key == key


async def test_get_rejects_record_under_wrong_key(store: Store) -> None:
    """§3.7 get step 3: a record whose identity differs from its key is corrupt."""
    stranger = make_run(run_id=rid(2), artifact_session_id=SID, artifact_run_id=rid(2))
    await store.kv.put(run_key(SID, rid(1)), encode_run(stranger), expected=0)
    with pytest.raises(CorruptRecordError, match="identity does not match"):
        await RunRegistry(store.kv).get(SID, rid(1))


async def test_runs_are_invisible_across_sessions_and_only_one_key_is_written(
    store: Store,
) -> None:
    """§12.23: Get from another session is not found, its List is empty; zero IDs are refused;
    the only key written is sessions/<sid>/workflows/runs/<rid>, a valid storage name."""
    registry = RunRegistry(store.kv)
    created = await registry.create(make_run())
    with pytest.raises(NotFoundError) as info:
        await registry.get(OTHER_SID, created.id)
    assert (info.value.kind, info.value.session_id, info.value.run_id) == (
        "run",
        OTHER_SID,
        created.id,
    )
    assert (await registry.list(OTHER_SID)) == RunPage(runs=[], next="")
    with pytest.raises(ValueError, match="session ID is required"):
        await registry.get(ZERO, created.id)
    with pytest.raises(ValueError, match="workflow run ID is required"):
        await registry.get(SID, ZERO)
    with pytest.raises(ValueError, match="session ID is required"):
        await registry.list(ZERO)
    keys = await store.kv.keys()
    # Beside the record, only the session's run order index (RunRegistry.list_newest).
    order = order_prefix(SID)
    assert [key for key in keys if not key.startswith(order)] == [
        f"sessions/{SID}/workflows/runs/{created.id}"
    ]
    assert len(keys) == 5 and all(validate_name(key) == key for key in keys)


REJECTED: list[tuple[str, dict[str, Any], str]] = [
    ("zero session", {"session_id": ZERO}, "session ID is required"),
    ("zero tool execution", {"tool_execution_id": ZERO}, "tool execution ID is required"),
    ("zero run", {"id": ZERO}, "workflow run ID is required"),
    ("zero graph run", {"graph_run_id": ZERO}, "graph run ID is required"),
    ("name ../policy", {"definition_name": "../policy"}, "definition_name"),
    (
        "malformed digest",
        {"input": InputReference("abc", f"sessions/{SID}/workflows/inputs/sha256/abc", 11)},
        "input digest",
    ),
    ("nonzero revision", {"revision": 3}, "new run revision must be zero"),
    (
        "non-UTC created_at",
        {"created_at": datetime(2026, 8, 10, 17, tzinfo=UTC).astimezone()},
        "created_at must be in UTC",
    ),
    (
        "partial namespace",
        {"artifact_input_kind": "bootstrap"},
        "artifact session ID is required",
    ),
]


@pytest.mark.parametrize(
    ("changes", "message"), [r[1:] for r in REJECTED], ids=[r[0] for r in REJECTED]
)
async def test_create_rejects_invalid_runs(
    store: Store, changes: dict[str, Any], message: str
) -> None:
    """§12.24: create refuses zero session/tool execution/run/graph run IDs, definition name
    ../policy, a malformed input digest, a nonzero revision and a non-UTC created_at; nothing
    is written."""
    registry = RunRegistry(store.kv)
    with pytest.raises(ValueError, match=message):
        await registry.create(dataclasses.replace(make_run(), **changes))
    assert await store.kv.keys() == []


async def test_encoded_record_is_valid_json(store: Store) -> None:
    """§12.25: the stored value is one valid JSON document with the v2 envelope."""
    created = await RunRegistry(store.kv).create(make_run())
    entry = await store.kv.get(run_key(SID, created.id))
    doc = json.loads(entry.value)
    assert doc["version"] == 2
    assert doc["run"]["id"] == created.id
    assert "revision" not in doc["run"]


async def test_artifact_namespace_survives_and_defaults(registry: RunRegistry) -> None:
    """§12.26: explicit artifact namespace fields (kind bootstrap and input IDs) persist as
    given; when all five are empty they default to (session, run)."""
    explicit = make_run(
        run_id=rid(1),
        artifact_session_id=OTHER_ID,
        artifact_run_id=rid(50),
        artifact_input_kind="bootstrap",
        artifact_input_session_id=OTHER_SID,
        artifact_input_run_id=rid(60),
    )
    created = await registry.create(explicit)
    assert created == dataclasses.replace(explicit, revision=1)
    fetched = await registry.get(SID, rid(1))
    assert (
        fetched.artifact_session_id,
        fetched.artifact_run_id,
        fetched.artifact_input_kind,
        fetched.artifact_input_session_id,
        fetched.artifact_input_run_id,
    ) == (OTHER_ID, rid(50), "bootstrap", OTHER_SID, rid(60))
    with pytest.raises(ConflictError, match="immutable run identity changed"):
        await registry.compare_and_swap(1, dataclasses.replace(fetched, artifact_run_id=rid(51)))
    defaulted = await registry.create(make_run(run_id=rid(2)))
    assert (defaulted.artifact_session_id, defaulted.artifact_run_id) == (SID, rid(2))
    assert (await registry.get(SID, rid(2))).artifact_run_id == rid(2)


async def test_a_missing_record_whose_run_left_its_journal_is_corrupt(store: Store) -> None:
    """With a witness (the run's activity journal, written only after its record), a
    record not found is `CorruptRecordError`; being pruned (its tombstone written first),
    or without a witness, it is not found."""
    journal = ActivityJournal(store.ledger)
    registry = RunRegistry(store.kv, witness=journal.has_records)
    run = await registry.create(make_run())
    await store.ledger.append(journal_name(SID, run.id), [b"{}"], expected=0)
    await store.kv.delete(run_key(SID, run.id))
    with pytest.raises(CorruptRecordError, match="activity journal"):
        await registry.get(SID, run.id)
    with pytest.raises(NotFoundError):
        await RunRegistry(store.kv).get(SID, run.id)
    with pytest.raises(NotFoundError):  # another run, no journal
        await registry.get(SID, rid(2))
    await store.kv.put(pruning_key(SID, run.id), b"", expected=0)
    with pytest.raises(NotFoundError):
        await registry.get(SID, run.id)
