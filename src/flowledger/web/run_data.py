"""A run's data for its session's owner: the state at a revision diffed against the
previous one, the input and the output, the errors with their tracebacks, every error
pause of the run (`run_errors`), and who answered each pause.

Unlike the other views (`views`, which read through the tool bundle, whose results
never carry state), this one reads the session's own records: the run through the
session's registry (another session's run is not found: 404), its checkpoints, its
input and its answers (`flowledger.workflows.records.answers`). A dashboard serves a
session only to whoever holds one of its tokens (without tokens: one session, on a
loopback address), so that is who reads it. Nothing here reaches the activity history
or a tool result.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Final

from .. import flow
from ..deploy.runs.compile import artifact_outcome
from ..workflows.errors import NotFoundError
from ..workflows.records.answers import Answer
from ..workflows.records.pending import readable_cause
from ..workflows.records.run import Run, RunStatus
from ..workflows.runtime.session import WorkflowSession
from .diff import Change, diff
from .run_errors import RunErrors, run_errors
from .timing import duration_text

__all__ = [
    "FOLD_CHARS",
    "MAX_SHOWN_CHARS",
    "NoCheckpointError",
    "RevisionData",
    "Shown",
    "revision_data",
    "shown_answers",
    "took",
]

FOLD_CHARS: Final = 160  # a value longer than this (or on several lines) is folded
MAX_SHOWN_CHARS: Final = 65536  # one value's text on a page; the rest is counted


@dataclass(frozen=True, slots=True)
class Shown:
    """One JSON value as a page shows it: indented text, bounded, folded when long."""

    text: str
    folded: bool
    cut: int = 0  # characters left out

    @classmethod
    def of(cls, value: Any) -> Shown:
        text = json.dumps(value, indent=2, ensure_ascii=False)
        cut = max(0, len(text) - MAX_SHOWN_CHARS)
        if cut:
            text = text[:MAX_SHOWN_CHARS]
        return cls(text, len(text) > FOLD_CHARS or "\n" in text, cut)


@dataclass(frozen=True, slots=True)
class ShownChange:
    path: str
    kind: str
    old: Shown | None
    new: Shown | None


@dataclass(frozen=True, slots=True)
class ShownError:
    """An errored vertex at the revision: what the engine kept of what it raised."""

    vertex: str
    label: str
    type: str
    message: str
    traceback: str  # "" when not kept (checkpoints written before it was)


@dataclass(frozen=True, slots=True)
class ShownAnswer:
    """Who or what answered one pause, and with what (`Answer`)."""

    revision: int
    kind: str
    transport: str
    session_id: str
    at: str
    payload: Shown | None


@dataclass(frozen=True)
class RevisionData:
    run_id: str
    revision: int
    latest: int
    step: int
    phase: str
    status: str
    time: str
    state: Shown
    changes: list[ShownChange]
    change_count: int
    errors: list[ShownError]
    input: Shown | None
    input_problem: str
    output: Shown | None
    outcome: str | None
    answers: list[ShownAnswer] = field(default_factory=list)
    answers_recorded: bool = False
    all_errors: RunErrors | None = None  # every error pause of the run, at any revision

    @property
    def previous(self) -> int | None:
        return self.revision - 1 if self.revision > 0 else None

    @property
    def next(self) -> int | None:
        return self.revision + 1 if self.revision < self.latest else None


class NoCheckpointError(LookupError):
    """The run has no checkpoint yet (it is pending), or none at the asked revision."""


def took(started: object, ended: object) -> str:
    """How long from one stored time to another, for a reader (``""`` if unreadable)."""
    try:
        start = datetime.fromisoformat(str(started))
        end = datetime.fromisoformat(str(ended))
        seconds = (end - start).total_seconds()
    except (TypeError, ValueError):
        return ""
    return duration_text(seconds) if seconds >= 0 else ""


def _change(change: Change) -> ShownChange:
    return ShownChange(
        change.path,
        change.kind,
        None if change.kind == "added" else Shown.of(change.old),
        None if change.kind == "removed" else Shown.of(change.new),
    )


def _errors(checkpoint: flow.Checkpoint, labels: Mapping[str, str]) -> list[ShownError]:
    out: list[ShownError] = []
    for item in checkpoint.interrupts:
        if item.kind is flow.InterruptKind.ERRORED:
            out.append(
                ShownError(
                    item.vertex,
                    labels.get(item.vertex, ""),
                    item.error_type or "error",
                    readable_cause(item.cause),
                    item.traceback,
                )
            )
    if checkpoint.halt is not None:
        out.append(ShownError("", "", str(checkpoint.halt.kind), checkpoint.halt.cause, ""))
    return out


async def _input(session: WorkflowSession, run: Run) -> tuple[Shown | None, str]:
    try:
        data = await session.inputs.get(session.session_id, run.input)
    except NotFoundError:
        return None, "the input is no longer stored"
    return Shown.of(json.loads(data)), ""


def _output(run: Run, state: Mapping[str, Any], deployed: bool) -> tuple[Shown | None, str | None]:
    """A completed run's result: a deployed run's end node (outcome and output), any
    other run's final state."""
    if run.status is not RunStatus.COMPLETED:
        return None, None
    if deployed:
        outcome, output = artifact_outcome(state)
        return Shown.of(output), None if outcome is None else str(outcome)
    return Shown.of(dict(state)), None


async def revision_data(
    session: WorkflowSession,
    run_id: str,
    revision: int | None,
    *,
    labels: Mapping[str, str],
    deployed: bool,
) -> RevisionData:
    """The run's data at ``revision`` (None: its latest). `NotFoundError` for a run that is
    not this session's, `NoCheckpointError` for a revision it does not have."""
    run = await session.registry.get(session.session_id, run_id)
    try:
        latest = await session.checkpoints.latest(run.graph_run_id)
    except flow.CheckpointNotFoundError:
        raise NoCheckpointError(f"run {run_id} has no checkpoint yet") from None
    last = latest.revision
    wanted = last if revision is None else revision
    if wanted > last:
        raise NoCheckpointError(f"run {run_id} has revisions 0..{last}, not {wanted}")
    pair = await session.checkpoints.history(run.graph_run_id, after=wanted - 2, limit=2)
    found = {checkpoint.revision: checkpoint for checkpoint in pair}
    checkpoint = found[wanted]
    before = found.get(wanted - 1)
    state = checkpoint.state or {}
    changes, count = diff(None if before is None else (before.state or {}), state)
    shown_input, problem = await _input(session, run)
    output, outcome = _output(run, latest.state or {}, deployed)
    answers, recorded = await shown_answers(session, run.id)
    return RevisionData(
        run_id=run.id,
        revision=wanted,
        latest=last,
        step=checkpoint.run.step,
        phase=str(checkpoint.phase),
        status=str(checkpoint.run.status),
        time=checkpoint.run.updated_at.isoformat(),
        state=Shown.of(state),
        changes=[_change(change) for change in changes],
        change_count=count,
        errors=_errors(checkpoint, labels),
        input=shown_input,
        input_problem=problem,
        output=output,
        outcome=outcome,
        answers=answers,
        answers_recorded=recorded,
        all_errors=await run_errors(session.checkpoints, run.graph_run_id, labels),
    )


async def shown_answers(session: WorkflowSession, run_id: str) -> tuple[list[ShownAnswer], bool]:
    """Who answered the run's pauses, oldest first, and whether any answer was ever
    recorded (the run must be this session's: the caller has read it)."""
    answers = await session.answers.get(session.session_id, run_id)
    return [_answer(answer) for answer in answers or ()], answers is not None


def _answer(answer: Answer) -> ShownAnswer:
    return ShownAnswer(
        answer.checkpoint_revision,
        answer.kind,
        answer.transport,
        answer.session_id,
        answer.at.isoformat(),
        None if answer.payload is None else Shown.of(answer.payload),
    )
