"""Forking a run: where a fork of revision ``r`` continues, and its patched state.

A fork is a new run (its own id, its own history from revision 0) whose revision 0 is a
*seed* - phase ``ROUTED``, status ``RUNNING``, no vertex records, no step base - carrying
the origin's state and the frontier the origin would run next, plus ``origin``
(`ForkOrigin`). Resuming the fork runs it like any run whose seed is durable.

What the seed continues from (`fork_point`) is always a *step boundary* of the origin,
so a fork never inherits half a step:

* a ``ROUTED`` revision (the seed, a step's end, or the completion) is a boundary: the
  fork runs its frontier next, as its resume would (the seed's step, else ``step + 1``).
  Forking the completion gives an empty frontier: resuming the fork completes it at once.
* a ``HALTED`` revision with a step-budget halt (``MAX_STEPS``) is a boundary too: the
  step it did not start is the fork's first step.
* every other revision is *inside* a step - ``RUNNING`` (after one vertex of a step),
  ``PAUSED`` (the step waits for a resume) or a routing halt (``CONDITION``,
  ``UNDECLARED_TARGET``, ``DEAD_END``: every vertex ran, routing failed). The fork
  restarts that whole step from its start: state, frontier, step number and
  ``finish_reached`` are those of the latest boundary before the revision (its state is
  the step's ``step_base``). Every vertex of that step runs again in the fork, the
  finished ones and a paused one too (which asks its question again; a continuation
  it kept is not carried over).
* a ``CANCELLED`` revision is a copy of the revision it cancelled (only the status
  changes), so forking it forks that revision.

Forking *after* a revision (`step_end`, what a history entry's "fork from here" means)
forks the revision that ends the step the revision is in, when the origin reached it:
the fork then continues with the next step, so a vertex whose completion the entry
records is not run again. An origin that never ended that step (paused, halted or
cancelled in it, or still running it) has no such revision: the fork restarts the step.
`fork_plan` says, before anything is written, which revision a fork is made from, the
step it runs first and every vertex the origin executed from that step on: the ones
the fork runs again if it takes the same path.

Idempotency: nothing of the origin's executions is copied. Every vertex the fork runs
gets a fresh ``vertex_run_id``, and ``RunInfo.idempotency_key``
(``graph=<graph>/run=<run id>/step=<step>/vertex=<vertex>``) names the fork's run id -
the step numbers continue the origin's, so the key of a vertex re-run in the fork
differs from the origin's exactly in ``run=``. A side effect deduplicated on that key is
done again by the fork.

The patch (`patch_state`) is a JSON object of top-level state fields. For a typed state
(dataclass, TypedDict, pydantic model) an unknown field is refused, and a value must
decode as its field's type *and* encode back to the same JSON (so ``"3"`` is not
accepted for an ``int`` field by coercion). A plain ``dict`` state has no schema: every
field name is accepted. Unpatched fields keep the origin's values exactly, so the
checkpoint store re-references the origin's stored field attachments instead of copying
them.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from .checkpoint import Checkpoint, HaltKind, RunStatus, StepPhase, VertexStatus, to_document
from .codec import JsonObject, StateCodec, dumps, to_json_value
from .errors import CodecError, FlowError, StatePatchError
from .reducers import state_field_names

__all__ = [
    "ForkPlan",
    "ForkPoint",
    "checkpoint_digest",
    "fork_plan",
    "fork_point",
    "patch_state",
    "step_end",
]


@dataclass(frozen=True, slots=True)
class ForkPoint:
    """Where a fork continues: the state, the frontier of the step it runs first, that
    step's number, and whether the finish vertex had completed by then."""

    state: JsonObject
    frontier: tuple[str, ...]
    step: int
    finish_reached: bool


def checkpoint_digest(cp: Checkpoint) -> str:
    """``sha256:<hex>`` of the checkpoint's document as compact, key-sorted JSON
    (`codec.dumps` of `to_document`): equal checkpoints always give equal digests."""
    return "sha256:" + hashlib.sha256(dumps(to_document(cp))).hexdigest()


def _is_boundary(cp: Checkpoint) -> bool:
    if cp.run.status is RunStatus.CANCELLED:
        return False
    if cp.phase is StepPhase.ROUTED:
        return True
    return (
        cp.phase is StepPhase.HALTED and cp.halt is not None and cp.halt.kind is HaltKind.MAX_STEPS
    )


def _point_of_boundary(cp: Checkpoint) -> ForkPoint:
    assert cp.state is not None
    if cp.phase is StepPhase.ROUTED and cp.run.revision > 0:
        step = cp.run.step + 1  # a step's end routes to the next step
    else:
        step = cp.run.step  # a seed's (or a budget halt's) frontier is its own step's
    return ForkPoint(dict(cp.state), tuple(cp.frontier), step, cp.run.finish_reached)


def fork_point(history: list[Checkpoint], revision: int) -> ForkPoint:
    """The fork point of ``history[revision]`` (``history`` holds revisions 0..revision
    at least) by the rules of the module docstring."""
    index = revision
    if history[index].run.status is RunStatus.CANCELLED and index > 0:
        index -= 1  # a cancellation copies the checkpoint it cancelled
    while index >= 0:
        if _is_boundary(history[index]):
            return _point_of_boundary(history[index])
        index -= 1
    raise FlowError(f"revision {revision} has no step boundary before it")  # revision 0 is one


@dataclass(frozen=True, slots=True)
class ForkPlan:
    """What a fork of one revision does, known before it is made: the revision it is
    made from (``revision``), the step it runs first (``step``) and that step's frontier
    (``first``), and the vertices the origin executed from that step on (``again``, in
    the order they first ran; a vertex that started counts, whatever its outcome)."""

    revision: int
    step: int
    first: tuple[str, ...]
    again: tuple[str, ...]


def step_end(history: list[Checkpoint], revision: int) -> int:
    """The revision that ends the step ``history[revision]`` is in - the first step
    boundary at or after it with the same step number - if ``history`` (the origin's
    revisions from 0 on) holds one before a cancellation; else ``revision``."""
    step = history[revision].run.step
    for cp in history[revision:]:
        if cp.run.status is RunStatus.CANCELLED or cp.run.step != step:
            break
        if _is_boundary(cp):
            return cp.run.revision
    return revision


_STARTED: Final = frozenset(
    {VertexStatus.RUNNING, VertexStatus.DONE, VertexStatus.INTERRUPTED, VertexStatus.FAILED}
)


def fork_plan(history: list[Checkpoint], revision: int, *, after: bool = False) -> ForkPlan:
    """The plan of a fork of ``history[revision]`` (``history``: the origin's whole
    history), or with ``after`` of the end of its step (`step_end`)."""
    made_from = step_end(history, revision) if after else revision
    point = fork_point(history, made_from)
    again: dict[str, None] = {}
    for cp in history:
        for record in sorted(cp.vertices, key=lambda r: r.step):
            if record.step >= point.step and record.status in _STARTED:
                again.setdefault(record.vertex, None)
    return ForkPlan(made_from, point.step, point.frontier, tuple(again))


def patch_state(codec: StateCodec[Any], state: JsonObject, patch: Any) -> JsonObject:
    """``state`` with ``patch``'s fields replaced, validated against ``codec``'s state
    type; `StatePatchError` naming the first bad field (in patch order) otherwise."""
    if patch is None:
        return dict(state)
    if not isinstance(patch, Mapping):
        raise StatePatchError(
            "", f"must be a JSON object of state fields, not {type(patch).__name__}"
        )
    known = state_field_names(codec.state_type)
    values: dict[str, Any] = {}
    for name, value in patch.items():
        if not isinstance(name, str):
            raise StatePatchError(str(name), "a field name must be a string")
        if known is not None and name not in known:
            raise StatePatchError(name, "the state has no such field")
        try:
            values[name] = to_json_value(value, f"patch.{name}")
        except CodecError as exc:
            raise StatePatchError(name, exc.detail) from exc
    merged = {**state, **values}
    try:
        decoded = codec.load(merged)
        encoded = codec.dump(decoded)
    except CodecError as exc:
        raise StatePatchError(_field_of(exc.path) or next(iter(values), ""), exc.detail) from exc
    for name, value in values.items():
        if encoded.get(name) != value:
            raise StatePatchError(
                name,
                "the value is not of the field's type (it would only fit converted)",
            )
    return merged


def _field_of(path: str) -> str:
    """The top-level field of a codec path such as ``state.items[2].name``."""
    rest = path.removeprefix("state").lstrip(".")
    for stop in (".", "["):
        rest = rest.split(stop, 1)[0]
    return rest
