"""The whole-history projection as it was before `Projector` (the oracle for its tests).

Kept verbatim apart from its old 10,000-checkpoint cap, so the incremental projector is
checked against the algorithm that wrote the event IDs already stored in journals."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from flowledger.flow import (
    Checkpoint,
    InterruptKind,
    RunStatus,
    StepPhase,
    VertexRecord,
    VertexStatus,
)
from flowledger.workflows.activities.activity import (
    MAX_CHECKPOINT_VERTICES,
    MAX_DEFINITION_VERTICES,
    MAX_LABEL_BYTES,
    MESSAGES,
    RESUMING_SUMMARY,
    STATUSES,
    ActivityKind,
    ActivityRecord,
    MetadataView,
    ProjectedActivity,
    RunView,
    _is_uuid,
    _when,
    event_id,
)
from flowledger.workflows.authoring.metadata import bound_text
from flowledger.workflows.errors import ActivityValidationError


def _validate_inputs(run: RunView, metadata: MetadataView, history: Sequence[Checkpoint]) -> None:
    if run is None:
        raise ActivityValidationError("run", "is required")
    for attr in ("session_id", "id", "graph_run_id"):
        if not _is_uuid(getattr(run, attr, None)):
            raise ActivityValidationError("run", f"{attr} must be a nonzero canonical UUID")
    if metadata is None:
        raise ActivityValidationError("definition", "is required")
    if metadata.name != run.definition_name or metadata.version != run.definition_version:
        raise ActivityValidationError("definition", "name and version must equal the run's")
    if len(metadata.vertices) > MAX_DEFINITION_VERTICES:
        raise ActivityValidationError(
            "definition vertices", f"more than {MAX_DEFINITION_VERTICES} vertex descriptors"
        )
    terminal = False
    for index, cp in enumerate(history):
        if cp is None:
            raise ActivityValidationError("checkpoint", f"checkpoint {index} is missing")
        if cp.revision != index:
            raise ActivityValidationError(
                "checkpoint revision", f"checkpoint {index} has revision {cp.revision}"
            )
        if cp.run.graph_run_id != run.graph_run_id:
            raise ActivityValidationError(
                "checkpoint run ID", f"checkpoint {index} belongs to another graph run"
            )
        if len(cp.vertices) > MAX_CHECKPOINT_VERTICES:
            raise ActivityValidationError(
                "checkpoint vertices", f"checkpoint {index} has too many vertex records"
            )
        if terminal:
            raise ActivityValidationError("history", "checkpoint after a terminal checkpoint")
        if not isinstance(cp.run.status, RunStatus):
            raise ActivityValidationError("checkpoint status", f"checkpoint {index}")
        terminal = cp.run.status.terminal


def _should_project_resume(run: RunView, history: Sequence[Checkpoint], index: int) -> bool:
    return (
        run.status == "running"
        and run.status_summary == RESUMING_SUMMARY
        and index > 0
        and history[index].revision == run.checkpoint_revision + 1
        and history[index - 1].run.status is RunStatus.INTERRUPTED
    )


def _paused_by_error(cp: Checkpoint) -> bool:
    """The checkpoint pauses the run for a task error (or a halt), not for a request."""
    if cp.phase is StepPhase.HALTED:
        return True
    return cp.phase is StepPhase.PAUSED and any(
        item.kind is InterruptKind.ERRORED for item in cp.interrupts
    )


def reference_project(
    run: RunView,
    metadata: MetadataView,
    history: Sequence[Checkpoint],
    *,
    failure_revision: int | None = None,
    fail_on_error: bool = False,
) -> list[ProjectedActivity]:
    """The activities of a run, in order, each with its revision (§6.3).

    A failed run's ``run_failed`` goes one past the history, or at ``failure_revision``
    when given (a failed run whose history cannot be read any more records its failure at
    the first revision not yet published). With ``fail_on_error`` (a definition whose
    task errors fail the run), a checkpoint that pauses for a task error projects no
    ``run_interrupted``: that pause is the run's failure.

    Pure and byte-deterministic: the same inputs give equal records with the same event
    IDs. Only identities, counters, fixed messages, bounded labels and timestamps are
    read; state, interrupts, halts, vertex errors and cancel reasons are never looked at.
    Every record satisfies `ActivityRecord.validate`."""
    _validate_inputs(run, metadata, history)
    descriptors = list(metadata.vertices)
    identity = any(d.id for d in descriptors)
    labels_by_id: dict[str, str] = {}
    if identity:
        for d in descriptors:
            if d.id:
                labels_by_id[d.id] = bound_text(d.label, MAX_LABEL_BYTES)
    total = len(descriptors)
    completed = 0
    seen: set[tuple[int, str]] = set()
    ordinals: dict[str, int] = {}
    terminal = False
    out: list[ProjectedActivity] = []
    session_id, run_id = run.session_id, run.id

    def progress() -> int:
        return min(completed, total)

    def emit(
        revision: int,
        kind: ActivityKind,
        when: datetime,
        *,
        vertex: str | None = None,
        ordinal: int = 0,
        label: str = "",
    ) -> None:
        record = ActivityRecord(
            event_id=event_id(session_id, run_id, kind, revision, vertex, ordinal),
            session_id=session_id,
            run_id=run_id,
            workflow_name=metadata.name,
            workflow_version=metadata.version,
            kind=kind,
            status=STATUSES[kind],
            occurred_at=when,
            vertex_id=vertex,
            vertex_label=label,
            completed_vertices=progress(),
            total_vertices=total,
            message=MESSAGES[kind],
        )
        record.validate()
        out.append(ProjectedActivity(revision, record))

    for index, cp in enumerate(history):
        revision = cp.revision
        record = cp.run
        if revision == 0:
            emit(revision, ActivityKind.RUN_STARTED, _when(record.created_at, record.updated_at))
        if _should_project_resume(run, history, index):
            emit(revision, ActivityKind.RUN_RESUMED, _when(record.updated_at))
        fresh: list[VertexRecord] = []
        for vertex in cp.vertices:
            if vertex.status is not VertexStatus.DONE:
                continue
            key = (vertex.step, vertex.vertex)
            if key in seen:
                continue
            seen.add(key)
            fresh.append(vertex)
        fresh.sort(key=lambda v: (v.step, v.vertex))
        for vertex in fresh:
            vid = vertex.vertex
            ordinal = ordinals.get(vid, 0)
            ordinals[vid] = ordinal + 1
            if identity:
                label = labels_by_id.get(vid, "")
            elif completed < len(descriptors):
                label = bound_text(descriptors[completed].label, MAX_LABEL_BYTES)
            else:
                label = ""
            completed += 1
            emit(
                revision,
                ActivityKind.VERTEX_COMPLETED,
                _when(vertex.completed_at, record.updated_at),
                vertex=vid,
                ordinal=ordinal,
                label=label,
            )
        status = record.status
        if status is RunStatus.INTERRUPTED and not (fail_on_error and _paused_by_error(cp)):
            emit(
                revision,
                ActivityKind.RUN_INTERRUPTED,
                _when(record.interrupted_at, record.updated_at),
            )
        elif status is RunStatus.COMPLETED:
            emit(
                revision, ActivityKind.RUN_COMPLETED, _when(record.completed_at, record.updated_at)
            )
            terminal = True
        elif status is RunStatus.CANCELLED:
            emit(
                revision, ActivityKind.RUN_CANCELLED, _when(record.cancelled_at, record.updated_at)
            )
            terminal = True

    if run.status == "failed" and not terminal:
        at = len(history) if failure_revision is None else failure_revision
        emit(at, ActivityKind.RUN_FAILED, _when(run.updated_at))
    return out
