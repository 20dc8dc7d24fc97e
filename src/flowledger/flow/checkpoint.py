"""The checkpoint: one durable, append-only record of a run's progress.

Revisions of one run are 0, 1, 2, ... without gaps. Enum integers are part of
the stored format and never change meaning.

Each checkpoint is a plain document (`to_document` / `from_document`). The
decoder is strict: an unknown field, a missing field or a wrong type raises
`CheckpointDecodeError` naming the path (e.g. ``checkpoint.vertices[1].status``).

One deliberate addition to the reference layout: the run record carries
``finish_reached`` (whether the finish vertex has completed at least once,
which decides completion versus dead end), so resuming needs no scan of the
history. A ``STEP_RUNNING`` checkpoint has no frontier: its vertex records
name every vertex of the step, finished or not. That makes a step of W per-vertex
checkpoints hold W lists of W records; stores need not write them so: the ledger store
writes each checkpoint as a delta on the one before (the records and state fields that
changed, see `ledger_store`), so its bytes per step grow linearly with W. ``micros`` is
the stored form of a time (integer microseconds since the epoch).

A second addition: revision 0 of a forked run (`flow.fork`) carries ``origin``
(`ForkOrigin`: the run, revision and checkpoint digest it was forked from). Only
that revision has it; a run that is not a fork has none anywhere.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass, field, fields, replace
from datetime import UTC, datetime, timedelta
from enum import IntEnum
from operator import attrgetter
from typing import Any, TypeVar

from .errors import CheckpointDecodeError

__all__ = [
    "Checkpoint",
    "ForkOrigin",
    "HaltKind",
    "HaltRecord",
    "InterruptKind",
    "InterruptRecord",
    "RouteRecord",
    "RunRecord",
    "RunStatus",
    "StepPhase",
    "VertexRecord",
    "VertexStatus",
]

E = TypeVar("E", bound=IntEnum)


class _NamedEnum(IntEnum):
    def __str__(self) -> str:
        return self.name.lower()


class RunStatus(_NamedEnum):
    RUNNING = 0
    COMPLETED = 1
    INTERRUPTED = 2
    CANCELLED = 3

    @property
    def terminal(self) -> bool:
        return self in (RunStatus.COMPLETED, RunStatus.CANCELLED)


class VertexStatus(_NamedEnum):
    PENDING = 0
    RUNNING = 1
    DONE = 2
    INTERRUPTED = 3
    FAILED = 4


class StepPhase(_NamedEnum):
    RUNNING = 0  # a vertex of the step was classified; the step is still under way
    PAUSED = 1  # at least one vertex paused; the step waits for a resume
    ROUTED = 2  # the step routed; ``frontier`` is the next step's (empty once completed)
    HALTED = 3  # routing or the step budget stopped the run; resumable


class InterruptKind(_NamedEnum):
    AWAITING = 0  # the task called `interrupt`
    ERRORED = 1  # the vertex failed and its policy is to pause
    TIMER = 2  # the task called `sleep` / `sleep_until`: it waits for ``wake_at``


class HaltKind(_NamedEnum):
    CONDITION = 0
    UNDECLARED_TARGET = 1
    DEAD_END = 2
    MAX_STEPS = 3


@dataclass(slots=True)
class RunRecord:
    """The engine-owned record of one run, copied into every checkpoint."""

    graph_run_id: str
    graph_id: str
    graph_version: str
    status: RunStatus
    step: int
    revision: int
    created_at: datetime
    started_at: datetime
    updated_at: datetime
    completed_at: datetime | None = None
    interrupted_at: datetime | None = None
    cancelled_at: datetime | None = None
    cancel_reason: str = ""
    finish_reached: bool = False

    def copy(self) -> RunRecord:
        """A shallow copy: what ``dataclasses.replace(self)`` makes, without walking the
        class's fields on every call (the engine copies the run into every checkpoint)."""
        return RunRecord(*_RUN_VALUES(self))


@dataclass(slots=True)
class VertexRecord:
    """One execution of one vertex within one step."""

    vertex: str
    vertex_run_id: str
    step: int
    status: VertexStatus
    attempt: int = 0
    created_at: datetime | None = None
    started_at: datetime | None = None
    completed_at: datetime | None = None
    interrupted_at: datetime | None = None
    failed_at: datetime | None = None
    error: str = ""

    def copy(self) -> VertexRecord:
        """A shallow copy, like `RunRecord.copy`."""
        return VertexRecord(*_VERTEX_VALUES(self))


# Every field is an ``__init__`` parameter in declaration order, so the values read in
# that order rebuild an equal record (tests/flow/test_checkpoint.py holds it to that).
_RUN_VALUES = attrgetter(*(f.name for f in fields(RunRecord)))
_VERTEX_VALUES = attrgetter(*(f.name for f in fields(VertexRecord)))


@dataclass(frozen=True, slots=True)
class RouteRecord:
    source: str
    targets: tuple[str, ...]
    conditional: bool


@dataclass(frozen=True, slots=True)
class InterruptRecord:
    """A paused vertex. ``info`` and ``continuation`` are JSON data. An errored pause keeps
    its failure as ``cause`` (one line), ``error_type`` (the exception's class name) and
    ``traceback`` (the last frames, bounded; stored only when set, so checkpoints written
    before it existed read back unchanged). Like the state, it is the owner's data: it
    may quote values the task held, so no activity or tool result copies it.

    ``wake_at`` is when a timer pause (`InterruptKind.TIMER`) is due, or the deadline of an
    awaiting pause declared with a timeout; such a pause then carries ``on_timeout``, the
    payload it is resumed with when the deadline passes (JSON data, never None)."""

    vertex: str
    kind: InterruptKind
    info: Any = None
    cause: str = ""
    stateful: bool = False  # whether ``continuation`` was given (it may be None)
    continuation: Any = None
    error_type: str = ""
    wake_at: datetime | None = None
    on_timeout: Any = None
    traceback: str = ""  # an errored pause's, bounded (`flow.errors.bounded_traceback`)


@dataclass(frozen=True, slots=True)
class HaltRecord:
    kind: HaltKind
    step: int
    cause: str


@dataclass(frozen=True, slots=True)
class ForkOrigin:
    """Where a forked run came from: the origin run, the revision forked, and the digest
    of that checkpoint (`flow.fork.checkpoint_digest`) as it was when forked."""

    run_id: str
    revision: int
    checkpoint_digest: str


@dataclass(slots=True)
class Checkpoint:
    """``state`` and ``step_base`` are JSON objects (the state as of now / at step start).
    ``origin`` is set on revision 0 of a forked run only."""

    run: RunRecord
    phase: StepPhase
    state: dict[str, Any] | None = None
    step_base: dict[str, Any] | None = None
    vertices: list[VertexRecord] = field(default_factory=list)
    frontier: list[str] = field(default_factory=list)
    routes: list[RouteRecord] = field(default_factory=list)
    interrupts: list[InterruptRecord] = field(default_factory=list)
    halt: HaltRecord | None = None
    origin: ForkOrigin | None = None

    @property
    def revision(self) -> int:
        return self.run.revision

    def copy(self) -> Checkpoint:
        """A fully independent copy."""
        return replace(
            self,
            run=replace(self.run),
            state=copy.deepcopy(self.state),
            step_base=copy.deepcopy(self.step_base),
            vertices=[replace(v) for v in self.vertices],
            frontier=list(self.frontier),
            routes=list(self.routes),
            interrupts=[
                replace(
                    i,
                    info=copy.deepcopy(i.info),
                    continuation=copy.deepcopy(i.continuation),
                    on_timeout=copy.deepcopy(i.on_timeout),
                )
                for i in self.interrupts
            ],
        )


# -- documents ------------------------------------------------------------------------------


def _time(value: datetime | None) -> int | None:
    """Microseconds since the epoch: exact, compact, and timezone-free."""
    if value is None:
        return None
    delta = value - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def micros(value: datetime) -> int:
    """``value`` as stored: microseconds since the epoch."""
    stored = _time(value)
    assert stored is not None
    return stored


def run_to_document(run: RunRecord) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "graph_run_id": run.graph_run_id,
        "graph_id": run.graph_id,
        "graph_version": run.graph_version,
        "status": int(run.status),
        "step": run.step,
        "revision": run.revision,
        "created_at": _time(run.created_at),
        "started_at": _time(run.started_at),
        "updated_at": _time(run.updated_at),
    }
    if run.finish_reached:
        doc["finish_reached"] = True
    for key in ("completed_at", "interrupted_at", "cancelled_at"):
        value = getattr(run, key)
        if value is not None:
            doc[key] = _time(value)
    if run.cancel_reason:
        doc["cancel_reason"] = run.cancel_reason
    return doc


def vertex_to_document(vertex: VertexRecord) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "vertex": vertex.vertex,
        "vertex_run_id": vertex.vertex_run_id,
        "step": vertex.step,
        "status": int(vertex.status),
        "attempt": vertex.attempt,
    }
    for key in ("created_at", "started_at", "completed_at", "interrupted_at", "failed_at"):
        value = getattr(vertex, key)
        if value is not None:
            doc[key] = _time(value)
    if vertex.error:
        doc["error"] = vertex.error
    return doc


def to_document(cp: Checkpoint, *, states: bool = True) -> dict[str, Any]:
    """The checkpoint as JSON data. With ``states=False`` the two state fields are left out
    (stores that keep them elsewhere add their own references)."""
    doc: dict[str, Any] = {
        "run": run_to_document(cp.run),
        "phase": int(cp.phase),
        "vertices": [vertex_to_document(v) for v in cp.vertices],
        "frontier": list(cp.frontier),
    }
    if states:
        if cp.state is not None:
            doc["state"] = cp.state
        if cp.step_base is not None:
            doc["step_base"] = cp.step_base
    if cp.routes:
        doc["routes"] = [
            {"source": r.source, "targets": list(r.targets), "conditional": r.conditional}
            for r in cp.routes
        ]
    if cp.interrupts:
        doc["interrupts"] = [_interrupt_to_document(i) for i in cp.interrupts]
    if cp.halt is not None:
        doc["halt"] = {"kind": int(cp.halt.kind), "step": cp.halt.step, "cause": cp.halt.cause}
    if cp.origin is not None:
        doc["origin"] = {
            "run_id": cp.origin.run_id,
            "revision": cp.origin.revision,
            "checkpoint_digest": cp.origin.checkpoint_digest,
        }
    return doc


def _interrupt_to_document(record: InterruptRecord) -> dict[str, Any]:
    doc: dict[str, Any] = {"vertex": record.vertex, "kind": int(record.kind), "info": record.info}
    if record.cause:
        doc["cause"] = record.cause
    if record.error_type:
        doc["error_type"] = record.error_type
    if record.stateful:
        doc["continuation"] = record.continuation
    if record.wake_at is not None:
        doc["wake_at"] = _time(record.wake_at)
    if record.on_timeout is not None:
        doc["on_timeout"] = record.on_timeout
    if record.traceback:
        doc["traceback"] = record.traceback
    return doc


class _Fields:
    """Strict reader over one JSON object: typed getters, and `done` rejects leftovers."""

    def __init__(self, doc: Any, path: str) -> None:
        if not isinstance(doc, dict):
            raise CheckpointDecodeError(path, "expected an object")
        self.doc = dict(doc)
        self.path = path

    def _fail(self, key: str, detail: str) -> CheckpointDecodeError:
        return CheckpointDecodeError(f"{self.path}.{key}", detail)

    def raw(self, key: str, default: Any = ..., *, optional: bool = False) -> Any:
        if key in self.doc:
            return self.doc.pop(key)
        if optional:
            return default
        raise self._fail(key, "missing")

    def typed(
        self,
        key: str,
        kind: type | tuple[type, ...],
        *,
        optional: bool = False,
        default: Any = None,
    ) -> Any:
        if key not in self.doc:
            if optional:
                return default
            raise self._fail(key, "missing")
        value = self.doc.pop(key)
        if isinstance(value, bool) and kind is int:
            raise self._fail(key, "expected an integer")
        if not isinstance(value, kind):
            name = kind.__name__ if isinstance(kind, type) else "/".join(k.__name__ for k in kind)
            raise self._fail(key, f"expected {name}, got {type(value).__name__}")
        return value

    def enum(self, key: str, enum: type[E]) -> E:
        value = self.typed(key, int)
        try:
            return enum(value)
        except ValueError:
            raise self._fail(key, f"unknown {enum.__name__} {value}") from None

    def time(self, key: str, *, optional: bool = False) -> datetime | None:
        value = self.typed(key, int, optional=optional)
        if value is None:
            return None
        try:
            return _EPOCH + timedelta(microseconds=value)
        except OverflowError:
            raise self._fail(key, "timestamp out of range") from None

    def names(self, key: str, *, optional: bool = False) -> list[str]:
        values = self.typed(key, list, optional=optional, default=[])
        for i, value in enumerate(values):
            if not isinstance(value, str):
                raise self._fail(f"{key}[{i}]", "expected a string")
        return list(values)

    def each(self, key: str, decode: Callable[[Any, str], Any]) -> list[Any]:
        values = self.typed(key, list, optional=True, default=[])
        return [decode(v, f"{self.path}.{key}[{i}]") for i, v in enumerate(values)]

    def done(self) -> None:
        if self.doc:
            key = sorted(self.doc)[0]
            raise self._fail(key, "unknown field")


def run_from_document(doc: Any, path: str = "checkpoint.run") -> RunRecord:
    f = _Fields(doc, path)
    run = RunRecord(
        graph_run_id=f.typed("graph_run_id", str),
        graph_id=f.typed("graph_id", str),
        graph_version=f.typed("graph_version", str),
        status=f.enum("status", RunStatus),
        step=f.typed("step", int),
        revision=f.typed("revision", int),
        created_at=f.time("created_at"),  # type: ignore[arg-type]
        started_at=f.time("started_at"),  # type: ignore[arg-type]
        updated_at=f.time("updated_at"),  # type: ignore[arg-type]
        finish_reached=f.typed("finish_reached", bool, optional=True, default=False),
        completed_at=f.time("completed_at", optional=True),
        interrupted_at=f.time("interrupted_at", optional=True),
        cancelled_at=f.time("cancelled_at", optional=True),
        cancel_reason=f.typed("cancel_reason", str, optional=True, default=""),
    )
    f.done()
    if run.revision < 0:
        raise CheckpointDecodeError(f"{path}.revision", "negative revision")
    return run


def _vertex_from_document(doc: Any, path: str) -> VertexRecord:
    f = _Fields(doc, path)
    record = VertexRecord(
        vertex=f.typed("vertex", str),
        vertex_run_id=f.typed("vertex_run_id", str),
        step=f.typed("step", int),
        status=f.enum("status", VertexStatus),
        attempt=f.typed("attempt", int),
        created_at=f.time("created_at", optional=True),
        started_at=f.time("started_at", optional=True),
        completed_at=f.time("completed_at", optional=True),
        interrupted_at=f.time("interrupted_at", optional=True),
        failed_at=f.time("failed_at", optional=True),
        error=f.typed("error", str, optional=True, default=""),
    )
    f.done()
    return record


def _route_from_document(doc: Any, path: str) -> RouteRecord:
    f = _Fields(doc, path)
    record = RouteRecord(
        source=f.typed("source", str),
        targets=tuple(f.names("targets")),
        conditional=f.typed("conditional", bool),
    )
    f.done()
    return record


def _interrupt_from_document(doc: Any, path: str) -> InterruptRecord:
    f = _Fields(doc, path)
    stateful = "continuation" in f.doc
    record = InterruptRecord(
        vertex=f.typed("vertex", str),
        kind=f.enum("kind", InterruptKind),
        info=f.raw("info"),
        cause=f.typed("cause", str, optional=True, default=""),
        stateful=stateful,
        continuation=f.raw("continuation", None, optional=True),
        error_type=f.typed("error_type", str, optional=True, default=""),
        wake_at=f.time("wake_at", optional=True),
        on_timeout=f.raw("on_timeout", None, optional=True),
        traceback=f.typed("traceback", str, optional=True, default=""),
    )
    f.done()
    if record.kind is InterruptKind.TIMER and record.wake_at is None:
        raise CheckpointDecodeError(f"{path}.wake_at", "a timer pause needs a wake time")
    return record


def _halt_from_document(doc: Any, path: str) -> HaltRecord:
    f = _Fields(doc, path)
    record = HaltRecord(
        kind=f.enum("kind", HaltKind), step=f.typed("step", int), cause=f.typed("cause", str)
    )
    f.done()
    return record


def _origin_from_document(doc: Any, path: str) -> ForkOrigin:
    f = _Fields(doc, path)
    record = ForkOrigin(
        run_id=f.typed("run_id", str),
        revision=f.typed("revision", int),
        checkpoint_digest=f.typed("checkpoint_digest", str),
    )
    f.done()
    if record.revision < 0:
        raise CheckpointDecodeError(f"{path}.revision", "negative revision")
    return record


def from_document(doc: Any, *, path: str = "checkpoint", states: bool = True) -> Checkpoint:
    """Strictly decode `to_document`'s output (``states`` as given there)."""
    f = _Fields(doc, path)
    cp = Checkpoint(
        run=run_from_document(f.raw("run"), f"{path}.run"),
        phase=f.enum("phase", StepPhase),
        vertices=f.each("vertices", _vertex_from_document),
        frontier=f.names("frontier"),
        routes=f.each("routes", _route_from_document),
        interrupts=f.each("interrupts", _interrupt_from_document),
    )
    if states:
        cp.state = f.typed("state", dict, optional=True)
        cp.step_base = f.typed("step_base", dict, optional=True)
    halt = f.raw("halt", None, optional=True)
    if halt is not None:
        cp.halt = _halt_from_document(halt, f"{path}.halt")
    origin = f.raw("origin", None, optional=True)
    if origin is not None:
        cp.origin = _origin_from_document(origin, f"{path}.origin")
        if cp.run.revision != 0:
            raise CheckpointDecodeError(f"{path}.origin", "only revision 0 records an origin")
    f.done()
    return cp
