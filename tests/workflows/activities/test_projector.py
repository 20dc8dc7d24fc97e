"""The incremental `Projector` equals the whole-history `project`, byte for byte.

Event IDs are part of the durable contract (a journal is idempotent by them), so a
projection resumed at any revision, from a saved `ProjectionState` or after any split
into pages, must emit exactly the records a whole-history projection emits there."""

from __future__ import annotations

import itertools
import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from flowledger.flow import Checkpoint, RunStatus
from flowledger.workflows.activities.activity import (
    ProjectedActivity,
    ProjectionState,
    Projector,
    project,
)
from flowledger.workflows.activities.journal import _encode
from flowledger.workflows.errors import ActivityValidationError

from .._activity_support import FakeMetadata, FakeRun, FakeVertex, checkpoint, done
from .._reference_projection import reference_project

VERTICES = ("draft", "review", "publish")
METADATAS = (
    FakeMetadata(),
    FakeMetadata(vertices=(FakeVertex("Draft"), FakeVertex("Review"))),
    FakeMetadata(vertices=tuple(FakeVertex(v.title(), v) for v in VERTICES)),
)


@st.composite
def histories(draw: Any) -> list[Checkpoint]:
    size = draw(st.integers(1, 12))
    out: list[Checkpoint] = []
    step = 0
    for revision in range(size):
        step += draw(st.integers(0, 1))
        names = draw(st.lists(st.sampled_from(VERTICES), max_size=3))
        # A vertex record may repeat from the previous step: it is counted once.
        records = [done(name, max(step - draw(st.integers(0, 1)), 0)) for name in names]
        last = revision == size - 1
        choices = [RunStatus.RUNNING, RunStatus.INTERRUPTED]
        if last:
            choices += [RunStatus.COMPLETED, RunStatus.CANCELLED]
        status = draw(st.sampled_from(choices))
        out.append(checkpoint(revision, status, records))
    return out


def encoded(items: list[ProjectedActivity]) -> list[bytes]:
    return [_encode(item) for item in items]


@settings(max_examples=300, deadline=None)
@given(
    history=histories(),
    metadata=st.sampled_from(METADATAS),
    status=st.sampled_from(["running", "failed", "interrupted", "completed"]),
    resuming=st.booleans(),
    checkpoint_revision=st.integers(0, 12),
    fail_on_error=st.booleans(),
    cuts=st.lists(st.integers(0, 12), max_size=4),
    emit_from=st.integers(0, 13),
    save=st.booleans(),
    failure_revision=st.none() | st.integers(0, 13),
)
def test_incremental_projection_equals_whole_history(
    history: list[Checkpoint],
    metadata: FakeMetadata,
    status: str,
    resuming: bool,
    checkpoint_revision: int,
    fail_on_error: bool,
    cuts: list[int],
    emit_from: int,
    save: bool,
    failure_revision: int | None,
) -> None:
    """Any pages, any emission start, optionally through the JSON form of the state."""
    run = FakeRun(
        status=status,
        status_summary="workflow resuming" if resuming else "",
        checkpoint_revision=checkpoint_revision,
    )
    whole = [
        item
        for item in reference_project(run, metadata, history, fail_on_error=fail_on_error)
        if item.revision >= emit_from
    ]
    bounds = sorted({0, len(history), *(min(c, len(history)) for c in cuts)})
    projector = Projector(run, metadata, fail_on_error=fail_on_error, emit_from=emit_from)
    pieces: list[ProjectedActivity] = []
    for start, end in itertools.pairwise(bounds):
        if save:  # a projector resumed from the saved state of the last one
            doc = json.loads(json.dumps(projector.state.to_json()))
            state = ProjectionState.from_json(doc)
            projector = Projector(
                run, metadata, fail_on_error=fail_on_error, state=state, emit_from=emit_from
            )
        pieces.extend(projector.advance(run, history[start:end]))
    pieces.extend(item for item in projector.finish(run) if item.revision >= emit_from)
    assert encoded(pieces) == encoded(whole)
    options: dict[str, Any] = {"fail_on_error": fail_on_error, "failure_revision": failure_revision}
    assert encoded(project(run, metadata, history, **options)) == encoded(
        reference_project(run, metadata, history, **options)
    )
    assert projector.revision == len(history)


def test_finish_reports_the_failure_even_before_emit_from() -> None:
    """`finish` always returns the ``run_failed`` (so a caller sees where the projection
    ends), at the same revision and with the same event ID as `project`'s."""
    run = FakeRun(status="failed")
    history = [checkpoint(0), checkpoint(1, vertices=[done("draft", 1)])]
    projector = Projector(run, METADATAS[2], emit_from=5)
    assert projector.advance(run, history) == []
    (failed,) = projector.finish(run)
    assert encoded([failed]) == encoded(project(run, METADATAS[2], history)[-1:])
    assert failed.revision == 2


def test_replay_emits_run_resumed_where_a_paused_run_went_on() -> None:
    """Rebuilding a journal (``replay``): ``run_resumed`` follows an interrupted checkpoint
    exactly where a resume published it - with the event ID the live projection gave it -
    and never before the cancellation of a paused run."""
    metadata = METADATAS[2]
    resumed = [
        checkpoint(0),
        checkpoint(1, RunStatus.INTERRUPTED),
        checkpoint(2, vertices=[done("draft", 1)]),
        checkpoint(3, RunStatus.COMPLETED),
    ]
    live = project(
        FakeRun(status="running", status_summary="workflow resuming", checkpoint_revision=1),
        metadata,
        resumed,
    )
    replayed = Projector(FakeRun(status="completed"), metadata, replay=True)
    replay = replayed.advance(FakeRun(status="completed"), resumed)
    resumes = [item for item in live if str(item.activity.kind) == "run_resumed"]
    assert resumes and encoded(resumes) == encoded(
        [item for item in replay if str(item.activity.kind) == "run_resumed"]
    )
    cancelled = [
        checkpoint(0),
        checkpoint(1, RunStatus.INTERRUPTED),
        checkpoint(2, RunStatus.CANCELLED),
    ]
    run = FakeRun(status="cancelled")
    kinds = [
        str(i.activity.kind) for i in Projector(run, metadata, replay=True).advance(run, cancelled)
    ]
    assert kinds == ["run_started", "run_interrupted", "run_cancelled"]


def test_projection_state_json_is_strict() -> None:
    """A saved state that is not exactly `to_json`'s shape is refused, naming the field."""
    good = ProjectionState(
        revision=3, completed=2, ordinals={"draft": 2}, seen={(1, "draft"), (2, "draft")}
    ).to_json()
    assert ProjectionState.from_json(json.loads(json.dumps(good))).to_json() == good
    bad: list[tuple[dict[str, Any], str]] = [
        ({**good, "extra": 1}, "projection state"),
        ({**good, "revision": -1}, "projection state revision"),
        ({**good, "terminal": 1}, "projection state terminal"),
        ({**good, "ordinals": {"Bad": 1}}, "projection state ordinals"),
        ({**good, "seen": [[1]]}, "projection state seen"),
    ]
    for doc, field in bad:
        try:
            ProjectionState.from_json(doc)
        except ActivityValidationError as exc:
            assert exc.field == field
        else:
            raise AssertionError(f"{doc} was accepted")
