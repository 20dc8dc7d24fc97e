"""Who answered each pause of a run, and with what: `Answer`, `AnswerStore`, `answering`.

The owner records an answer when a resume takes effect (the run is marked running
again, `supervisor.resume.resume_locked`), whichever path brought it: a caller in its own
process, a front door's request (`requests`: the request carries who sent it), or the
owner's own timer loop (a parked run's timer, a request's deadline). An answer says

* ``checkpoint_revision``: the paused revision it answered;
* ``kind``: ``request`` (a payload for `flow.interrupt`), ``retry`` (an errored pause
  retried), ``timer`` (a parked run woken) or ``deadline`` (a request's ``on_timeout``);
* ``transport``: how it came (`TRANSPORTS`: ``cli``, ``mcp-http``, ``mcp-stdio``,
  ``web``, ``python`` for a direct Python call, ``owner`` for the owner's timer loop);
* ``session_id``: the session whose tools sent it (on an HTTP server, the session the
  caller's token serves);
* ``at``: when it took effect (UTC), and ``payload``: the JSON payload, if any.

The payload is the owner's data, like the state: it lives in the session's KV namespace
under ``sessions/<sid>/workflows/answers/<run>`` (JSON ``{"version":1,"answers":[...]}``,
the last `MAX_ANSWERS`, a payload over `MAX_PAYLOAD_BYTES` of JSON text kept as its
size only), never in the activity history nor in a tool result. A run resumed before
answers were recorded has none: readers say "not recorded".

How a resume came is request-scoped, like a trace context: the surface that takes the
call says it with `answering` (a context variable), so the transport-neutral tools and
the supervisor's ``resume(run_id, payload)`` keep their signatures.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final, Literal

from ...storage import KV, CorruptDataError, KeyNotFoundError, fence_arg, validate_name
from ..errors import CorruptRecordError
from .run import format_time, is_id, parse_time

__all__ = [
    "ANSWER_KINDS",
    "MAX_ANSWERS",
    "MAX_PAYLOAD_BYTES",
    "TRANSPORTS",
    "Answer",
    "AnswerStore",
    "answering",
    "answers_key",
    "current_transport",
]

MAX_ANSWERS: Final = 64
MAX_PAYLOAD_BYTES: Final = 16384
TRANSPORTS: Final = ("cli", "mcp-http", "mcp-stdio", "web", "python", "owner")
ANSWER_KINDS: Final = ("request", "retry", "timer", "deadline")
_VERSION: Final = 1

AnswerKind = Literal["request", "retry", "timer", "deadline"]

_transport: ContextVar[str] = ContextVar("flowledger_answering", default="python")


@contextmanager
def answering(transport: str) -> Iterator[None]:
    """Resumes started inside this block (in this task and the tasks it creates) came
    through ``transport`` (one of `TRANSPORTS`)."""
    if transport not in TRANSPORTS:
        raise ValueError(f"transport must be one of {', '.join(TRANSPORTS)}, not {transport!r}")
    token = _transport.set(transport)
    try:
        yield
    finally:
        _transport.reset(token)


def current_transport() -> str:
    """How the resume being made now came (``python`` when no surface said)."""
    return _transport.get()


@dataclass(frozen=True, slots=True)
class Answer:
    checkpoint_revision: int
    kind: AnswerKind
    transport: str
    session_id: str
    at: datetime
    payload: Any = None  # JSON data; None without one
    payload_bytes: int = 0  # its size as JSON text (0: none)
    payload_kept: bool = True  # False when it was over MAX_PAYLOAD_BYTES

    @classmethod
    def of(
        cls,
        checkpoint_revision: int,
        kind: AnswerKind,
        transport: str,
        session_id: str,
        at: datetime,
        payload_text: bytes | str | None,
    ) -> Answer:
        """An answer whose payload is the JSON text the resume was made with."""
        if payload_text is None or payload_text in ("", b""):
            return cls(checkpoint_revision, kind, transport, session_id, at)
        size = len(payload_text if isinstance(payload_text, bytes) else payload_text.encode())
        if size > MAX_PAYLOAD_BYTES:
            return cls(checkpoint_revision, kind, transport, session_id, at, None, size, False)
        return cls(
            checkpoint_revision, kind, transport, session_id, at, json.loads(payload_text), size
        )

    def to_json(self) -> dict[str, Any]:
        document: dict[str, Any] = {
            "checkpoint_revision": self.checkpoint_revision,
            "kind": self.kind,
            "transport": self.transport,
            "session_id": self.session_id,
            "at": format_time(self.at),
        }
        if self.payload_bytes:
            document["payload_bytes"] = self.payload_bytes
            if self.payload_kept:
                document["payload"] = self.payload
        return document

    @classmethod
    def from_json(cls, document: Mapping[str, Any]) -> Answer:
        revision = document["checkpoint_revision"]
        kind = document["kind"]
        transport = document["transport"]
        session_id = document["session_id"]
        size = document.get("payload_bytes", 0)
        if not isinstance(revision, int) or isinstance(revision, bool) or revision < 0:
            raise ValueError("checkpoint_revision must be a whole number")
        if kind not in ANSWER_KINDS or transport not in TRANSPORTS:
            raise ValueError(f"unknown kind {kind!r} or transport {transport!r}")
        if not is_id(session_id):
            raise ValueError("session_id must be a session ID")
        if not isinstance(size, int) or isinstance(size, bool) or size < 0:
            raise ValueError("payload_bytes must be a whole number")
        return cls(
            revision,
            kind,
            transport,
            session_id,
            parse_time(str(document["at"])),
            document.get("payload"),
            size,
            "payload" in document or not size,
        )


def answers_key(session_id: str, run_id: str) -> str:
    """``sessions/<sid>/workflows/answers/<rid>``."""
    if not is_id(session_id) or not is_id(run_id):
        raise ValueError("answers_key needs a session ID and a run ID")
    return validate_name(f"sessions/{session_id}/workflows/answers/{run_id}")


def _decode(key: str, data: bytes) -> list[Answer]:
    try:
        document = json.loads(data)
        if not isinstance(document, Mapping) or document.get("version") != _VERSION:
            raise ValueError("not a version 1 answers record")
        items = document["answers"]
        if not isinstance(items, list):
            raise ValueError("answers must be a list")
        return [Answer.from_json(item) for item in items]
    except (ValueError, KeyError, TypeError) as exc:
        raise CorruptRecordError(key, str(exc)) from exc


def _encode(answers: list[Answer]) -> bytes:
    body = {"version": _VERSION, "answers": [answer.to_json() for answer in answers]}
    return json.dumps(body, separators=(",", ":"), ensure_ascii=False).encode()


class AnswerStore:
    """The session's answers, one record per run (the newest `MAX_ANSWERS` answers)."""

    def __init__(self, kv: KV) -> None:
        self._kv = kv

    async def add(self, session_id: str, run_id: str, answer: Answer) -> None:
        """Append ``answer`` (only the session's owner writes these, under its lease; an
        answer for a revision already recorded replaces it: the owner that recorded it
        lost its segment, and this one carries the same resume out again)."""
        key = answers_key(session_id, run_id)
        fence = fence_arg()  # the owner's lease, when it set one (`storage.fencing`)
        try:
            current = await self._kv.get(key)
        except KeyNotFoundError:
            await self._kv.put(key, _encode([answer]), expected=0, **fence)
            return
        except CorruptDataError:
            await self._kv.delete(key, **fence)
            await self._kv.put(key, _encode([answer]), expected=0, **fence)
            return
        try:
            kept = _decode(key, current.value)
        except CorruptRecordError:
            kept = []  # a damaged record is replaced rather than blocking the resume
        kept = [item for item in kept if item.checkpoint_revision != answer.checkpoint_revision]
        kept = [*kept, answer][-MAX_ANSWERS:]
        await self._kv.put(key, _encode(kept), expected=current.revision, **fence)

    async def get(self, session_id: str, run_id: str) -> list[Answer] | None:
        """The run's answers, oldest first; None when none was ever recorded.
        `CorruptRecordError` for a damaged record."""
        key = answers_key(session_id, run_id)
        try:
            entry = await self._kv.get(key)
        except KeyNotFoundError:
            return None
        except CorruptDataError as exc:
            raise CorruptRecordError(key, str(exc)) from exc
        return _decode(key, entry.value)
