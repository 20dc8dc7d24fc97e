"""Every error the flow engine raises. All messages start with ``flow: ``.

Build errors (`GraphBuildError` family) come from `Graph` and `Graph.compile`.
Resume/cancel refusals, store failures and codec failures are *engine errors*:
they are raised, and no result exists. Pauses and halts are never errors;
they are results.
"""

from __future__ import annotations

import traceback
from typing import Any, Final

__all__ = [
    "MAX_TRACEBACK_CHARS",
    "AmbiguousRoutingError",
    "BuildError",
    "CheckpointDecodeError",
    "CheckpointNotFoundError",
    "CodecError",
    "ConditionError",
    "ConflictingUpdateError",
    "DeadEndError",
    "DuplicateEdgeError",
    "DuplicateRouteError",
    "DuplicateVertexError",
    "FieldUpdateError",
    "FlowError",
    "ForkRevisionError",
    "GraphBuildError",
    "GraphMismatchError",
    "GraphRunExistsError",
    "GraphRunMismatchError",
    "GraphVersionMismatchError",
    "MaxStepsExceededError",
    "MissingEntryError",
    "ResumeTerminalError",
    "RevisionConflictError",
    "StatePatchError",
    "StoreError",
    "TimerError",
    "UndeclaredTargetError",
    "UnknownVertexError",
    "UnreachableVertexError",
    "VertexError",
    "bounded_traceback",
]


class FlowError(Exception):
    """Base class of every flow error."""

    def __init__(self, message: str) -> None:
        super().__init__(f"flow: {message}")


# -- build ----------------------------------------------------------------------------------


class GraphBuildError(FlowError):
    """A graph could not be built or compiled."""


class BuildError(GraphBuildError, ValueError):
    def __init__(self, op: str, detail: str) -> None:
        self.op = op
        self.detail = detail
        super().__init__(f"{op}: {detail}")


class DuplicateVertexError(GraphBuildError):
    def __init__(self, vertex: str) -> None:
        self.vertex = vertex
        super().__init__(f"duplicate vertex {vertex}")


class DuplicateEdgeError(GraphBuildError):
    def __init__(self, source: str, target: str) -> None:
        self.source = source
        self.target = target
        super().__init__(f"duplicate edge {source} -> {target}")


class DuplicateRouteError(GraphBuildError):
    def __init__(self, source: str) -> None:
        self.source = source
        super().__init__(f"duplicate conditional route for vertex {source}")


class UnknownVertexError(GraphBuildError):
    """A graph or a stored checkpoint names a vertex the graph does not have."""

    def __init__(self, vertex: str) -> None:
        self.vertex = vertex
        super().__init__(f"unknown vertex {vertex}")


class UnreachableVertexError(GraphBuildError):
    def __init__(self, vertex: str) -> None:
        self.vertex = vertex
        super().__init__(f"unreachable vertex {vertex}")


class AmbiguousRoutingError(GraphBuildError):
    def __init__(self, vertex: str) -> None:
        self.vertex = vertex
        super().__init__(f"ambiguous routing for vertex {vertex}: static edges and a route")


class MissingEntryError(GraphBuildError):
    def __init__(self, vertex: str, role: str) -> None:
        self.vertex = vertex
        self.role = role
        super().__init__(f"missing {role} vertex {vertex}")


# -- run-time causes carried by results (halts, failures) -----------------------------------


class MaxStepsExceededError(FlowError):
    def __init__(self, max_steps: int, step: int) -> None:
        self.max_steps = max_steps
        self.step = step
        super().__init__(f"max steps exceeded: limit {max_steps} reached at step {step}")


class UndeclaredTargetError(FlowError):
    def __init__(self, source: str, target: str | None) -> None:
        self.source = source
        self.target = target
        if target is None:
            super().__init__(f"route at vertex {source} returned an empty target set")
        else:
            super().__init__(f"route at vertex {source} returned undeclared target {target}")


class DeadEndError(FlowError):
    def __init__(self, step: int) -> None:
        self.step = step
        super().__init__(f"dead end at step {step}: frontier drained before finish executed")


class ConditionError(FlowError):
    def __init__(self, source: str, cause: BaseException) -> None:
        self.source = source
        self.cause = cause
        super().__init__(f"route at vertex {source} failed: {describe(cause)}")
        self.__cause__ = cause


class VertexError(FlowError):
    """A vertex's task (after retries), selector, or hook of its retry policy failed."""

    def __init__(self, vertex: str, vertex_run_id: str, attempt: int, cause: BaseException):
        self.vertex = vertex
        self.vertex_run_id = vertex_run_id
        self.attempt = attempt
        self.cause = cause
        super().__init__(
            f"vertex {vertex} (run {vertex_run_id}, attempt {attempt}) failed: {describe(cause)}"
        )
        self.__cause__ = cause


class ConflictingUpdateError(FlowError):
    """Two vertices of one super-step updated the same state field, which has no reducer.

    ``vertex`` is the later writer in vertex-id order (it fails; the earlier writes stay);
    ``earlier`` names the vertices whose write it would have overwritten. On a resumed step
    the carried vertices' writes are known only together, so ``earlier`` may name several.
    """

    def __init__(self, field: str, vertex: str, earlier: tuple[str, ...]) -> None:
        self.field = field
        self.vertex = vertex
        self.earlier = earlier
        writers = " or ".join(earlier)
        super().__init__(
            f"conflicting update of field {field!r} in one step: vertex {vertex} would "
            f"overwrite the update of vertex {writers}; declare a reducer for {field!r} "
            "(for example Annotated[list[...], flow.append]) or let one vertex write it"
        )


class FieldUpdateError(FlowError):
    """A vertex's update of one state field could not be applied: its field reducer failed
    (``cause``), or the update does not fit a field that has a reducer."""

    def __init__(
        self, field: str, vertex: str, detail: str, cause: BaseException | None = None
    ) -> None:
        self.field = field
        self.vertex = vertex
        self.detail = detail
        self.cause = cause
        reason = detail if cause is None else f"{detail}: {describe(cause)}"
        super().__init__(f"update of field {field!r} by vertex {vertex}: {reason}")
        if cause is not None:
            self.__cause__ = cause


# -- engine errors ---------------------------------------------------------------------------


class CodecError(FlowError):
    """A value could not be encoded to, or decoded from, JSON. ``path`` locates the problem."""

    def __init__(self, op: str, path: str, detail: str) -> None:
        self.op = op
        self.path = path
        self.detail = detail
        where = f" at {path}" if path else ""
        super().__init__(f"codec {op}{where}: {detail}")


class CheckpointDecodeError(FlowError):
    def __init__(self, field: str, detail: str) -> None:
        self.field = field
        self.detail = detail
        super().__init__(f"failed to decode checkpoint {field}: {detail}")


class CheckpointNotFoundError(FlowError, LookupError):
    def __init__(self, run_id: str) -> None:
        self.run_id = run_id
        super().__init__(f"no checkpoint found for run {run_id}")


class ResumeTerminalError(FlowError):
    def __init__(self, status: Any) -> None:
        self.status = status
        super().__init__(f"run is {status}: a terminal run cannot be resumed or cancelled")


class GraphMismatchError(FlowError):
    def __init__(self, expected: str, actual: str) -> None:
        self.expected = expected
        self.actual = actual
        super().__init__(f"graph mismatch: expected {expected}, got {actual}")


class GraphVersionMismatchError(FlowError):
    def __init__(self, expected: str, actual: str) -> None:
        self.expected = expected
        self.actual = actual
        super().__init__(f"graph version mismatch: expected {expected}, got {actual}")


class GraphRunMismatchError(FlowError):
    def __init__(self, requested: str, actual: str) -> None:
        self.requested = requested
        self.actual = actual
        super().__init__(f"graph run mismatch: requested {requested}, got {actual}")


class GraphRunExistsError(FlowError):
    def __init__(self, run_id: str) -> None:
        self.run_id = run_id
        super().__init__(f"run {run_id} already exists")


class RevisionConflictError(FlowError):
    """Another writer appended first. ``expected`` is the revision the store needed next."""

    def __init__(self, run_id: str, expected: int, actual: int) -> None:
        self.run_id = run_id
        self.expected = expected
        self.actual = actual
        super().__init__(
            f"revision conflict for run {run_id}: expected revision {expected}, got {actual}"
        )


class ForkRevisionError(FlowError, ValueError):
    """A fork named a revision the origin run does not have (``tip``: its latest)."""

    def __init__(self, run_id: str, revision: object, tip: int) -> None:
        self.run_id = run_id
        self.revision = revision
        self.tip = tip
        super().__init__(
            f"run {run_id} has no revision {revision!r}: forkable revisions are 0..{tip}"
        )


class StatePatchError(FlowError, ValueError):
    """A fork's state patch was refused: ``field`` names the top-level state field (empty
    when the patch as a whole is wrong), ``detail`` says why. Nothing was written."""

    def __init__(self, field: str, detail: str) -> None:
        self.field = field
        self.detail = detail
        where = f"field {field!r}" if field else "the patch"
        super().__init__(f"state patch: {where}: {detail}")


class StoreError(FlowError):
    """A checkpoint store operation failed; ``cause`` says why (corrupt record, I/O, ...)."""

    def __init__(self, op: str, cause: BaseException) -> None:
        self.op = op
        self.cause = cause
        super().__init__(f"store operation {op} failed: {describe(cause)}")
        self.__cause__ = cause


MAX_TRACEBACK_CHARS: Final = 8192


def bounded_traceback(error: BaseException) -> str:
    """What a task raised, formatted as Python prints it (a `VertexError`'s cause, with
    its chain), cut to its last `MAX_TRACEBACK_CHARS` characters: the innermost frames
    and the message are at the end."""
    shown = error.cause if isinstance(error, VertexError) else error
    text = "".join(traceback.format_exception(shown))
    if len(text) <= MAX_TRACEBACK_CHARS:
        return text
    return "...\n" + text[-MAX_TRACEBACK_CHARS:]


def describe(error: BaseException) -> str:
    """An exception as one line: its message, or its type name when the message is empty."""
    text = str(error)
    return text if text else type(error).__name__


class TimerError(FlowError, ValueError):
    """A bad argument to `flow.sleep`, `flow.sleep_until` or an interrupt's ``timeout``:
    ``field`` names it (``seconds``, ``until``, ``timeout``, ``on_timeout``). Raised inside
    the task, so it fails the vertex like any error it raises; nothing is parked."""

    def __init__(self, field: str, detail: str) -> None:
        self.field = field
        self.detail = detail
        super().__init__(f"{field}: {detail}")
