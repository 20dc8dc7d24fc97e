"""What a stopped run waits for, or what stopped it: `Pending`, and `PendingStore`.

A run pauses for one of two reasons, its *pause kind*:

* ``request``: a task called `flow.interrupt` and waits for whoever resumes. The pause
  carries the interrupt's ``info`` (addressed to that person or model) and the
  definition's resume schema; a resume must send a payload the schema accepts.
* ``error``: a task raised (after its retries) and had no error route, or the step's
  routing failed (a halt). The pause carries the exception's type and a bounded message;
  resuming retries the step and takes no payload.

* ``timer``: a task called `flow.sleep` / `flow.sleep_until`; the run is *parked* until
  ``wake_at`` and its owner resumes it then (nobody else may).

A step can pause several vertices; the run's kind is ``request`` when any of them asks
for a payload (the payload reaches those vertices; errored ones are retried beside them),
``timer`` when all of them are timers, else ``error``. A request may carry a deadline
(``wake_at`` with the vertex): its owner resumes it with the interrupt's ``on_timeout``
payload once it passes. `Pending.wake_at` is the earliest of these times.

The owner writes a `Pending` record when a run pauses (and, for a definition with
``on_error="fail"``, the error that failed it), in the session's KV namespace under
``sessions/<sid>/workflows/pending/<run>``, bound to the checkpoint revision it
describes. Readers (`runs show`, `workflow_run_get`) need no definition loaded to show
it. It is owner-only data - never part of activity history or run listings - and it is
bounded: ``info`` to `MAX_INFO_BYTES` of JSON text (beyond that a prefix of the text with
``info_truncated``), messages to `MAX_ERROR_MESSAGE_BYTES`, the stored resume schema to
`MAX_SCHEMA_BYTES`.
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any, Final

from ... import flow
from ...storage import (
    KV,
    ConflictError,
    CorruptDataError,
    Entry,
    KeyNotFoundError,
    fence_arg,
    validate_name,
)
from ..authoring.metadata import MAX_LABEL_BYTES, Metadata, bound_text
from ..errors import CorruptRecordError
from .run import format_time, is_id, parse_time

__all__ = [
    "MAX_ERROR_MESSAGE_BYTES",
    "MAX_INFO_BYTES",
    "MAX_SCHEMA_BYTES",
    "PauseKind",
    "PausedVertex",
    "Pending",
    "PendingStore",
    "describe_pause",
    "pause_kind",
    "paused_prefix",
    "pending_key",
    "readable_cause",
    "requests",
]

MAX_INFO_BYTES: Final = 4096
MAX_ERROR_MESSAGE_BYTES: Final = 512
MAX_SCHEMA_BYTES: Final = 65536
_VERSION: Final = 1
# `flow.VertexError` prefixes the task's message with bookkeeping a reader does not need.
_VERTEX_ERROR_PREFIX: Final = re.compile(r"vertex \S+ \(run \S+, attempt \d+\) failed: ")
_CONTROL: Final = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")


class PauseKind(StrEnum):
    REQUEST = "request"
    ERROR = "error"
    TIMER = "timer"


@dataclass(frozen=True, slots=True)
class PausedVertex:
    """One paused vertex (``vertex`` is ``""`` for a halt, which pauses a whole step)."""

    vertex: str
    label: str
    kind: PauseKind
    info: Any = None
    info_truncated: bool = False
    error_type: str = ""
    error_message: str = ""
    wake_at: datetime | None = None  # a timer's wake time or a request's deadline

    def to_json(self) -> dict[str, Any]:
        document: dict[str, Any] = {"kind": str(self.kind)}
        if self.vertex:
            document["vertex_id"] = self.vertex
        if self.label:
            document["vertex_label"] = self.label
        if self.kind is PauseKind.REQUEST:
            document["info"] = self.info
            if self.info_truncated:
                document["info_truncated"] = True
        elif self.kind is PauseKind.ERROR:
            document["error"] = {"type": self.error_type, "message": self.error_message}
        if self.wake_at is not None:
            document["wake_at"] = format_time(self.wake_at)
        return document


@dataclass(frozen=True, slots=True)
class Pending:
    """What the run at ``checkpoint_revision`` waits for (or, with ``failed``, what made
    an ``on_error="fail"`` definition fail it)."""

    kind: PauseKind
    vertices: tuple[PausedVertex, ...]
    checkpoint_revision: int
    resume_schema: dict[str, Any] | None = None
    failed: bool = False

    @property
    def first(self) -> PausedVertex:
        return self.vertices[0]

    @property
    def wake_at(self) -> datetime | None:
        """When the run's owner resumes it by itself: the earliest timer of a ``timer``
        pause, or the earliest deadline of a ``request`` pause; None otherwise."""
        if self.failed or self.kind is PauseKind.ERROR:
            return None
        times = [v.wake_at for v in self.vertices if v.wake_at is not None and v.kind is self.kind]
        if self.kind is PauseKind.TIMER:
            # every timer must be due before the step resumes
            return max(times) if times else None
        return min(times) if times else None

    @property
    def errored(self) -> tuple[PausedVertex, ...]:
        """Every errored vertex (several when parallel branches failed in one step)."""
        return tuple(item for item in self.vertices if item.kind is PauseKind.ERROR)

    def error_summary(self) -> str:
        """``label: Type`` of every errored vertex (``routing`` for a halt), joined by
        ``; ``, or ``""``: what a run's status summary may say of its error. Never the
        message: a tool's or an exception's text can echo its input (tool arguments hold
        user data), and the summary is shown in run listings and to every reader of the
        run; the messages stay in this owner-only record (``workflow_run_get``'s ``error``
        and ``errors``)."""
        return "; ".join(
            f"{item.label or item.vertex or 'routing'}: {item.error_type}".rstrip(": ")
            for item in self.errored
        )

    def to_json(self) -> dict[str, Any]:
        document: dict[str, Any] = {
            "kind": str(self.kind),
            "checkpoint_revision": self.checkpoint_revision,
            "vertices": [item.to_json() for item in self.vertices],
        }
        first = self.first
        # The first vertex's fields at the top level: what a caller with one pause reads.
        for key in ("vertex_id", "vertex_label", "info", "info_truncated", "error"):
            value = first.to_json().get(key)
            if value is not None:
                document[key] = value
        wake_at = self.wake_at
        if wake_at is not None:
            document["wake_at"] = format_time(wake_at)
        if self.kind is PauseKind.REQUEST:
            document["resume_schema"] = self.resume_schema
        return document


# -- building one from a result -------------------------------------------------------------------


def pause_kind(interrupts: Sequence[flow.Interruption] | None, halt: flow.Halt | None) -> PauseKind:
    """``request`` when any interrupt awaits a payload, ``timer`` when every one is a
    timer, else ``error``."""
    if halt is None and any(i.kind is flow.InterruptKind.AWAITING for i in interrupts or ()):
        return PauseKind.REQUEST
    if halt is None and interrupts and all(i.kind is flow.InterruptKind.TIMER for i in interrupts):
        return PauseKind.TIMER
    return PauseKind.ERROR


def requests(interrupts: Sequence[flow.Interruption] | None) -> list[str]:
    """The vertices of ``interrupts`` that wait for a payload, in order."""
    return [i.vertex for i in interrupts or () if i.kind is flow.InterruptKind.AWAITING]


def _bounded_info(info: Any) -> tuple[Any, bool]:
    text = json.dumps(info, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    data = text.encode()
    if len(data) <= MAX_INFO_BYTES:
        return info, False
    return data[:MAX_INFO_BYTES].decode(errors="ignore"), True


def readable_cause(text: str) -> str:
    """A stored failure's one line as a reader wants it: without the engine's
    bookkeeping (``flow: vertex V (run R, attempt N) failed: ``) or control characters."""
    text = _VERTEX_ERROR_PREFIX.sub("", text, count=1)
    return _CONTROL.sub(" ", text.removeprefix("flow: "))


def _message(error: BaseException | None) -> tuple[str, str]:
    if error is None:
        return "", ""
    if isinstance(error, flow.VertexError):
        error = error.cause
    if isinstance(error, flow.StoredError):
        type_name = error.type_name
        text = _VERTEX_ERROR_PREFIX.sub("", str(error), count=1)
    else:
        type_name = type(error).__name__
        text = str(error) or type_name
    text = _CONTROL.sub(" ", text.removeprefix("flow: "))
    return type_name or "Error", bound_text(text, MAX_ERROR_MESSAGE_BYTES)


def _labels(metadata: Metadata) -> dict[str, str]:
    return {
        item.id: bound_text(item.label, MAX_LABEL_BYTES)
        for item in metadata.vertices
        if item.id is not None
    }


def describe_pause(
    metadata: Metadata,
    revision: int,
    interrupts: Sequence[flow.Interruption] | None,
    halt: flow.Halt | None,
    *,
    resume_schema: dict[str, Any] | None = None,
    failed: bool = False,
) -> Pending:
    """The `Pending` of a paused (or halted) result at checkpoint ``revision``;
    ``resume_schema`` is what a payload must match (default: the metadata's)."""
    labels = _labels(metadata)
    vertices: list[PausedVertex] = []
    if halt is not None:
        type_name, text = _message(halt.cause)
        vertices.append(PausedVertex("", "", PauseKind.ERROR, None, False, type_name, text))
    for item in interrupts or ():
        label = labels.get(item.vertex, "")
        if item.kind is flow.InterruptKind.AWAITING:
            info, truncated = _bounded_info(item.info)
            vertices.append(
                PausedVertex(
                    item.vertex, label, PauseKind.REQUEST, info, truncated, wake_at=item.wake_at
                )
            )
        elif item.kind is flow.InterruptKind.TIMER:
            vertices.append(
                PausedVertex(item.vertex, label, PauseKind.TIMER, None, wake_at=item.wake_at)
            )
        else:
            type_name, text = _message(item.cause)
            vertices.append(
                PausedVertex(item.vertex, label, PauseKind.ERROR, None, False, type_name, text)
            )
    if not vertices:
        raise ValueError("a pause needs interrupts or a halt")
    kind = pause_kind(interrupts, halt)
    schema = None
    if kind is PauseKind.REQUEST:
        schema = metadata.resume_schema if resume_schema is None else resume_schema
    if schema is not None and len(json.dumps(schema).encode()) > MAX_SCHEMA_BYTES:
        schema = {"description": "the resume schema is too large to store; see the definition"}
    # Requests first, so `first` is what a resume answers.
    ordered = sorted(vertices, key=lambda v: (v.kind is not PauseKind.REQUEST, v.vertex))
    return Pending(kind, tuple(ordered), revision, schema, failed)


# -- storage ----------------------------------------------------------------------------------


def pending_key(session_id: str, run_id: str) -> str:
    """``sessions/<sid>/workflows/pending/<rid>``."""
    if not is_id(session_id) or not is_id(run_id):
        raise ValueError("pending_key needs a session ID and a run ID")
    return validate_name(f"sessions/{session_id}/workflows/pending/{run_id}")


def paused_prefix(session_id: str) -> str:
    """``sessions/<sid>/workflows/paused/``: one empty marker per run with a pending
    record, ``<kind>/<rid>``, so runs can be counted by the kind of their latest pause
    from keys alone (joined with the registry's interrupted status entries: a marker
    outlives the pause, as the record does)."""
    if not is_id(session_id):
        raise ValueError("paused_prefix needs a session ID")
    return f"sessions/{session_id}/workflows/paused/"


def _paused_key(session_id: str, kind: PauseKind, run_id: str) -> str:
    return validate_name(f"{paused_prefix(session_id)}{kind}/{run_id}")


def _encode(pending: Pending) -> bytes:
    body = {
        "version": _VERSION,
        "kind": str(pending.kind),
        "checkpoint_revision": pending.checkpoint_revision,
        "failed": pending.failed,
        "resume_schema": pending.resume_schema,
        "vertices": [
            {
                "vertex": v.vertex,
                "label": v.label,
                "kind": str(v.kind),
                "info": v.info,
                "info_truncated": v.info_truncated,
                "error_type": v.error_type,
                "error_message": v.error_message,
                **({} if v.wake_at is None else {"wake_at": format_time(v.wake_at)}),
            }
            for v in pending.vertices
        ],
    }
    return json.dumps(body, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode()


def _decode(key: str, data: bytes) -> Pending:
    try:
        doc = json.loads(data)
        if not isinstance(doc, Mapping) or doc.get("version") != _VERSION:
            raise ValueError("not a version 1 pending record")
        vertices = tuple(
            PausedVertex(
                _text(v["vertex"]),
                _text(v["label"]),
                PauseKind(v["kind"]),
                v["info"],
                bool(v["info_truncated"]),
                _text(v["error_type"]),
                _text(v["error_message"]),
                None if v.get("wake_at") is None else parse_time(_text(v["wake_at"])),
            )
            for v in doc["vertices"]
        )
        revision = doc["checkpoint_revision"]
        schema = doc["resume_schema"]
        if not vertices or not isinstance(revision, int) or isinstance(revision, bool):
            raise ValueError("malformed pending record")
        if schema is not None and not isinstance(schema, dict):
            raise ValueError("malformed resume schema")
        return Pending(PauseKind(doc["kind"]), vertices, revision, schema, bool(doc["failed"]))
    except (ValueError, KeyError, TypeError) as exc:
        raise CorruptRecordError(key, str(exc)) from exc


def _kind_of(data: bytes) -> PauseKind | None:
    """The kind a stored record names (None if it names none that is known)."""
    try:
        doc = json.loads(data)
        return PauseKind(doc["kind"]) if isinstance(doc, Mapping) else None
    except (ValueError, KeyError, TypeError):
        return None


def _text(value: object) -> str:
    if not isinstance(value, str):
        raise ValueError("expected a string")
    return value


class PendingStore:
    """The session's `Pending` records, one per run (the latest pause replaces the last)."""

    def __init__(self, kv: KV) -> None:
        self._kv = kv

    async def put(self, session_id: str, run_id: str, pending: Pending) -> None:
        """Store ``pending`` for the run (only the session's owner writes these, so a plain
        read-then-swap cannot race another writer; a damaged record is replaced)."""
        key = pending_key(session_id, run_id)
        data = _encode(pending)
        fence = fence_arg()  # the owner's lease, when it set one (`storage.fencing`)
        try:
            current: Entry | None = await self._kv.get(key)
        except KeyNotFoundError:
            current = None
        except CorruptDataError:
            await self._kv.delete(key, **fence)
            current = None
        before = None if current is None else _kind_of(current.value)
        if before is not None and before is not pending.kind:
            await self._kv.delete(_paused_key(session_id, before, run_id), **fence)
        with contextlib.suppress(ConflictError):  # marked already (the same kind again)
            await self._kv.put(
                _paused_key(session_id, pending.kind, run_id), b"", expected=0, **fence
            )
        if current is None:
            await self._kv.put(key, data, expected=0, **fence)
        elif current.value != data:
            await self._kv.put(key, data, expected=current.revision, **fence)

    async def get(self, session_id: str, run_id: str) -> Pending | None:
        key = pending_key(session_id, run_id)
        try:
            entry = await self._kv.get(key)
        except KeyNotFoundError:
            return None
        except CorruptDataError as exc:
            raise CorruptRecordError(key, str(exc)) from exc
        return _decode(key, entry.value)

    async def delete(self, session_id: str, run_id: str) -> None:
        await self._kv.delete(pending_key(session_id, run_id))
        for kind in PauseKind:
            await self._kv.delete(_paused_key(session_id, kind, run_id))
