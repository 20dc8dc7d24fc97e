"""Workflow activities: the bounded, safe public trace of a run (workflows-spec §6.1-6.3).

An activity says *that* something happened to a run (started, a vertex
completed, paused, resumed, finished) and never *what* the run holds: nothing
from graph state, checkpoint payloads, interrupt info or causes, vertex error
text, inputs or cancel reasons is ever copied into one. Every text field is a
fixed message or a bounded definition label.

* `ActivityRecord` is the DTO, with a strict JSON form (`to_json` / `from_json`)
  and the publisher-side validation rules (`validate`).
* `event_id` derives the stable source ID of an activity (§6.2), so replaying a
  projection after a crash or a restore yields the same IDs and a publisher
  that is idempotent by ``event_id`` stores each activity once.
* `project` turns a run's registry record, its definition metadata and its full
  checkpoint history into the ordered list of `(revision, activity)` (§6.3).

Deliberate decisions (DESIGN.md, workflows-spec §11.5): progress is clamped so
``completed_vertices <= total_vertices`` for every activity, terminal ones
included; with no vertex descriptors both counters are 0.
"""

from __future__ import annotations

import dataclasses
import hashlib
import re
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from typing import Any, Final, Protocol

from ...flow import Checkpoint, InterruptKind, RunStatus, StepPhase, VertexRecord, VertexStatus
from ...flow.ledger_store import MAX_HISTORY
from ..authoring.metadata import bound_text
from ..errors import ActivityValidationError

__all__ = [
    "ACTIVITY_STATUSES",
    "MAX_CHECKPOINTS",
    "MAX_CHECKPOINT_VERTICES",
    "MAX_DEFINITION_VERTICES",
    "MAX_LABEL_BYTES",
    "MAX_MESSAGE_BYTES",
    "MAX_TOTAL_VERTICES",
    "MESSAGES",
    "RESUMING_SUMMARY",
    "STATUSES",
    "ActivityKind",
    "ActivityRecord",
    "MetadataView",
    "ProjectedActivity",
    "ProjectionState",
    "Projector",
    "RunView",
    "VertexView",
    "event_id",
    "format_time",
    "parse_time",
    "project",
]


class ActivityKind(StrEnum):
    RUN_STARTED = "run_started"
    VERTEX_COMPLETED = "vertex_completed"
    RUN_INTERRUPTED = "run_interrupted"
    RUN_RESUMED = "run_resumed"
    RUN_COMPLETED = "run_completed"
    RUN_CANCELLED = "run_cancelled"
    RUN_FAILED = "run_failed"


MESSAGES: Final[Mapping[ActivityKind, str]] = {
    ActivityKind.RUN_STARTED: "Workflow started",
    ActivityKind.VERTEX_COMPLETED: "Workflow step completed",
    ActivityKind.RUN_INTERRUPTED: "Workflow interrupted",
    ActivityKind.RUN_RESUMED: "Workflow resumed",
    ActivityKind.RUN_COMPLETED: "Workflow completed",
    ActivityKind.RUN_CANCELLED: "Workflow cancelled",
    ActivityKind.RUN_FAILED: "Workflow failed",
}

STATUSES: Final[Mapping[ActivityKind, str]] = {
    ActivityKind.RUN_STARTED: "running",
    ActivityKind.VERTEX_COMPLETED: "running",
    ActivityKind.RUN_INTERRUPTED: "interrupted",
    ActivityKind.RUN_RESUMED: "running",
    ActivityKind.RUN_COMPLETED: "completed",
    ActivityKind.RUN_CANCELLED: "cancelled",
    ActivityKind.RUN_FAILED: "failed",
}

ACTIVITY_STATUSES: Final = frozenset(STATUSES.values())

MAX_LABEL_BYTES: Final = 128
MAX_MESSAGE_BYTES: Final = 512
MAX_TOTAL_VERTICES: Final = 1_000_000
#: Checkpoints a projection accepts: the checkpoint store's own history limit, so every
#: history the engine can write (its step budget is per run, one or more checkpoints a
#: step) is projected.
MAX_CHECKPOINTS: Final = MAX_HISTORY
MAX_CHECKPOINT_VERTICES: Final = 10_000
MAX_DEFINITION_VERTICES: Final = 1_000_000

#: The registry summary the supervisor writes while a resume is in flight. The projector
#: keys `run_resumed` on it (§5.x, §6.3), so it is load-bearing.
RESUMING_SUMMARY: Final = "workflow resuming"

_UUID: Final = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
_ZERO_UUID: Final = "00000000-0000-0000-0000-000000000000"
_NAME: Final = re.compile(r"[a-z][a-z0-9_]{2,63}")
_VERSION: Final = re.compile(r"[A-Za-z0-9._+-]{1,64}")
_VERTEX: Final = re.compile(r"[a-z][a-z0-9_]{0,63}")
_TIME: Final = re.compile(r"(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,6}))?Z")

_NAMESPACE: Final = uuid.UUID("d5e20f2c-8897-5bc0-9de8-3d65d4ebf053").bytes
_ZERO_BYTES: Final = bytes(16)
_MAX_UINT64: Final = (1 << 64) - 1
_MAX_UINT32: Final = (1 << 32) - 1


def _is_uuid(value: object) -> bool:
    return isinstance(value, str) and _UUID.fullmatch(value) is not None and value != _ZERO_UUID


def _is_control(ch: str) -> bool:
    """Unicode category Cc: U+0000-001F and U+007F-009F."""
    code = ord(ch)
    return code < 0x20 or 0x7F <= code <= 0x9F


def _valid_utf8(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # lone surrogates
        return False
    return True


# -- times --------------------------------------------------------------------------------


def format_time(moment: datetime) -> str:
    """RFC 3339 in UTC with a ``Z`` suffix; fractional seconds without trailing zeros."""
    if moment.utcoffset() is None:
        raise ValueError("a naive datetime has no instant")
    utc = moment.astimezone(UTC)
    text = (
        f"{utc.year:04d}-{utc.month:02d}-{utc.day:02d}"
        f"T{utc.hour:02d}:{utc.minute:02d}:{utc.second:02d}"
    )
    if utc.microsecond:
        text += "." + f"{utc.microsecond:06d}".rstrip("0")
    return text + "Z"


def parse_time(text: str) -> datetime:
    """Strict inverse of `format_time` (accepts 1..6 fractional digits); ValueError else."""
    match = _TIME.fullmatch(text) if isinstance(text, str) else None
    if match is None:
        raise ValueError("not an RFC 3339 UTC time ending in Z")
    year, month, day, hour, minute, second = (int(g) for g in match.groups()[:6])
    fraction = match.group(7) or ""
    micro = int(fraction.ljust(6, "0")) if fraction else 0
    return datetime(year, month, day, hour, minute, second, micro, tzinfo=UTC)


# -- the record -----------------------------------------------------------------------------


def _check_text(field: str, value: str, limit: int) -> None:
    if not isinstance(value, str):
        raise ActivityValidationError(field, "must be a string")
    if not value:
        return
    if not _valid_utf8(value):
        raise ActivityValidationError(field, "must be valid UTF-8")
    if any(_is_control(ch) for ch in value):
        raise ActivityValidationError(field, "must not contain control characters")
    if not value.strip():
        raise ActivityValidationError(field, "must not be blank")
    if len(value.encode("utf-8")) > limit:
        raise ActivityValidationError(field, f"must be at most {limit} bytes")


def _check_count(field: str, value: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ActivityValidationError(field, "must be an integer")
    if value < 0:
        raise ActivityValidationError(field, "must not be negative")


@dataclass(frozen=True, slots=True)
class ActivityRecord:
    """One workflow activity (§6.1). Empty optional fields are omitted from the JSON form."""

    event_id: str
    session_id: str
    run_id: str
    workflow_name: str
    workflow_version: str
    kind: ActivityKind
    status: str
    occurred_at: datetime
    vertex_id: str | None = None
    vertex_label: str = ""
    completed_vertices: int = 0
    total_vertices: int = 0
    message: str = ""

    def validate(self) -> None:
        """The publisher-side rules of §6.1; `ActivityValidationError` names the field.

        Beyond the reference: the status must be the kind's fixed status, and a vertex ID
        (a flow vertex name) is present exactly on ``vertex_completed``."""
        for field in ("event_id", "session_id", "run_id"):
            if not _is_uuid(getattr(self, field)):
                raise ActivityValidationError(field, "must be a nonzero canonical lowercase UUID")
        if not isinstance(self.workflow_name, str) or not _NAME.fullmatch(self.workflow_name):
            raise ActivityValidationError("workflow_name", f"must match {_NAME.pattern}")
        if not isinstance(self.workflow_version, str) or not _VERSION.fullmatch(
            self.workflow_version
        ):
            raise ActivityValidationError(
                "workflow_version", "must be 1..64 bytes of letters, digits and ._-+"
            )
        if not isinstance(self.kind, str) or self.kind not in _KINDS:
            raise ActivityValidationError("kind", "unknown activity kind")
        kind = ActivityKind(self.kind)
        if not isinstance(self.status, str) or self.status not in ACTIVITY_STATUSES:
            raise ActivityValidationError("status", "unknown activity status")
        if self.status != STATUSES[kind]:
            raise ActivityValidationError("status", f"must be {STATUSES[kind]} for {kind}")
        if self.vertex_id is not None and (
            not isinstance(self.vertex_id, str) or not _VERTEX.fullmatch(self.vertex_id)
        ):
            raise ActivityValidationError("vertex_id", f"must match {_VERTEX.pattern}")
        if (self.vertex_id is not None) != (kind is ActivityKind.VERTEX_COMPLETED):
            raise ActivityValidationError("vertex_id", "is present exactly on vertex_completed")
        _check_text("vertex_label", self.vertex_label, MAX_LABEL_BYTES)
        if self.vertex_label and self.vertex_id is None:
            raise ActivityValidationError("vertex_label", "requires a vertex ID")
        _check_text("message", self.message, MAX_MESSAGE_BYTES)
        _check_count("completed_vertices", self.completed_vertices)
        _check_count("total_vertices", self.total_vertices)
        if self.total_vertices > MAX_TOTAL_VERTICES:
            raise ActivityValidationError("total_vertices", f"must be <= {MAX_TOTAL_VERTICES}")
        if self.completed_vertices > self.total_vertices:
            raise ActivityValidationError("completed_vertices", "must be <= total_vertices")
        if not isinstance(self.occurred_at, datetime):
            raise ActivityValidationError("occurred_at", "is required")
        offset = self.occurred_at.utcoffset()
        if offset is None:
            raise ActivityValidationError("occurred_at", "must be timezone-aware")
        if offset != timedelta(0):
            raise ActivityValidationError("occurred_at", "must be in UTC")

    def to_json(self) -> dict[str, Any]:
        """The JSON object; ``vertex_id``, ``vertex_label``, the counters and ``message`` are
        left out when empty (None, "" or 0)."""
        doc: dict[str, Any] = {
            "event_id": self.event_id,
            "session_id": self.session_id,
            "run_id": self.run_id,
            "workflow_name": self.workflow_name,
            "workflow_version": self.workflow_version,
            "kind": str(self.kind),
            "status": self.status,
        }
        if self.vertex_id is not None:
            doc["vertex_id"] = self.vertex_id
        if self.vertex_label:
            doc["vertex_label"] = self.vertex_label
        if self.completed_vertices:
            doc["completed_vertices"] = self.completed_vertices
        if self.total_vertices:
            doc["total_vertices"] = self.total_vertices
        if self.message:
            doc["message"] = self.message
        doc["occurred_at"] = format_time(self.occurred_at)
        return doc

    @classmethod
    def from_json(cls, doc: Any) -> ActivityRecord:
        """Strictly decode `to_json`'s output: unknown or missing fields, wrong types and
        anything `validate` refuses raise `ActivityValidationError`."""
        if not isinstance(doc, Mapping):
            raise ActivityValidationError("activity", "must be a JSON object")
        unknown = sorted(set(doc) - _JSON_FIELDS)
        if unknown:
            raise ActivityValidationError(str(unknown[0]), "unknown field")
        for field in _REQUIRED_FIELDS:
            if field not in doc:
                raise ActivityValidationError(field, "is required")
        for field in _STRING_FIELDS:
            if field in doc and not isinstance(doc[field], str):
                raise ActivityValidationError(field, "must be a string")
        for field in ("completed_vertices", "total_vertices"):
            if field in doc:
                _check_count(field, doc[field])
        if doc["kind"] not in _KINDS:
            raise ActivityValidationError("kind", "unknown activity kind")
        try:
            occurred_at = parse_time(doc["occurred_at"])
        except ValueError as exc:
            raise ActivityValidationError("occurred_at", str(exc)) from None
        record = cls(
            event_id=doc["event_id"],
            session_id=doc["session_id"],
            run_id=doc["run_id"],
            workflow_name=doc["workflow_name"],
            workflow_version=doc["workflow_version"],
            kind=ActivityKind(doc["kind"]),
            status=doc["status"],
            occurred_at=occurred_at,
            vertex_id=doc.get("vertex_id"),
            vertex_label=doc.get("vertex_label", ""),
            completed_vertices=doc.get("completed_vertices", 0),
            total_vertices=doc.get("total_vertices", 0),
            message=doc.get("message", ""),
        )
        record.validate()
        return record


_KINDS: Final = frozenset(k.value for k in ActivityKind)
_REQUIRED_FIELDS: Final = (
    "event_id",
    "session_id",
    "run_id",
    "workflow_name",
    "workflow_version",
    "kind",
    "status",
    "occurred_at",
)
_STRING_FIELDS: Final = (*_REQUIRED_FIELDS, "vertex_id", "vertex_label", "message")
_JSON_FIELDS: Final = frozenset(
    (*_STRING_FIELDS, "completed_vertices", "total_vertices"),
)


@dataclass(frozen=True, slots=True)
class ProjectedActivity:
    """An activity and the checkpoint revision it belongs to (the virtual failure revision
    is one past the real history)."""

    revision: int
    activity: ActivityRecord


# -- stable event IDs -----------------------------------------------------------------------


def _field(data: bytes) -> bytes:
    return len(data).to_bytes(8, "big") + data


def _derive(
    session: bytes, run: bytes, kind: str, revision: int, vertex: bytes, ordinal: int
) -> str:
    """§6.2 over raw field bytes."""
    digest = hashlib.sha256(
        _field(_NAMESPACE)
        + _field(session)
        + _field(run)
        + _field(kind.encode("ascii"))
        + _field(revision.to_bytes(8, "big"))
        + _field(vertex)
        + _field(ordinal.to_bytes(4, "big"))
    ).digest()
    raw = bytearray(digest[:16])
    raw[6] = (raw[6] & 0x0F) | 0x50
    raw[8] = (raw[8] & 0x3F) | 0x80
    return str(uuid.UUID(bytes=bytes(raw)))


def event_id(
    session_id: str,
    run_id: str,
    kind: str,
    revision: int,
    vertex_id: str | None,
    ordinal: int,
) -> str:
    """The stable source ID of one activity (§6.2): a version-5-style UUID.

    UUID fields contribute their 16 raw bytes. Our vertex IDs are flow vertex names, so the
    vertex field is the name's UTF-8 bytes; without a vertex (every kind but
    ``vertex_completed``) it is the zero UUID's 16 bytes, exactly as in the reference, so
    IDs of run-level activities equal the reference's. A vertex name cannot be 16 zero
    bytes, so the two forms never collide."""
    if not _is_uuid(session_id):
        raise ValueError(f"session id {session_id!r} is not a nonzero canonical UUID")
    if not _is_uuid(run_id):
        raise ValueError(f"run id {run_id!r} is not a nonzero canonical UUID")
    if not isinstance(kind, str) or kind not in _KINDS:
        raise ValueError(f"unknown activity kind {kind!r}")
    if isinstance(revision, bool) or not isinstance(revision, int):
        raise TypeError("revision must be an int")
    if not 0 <= revision <= _MAX_UINT64:
        raise ValueError(f"revision {revision} is outside uint64")
    if isinstance(ordinal, bool) or not isinstance(ordinal, int):
        raise TypeError("ordinal must be an int")
    if not 0 <= ordinal <= _MAX_UINT32:
        raise ValueError(f"ordinal {ordinal} is outside uint32")
    if kind == ActivityKind.VERTEX_COMPLETED:
        if not isinstance(vertex_id, str) or not _VERTEX.fullmatch(vertex_id):
            raise ValueError(f"vertex id {vertex_id!r} must match {_VERTEX.pattern}")
        vertex = vertex_id.encode("utf-8")
    else:
        if vertex_id is not None or ordinal != 0:
            raise ValueError(f"{kind} has no vertex and ordinal 0")
        vertex = _ZERO_BYTES
    return _derive(
        uuid.UUID(session_id).bytes, uuid.UUID(run_id).bytes, kind, revision, vertex, ordinal
    )


# -- projection -----------------------------------------------------------------------------


class RunView(Protocol):
    """What projection reads of a registry run record (`workflows.records.run.Run`)."""

    @property
    def session_id(self) -> str: ...
    @property
    def id(self) -> str: ...
    @property
    def graph_run_id(self) -> str: ...
    @property
    def definition_name(self) -> str: ...
    @property
    def definition_version(self) -> str: ...
    @property
    def status(self) -> str: ...
    @property
    def status_summary(self) -> str: ...
    @property
    def checkpoint_revision(self) -> int: ...
    @property
    def updated_at(self) -> datetime: ...


class VertexView(Protocol):
    """A vertex descriptor (`authoring.metadata.VertexMetadata`); ``id`` is a vertex name."""

    @property
    def label(self) -> str: ...
    @property
    def id(self) -> str | None: ...


class MetadataView(Protocol):
    """What projection reads of a definition's metadata (`authoring.metadata.Metadata`)."""

    @property
    def name(self) -> str: ...
    @property
    def version(self) -> str: ...
    @property
    def vertices(self) -> Sequence[VertexView]: ...


def _when(*candidates: datetime | None) -> datetime:
    """The first present time, normalised to UTC (``occurred_at`` rule of §6.3)."""
    for moment in candidates:
        if moment is None:
            continue
        if not isinstance(moment, datetime):
            raise ActivityValidationError("occurred_at", "must be a datetime")
        if moment.utcoffset() is None:
            raise ActivityValidationError("occurred_at", "must be timezone-aware")
        return moment.astimezone(UTC)
    raise ActivityValidationError("occurred_at", "no timestamp available")


def _check_identity(run: RunView, metadata: MetadataView) -> None:
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


def _paused_by_error(cp: Checkpoint) -> bool:
    """The checkpoint pauses the run for a task error (or a halt), not for a request."""
    if cp.phase is StepPhase.HALTED:
        return True
    return cp.phase is StepPhase.PAUSED and any(
        item.kind is InterruptKind.ERRORED for item in cp.interrupts
    )


@dataclass(slots=True)
class ProjectionState:
    """What projecting checkpoints ``0 .. revision - 1`` carries forward to the next one.

    It depends on the checkpoints only (never on the registry record or the definition's
    error policy), so a projector resumed from it emits exactly what a whole-history
    projection emits for the later revisions. JSON-able through `to_json` / `from_json`.
    ``seen`` holds the ``(step, vertex)`` pairs already counted (a vertex record repeats
    in the checkpoints of its step); ``previous_interrupted`` whether checkpoint
    ``revision - 1`` was interrupted (it decides ``run_resumed``)."""

    revision: int = 0
    completed: int = 0
    ordinals: dict[str, int] = dataclasses.field(default_factory=dict)
    seen: set[tuple[int, str]] = dataclasses.field(default_factory=set)
    terminal: bool = False
    previous_interrupted: bool = False

    def to_json(self) -> dict[str, Any]:
        return {
            "revision": self.revision,
            "completed": self.completed,
            "ordinals": dict(sorted(self.ordinals.items())),
            "seen": [[step, vertex] for step, vertex in sorted(self.seen)],
            "terminal": self.terminal,
            "previous_interrupted": self.previous_interrupted,
        }

    @classmethod
    def from_json(cls, doc: Any) -> ProjectionState:
        """Strict inverse of `to_json`; `ActivityValidationError` names what is wrong."""
        fields = {"revision", "completed", "ordinals", "seen", "terminal", "previous_interrupted"}
        if not isinstance(doc, Mapping) or set(doc) != fields:
            raise ActivityValidationError("projection state", f"must have exactly {sorted(fields)}")
        for name in ("revision", "completed"):
            _check_count(f"projection state {name}", doc[name])
        for name in ("terminal", "previous_interrupted"):
            if not isinstance(doc[name], bool):
                raise ActivityValidationError(f"projection state {name}", "must be a boolean")
        ordinals = doc["ordinals"]
        if not isinstance(ordinals, Mapping) or not all(
            isinstance(k, str) and _VERTEX.fullmatch(k) for k in ordinals
        ):
            raise ActivityValidationError("projection state ordinals", "must map vertex names")
        for value in ordinals.values():
            _check_count("projection state ordinals", value)
        seen = doc["seen"]
        if not isinstance(seen, list) or not all(
            isinstance(pair, list)
            and len(pair) == 2
            and not isinstance(pair[0], bool)
            and isinstance(pair[0], int)
            and pair[0] >= 0
            and isinstance(pair[1], str)
            for pair in seen
        ):
            raise ActivityValidationError("projection state seen", "must list [step, vertex]")
        return cls(
            revision=doc["revision"],
            completed=doc["completed"],
            ordinals=dict(ordinals),
            seen={(step, vertex) for step, vertex in seen},
            terminal=doc["terminal"],
            previous_interrupted=doc["previous_interrupted"],
        )


class Projector:
    """Incremental `project`: feed a run's checkpoints in revision order, a page at a time.

    ``advance(run, page)`` returns the activities of the page's checkpoints (those at
    revisions ``>= emit_from``; earlier ones only update the counters, which is how a
    projector is rebuilt up to a cursor), and ``finish(run)`` the ``run_failed`` a failed
    run ends with, if any. For any split of a history into pages, the concatenated output
    equals ``project(run, metadata, history)`` filtered to revisions ``>= emit_from``,
    byte for byte (event IDs included). Checkpoints are checked as `project` checks them;
    an `ActivityValidationError` leaves the projector unusable (build a new one).

    The projector holds no checkpoint, only `ProjectionState`, so its memory is bounded
    by the number of distinct completed ``(step, vertex)`` pairs, not by state sizes.

    ``replay`` re-derives a journal already published (to rebuild a damaged one): the
    registry record at each publication is gone, so ``run_resumed`` - the only activity
    that depends on it - is emitted wherever the run went on after an interrupted
    checkpoint other than by being cancelled, which is when the supervisor publishes it
    (a resume marks the run ``workflow resuming`` at the interrupted revision)."""

    def __init__(
        self,
        run: RunView,
        metadata: MetadataView,
        *,
        fail_on_error: bool = False,
        state: ProjectionState | None = None,
        emit_from: int = 0,
        replay: bool = False,
    ) -> None:
        _check_identity(run, metadata)
        self._replay = replay
        self._graph_run_id = run.graph_run_id
        self._metadata = metadata
        self._fail_on_error = fail_on_error
        self.state = ProjectionState() if state is None else state
        self.emit_from = emit_from
        self._broken = False
        descriptors = list(metadata.vertices)
        self._descriptors = descriptors
        self._identity = any(d.id for d in descriptors)
        self._labels_by_id: dict[str, str] = {}
        if self._identity:
            for d in descriptors:
                if d.id:
                    self._labels_by_id[d.id] = bound_text(d.label, MAX_LABEL_BYTES)
        self._total = len(descriptors)

    @property
    def revision(self) -> int:
        """The next revision this projector expects (how many checkpoints it has seen)."""
        return self.state.revision

    def _emit(
        self,
        out: list[ProjectedActivity],
        run: RunView,
        revision: int,
        kind: ActivityKind,
        when: datetime,
        *,
        vertex: str | None = None,
        ordinal: int = 0,
        label: str = "",
        message: str = "",
    ) -> None:
        if revision < self.emit_from:
            return
        record = ActivityRecord(
            event_id=event_id(run.session_id, run.id, kind, revision, vertex, ordinal),
            session_id=run.session_id,
            run_id=run.id,
            workflow_name=self._metadata.name,
            workflow_version=self._metadata.version,
            kind=kind,
            status=STATUSES[kind],
            occurred_at=when,
            vertex_id=vertex,
            vertex_label=label,
            completed_vertices=min(self.state.completed, self._total),
            total_vertices=self._total,
            message=message or MESSAGES[kind],
        )
        record.validate()
        out.append(ProjectedActivity(revision, record))

    def _check(self, run: RunView, cp: Checkpoint) -> None:
        index = self.state.revision
        if run.graph_run_id != self._graph_run_id:
            raise ActivityValidationError("run", "graph_run_id changed under the projector")
        if cp is None:
            raise ActivityValidationError("checkpoint", f"checkpoint {index} is missing")
        if index >= MAX_CHECKPOINTS:
            raise ActivityValidationError("history", f"more than {MAX_CHECKPOINTS} checkpoints")
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
        if self.state.terminal:
            raise ActivityValidationError("history", "checkpoint after a terminal checkpoint")
        if not isinstance(cp.run.status, RunStatus):
            raise ActivityValidationError("checkpoint status", f"checkpoint {index}")

    def advance(self, run: RunView, page: Sequence[Checkpoint]) -> list[ProjectedActivity]:
        """Project the next checkpoints (``page[0].revision`` must be `revision`)."""
        if self._broken:
            raise ActivityValidationError("projector", "an earlier page was refused")
        out: list[ProjectedActivity] = []
        try:
            for cp in page:
                self._advance_one(run, cp, out)
        except BaseException:
            self._broken = True
            raise
        return out

    def _advance_one(self, run: RunView, cp: Checkpoint, out: list[ProjectedActivity]) -> None:
        self._check(run, cp)
        state = self.state
        revision = cp.revision
        record = cp.run
        if revision == 0:
            self._emit(
                out,
                run,
                revision,
                ActivityKind.RUN_STARTED,
                _when(record.created_at, record.updated_at),
            )
        if self._replay:
            resumed = state.previous_interrupted and record.status is not RunStatus.CANCELLED
        else:
            resumed = (
                run.status == "running"
                and run.status_summary == RESUMING_SUMMARY
                and revision > 0
                and revision == run.checkpoint_revision + 1
                and state.previous_interrupted
            )
        if resumed:
            self._emit(out, run, revision, ActivityKind.RUN_RESUMED, _when(record.updated_at))
        fresh: list[VertexRecord] = []
        for vertex in cp.vertices:
            if vertex.status is not VertexStatus.DONE:
                continue
            key = (vertex.step, vertex.vertex)
            if key in state.seen:
                continue
            state.seen.add(key)
            fresh.append(vertex)
        fresh.sort(key=lambda v: (v.step, v.vertex))
        descriptors = self._descriptors
        for vertex in fresh:
            vid = vertex.vertex
            ordinal = state.ordinals.get(vid, 0)
            state.ordinals[vid] = ordinal + 1
            if self._identity:
                label = self._labels_by_id.get(vid, "")
            elif state.completed < len(descriptors):
                label = bound_text(descriptors[state.completed].label, MAX_LABEL_BYTES)
            else:
                label = ""
            state.completed += 1
            self._emit(
                out,
                run,
                revision,
                ActivityKind.VERTEX_COMPLETED,
                _when(vertex.completed_at, record.updated_at),
                vertex=vid,
                ordinal=ordinal,
                label=label,
            )
        status = record.status
        if status is RunStatus.INTERRUPTED and not (self._fail_on_error and _paused_by_error(cp)):
            self._emit(
                out,
                run,
                revision,
                ActivityKind.RUN_INTERRUPTED,
                _when(record.interrupted_at, record.updated_at),
                message=_parked_message(cp),
            )
        elif status is RunStatus.COMPLETED:
            self._emit(
                out,
                run,
                revision,
                ActivityKind.RUN_COMPLETED,
                _when(record.completed_at, record.updated_at),
            )
        elif status is RunStatus.CANCELLED:
            self._emit(
                out,
                run,
                revision,
                ActivityKind.RUN_CANCELLED,
                _when(record.cancelled_at, record.updated_at),
            )
        state.terminal = status.terminal
        state.previous_interrupted = status is RunStatus.INTERRUPTED
        state.revision = revision + 1

    def finish(
        self, run: RunView, *, failure_revision: int | None = None
    ) -> list[ProjectedActivity]:
        """The ``run_failed`` of a failed run without a terminal checkpoint: one past the
        checkpoints seen, or at ``failure_revision``. Emitted whatever `emit_from` is, so
        a caller can tell where the projection ends. Nothing for any other run."""
        if run.status != "failed" or self.state.terminal:
            return []
        at = self.state.revision if failure_revision is None else failure_revision
        out: list[ProjectedActivity] = []
        emit_from, self.emit_from = self.emit_from, 0
        try:
            self._emit(out, run, at, ActivityKind.RUN_FAILED, _when(run.updated_at))
        finally:
            self.emit_from = emit_from
        return out


def _parked_message(cp: Checkpoint) -> str:
    """``Workflow parked until <time>`` for a pause of timers only (the latest wake:
    the step continues once all are due), else ``""`` (the kind's message)."""
    times = [i.wake_at for i in cp.interrupts if i.kind is InterruptKind.TIMER and i.wake_at]
    if not times or len(times) != len(cp.interrupts) or cp.halt is not None:
        return ""
    wake = max(times).astimezone(UTC)
    return f"Workflow parked until {wake:%Y-%m-%dT%H:%M:%S}.{wake.microsecond:06d}Z"


def project(
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
    Every record satisfies `ActivityRecord.validate`. The whole-history form of
    `Projector` (which the supervisor uses, a page at a time)."""
    projector = Projector(run, metadata, fail_on_error=fail_on_error)
    out = projector.advance(run, history)
    out.extend(projector.finish(run, failure_revision=failure_revision))
    return out
