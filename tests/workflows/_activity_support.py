"""Stand-ins and builders shared by the activity, history and journal tests.

The registry `Run` and definition `Metadata` are replaced by small dataclasses with the
attributes projection reads (`RunView` / `MetadataView`), so these tests depend on
neither run.py nor metadata.py. Checkpoints are built by hand with `flow` records.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from flowledger import flow
from flowledger.flow import (
    Checkpoint,
    InterruptKind,
    InterruptRecord,
    RunRecord,
    RunStatus,
    StepPhase,
    VertexRecord,
    VertexStatus,
)
from flowledger.workflows.activities.activity import (
    MESSAGES,
    STATUSES,
    ActivityKind,
    ActivityRecord,
    ProjectedActivity,
    event_id,
)

SID = "5e551011-aaaa-4bbb-8ccc-dddddddddd01"
SID2 = "5e551011-aaaa-4bbb-8ccc-dddddddddd02"
RID = "0000a1b2-c3d4-4e5f-8a6b-7c8d9e0f0001"
RID2 = "0000a1b2-c3d4-4e5f-8a6b-7c8d9e0f0002"
GID = "9a9a9a9a-bcbc-4dde-8eef-f0f0f0f0f0f0"
T0 = datetime(2024, 5, 1, 12, 0, 0, tzinfo=UTC)

#: Strings placed in state, interrupt info/causes, vertex errors, halts and cancel reasons;
#: none may ever reach an activity.
SENTINELS = (
    "SENTINEL-STATE-7f3a",
    "SENTINEL-STEPBASE-1c9e",
    "SENTINEL-INTERRUPT-INFO-44d1",
    "SENTINEL-INTERRUPT-CAUSE-0b2c",
    "SENTINEL-CONTINUATION-9e0f",
    "SENTINEL-VERTEX-ERROR-5a6b",
    "SENTINEL-CANCEL-REASON-d00d",
    "SENTINEL-HALT-CAUSE-8c8c",
)


@dataclass(frozen=True)
class FakeRun:
    session_id: str = SID
    id: str = RID
    graph_run_id: str = GID
    definition_name: str = "review_flow"
    definition_version: str = "1"
    status: str = "running"
    status_summary: str = ""
    checkpoint_revision: int = 0
    activity_cursor: int = 0
    updated_at: datetime = T0


@dataclass(frozen=True)
class FakeVertex:
    label: str
    id: str | None = None


@dataclass(frozen=True)
class FakeMetadata:
    name: str = "review_flow"
    version: str = "1"
    vertices: tuple[FakeVertex, ...] = field(default_factory=tuple)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def done(vertex: str, step: int, completed_at: datetime | None = None) -> VertexRecord:
    return VertexRecord(
        vertex=vertex,
        vertex_run_id=f"{GID}/{step}/{vertex}",
        step=step,
        status=VertexStatus.DONE,
        attempt=1,
        completed_at=completed_at,
        error=SENTINELS[5],
    )


def checkpoint(
    revision: int,
    status: RunStatus = RunStatus.RUNNING,
    vertices: Sequence[VertexRecord] = (),
    *,
    created_at: datetime = T0,
    updated_at: datetime | None = None,
    completed_at: datetime | None = None,
    interrupted_at: datetime | None = None,
    cancelled_at: datetime | None = None,
    graph_run_id: str = GID,
) -> Checkpoint:
    """A checkpoint full of sentinel strings wherever the engine keeps free text."""
    run = RunRecord(
        graph_run_id=graph_run_id,
        graph_id="review",
        graph_version="1",
        status=status,
        step=max([v.step for v in vertices], default=0),
        revision=revision,
        created_at=created_at,
        started_at=created_at,
        updated_at=updated_at or at(revision),
        completed_at=completed_at,
        interrupted_at=interrupted_at,
        cancelled_at=cancelled_at,
        cancel_reason=SENTINELS[6] if status is RunStatus.CANCELLED else "",
    )
    interrupts = []
    if status is RunStatus.INTERRUPTED:
        interrupts.append(
            InterruptRecord(
                vertex="approve",
                kind=InterruptKind.ERRORED,
                info={"question": SENTINELS[2]},
                cause=SENTINELS[3],
                stateful=True,
                continuation={"memo": SENTINELS[4]},
            )
        )
    return Checkpoint(
        run=run,
        phase=StepPhase.PAUSED if interrupts else StepPhase.ROUTED,
        state={"secret": SENTINELS[0], "n": revision},
        step_base={"secret": SENTINELS[1]},
        vertices=list(vertices),
        interrupts=interrupts,
        halt=flow.HaltRecord(flow.HaltKind.CONDITION, 0, SENTINELS[7]),
    )


def activity(
    revision: int,
    ordinal: int,
    *,
    session_id: str = SID,
    run_id: str = RID,
    kind: ActivityKind = ActivityKind.VERTEX_COMPLETED,
    at_seconds: float = 0,
) -> ProjectedActivity:
    """A valid projected activity with a unique, stable event ID per (revision, ordinal)."""
    vertex = "step" if kind is ActivityKind.VERTEX_COMPLETED else None
    order = ordinal if vertex else 0
    return ProjectedActivity(
        revision,
        ActivityRecord(
            event_id=event_id(session_id, run_id, kind, revision, vertex, order),
            session_id=session_id,
            run_id=run_id,
            workflow_name="review_flow",
            workflow_version="1",
            kind=kind,
            status=STATUSES[kind],
            occurred_at=at(at_seconds or revision),
            vertex_id=vertex,
            vertex_label="Step" if vertex else "",
            completed_vertices=0,
            total_vertices=3,
            message=MESSAGES[kind],
        ),
    )


def sequence(sizes: Sequence[int], **kwargs: str) -> list[ProjectedActivity]:
    """Activities in revision groups: ``sizes[r]`` activities at revision ``r``."""
    out: list[ProjectedActivity] = []
    ordinal = 0
    for revision, size in enumerate(sizes):
        for _ in range(size):
            out.append(activity(revision, ordinal, **kwargs))  # type: ignore[arg-type]
            ordinal += 1
    return out
