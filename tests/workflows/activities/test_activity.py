"""Activity records, stable event IDs and projection: workflows-spec §6.1-6.3 and
checklist §12 items 50-54 and 58."""

from __future__ import annotations

import hashlib
import json
import uuid
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest

from flowledger import flow
from flowledger.flow import Checkpoint, RunStatus, VertexRecord, VertexStatus
from flowledger.flow.ledger_store import MAX_HISTORY
from flowledger.workflows.activities.activity import (
    MAX_CHECKPOINTS,
    MESSAGES,
    STATUSES,
    ActivityKind,
    ActivityRecord,
    ProjectedActivity,
    ProjectionState,
    Projector,
    _derive,
    event_id,
    format_time,
    parse_time,
    project,
)
from flowledger.workflows.authoring.metadata import bound_text
from flowledger.workflows.errors import ActivityValidationError

from .._activity_support import (
    GID,
    RID,
    SENTINELS,
    SID,
    T0,
    FakeMetadata,
    FakeRun,
    FakeVertex,
    at,
    checkpoint,
    done,
)


def u(n: int) -> str:
    return str(uuid.UUID(int=n))


def kinds(items: list[ProjectedActivity]) -> list[str]:
    return [str(item.activity.kind) for item in items]


def dump(items: list[ProjectedActivity]) -> bytes:
    return json.dumps(
        [{"revision": i.revision, "activity": i.activity.to_json()} for i in items],
        separators=(",", ":"),
        ensure_ascii=False,
    ).encode()


def assert_no_sentinels(items: list[ProjectedActivity]) -> None:
    text = dump(items).decode()
    for sentinel in SENTINELS:
        assert sentinel not in text


# -- kinds, messages, statuses ----------------------------------------------------------------


def test_kinds_have_fixed_messages_and_statuses() -> None:
    """§6.1 table: seven kinds, each with its fixed message and status."""
    table = {
        "run_started": ("Workflow started", "running"),
        "vertex_completed": ("Workflow step completed", "running"),
        "run_interrupted": ("Workflow interrupted", "interrupted"),
        "run_resumed": ("Workflow resumed", "running"),
        "run_completed": ("Workflow completed", "completed"),
        "run_cancelled": ("Workflow cancelled", "cancelled"),
        "run_failed": ("Workflow failed", "failed"),
    }
    assert [k.value for k in ActivityKind] == list(table)
    for kind in ActivityKind:
        assert (MESSAGES[kind], STATUSES[kind]) == table[kind.value]


# -- event IDs --------------------------------------------------------------------------------

SPEC_VECTORS = [
    ("run_started", 0, None, 0, "d5a9e63d-3a36-53de-97f8-db5ecdb1306e"),
    ("vertex_completed", 7, 3, 0, "30229d5c-514a-5d1a-94dd-b11d125418d7"),
    ("vertex_completed", 7, 3, 1, "cbafb6a5-d9df-56ea-8412-9f9f6659a30f"),
    ("run_failed", 0, None, 0, "bc1a9635-e183-500d-8b78-bb4326d5fc49"),
]


@pytest.mark.parametrize(("kind", "revision", "vertex", "ordinal", "expected"), SPEC_VECTORS)
def test_derivation_matches_every_spec_vector(
    kind: str, revision: int, vertex: int | None, ordinal: int, expected: str
) -> None:
    """§6.2 test vectors, all four rows, through the raw-field derivation (the spec's
    vertex IDs are UUIDs; ours are names, so the UUID rows use the raw form)."""
    vertex_bytes = uuid.UUID(int=vertex or 0).bytes
    session, run = uuid.UUID(u(1)).bytes, uuid.UUID(u(2)).bytes
    assert _derive(session, run, kind, revision, vertex_bytes, ordinal) == expected


@pytest.mark.parametrize(("kind", "expected"), [(r[0], r[4]) for r in SPEC_VECTORS if not r[2]])
def test_public_event_id_matches_spec_for_run_level_kinds(kind: str, expected: str) -> None:
    """§6.2: run-level rows use only UUIDs, so the public function reproduces them exactly."""
    assert event_id(u(1), u(2), kind, 0, None, 0) == expected


def independent_event_id(
    session: str, run: str, kind: str, revision: int, vertex: str, ordinal: int
) -> str:
    """A second, literal transcription of §6.2 (vertex field = the name's UTF-8 bytes)."""
    parts = [
        bytes.fromhex("d5e20f2c88975bc09de83d65d4ebf053"),
        bytes.fromhex(session.replace("-", "")),
        bytes.fromhex(run.replace("-", "")),
        kind.encode("ascii"),
        revision.to_bytes(8, "big"),
        vertex.encode("utf-8"),
        ordinal.to_bytes(4, "big"),
    ]
    data = b"".join(len(p).to_bytes(8, "big") + p for p in parts)
    raw = bytearray(hashlib.sha256(data).digest()[:16])
    raw[6] = (raw[6] & 0x0F) | 0x50
    raw[8] = (raw[8] & 0x3F) | 0x80
    return str(uuid.UUID(bytes=bytes(raw)))


# Our own vectors for named vertices (computed once with `independent_event_id`).
OWN_VECTORS = [
    (7, "review", 0, "ffaaef17-316b-5741-ab3b-662908640442"),
    (7, "review", 1, "10988c88-cef1-5465-a73f-10dd42f52066"),
    (0, "a", 0, "d906cc5e-a64f-5e3a-884d-91ed78d89d1d"),
]


@pytest.mark.parametrize(("revision", "vertex", "ordinal", "expected"), OWN_VECTORS)
def test_vertex_event_ids_match_own_vectors(
    revision: int, vertex: str, ordinal: int, expected: str
) -> None:
    """§6.2 with a named vertex: the vertex field is the name's UTF-8 bytes."""
    got = event_id(u(1), u(2), "vertex_completed", revision, vertex, ordinal)
    assert got == independent_event_id(u(1), u(2), "vertex_completed", revision, vertex, ordinal)
    assert got == expected


def test_event_ids_differ_when_only_the_ordinal_differs() -> None:
    """§12 item 58: the transition ordinal alone changes the ID."""
    first = event_id(SID, RID, "vertex_completed", 3, "review", 0)
    second = event_id(SID, RID, "vertex_completed", 3, "review", 1)
    assert first != second
    # and every other identity field matters too
    variants = {
        first,
        event_id(SID, RID, "vertex_completed", 4, "review", 0),
        event_id(SID, RID, "vertex_completed", 3, "publish", 0),
        event_id(RID, RID, "vertex_completed", 3, "review", 0),
        event_id(SID, SID, "vertex_completed", 3, "review", 0),
        event_id(SID, RID, "run_started", 3, None, 0),
    }
    assert len(variants) == 6


def test_event_ids_are_version_5_rfc4122() -> None:
    """§6.2: version nibble 5 and RFC 4122 variant."""
    for revision in range(50):
        parsed = uuid.UUID(event_id(SID, RID, "vertex_completed", revision, "v", revision))
        assert parsed.version == 5
        assert parsed.variant == uuid.RFC_4122


@pytest.mark.parametrize(
    "args",
    [
        (u(0), RID, "run_started", 0, None, 0),
        ("not-a-uuid", RID, "run_started", 0, None, 0),
        (SID.upper(), RID, "run_started", 0, None, 0),
        (SID, RID, "run_paused", 0, None, 0),
        (SID, RID, "run_started", -1, None, 0),
        (SID, RID, "run_started", 1 << 64, None, 0),
        (SID, RID, "run_started", 0, "review", 0),
        (SID, RID, "run_started", 0, None, 1),
        (SID, RID, "vertex_completed", 0, None, 0),
        (SID, RID, "vertex_completed", 0, "Review", 0),
        (SID, RID, "vertex_completed", 0, u(3), 0),
        (SID, RID, "vertex_completed", 0, "review", 1 << 32),
    ],
)
def test_event_id_rejects_bad_identity(args: tuple[Any, ...]) -> None:
    with pytest.raises(ValueError):
        event_id(*args)


# -- bounded text -----------------------------------------------------------------------------


def test_bound_text_cuts_at_code_point_boundaries() -> None:
    """§12 item 51: CJK labels to <= 128 bytes, emoji messages to <= 512 bytes, valid UTF-8,
    actually truncated."""
    cjk = "界" * 100  # 300 bytes, 3 per code point
    label = bound_text(cjk, 128)
    assert label == "界" * 42
    assert len(label.encode()) == 126
    emoji = "a" + "😀" * 200  # 801 bytes; 4 per emoji, misaligned by one
    message = bound_text(emoji, 512)
    assert message == "a" + "😀" * 127
    assert len(message.encode()) == 509
    for text in (label, message):
        text.encode("utf-8").decode("utf-8")  # valid UTF-8 round trip


def test_bound_text_drops_controls_and_trims() -> None:
    assert bound_text("  \x00Re\x07view\x9f \n", 128) == "Review"
    assert bound_text("\u00a0 draft \u2003", 128) == "draft"
    assert bound_text("ab" + " " * 10 + "cd", 4) == "ab"  # cut, then trimmed again
    assert bound_text("short", 128) == "short"
    assert bound_text("anything", 0) == ""
    assert bound_text("anything", -5) == ""
    assert bound_text("bad \ud800 surrogate", 128) == ""


def test_projected_labels_are_bounded() -> None:
    """§12 item 51 through projection: a long CJK label becomes <= 128 bytes."""
    metadata = FakeMetadata(vertices=(FakeVertex("審査" * 80),))
    history = [checkpoint(0), checkpoint(1, RunStatus.COMPLETED, [done("review", 0)])]
    items = project(FakeRun(), metadata, history)
    label = items[1].activity.vertex_label
    assert label and label == "審査" * 21
    assert len(label.encode()) <= 128


# -- the record -------------------------------------------------------------------------------


def record(**changes: Any) -> ActivityRecord:
    base = ActivityRecord(
        event_id=event_id(SID, RID, "vertex_completed", 1, "review", 0),
        session_id=SID,
        run_id=RID,
        workflow_name="review_flow",
        workflow_version="1.0-beta+2",
        kind=ActivityKind.VERTEX_COMPLETED,
        status="running",
        occurred_at=datetime(2024, 5, 1, 12, 0, 0, 250000, tzinfo=UTC),
        vertex_id="review",
        vertex_label="Review",
        completed_vertices=1,
        total_vertices=2,
        message="Workflow step completed",
    )
    return replace(base, **changes)


def test_record_json_round_trip_and_shape() -> None:
    full = record()
    doc = full.to_json()
    assert doc == {
        "event_id": full.event_id,
        "session_id": SID,
        "run_id": RID,
        "workflow_name": "review_flow",
        "workflow_version": "1.0-beta+2",
        "kind": "vertex_completed",
        "status": "running",
        "vertex_id": "review",
        "vertex_label": "Review",
        "completed_vertices": 1,
        "total_vertices": 2,
        "message": "Workflow step completed",
        "occurred_at": "2024-05-01T12:00:00.25Z",
    }
    assert ActivityRecord.from_json(json.loads(json.dumps(doc))) == full


def test_record_json_omits_empty_optional_fields() -> None:
    bare = record(
        event_id=event_id(SID, RID, "run_started", 0, None, 0),
        kind=ActivityKind.RUN_STARTED,
        vertex_id=None,
        vertex_label="",
        completed_vertices=0,
        total_vertices=0,
        message="",
        occurred_at=T0,
    )
    doc = bare.to_json()
    assert set(doc) == {
        "event_id",
        "session_id",
        "run_id",
        "workflow_name",
        "workflow_version",
        "kind",
        "status",
        "occurred_at",
    }
    assert doc["occurred_at"] == "2024-05-01T12:00:00Z"
    assert ActivityRecord.from_json(doc) == bare


def test_times_are_rfc3339_utc() -> None:
    local = datetime(2024, 5, 1, 14, 0, 0, 123, tzinfo=timezone(timedelta(hours=2)))
    assert format_time(local) == "2024-05-01T12:00:00.000123Z"
    assert parse_time("2024-05-01T12:00:00.000123Z") == local
    assert format_time(datetime(5, 1, 2, tzinfo=UTC)) == "0005-01-02T00:00:00Z"
    with pytest.raises(ValueError):
        format_time(datetime(2024, 1, 1))  # naive
    for bad in (
        "2024-05-01T12:00:00+00:00",
        "2024-05-01 12:00:00Z",
        "2024-05-01T12:00:00.1234567Z",
        "2024-13-01T12:00:00Z",
        "",
    ):
        with pytest.raises(ValueError):
            parse_time(bad)


@pytest.mark.parametrize(
    ("mutate", "field"),
    [
        (lambda d: d.update(extra=1), "extra"),
        (lambda d: d.pop("occurred_at"), "occurred_at"),
        (lambda d: d.pop("event_id"), "event_id"),
        (lambda d: d.update(kind="run_paused"), "kind"),
        (lambda d: d.update(status="paused"), "status"),
        (lambda d: d.update(status="completed"), "status"),
        (lambda d: d.update(completed_vertices=True), "completed_vertices"),
        (lambda d: d.update(total_vertices="2"), "total_vertices"),
        (lambda d: d.update(vertex_id=None), "vertex_id"),
        (lambda d: d.update(vertex_label=5), "vertex_label"),
        (lambda d: d.update(occurred_at="2024-05-01T12:00:00+00:00"), "occurred_at"),
        (lambda d: d.update(occurred_at=1714564800), "occurred_at"),
        (lambda d: d.update(event_id=d["event_id"].upper()), "event_id"),
        (lambda d: d.update(workflow_name="Bad-Name"), "workflow_name"),
        (lambda d: d.update(completed_vertices=3), "completed_vertices"),
    ],
)
def test_from_json_is_strict(mutate: Any, field: str) -> None:
    doc = record().to_json()
    mutate(doc)
    with pytest.raises(ActivityValidationError) as caught:
        ActivityRecord.from_json(doc)
    assert caught.value.field == field


def test_from_json_rejects_non_objects() -> None:
    docs: list[Any] = [None, [], "x", 1]
    for doc in docs:
        with pytest.raises(ActivityValidationError):
            ActivityRecord.from_json(doc)


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"event_id": "00000000-0000-0000-0000-000000000000"}, "event_id"),
        ({"session_id": "nope"}, "session_id"),
        ({"run_id": RID.upper()}, "run_id"),
        ({"workflow_name": "ab"}, "workflow_name"),
        ({"workflow_name": "a" * 65}, "workflow_name"),
        ({"workflow_name": "1abc"}, "workflow_name"),
        ({"workflow_version": ""}, "workflow_version"),
        ({"workflow_version": "1 0"}, "workflow_version"),
        ({"workflow_version": "v/1"}, "workflow_version"),
        ({"workflow_version": "v:1"}, "workflow_version"),
        ({"workflow_version": "1" * 65}, "workflow_version"),
        ({"kind": "run_paused"}, "kind"),
        ({"status": "pending"}, "status"),
        ({"status": "failed"}, "status"),
        ({"vertex_id": "Review"}, "vertex_id"),
        ({"vertex_id": None, "vertex_label": ""}, "vertex_id"),
        (
            {
                "kind": ActivityKind.RUN_STARTED,
                "event_id": event_id(SID, RID, "run_started", 0, None, 0),
                "vertex_id": None,
            },
            "vertex_label",
        ),
        ({"vertex_label": "a" * 129}, "vertex_label"),
        ({"vertex_label": "   "}, "vertex_label"),
        ({"vertex_label": "tab\there"}, "vertex_label"),
        ({"vertex_label": "bad \ud800"}, "vertex_label"),
        ({"message": "é" * 257}, "message"),
        ({"message": "line\nbreak"}, "message"),
        ({"completed_vertices": -1}, "completed_vertices"),
        ({"completed_vertices": 3}, "completed_vertices"),
        ({"total_vertices": 1_000_001, "completed_vertices": 0}, "total_vertices"),
        ({"occurred_at": datetime(2024, 5, 1)}, "occurred_at"),
        (
            {"occurred_at": datetime(2024, 5, 1, tzinfo=timezone(timedelta(hours=1)))},
            "occurred_at",
        ),
    ],
)
def test_validate_names_the_field(changes: dict[str, Any], field: str) -> None:
    """§6.1 publisher-side rules, each refused with the field named."""
    record().validate()
    with pytest.raises(ActivityValidationError) as caught:
        record(**changes).validate()
    assert caught.value.field == field


def test_validate_accepts_the_bounds() -> None:
    record(vertex_label="a" * 128, message="b" * 512).validate()
    record(total_vertices=1_000_000, completed_vertices=1_000_000).validate()
    record(workflow_version="A" * 64).validate()


# -- projection -------------------------------------------------------------------------------

TWO = FakeMetadata(vertices=(FakeVertex("Draft"), FakeVertex("Publish")))


def resuming(checkpoint_revision: int) -> FakeRun:
    return FakeRun(
        status="running",
        status_summary="workflow resuming",
        checkpoint_revision=checkpoint_revision,
    )


def scenario_history() -> list[Checkpoint]:
    return [
        checkpoint(0, updated_at=at(1)),
        checkpoint(
            1,
            RunStatus.INTERRUPTED,
            [done("a", 0, at(2))],
            updated_at=at(3),
            interrupted_at=at(4),
        ),
        checkpoint(
            2,
            RunStatus.COMPLETED,
            [done("a", 0, at(2)), done("b", 1)],
            updated_at=at(5),
            completed_at=at(6),
        ),
    ]


def test_projection_of_an_interrupted_and_resumed_run() -> None:
    """§12 item 50: kinds and order, byte-identical reprojection, distinct v5 IDs, the
    resume is stamped with rev 2's updated_at, and no sentinel leaks."""
    run = resuming(1)
    items = project(run, TWO, scenario_history())
    assert kinds(items) == [
        "run_started",
        "vertex_completed",
        "run_interrupted",
        "run_resumed",
        "vertex_completed",
        "run_completed",
    ]
    assert [i.revision for i in items] == [0, 1, 1, 2, 2, 2]
    assert dump(items) == dump(project(run, TWO, scenario_history()))
    ids = [i.activity.event_id for i in items]
    assert len(set(ids)) == len(ids)
    for value in ids:
        parsed = uuid.UUID(value)
        assert (parsed.version, parsed.variant) == (5, uuid.RFC_4122)
    resumed = items[3].activity
    assert resumed.occurred_at == at(5)
    assert resumed.status == "running" and resumed.message == "Workflow resumed"
    started, first, interrupted, _, second, completed = (i.activity for i in items)
    assert started.occurred_at == T0  # created_at first
    assert first.occurred_at == at(2) and first.vertex_label == "Draft"
    assert second.occurred_at == at(5)  # no completed_at: the checkpoint's updated_at
    assert second.vertex_label == "Publish"
    assert interrupted.occurred_at == at(4)
    assert completed.occurred_at == at(6)
    assert [a.activity.completed_vertices for a in items] == [0, 1, 1, 1, 2, 2]
    assert {a.activity.total_vertices for a in items} == {2}
    assert all(i.activity.status == STATUSES[i.activity.kind] for i in items)
    assert first.event_id == event_id(SID, RID, "vertex_completed", 1, "a", 0)
    assert started.event_id == event_id(SID, RID, "run_started", 0, None, 0)
    assert_no_sentinels(items)


@pytest.mark.parametrize(
    "run",
    [
        FakeRun(status="running", status_summary="workflow running", checkpoint_revision=1),
        FakeRun(status="running", status_summary="workflow resuming ", checkpoint_revision=1),
        FakeRun(status="completed", status_summary="workflow resuming", checkpoint_revision=1),
        FakeRun(status="running", status_summary="workflow resuming", checkpoint_revision=0),
        FakeRun(status="running", status_summary="workflow resuming", checkpoint_revision=2),
    ],
)
def test_run_resumed_needs_the_exact_resuming_record(run: FakeRun) -> None:
    """§6.3 step 2: status running, summary exactly "workflow resuming", and the checkpoint
    right after the registry's interrupted revision."""
    assert "run_resumed" not in kinds(project(run, TWO, scenario_history()))


def test_run_resumed_needs_an_interrupted_previous_checkpoint() -> None:
    history = scenario_history()
    history[1].run.status = RunStatus.RUNNING
    assert "run_resumed" not in kinds(project(resuming(1), TWO, history))
    assert "run_resumed" in kinds(project(resuming(1), TWO, scenario_history()))


@pytest.mark.parametrize("status", [RunStatus.COMPLETED, RunStatus.CANCELLED])
def test_single_terminal_checkpoint_has_one_terminal_activity(status: RunStatus) -> None:
    """§12 item 52: exactly one terminal activity for a completed or cancelled checkpoint."""
    items = project(FakeRun(status=str(status)), TWO, [checkpoint(0, status)])
    terminal = "run_completed" if status is RunStatus.COMPLETED else "run_cancelled"
    assert kinds(items) == ["run_started", terminal]
    assert items[1].activity.status == str(status)
    assert items[1].revision == 0
    assert items[1].activity.occurred_at == at(0)  # no completed/cancelled_at: updated_at
    assert_no_sentinels(items)


def test_failed_run_without_history_has_one_run_failed() -> None:
    """§12 item 52: a failed run with no history yields exactly one run_failed."""
    run = FakeRun(status="failed", status_summary="workflow failed", updated_at=at(42))
    items = project(run, TWO, [])
    assert kinds(items) == ["run_failed"]
    (failed,) = items
    assert failed.revision == 0
    assert failed.activity.status == "failed"
    assert failed.activity.occurred_at == at(42)
    assert failed.activity.event_id == event_id(SID, RID, "run_failed", 0, None, 0)


def test_run_failed_goes_one_past_a_non_terminal_history() -> None:
    run = FakeRun(status="failed", updated_at=at(9))
    history = [checkpoint(0), checkpoint(1, vertices=[done("draft", 0)])]
    items = project(run, TWO, history)
    assert kinds(items) == ["run_started", "vertex_completed", "run_failed"]
    assert items[-1].revision == 2
    assert items[-1].activity.completed_vertices == 1


def test_failed_run_with_terminal_checkpoint_has_no_run_failed() -> None:
    run = FakeRun(status="failed")
    items = project(run, TWO, [checkpoint(0, RunStatus.COMPLETED)])
    assert kinds(items) == ["run_started", "run_completed"]


def test_identity_mode_labels_follow_vertex_ids() -> None:
    """§12 item 53: with ID-bound descriptors, labels follow the vertex even when
    completions arrive in the opposite order of declaration."""
    metadata = FakeMetadata(
        vertices=(FakeVertex("Draft the text", "draft"), FakeVertex("Publish it", "publish"))
    )
    history = [
        checkpoint(0),
        checkpoint(1, vertices=[done("publish", 0)]),
        checkpoint(2, RunStatus.COMPLETED, [done("publish", 0), done("draft", 1)]),
    ]
    items = project(FakeRun(), metadata, history)
    labels = [(i.activity.vertex_id, i.activity.vertex_label) for i in items[1:3]]
    assert labels == [("publish", "Publish it"), ("draft", "Draft the text")]
    # Positional mode (no IDs) would have labelled them by completion order instead.
    positional = FakeMetadata(vertices=(FakeVertex("Draft the text"), FakeVertex("Publish it")))
    items = project(FakeRun(), positional, history)
    assert [i.activity.vertex_label for i in items[1:3]] == ["Draft the text", "Publish it"]


def test_identity_mode_unknown_vertex_gets_no_label() -> None:
    metadata = FakeMetadata(vertices=(FakeVertex("Draft", "draft"), FakeVertex("Other")))
    history = [checkpoint(0, RunStatus.COMPLETED, [done("review", 0), done("draft", 0)])]
    items = project(FakeRun(), metadata, history)
    labelled = {i.activity.vertex_id: i.activity.vertex_label for i in items[1:3]}
    assert labelled == {"draft": "Draft", "review": ""}
    assert "vertex_label" not in items[2].activity.to_json()


def test_local_zone_timestamps_are_normalised_to_utc() -> None:
    """§12 item 54: a Flow timestamp in a local zone is the same instant, in UTC."""
    zone = timezone(timedelta(hours=-7, minutes=-30))
    local = datetime(2024, 5, 1, 4, 30, 0, tzinfo=zone)  # == 12:00 UTC
    history = [
        checkpoint(
            0,
            RunStatus.COMPLETED,
            [done("draft", 0, local + timedelta(seconds=1))],
            created_at=local,
            updated_at=local + timedelta(seconds=2),
            completed_at=local + timedelta(seconds=3),
        )
    ]
    items = project(FakeRun(), TWO, history)
    times = [i.activity.occurred_at for i in items]
    assert times == [T0, at(1), at(3)]
    assert all(t.tzinfo is UTC for t in times)
    assert [i.activity.to_json()["occurred_at"] for i in items] == [
        "2024-05-01T12:00:00Z",
        "2024-05-01T12:00:01Z",
        "2024-05-01T12:00:03Z",
    ]


def test_completions_are_deduplicated_and_ordered() -> None:
    """Vertex lists are cumulative: (step, vertex) pairs count once; new completions are
    ordered by step then vertex name; re-runs in later steps count again with the next
    ordinal; non-done records are ignored."""
    pending = VertexRecord("zeta", "x", 0, VertexStatus.RUNNING)
    failed = VertexRecord("omega", "y", 0, VertexStatus.FAILED, error=SENTINELS[5])
    history = [
        checkpoint(0, vertices=[done("beta", 0), done("alpha", 0), pending, failed]),
        checkpoint(1, vertices=[done("beta", 0), done("alpha", 0), done("zeta", 0)]),
        checkpoint(2, vertices=[done("alpha", 1), done("zeta", 0)]),
    ]
    items = project(FakeRun(), FakeMetadata(), history)
    completions = [
        (i.revision, i.activity.vertex_id) for i in items if i.activity.kind == "vertex_completed"
    ]
    assert completions == [(0, "alpha"), (0, "beta"), (1, "zeta"), (2, "alpha")]
    alpha = [i.activity for i in items if i.activity.vertex_id == "alpha"]
    assert [a.event_id for a in alpha] == [
        event_id(SID, RID, "vertex_completed", 0, "alpha", 0),
        event_id(SID, RID, "vertex_completed", 2, "alpha", 1),
    ]
    assert_no_sentinels(items)


def test_progress_is_clamped_to_total() -> None:
    """Our decision (§11.5): completed <= total for every activity, terminal ones too; no
    descriptors means 0/0."""
    history = [
        checkpoint(0),
        checkpoint(1, vertices=[done("a", 0), done("b", 0)]),
        checkpoint(2, RunStatus.COMPLETED, [done("c", 1)]),
    ]
    one = FakeMetadata(vertices=(FakeVertex("Only"),))
    items = project(FakeRun(), one, history)
    assert [(i.activity.completed_vertices, i.activity.total_vertices) for i in items] == [
        (0, 1),
        (1, 1),
        (1, 1),
        (1, 1),
        (1, 1),
    ]
    assert [i.activity.vertex_label for i in items[1:4]] == ["Only", "", ""]
    none = project(FakeRun(), FakeMetadata(), history)
    assert {(i.activity.completed_vertices, i.activity.total_vertices) for i in none} == {(0, 0)}
    failed = project(FakeRun(status="failed"), one, history[:2])
    assert failed[-1].activity.kind == "run_failed"
    assert failed[-1].activity.completed_vertices == 1
    for item in items + none + failed:
        item.activity.validate()


def test_projection_is_pure() -> None:
    history = scenario_history()
    before = [cp.copy() for cp in history]
    project(resuming(1), TWO, history)
    assert history == before


# -- projection validation --------------------------------------------------------------------


@dataclass(frozen=True)
class HugeVertices:
    name: str = "review_flow"
    version: str = "1"
    vertices: tuple[FakeVertex, ...] = (FakeVertex("x"),) * 1_000_001


def terminal_then_more() -> list[Checkpoint]:
    return [checkpoint(0, RunStatus.COMPLETED), checkpoint(1)]


def bad_status() -> list[Checkpoint]:
    cp = checkpoint(0)
    cp.run.status = 7  # type: ignore[assignment]
    return [cp]


def too_many_vertex_records() -> list[Checkpoint]:
    return [checkpoint(0, vertices=[done("a", s) for s in range(10_001)])]


def naive_time() -> list[Checkpoint]:
    return [checkpoint(0, created_at=datetime(2024, 1, 1))]


@pytest.mark.parametrize(
    ("run", "metadata", "history", "field"),
    [
        (FakeRun(session_id=u(0)), TWO, lambda: [], "run"),
        (FakeRun(id="bogus"), TWO, lambda: [], "run"),
        (FakeRun(graph_run_id=u(0)), TWO, lambda: [], "run"),
        (FakeRun(), FakeMetadata(name="other_flow"), lambda: [], "definition"),
        (FakeRun(), FakeMetadata(version="2"), lambda: [], "definition"),
        (FakeRun(), HugeVertices(), lambda: [], "definition vertices"),
        (FakeRun(), TWO, lambda: [checkpoint(0), None], "checkpoint"),
        (FakeRun(), TWO, lambda: [checkpoint(0), checkpoint(2)], "checkpoint revision"),
        (FakeRun(), TWO, lambda: [checkpoint(1)], "checkpoint revision"),
        (FakeRun(), TWO, lambda: [checkpoint(0, graph_run_id=RID)], "checkpoint run ID"),
        (FakeRun(), TWO, too_many_vertex_records, "checkpoint vertices"),
        (FakeRun(), TWO, terminal_then_more, "history"),
        (FakeRun(), TWO, bad_status, "checkpoint status"),
        (FakeRun(), TWO, naive_time, "occurred_at"),
        (FakeRun(status="failed", updated_at=datetime(2024, 1, 1)), TWO, lambda: [], "occurred_at"),
    ],
)
def test_projection_validation(run: Any, metadata: Any, history: Any, field: str) -> None:
    """§6.3 validation: each rule fails with `ActivityValidationError` naming its field."""
    with pytest.raises(ActivityValidationError) as caught:
        project(run, metadata, history())
    assert caught.value.field == field


def test_projection_history_limit_is_the_store_limit() -> None:
    """The projection accepts every history the checkpoint store holds (its limit is the
    store's, not a smaller one of its own) and refuses a checkpoint past it."""
    assert MAX_CHECKPOINTS == MAX_HISTORY
    projector = Projector(FakeRun(), TWO, state=ProjectionState(revision=MAX_CHECKPOINTS))
    with pytest.raises(ActivityValidationError) as caught:
        projector.advance(FakeRun(), [checkpoint(MAX_CHECKPOINTS)])
    assert caught.value.field == "history"


def test_invalid_definition_identity_fails_projection() -> None:
    """A name the publisher would refuse is caught at projection time."""
    run = FakeRun(definition_name="x")
    with pytest.raises(ActivityValidationError) as caught:
        project(run, FakeMetadata(name="x"), [checkpoint(0)])
    assert caught.value.field == "workflow_name"


# -- a real flow graph ------------------------------------------------------------------------


@dataclass
class Review:
    text: str = ""
    approved: bool = False


async def test_projection_over_a_real_flow_run() -> None:
    """Run draft -> approve (interrupts) -> publish on the engine; project its real history
    before and after the resume; no state or interrupt text leaks."""
    graph: flow.Graph[Review] = flow.Graph("review", state=Review)

    async def draft(state: Review) -> dict[str, Any]:
        return {"text": SENTINELS[0]}

    async def approve(state: Review) -> dict[str, Any]:
        answer = flow.interrupt({"question": SENTINELS[2]})
        return {"approved": bool(answer["ok"])}

    async def publish(state: Review) -> dict[str, Any]:
        return {}

    graph.add_vertex("draft", draft)
    graph.add_vertex("approve", approve)
    graph.add_vertex("publish", publish)
    graph.add_edge("draft", "approve")
    graph.add_edge("approve", "publish")
    store = flow.MemoryCheckpointStore()
    runner = graph.compile(entry="draft", finish="publish", store=store, version="1")
    metadata = FakeMetadata(
        vertices=(
            FakeVertex("Draft", "draft"),
            FakeVertex("Approve", "approve"),
            FakeVertex("Publish", "publish"),
        )
    )

    paused = await runner.run(Review(), run_id=GID)
    assert paused.run.status is RunStatus.INTERRUPTED
    interrupted_at = paused.run.revision
    history = await runner.history(GID)
    items = project(
        FakeRun(status="interrupted", checkpoint_revision=interrupted_at), metadata, history
    )
    assert kinds(items) == ["run_started", "vertex_completed", "run_interrupted"]
    assert items[-1].revision == interrupted_at

    done_run = await runner.resume(GID, {"ok": True})
    assert done_run.run.status is RunStatus.COMPLETED
    history = await runner.history(GID)
    items_resumed = project(resuming(interrupted_at), metadata, history)
    assert kinds(items_resumed) == [
        "run_started",
        "vertex_completed",
        "run_interrupted",
        "run_resumed",
        "vertex_completed",
        "vertex_completed",
        "run_completed",
    ]
    assert items_resumed[3].revision == interrupted_at + 1
    assert [i.activity.vertex_label for i in items_resumed if i.activity.vertex_id] == [
        "Draft",
        "Approve",
        "Publish",
    ]
    assert items_resumed[:3] == items  # earlier revisions project identically
    assert items_resumed[-1].activity.completed_vertices == 3
    assert_no_sentinels(items_resumed)
    # After completion the registry record no longer says "resuming": the re-projection
    # drops run_resumed (why the journal persists published activities).
    final = project(
        FakeRun(status="completed", checkpoint_revision=len(history) - 1), metadata, history
    )
    assert "run_resumed" not in kinds(final)
