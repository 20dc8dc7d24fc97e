"""The workflow run record: `Run`, `RunStatus`, validation, the JSON codec and key layout.

A `Run` is the bridge's bounded metadata about one execution. The Flow
checkpoint history is the execution truth; the run record is a projection of
it that the `RunRegistry` keeps in a KV store under compare-and-swap.

Identifiers (session, run, graph run, tool execution, parent and artifact
IDs) are canonical lowercase UUID strings (``str(uuid.uuid4())``); "absent" is
`None`, and the all-zero UUID is refused everywhere. Timestamps are aware
`datetime` objects whose ``tzinfo`` is exactly `datetime.UTC`; they are
stored as RFC 3339 text with microseconds and ``Z``
(``2026-08-10T16:00:00.000000Z``).

The stored value is compact JSON ``{"version":2,"run":{...}}``. The KV
revision (`Run.revision`) is the compare-and-swap token and is never stored
inside the value. Decoding is strict: anything doubtful is a
`CorruptRecordError`.

A forked run (`forks`) has ``forked_from`` (`ForkedFrom`): the workflow run, checkpoint
revision and checkpoint digest it was forked from. It is part of the immutable identity,
and stored only when set (``"forked_from": {"run_id", "revision", "checkpoint_digest"}``),
so records of runs that are not forks are unchanged.

A run created while traces are on (`flowledger.observability.tracing`) has ``trace_parent``:
the W3C ``traceparent`` of its ``flowledger.run`` span, which every segment of the run, in
any process, continues. Immutable, and stored only when set, like ``forked_from``.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any, Final

from flowledger.observability.tracing import TRACEPARENT
from flowledger.storage import validate_name

from ..errors import CorruptRecordError

__all__ = [
    "ARTIFACT_INPUT_BOOTSTRAP",
    "ARTIFACT_INPUT_PARENT",
    "DEFAULT_RUN_PAGE_SIZE",
    "MAX_ARTIFACT_REFERENCES",
    "MAX_INPUT_BYTES",
    "MAX_RUN_PAGE_SIZE",
    "MAX_RUN_RECORD_BYTES",
    "MAX_STATUS_SUMMARY_BYTES",
    "RUN_RECORD_VERSION",
    "ArtifactReference",
    "ForkedFrom",
    "InputReference",
    "Run",
    "RunStatus",
    "ScheduledBy",
    "can_transition",
    "decode_run",
    "encode_run",
    "format_time",
    "input_key",
    "inputs_prefix",
    "is_digest",
    "is_id",
    "owner_lease_name",
    "parse_time",
    "run_key",
    "runs_prefix",
    "validate_run",
]

MAX_RUN_RECORD_BYTES: Final = 65536
MAX_ARTIFACT_REFERENCES: Final = 128
MAX_RUN_PAGE_SIZE: Final = 100
DEFAULT_RUN_PAGE_SIZE: Final = 50
MAX_INPUT_BYTES: Final = 262144
RUN_RECORD_VERSION: Final = 2
MAX_STATUS_SUMMARY_BYTES: Final = 1024
ARTIFACT_INPUT_BOOTSTRAP: Final = "bootstrap"
ARTIFACT_INPUT_PARENT: Final = "parent"

_MAX_UINT64: Final = (1 << 64) - 1
_ZERO_ID: Final = "00000000-0000-0000-0000-000000000000"
_ID: Final = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
_DIGEST: Final = re.compile(r"[0-9a-f]{64}")
_TIMESTAMP: Final = re.compile(
    r"(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,6}))?(Z|[+-]\d{2}:\d{2})",
    re.ASCII,
)
_ARTIFACT_INPUT_KINDS: Final = frozenset({"", ARTIFACT_INPUT_BOOTSTRAP, ARTIFACT_INPUT_PARENT})


class RunStatus(StrEnum):
    """Lifecycle of a run. See `can_transition` for the legal moves."""

    PENDING = "pending"  # the record exists; Flow is not seeded yet
    RUNNING = "running"  # handed to Flow, or continuing
    INTERRUPTED = "interrupted"  # Flow paused durably; waits for an explicit resume
    COMPLETED = "completed"  # adopted from a terminal Flow checkpoint
    CANCELLED = "cancelled"  # adopted from a cancelled checkpoint, or cancelled while pending
    FAILED = "failed"  # the bridge could not establish or reconcile an execution

    @property
    def terminal(self) -> bool:
        """True for completed, cancelled and failed: no status change is legal afterwards."""
        return self in _TERMINAL


_TERMINAL: Final = frozenset({RunStatus.COMPLETED, RunStatus.CANCELLED, RunStatus.FAILED})

_TRANSITIONS: Final[dict[RunStatus, frozenset[RunStatus]]] = {
    RunStatus.PENDING: frozenset(
        {RunStatus.PENDING, RunStatus.RUNNING, RunStatus.CANCELLED, RunStatus.FAILED}
    ),
    RunStatus.RUNNING: frozenset(
        {
            RunStatus.RUNNING,
            RunStatus.INTERRUPTED,
            RunStatus.COMPLETED,
            RunStatus.CANCELLED,
            RunStatus.FAILED,
        }
    ),
    RunStatus.INTERRUPTED: frozenset(
        {RunStatus.INTERRUPTED, RunStatus.RUNNING, RunStatus.CANCELLED, RunStatus.FAILED}
    ),
    RunStatus.COMPLETED: frozenset({RunStatus.COMPLETED}),
    RunStatus.CANCELLED: frozenset({RunStatus.CANCELLED}),
    RunStatus.FAILED: frozenset({RunStatus.FAILED}),
}


def can_transition(current: RunStatus, target: RunStatus) -> bool:
    """Whether a run may move from ``current`` to ``target`` (workflows-spec §3.4).

    Every valid status may stay where it is. ``pending`` may go to running,
    cancelled or failed; ``running`` to anything but pending; ``interrupted``
    to running, cancelled or failed. Terminal statuses never change. Anything
    that is not a `RunStatus` member is never a legal endpoint.
    """
    if not isinstance(current, RunStatus) or not isinstance(target, RunStatus):
        return False
    return target in _TRANSITIONS[current]


@dataclass(frozen=True, slots=True)
class InputReference:
    """Where a run's input lives: ``key`` = ``inputs_prefix(session) + digest``.

    ``digest`` is the lowercase hex SHA-256 of the exact stored bytes and
    ``size`` their length (1..`MAX_INPUT_BYTES`).
    """

    digest: str
    key: str
    size: int


@dataclass(frozen=True, slots=True)
class ArtifactReference:
    """A bounded pointer to something a run produced (the bytes live elsewhere)."""

    id: str
    kind: str
    digest: str
    size: int


@dataclass(frozen=True, slots=True)
class ForkedFrom:
    """The run a fork was made from: its workflow run ID, the checkpoint revision, and
    the digest of that checkpoint (``sha256:<64 hex>``, `flow.checkpoint_digest`)."""

    run_id: str
    revision: int
    checkpoint_digest: str


@dataclass(frozen=True, slots=True)
class ScheduledBy:
    """The schedule firing that started a run: the schedule's ID, the slot (UTC, whole
    seconds) and whether it was a manual ``trigger`` rather than a due slot."""

    schedule_id: str
    slot: datetime
    manual: bool = False

    def to_json(self) -> dict[str, Any]:
        return {
            "schedule_id": self.schedule_id,
            "slot": f"{self.slot.astimezone(UTC):%Y-%m-%dT%H:%M:%SZ}",
            "manual": self.manual,
        }


@dataclass(frozen=True, slots=True)
class Run:
    """The durable metadata of one workflow run (workflows-spec §3.2).

    Immutable after creation: session, tool execution, definition name and
    version, id, graph run id, parent run id, the five artifact namespace
    fields, input, ledger locator and ``created_at``. Mutable under CAS:
    status (transition-checked), status summary, cancel intent, checkpoint
    revision and activity cursor (both non-decreasing), artifacts and
    ``updated_at`` (non-decreasing). ``revision`` is the KV compare-and-swap
    token of the stored copy; it is never encoded. Update with
    `dataclasses.replace`.
    """

    session_id: str
    tool_execution_id: str
    definition_name: str
    definition_version: str
    id: str
    graph_run_id: str
    input: InputReference
    ledger_locator: str
    created_at: datetime
    updated_at: datetime
    status: RunStatus = RunStatus.PENDING
    status_summary: str = ""
    cancel_requested: bool = False
    checkpoint_revision: int = 0
    activity_cursor: int = 0
    parent_run_id: str | None = None
    artifact_session_id: str | None = None
    artifact_run_id: str | None = None
    artifact_input_kind: str = ""
    artifact_input_session_id: str | None = None
    artifact_input_run_id: str | None = None
    artifacts: tuple[ArtifactReference, ...] = ()
    revision: int = 0
    forked_from: ForkedFrom | None = None
    scheduled_by: ScheduledBy | None = None
    trace_parent: str | None = None


# -- identifiers and keys ------------------------------------------------------------------------


def is_id(value: object) -> bool:
    """True iff ``value`` is a canonical lowercase UUID string other than the all-zero UUID."""
    return isinstance(value, str) and value != _ZERO_ID and _ID.fullmatch(value) is not None


def is_digest(value: object) -> bool:
    """True iff ``value`` is 64 lowercase hex characters (a SHA-256 digest)."""
    return isinstance(value, str) and _DIGEST.fullmatch(value) is not None


def _require_id(value: object, message: str) -> str:
    if value is None or value == "" or value == _ZERO_ID:
        raise ValueError(message)
    if not is_id(value):
        raise ValueError(f"{message} (not a canonical lowercase UUID: {value!r})")
    assert isinstance(value, str)
    return value


def _session(session_id: object) -> str:
    return _require_id(session_id, "session ID is required")


def runs_prefix(session_id: str) -> str:
    """``sessions/<sid>/workflows/runs/``: the listing prefix of one session's run records."""
    prefix = f"sessions/{_session(session_id)}/workflows/runs"
    validate_name(prefix)
    return prefix + "/"


def run_key(session_id: str, run_id: str) -> str:
    """``sessions/<sid>/workflows/runs/<rid>``; `ValueError` for a missing or malformed ID."""
    prefix = runs_prefix(session_id)
    return validate_name(prefix + _require_id(run_id, "workflow run ID is required"))


def pruning_key(session_id: str, run_id: str) -> str:
    """``sessions/<sid>/workflows/pruning/<rid>``: the tombstone a prune writes before it
    deletes the run (`retention`); a fork of the run checks it (`forks`)."""
    prefix = f"sessions/{_session(session_id)}/workflows/pruning/"
    return validate_name(prefix + _require_id(run_id, "workflow run ID is required"))


def inputs_prefix(session_id: str) -> str:
    """``sessions/<sid>/workflows/inputs/sha256/``: where one session's inputs live."""
    prefix = f"sessions/{_session(session_id)}/workflows/inputs/sha256"
    validate_name(prefix)
    return prefix + "/"


def input_key(session_id: str, digest: str) -> str:
    """``sessions/<sid>/workflows/inputs/sha256/<digest>`` for a 64-hex SHA-256 digest."""
    prefix = inputs_prefix(session_id)
    if not is_digest(digest):
        raise ValueError(f"input digest must be 64 lowercase hex characters, not {digest!r}")
    return validate_name(prefix + digest)


def owner_lease_name(session_id: str) -> str:
    """``sessions/<sid>/workflows/owner``: the lease whose holder executes the session's runs."""
    return validate_name(f"sessions/{_session(session_id)}/workflows/owner")


# -- validation ----------------------------------------------------------------------------------


def _check_segment(field: str, value: object) -> None:
    if not isinstance(value, str):
        raise ValueError(f"{field} must be a str, not {type(value).__name__}")
    if "/" in value:
        raise ValueError(f"{field} {value!r} must be a single storage-name segment")
    try:
        validate_name(value)
    except ValueError as exc:
        raise ValueError(f"{field} {value!r} is not a valid storage-name segment: {exc}") from None


def _check_count(field: str, value: object, low: int, high: int) -> None:
    if not isinstance(value, int) or isinstance(value, bool):
        raise ValueError(f"{field} must be an int, not {type(value).__name__}")
    if not low <= value <= high:
        raise ValueError(f"{field} {value} is outside {low}..{high}")


def _check_time(field: str, value: object) -> None:
    if not isinstance(value, datetime):
        raise ValueError(f"{field} must be a datetime, not {type(value).__name__}")
    if value.tzinfo is not UTC:
        raise ValueError(f"{field} must be in UTC (tzinfo datetime.UTC), not {value.tzinfo!r}")
    if not 2000 <= value.year <= 9999:
        raise ValueError(f"{field} year {value.year} is outside 2000..9999")


def _check_optional_id(field: str, value: object) -> None:
    if value is not None and not is_id(value):
        raise ValueError(f"{field} must be None or a nonzero canonical lowercase UUID: {value!r}")


def _check_input(run: Run) -> None:
    ref = run.input
    if not isinstance(ref, InputReference):
        raise ValueError(f"input must be an InputReference, not {type(ref).__name__}")
    if not is_digest(ref.digest):
        raise ValueError(f"input digest {ref.digest!r} must be 64 lowercase hex characters")
    if ref.key != input_key(run.session_id, ref.digest):
        raise ValueError(f"input key {ref.key!r} is not this session's key for its digest")
    _check_count("input size", ref.size, 1, MAX_INPUT_BYTES)


def _check_artifacts(artifacts: object) -> None:
    if not isinstance(artifacts, tuple):
        raise ValueError(f"artifacts must be a tuple, not {type(artifacts).__name__}")
    if len(artifacts) > MAX_ARTIFACT_REFERENCES:
        raise ValueError(f"{len(artifacts)} artifacts; the limit is {MAX_ARTIFACT_REFERENCES}")
    seen: set[str] = set()
    for i, artifact in enumerate(artifacts):
        if not isinstance(artifact, ArtifactReference):
            raise ValueError(f"artifacts[{i}] must be an ArtifactReference")
        _check_segment(f"artifacts[{i}].id", artifact.id)
        _check_segment(f"artifacts[{i}].kind", artifact.kind)
        if not is_digest(artifact.digest):
            raise ValueError(f"artifacts[{i}].digest must be 64 lowercase hex characters")
        _check_count(f"artifacts[{i}].size", artifact.size, 0, _MAX_UINT64)
        if artifact.id in seen:
            raise ValueError(f"artifact id {artifact.id!r} appears more than once")
        seen.add(artifact.id)


def validate_run(run: Run) -> None:
    """Raise `ValueError` naming the first rule ``run`` breaks (workflows-spec §3.3).

    Required nonzero IDs: session, tool execution, run, graph run, artifact
    session and artifact run. The artifact input descriptor is either empty
    (kind ``""`` and both input IDs `None`) or kind ``bootstrap``/``parent``
    with both IDs set. Definition name and version are single storage-name
    segments. The status is a `RunStatus`; the summary at most 1024 UTF-8
    bytes. The input reference is this session's key for a 64-hex digest and
    its size is 1..262144. The ledger locator is a storage name. Both
    timestamps are UTC (``tzinfo is datetime.UTC``) with years 2000..9999 and
    ``updated_at >= created_at``. Counters are non-negative 64-bit ints. At
    most 128 artifacts, each with segment ``id``/``kind``, 64-hex digest,
    size >= 0, and unique ids. The ``revision`` is not part of the record
    but must be a non-negative int.
    """
    if not isinstance(run, Run):
        raise ValueError(f"expected a Run, not {type(run).__name__}")
    _session(run.session_id)
    _require_id(run.tool_execution_id, "tool execution ID is required")
    _require_id(run.id, "workflow run ID is required")
    _require_id(run.graph_run_id, "graph run ID is required")
    _check_optional_id("parent_run_id", run.parent_run_id)
    _require_id(run.artifact_session_id, "artifact session ID is required")
    _require_id(run.artifact_run_id, "artifact run ID is required")
    _check_optional_id("artifact_input_session_id", run.artifact_input_session_id)
    _check_optional_id("artifact_input_run_id", run.artifact_input_run_id)
    kind = run.artifact_input_kind
    if not isinstance(kind, str) or kind not in _ARTIFACT_INPUT_KINDS:
        raise ValueError(f"artifact_input_kind must be '', 'bootstrap' or 'parent', not {kind!r}")
    ids_set = (run.artifact_input_session_id is not None, run.artifact_input_run_id is not None)
    if kind == "" and any(ids_set):
        raise ValueError("artifact input IDs must be absent when artifact_input_kind is empty")
    if kind != "" and not all(ids_set):
        raise ValueError(f"artifact input kind {kind!r} requires both artifact input IDs")
    _check_segment("definition_name", run.definition_name)
    _check_segment("definition_version", run.definition_version)
    if not isinstance(run.status, RunStatus):
        raise ValueError(f"status must be a RunStatus, not {run.status!r}")
    if not isinstance(run.status_summary, str):
        raise ValueError("status_summary must be a str")
    try:
        summary_bytes = len(run.status_summary.encode())
    except UnicodeEncodeError:
        raise ValueError("status_summary is not valid Unicode text") from None
    if summary_bytes > MAX_STATUS_SUMMARY_BYTES:
        raise ValueError(
            f"status_summary is {summary_bytes} bytes; the limit is {MAX_STATUS_SUMMARY_BYTES}"
        )
    if not isinstance(run.cancel_requested, bool):
        raise ValueError("cancel_requested must be a bool")
    _check_count("checkpoint_revision", run.checkpoint_revision, 0, _MAX_UINT64)
    _check_count("activity_cursor", run.activity_cursor, 0, _MAX_UINT64)
    _check_count("revision", run.revision, 0, _MAX_UINT64)
    _check_input(run)
    if not isinstance(run.ledger_locator, str):
        raise ValueError("ledger_locator must be a str")
    try:
        validate_name(run.ledger_locator)
    except ValueError as exc:
        raise ValueError(f"ledger_locator is not a valid storage name: {exc}") from None
    _check_time("created_at", run.created_at)
    _check_time("updated_at", run.updated_at)
    if run.updated_at < run.created_at:
        raise ValueError("updated_at is before created_at")
    _check_artifacts(run.artifacts)
    _check_forked_from(run)
    if run.trace_parent is not None and (
        not isinstance(run.trace_parent, str) or TRACEPARENT.fullmatch(run.trace_parent) is None
    ):
        raise ValueError("trace_parent must be a W3C traceparent (00-<32 hex>-<16 hex>-<2 hex>)")


_CHECKPOINT_DIGEST: Final = re.compile(r"sha256:[0-9a-f]{64}")


def _check_forked_from(run: Run) -> None:
    origin = run.forked_from
    if origin is None:
        return
    if not isinstance(origin, ForkedFrom):
        raise ValueError("forked_from must be a ForkedFrom")
    _require_id(origin.run_id, "forked_from.run_id must be a run ID")
    if origin.run_id == run.id:
        raise ValueError("a run cannot be forked from itself")
    _check_count("forked_from.revision", origin.revision, 0, _MAX_UINT64)
    digest = origin.checkpoint_digest
    if not isinstance(digest, str) or _CHECKPOINT_DIGEST.fullmatch(digest) is None:
        raise ValueError("forked_from.checkpoint_digest must be sha256:<64 lowercase hex>")


# -- codec ---------------------------------------------------------------------------------------


def _format_time(value: datetime) -> str:
    return f"{value:%Y-%m-%dT%H:%M:%S}.{value.microsecond:06d}Z"


def format_time(value: datetime) -> str:
    """An aware ``value`` as the records store times: RFC 3339 UTC with microseconds."""
    return _format_time(value.astimezone(UTC))


def parse_time(text: str) -> datetime:
    """`format_time`'s output back (`ValueError` for anything else)."""
    try:
        return _time("time", text)
    except _Corrupt as exc:
        raise ValueError(str(exc)) from None


def encode_run(run: Run) -> bytes:
    """Validate ``run`` and return its stored form (workflows-spec §3.6).

    Compact UTF-8 JSON ``{"version":2,"run":{...}}`` with the fields of §3.2 in
    table order. Omitted when empty: ``parent_run_id``, ``artifact_input_kind``,
    ``artifact_input_session_id``, ``artifact_input_run_id``,
    ``status_summary``, ``cancel_requested`` (false) and ``artifacts``.
    ``revision`` is never encoded. `ValueError` if the run is invalid or the
    result exceeds `MAX_RUN_RECORD_BYTES`.
    """
    validate_run(run)
    body: dict[str, Any] = {
        "session_id": run.session_id,
        "tool_execution_id": run.tool_execution_id,
        "definition_name": run.definition_name,
        "definition_version": run.definition_version,
        "id": run.id,
        "graph_run_id": run.graph_run_id,
    }
    if run.parent_run_id is not None:
        body["parent_run_id"] = run.parent_run_id
    body["artifact_session_id"] = run.artifact_session_id
    body["artifact_run_id"] = run.artifact_run_id
    if run.artifact_input_kind:
        body["artifact_input_kind"] = run.artifact_input_kind
    if run.artifact_input_session_id is not None:
        body["artifact_input_session_id"] = run.artifact_input_session_id
    if run.artifact_input_run_id is not None:
        body["artifact_input_run_id"] = run.artifact_input_run_id
    body["input"] = {"digest": run.input.digest, "key": run.input.key, "size": run.input.size}
    body["status"] = run.status.value
    if run.status_summary:
        body["status_summary"] = run.status_summary
    if run.cancel_requested:
        body["cancel_requested"] = True
    body["checkpoint_revision"] = run.checkpoint_revision
    body["activity_cursor"] = run.activity_cursor
    body["ledger_locator"] = run.ledger_locator
    if run.artifacts:
        body["artifacts"] = [
            {"id": a.id, "kind": a.kind, "digest": a.digest, "size": a.size} for a in run.artifacts
        ]
    body["created_at"] = _format_time(run.created_at)
    body["updated_at"] = _format_time(run.updated_at)
    if run.forked_from is not None:
        body["forked_from"] = {
            "run_id": run.forked_from.run_id,
            "revision": run.forked_from.revision,
            "checkpoint_digest": run.forked_from.checkpoint_digest,
        }
    if run.scheduled_by is not None:
        body["scheduled_by"] = run.scheduled_by.to_json()
    if run.trace_parent is not None:
        body["trace_parent"] = run.trace_parent
    data = json.dumps(
        {"version": RUN_RECORD_VERSION, "run": body},
        separators=(",", ":"),
        ensure_ascii=False,
        allow_nan=False,
    ).encode()
    if len(data) > MAX_RUN_RECORD_BYTES:
        raise ValueError(f"run record exceeds {MAX_RUN_RECORD_BYTES} bytes")
    return data


class _Corrupt(Exception):
    """Internal: why a stored record was refused (becomes the `CorruptRecordError` cause)."""


_REQUIRED: Final = (
    "session_id",
    "tool_execution_id",
    "definition_name",
    "definition_version",
    "id",
    "graph_run_id",
    "artifact_session_id",
    "artifact_run_id",
    "input",
    "status",
    "checkpoint_revision",
    "activity_cursor",
    "ledger_locator",
    "created_at",
    "updated_at",
)
_OPTIONAL: Final = (
    "parent_run_id",
    "artifact_input_kind",
    "artifact_input_session_id",
    "artifact_input_run_id",
    "status_summary",
    "cancel_requested",
    "artifacts",
    "forked_from",
    "scheduled_by",
    "trace_parent",
)
_RUN_FIELDS: Final = frozenset(_REQUIRED + _OPTIONAL)


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise ValueError(f"duplicate key {key!r}")
        result[key] = value
    return result


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def _object(where: str, value: Any, required: tuple[str, ...], allowed: frozenset[str]) -> None:
    if not isinstance(value, dict):
        raise _Corrupt(f"{where} must be a JSON object")
    unknown = sorted(set(value) - allowed)
    if unknown:
        raise _Corrupt(f"unknown field {unknown[0]!r} in {where}")
    missing = [name for name in required if name not in value]
    if missing:
        raise _Corrupt(f"missing field {missing[0]!r} in {where}")


def _str(where: str, value: Any) -> str:
    if not isinstance(value, str):
        raise _Corrupt(f"{where} must be a JSON string")
    return value


def _int(where: str, value: Any) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise _Corrupt(f"{where} must be a JSON integer")
    return value


def _time(where: str, value: Any) -> datetime:
    match = _TIMESTAMP.fullmatch(_str(where, value))
    if match is None:
        raise _Corrupt(f"{where} is not an RFC 3339 timestamp")
    year, month, day, hour, minute, second, fraction, zone = match.groups()
    if zone != "Z":
        raise _Corrupt(f"{where} is not in UTC (offset {zone})")
    micros = int((fraction or "0").ljust(6, "0"))
    try:
        return datetime(
            int(year), int(month), int(day), int(hour), int(minute), int(second), micros, UTC
        )
    except ValueError as exc:
        raise _Corrupt(f"{where}: {exc}") from None


def _run_from(body: Any) -> Run:
    _object("run", body, _REQUIRED, _RUN_FIELDS)
    ref = body["input"]
    _object("run.input", ref, ("digest", "key", "size"), frozenset({"digest", "key", "size"}))
    status_text = _str("run.status", body["status"])
    try:
        status = RunStatus(status_text)
    except ValueError:
        raise _Corrupt(f"unknown status {status_text!r}") from None
    artifacts_raw = body.get("artifacts", [])
    if not isinstance(artifacts_raw, list):
        raise _Corrupt("run.artifacts must be a JSON array")
    if len(artifacts_raw) > MAX_ARTIFACT_REFERENCES:
        raise _Corrupt(f"more than {MAX_ARTIFACT_REFERENCES} artifacts")
    fields = ("id", "kind", "digest", "size")
    artifacts: list[ArtifactReference] = []
    for i, item in enumerate(artifacts_raw):
        where = f"run.artifacts[{i}]"
        _object(where, item, fields, frozenset(fields))
        artifacts.append(
            ArtifactReference(
                id=_str(f"{where}.id", item["id"]),
                kind=_str(f"{where}.kind", item["kind"]),
                digest=_str(f"{where}.digest", item["digest"]),
                size=_int(f"{where}.size", item["size"]),
            )
        )
    cancel = body.get("cancel_requested", False)
    if not isinstance(cancel, bool):
        raise _Corrupt("run.cancel_requested must be a JSON boolean")

    def optional_id(name: str) -> str | None:
        return _str(f"run.{name}", body[name]) if name in body else None

    forked_from = None
    if "forked_from" in body:
        origin = body["forked_from"]
        names = ("run_id", "revision", "checkpoint_digest")
        _object("run.forked_from", origin, names, frozenset(names))
        forked_from = ForkedFrom(
            run_id=_str("run.forked_from.run_id", origin["run_id"]),
            revision=_int("run.forked_from.revision", origin["revision"]),
            checkpoint_digest=_str(
                "run.forked_from.checkpoint_digest", origin["checkpoint_digest"]
            ),
        )

    scheduled_by = None
    if "scheduled_by" in body:
        by = body["scheduled_by"]
        names = ("schedule_id", "slot", "manual")
        _object("run.scheduled_by", by, names, frozenset(names))
        manual = by["manual"]
        if not isinstance(manual, bool):
            raise _Corrupt("run.scheduled_by.manual must be a JSON boolean")
        slot_text = _str("run.scheduled_by.slot", by["slot"])
        try:
            slot = datetime.strptime(slot_text, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
        except ValueError:
            raise _Corrupt(f"run.scheduled_by.slot is not a UTC time: {slot_text!r}") from None
        schedule_id = _str("run.scheduled_by.schedule_id", by["schedule_id"])
        if not is_id(schedule_id):
            raise _Corrupt("run.scheduled_by.schedule_id is not a lowercase UUID")
        scheduled_by = ScheduledBy(schedule_id, slot, manual)

    return Run(
        session_id=_str("run.session_id", body["session_id"]),
        tool_execution_id=_str("run.tool_execution_id", body["tool_execution_id"]),
        definition_name=_str("run.definition_name", body["definition_name"]),
        definition_version=_str("run.definition_version", body["definition_version"]),
        id=_str("run.id", body["id"]),
        graph_run_id=_str("run.graph_run_id", body["graph_run_id"]),
        input=InputReference(
            digest=_str("run.input.digest", ref["digest"]),
            key=_str("run.input.key", ref["key"]),
            size=_int("run.input.size", ref["size"]),
        ),
        ledger_locator=_str("run.ledger_locator", body["ledger_locator"]),
        created_at=_time("run.created_at", body["created_at"]),
        updated_at=_time("run.updated_at", body["updated_at"]),
        status=status,
        status_summary=_str("run.status_summary", body.get("status_summary", "")),
        cancel_requested=cancel,
        checkpoint_revision=_int("run.checkpoint_revision", body["checkpoint_revision"]),
        activity_cursor=_int("run.activity_cursor", body["activity_cursor"]),
        parent_run_id=optional_id("parent_run_id"),
        artifact_session_id=_str("run.artifact_session_id", body["artifact_session_id"]),
        artifact_run_id=_str("run.artifact_run_id", body["artifact_run_id"]),
        artifact_input_kind=_str("run.artifact_input_kind", body.get("artifact_input_kind", "")),
        artifact_input_session_id=optional_id("artifact_input_session_id"),
        artifact_input_run_id=optional_id("artifact_input_run_id"),
        artifacts=tuple(artifacts),
        forked_from=forked_from,
        scheduled_by=scheduled_by,
        trace_parent=optional_id("trace_parent"),
    )


def decode_run(key: str, data: bytes) -> Run:
    """Parse and validate a stored run record; any failure is `CorruptRecordError(key, cause)`.

    Refused: a value that is not non-empty bytes, larger than
    `MAX_RUN_RECORD_BYTES`, not UTF-8 JSON, with duplicate keys, a trailing
    value, an unknown or missing field (envelope, run, input or artifact
    level), a wrong JSON type, a version other than 2, a timestamp not in UTC
    ``Z`` form, or a record that fails `validate_run`. The result has
    ``revision`` 0; the registry sets the KV revision.
    """
    try:
        if not isinstance(data, bytes | bytearray | memoryview):
            raise _Corrupt(f"value must be bytes, not {type(data).__name__}")
        raw = bytes(data)
        if not raw:
            raise _Corrupt("empty value")
        if len(raw) > MAX_RUN_RECORD_BYTES:
            raise _Corrupt(f"value is {len(raw)} bytes; the limit is {MAX_RUN_RECORD_BYTES}")
        try:
            text = raw.decode("utf-8")
            doc = json.loads(
                text, object_pairs_hook=_no_duplicates, parse_constant=_reject_constant
            )
        except (ValueError, RecursionError) as exc:
            raise _Corrupt(f"invalid JSON: {exc}") from None
        _object("envelope", doc, ("version", "run"), frozenset({"version", "run"}))
        version = doc["version"]
        if not isinstance(version, int) or isinstance(version, bool):
            raise _Corrupt("version must be a JSON integer")
        if version != RUN_RECORD_VERSION:
            raise _Corrupt(f"unsupported run record version {version}")
        run = _run_from(doc["run"])
        validate_run(run)
    except _Corrupt as exc:
        raise CorruptRecordError(key, str(exc)) from None
    except ValueError as exc:
        raise CorruptRecordError(key, exc)  # noqa: B904 - the cause is attached by the error
    return run
