"""`RunRequests`: durable resume and cancel requests, for sessions owned elsewhere.

A front door (a CLI command or an MCP server that does not own the session) cannot
execute anything; it writes a request, and the session's owner (a worker's supervisor)
acts on it. Both kinds live in the session's KV namespace:

* ``sessions/<sid>/workflows/resume-requests/<run>`` - one resume of one interrupted
  run, bound to the run's checkpoint revision at the time of the request (the
  interrupt it answers). JSON ``{"version":1,"payload":<canonical resume JSON text, or
  "" for the retry of an errored pause, which takes no payload>,
  "checkpoint_revision":R,"requested_at":T,"state":S,"error":E}``; ``state`` is
  ``requested`` (waiting), ``accepted`` (the owner is executing it: from then on it
  may only be carried out, never refused or withdrawn) or ``failed`` (refused, with an
  ``error`` code from `RESUME_ERRORS`, for the front door to report and delete);
  ``transport`` says how the front door was reached (`answers.TRANSPORTS`; absent in
  requests written before it existed: ``python``), for the owner's `answers`. The
  owner deletes the request once the resumed segment has ended. Only one request per
  run can wait: a second front door gets `ConflictError`. The revision binding makes
  a crash harmless: a request left behind after its resume took effect no longer
  matches the run, and an accepted one whose resume never reached a checkpoint is
  carried out again by the next owner (exactly one resume takes effect).
* ``sessions/<sid>/workflows/cancel-requests/<run>`` - the doorbell of a cancellation:
  ``{"version":1,"reason":...,"requested_at":T}``. The durable intent itself is the
  run record's ``cancel_requested`` (which any owner's reconciliation honours); the
  doorbell carries the reason and lets the owner notice at once, without re-reading
  every run record. The owner deletes it once the run is cancelled (or terminal).

Every request also rings a *bell*: ``workflows/bells/<sid>/<run>``, written right after
the request record. Bells live under one global prefix, so a worker learns which of its
sessions have new requests from the one listing it makes per tick anyway, and reads the
request records of a session only when it has a bell (or still has requests it is
working on, or once in a while as a safety net). An owner silences (deletes) a session's
bells *before* reading its request records, so a request written after that read always
comes with a bell that is still ringing.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from typing import Any, Final, Literal

from ...storage import KV, CorruptDataError, KeyNotFoundError, fence_arg, validate_name
from ...storage import ConflictError as StorageConflictError
from ..errors import ConflictError, CorruptRecordError
from .answers import TRANSPORTS
from .run import is_id
from .wakeups import waking_session

__all__ = [
    "BELLS_PREFIX",
    "MAX_REASON_BYTES",
    "RESUME_ERRORS",
    "CancelRequest",
    "ResumeRequest",
    "RunRequests",
    "bell_key",
    "cancel_request_key",
    "resume_request_key",
]

BELLS_PREFIX: Final = "workflows/bells/"
REQUEST_VERSION: Final = 1
MAX_REASON_BYTES: Final = 512
MAX_REQUEST_BYTES: Final = 300_000

ResumeState = Literal["requested", "accepted", "failed"]
# Why an owner refused a resume request (the front door turns them into typed errors).
RESUME_ERRORS: Final = {
    "not_interrupted": "run is not interrupted",
    "stale": "the run moved past the interrupt this resume answers",
    "invalid": "the owner's definition refused the resume payload",
    "blocked": "the run cannot be resumed now (its readiness is blocked)",
    "failed": "the resume failed",
    "withdrawn": "the request was withdrawn",
}


def _session_prefix(session_id: str, kind: str) -> str:
    if not is_id(session_id):
        raise ValueError(f"session ID must be a nonzero lowercase UUID, not {session_id!r}")
    return f"sessions/{session_id}/workflows/{kind}/"


def resume_request_key(session_id: str, run_id: str) -> str:
    if not is_id(run_id):
        raise ValueError(f"run ID must be a nonzero lowercase UUID, not {run_id!r}")
    return validate_name(_session_prefix(session_id, "resume-requests") + run_id)


def cancel_request_key(session_id: str, run_id: str) -> str:
    if not is_id(run_id):
        raise ValueError(f"run ID must be a nonzero lowercase UUID, not {run_id!r}")
    return validate_name(_session_prefix(session_id, "cancel-requests") + run_id)


def bell_key(session_id: str, run_id: str) -> str:
    """``workflows/bells/<session>/<run>``: a request for the run is waiting."""
    if not is_id(session_id) or not is_id(run_id):
        raise ValueError("bell: session and run IDs must be nonzero lowercase UUIDs")
    return validate_name(f"{BELLS_PREFIX}{session_id}/{run_id}")


@dataclass(frozen=True)
class ResumeRequest:
    session_id: str
    run_id: str
    payload: bytes
    checkpoint_revision: int
    requested_at: float
    state: ResumeState = "requested"
    error: str = ""
    revision: int = 0  # the KV revision (compare-and-swap token), never stored
    transport: str = "python"  # how the front door was reached (`answers.TRANSPORTS`)


@dataclass(frozen=True)
class CancelRequest:
    session_id: str
    run_id: str
    reason: str
    requested_at: float


def _dumps(document: dict[str, Any]) -> bytes:
    return json.dumps(document, separators=(",", ":"), ensure_ascii=False).encode()


def _load(key: str, data: bytes) -> dict[str, Any]:
    try:
        document = json.loads(data)
    except (ValueError, RecursionError) as exc:
        raise CorruptRecordError(key, f"invalid JSON: {exc}") from None
    if not isinstance(document, dict) or document.get("version") != REQUEST_VERSION:
        raise CorruptRecordError(key, "not a version 1 request")
    return document


def _encode_resume(request: ResumeRequest) -> bytes:
    document = {
        "version": REQUEST_VERSION,
        "payload": request.payload.decode("utf-8"),
        "checkpoint_revision": request.checkpoint_revision,
        "requested_at": request.requested_at,
        "state": request.state,
        "error": request.error,
    }
    if request.transport != "python":
        document["transport"] = request.transport
    return _dumps(document)


def _decode_resume(
    session_id: str, run_id: str, key: str, data: bytes, revision: int
) -> ResumeRequest:
    document = _load(key, data)
    payload = document.get("payload")
    checkpoint = document.get("checkpoint_revision")
    state = document.get("state")
    error = document.get("error", "")
    at = document.get("requested_at", 0.0)
    transport = document.get("transport", "python")
    if (
        transport not in TRANSPORTS
        or not isinstance(payload, str)
        or not isinstance(checkpoint, int)
        or isinstance(checkpoint, bool)
        or checkpoint < 0
        or state not in ("requested", "accepted", "failed")
        or not isinstance(error, str)
        or not isinstance(at, int | float)
    ):
        raise CorruptRecordError(key, "malformed resume request")
    return ResumeRequest(
        session_id,
        run_id,
        payload.encode("utf-8"),
        checkpoint,
        float(at),
        state,
        error,
        revision,
        transport,
    )


class RunRequests:
    """Write, read, accept, refuse and delete resume and cancel requests."""

    def __init__(self, kv: KV, *, clock: Callable[[], float] = time.time) -> None:
        self.kv = kv
        self._clock = clock

    # -- resume ----------------------------------------------------------------------------

    async def request_resume(
        self,
        session_id: str,
        run_id: str,
        payload: bytes,
        checkpoint_revision: int,
        *,
        transport: str = "python",
    ) -> ResumeRequest:
        """Queue a resume of the interrupt at ``checkpoint_revision`` (``transport``: how
        it came, `answers.TRANSPORTS`). A waiting or accepted
        request for the same interrupt is a `ConflictError`; a refused one, or one for an
        older interrupt, is replaced."""
        key = resume_request_key(session_id, run_id)
        request = ResumeRequest(
            session_id,
            run_id,
            bytes(payload),
            checkpoint_revision,
            self._clock(),
            transport=transport,
        )
        data = _encode_resume(request)
        if len(data) > MAX_REQUEST_BYTES:
            raise ValueError(f"resume request exceeds {MAX_REQUEST_BYTES} bytes")
        for _ in range(4):
            current = await self.resume_request(session_id, run_id)
            expected = 0
            if current is not None:
                replaceable = current.state == "failed" or (
                    current.state == "requested"
                    and current.checkpoint_revision < checkpoint_revision
                )
                if not replaceable:
                    raise ConflictError(
                        session_id, run_id, "a resume of this run is already requested"
                    )
                expected = current.revision
            try:
                revision = await self.kv.put(key, data, expected=expected)
            except StorageConflictError:
                continue  # the request changed under us: look again
            await self.ring(session_id, run_id)
            return replace(request, revision=revision)
        raise ConflictError(session_id, run_id, "a resume of this run is already requested")

    async def resume_request(self, session_id: str, run_id: str) -> ResumeRequest | None:
        key = resume_request_key(session_id, run_id)
        try:
            entry = await self.kv.get(key)
        except KeyNotFoundError:
            return None
        except CorruptDataError as exc:
            raise CorruptRecordError(key, exc) from exc
        return _decode_resume(session_id, run_id, key, entry.value, entry.revision)

    async def resume_ids(self, session_id: str) -> list[str]:
        """The runs of the session with a resume request (in any state)."""
        prefix = _session_prefix(session_id, "resume-requests")
        return [k[len(prefix) :] for k in await self.kv.keys(prefix) if is_id(k[len(prefix) :])]

    async def accept_resume(self, request: ResumeRequest) -> ResumeRequest:
        """Mark the request accepted (compare-and-swap; `ConflictError` if it changed)."""
        return await self._swap(replace(request, state="accepted", error=""))

    async def refuse_resume(self, request: ResumeRequest, code: str) -> ResumeRequest:
        """Mark the request failed with an error code of `RESUME_ERRORS`."""
        if code not in RESUME_ERRORS:
            raise ValueError(f"unknown resume error code {code!r}")
        return await self._swap(replace(request, state="failed", error=code))

    async def delete_resume(self, session_id: str, run_id: str) -> None:
        await self.kv.delete(resume_request_key(session_id, run_id), **fence_arg())

    async def _swap(self, request: ResumeRequest) -> ResumeRequest:
        key = resume_request_key(request.session_id, request.run_id)
        try:
            data = _encode_resume(request)
            revision = await self.kv.put(key, data, expected=request.revision, **fence_arg())
        except StorageConflictError as exc:
            raise ConflictError(
                request.session_id,
                request.run_id,
                "the resume request changed",
                expected=request.revision,
                actual=exc.actual,
            ) from exc
        return replace(request, revision=revision)

    # -- cancel ----------------------------------------------------------------------------

    async def request_cancel(self, session_id: str, run_id: str, reason: str) -> None:
        """Ring the cancel doorbell (a later request's reason replaces an earlier one's)."""
        key = cancel_request_key(session_id, run_id)
        reason = reason.encode("utf-8", errors="replace")[:MAX_REASON_BYTES].decode(
            "utf-8", errors="ignore"
        )
        data = _dumps({"version": REQUEST_VERSION, "reason": reason, "requested_at": self._clock()})
        for _ in range(4):
            try:
                entry = await self.kv.get(key)
                expected = entry.revision
            except KeyNotFoundError:
                expected = 0
            try:
                await self.kv.put(key, data, expected=expected)
            except StorageConflictError:
                continue
            await self.ring(session_id, run_id)
            return
        raise ConflictError(session_id, run_id, "the cancel request kept changing")

    async def cancel_request(self, session_id: str, run_id: str) -> CancelRequest | None:
        key = cancel_request_key(session_id, run_id)
        try:
            entry = await self.kv.get(key)
        except KeyNotFoundError:
            return None
        except CorruptDataError as exc:
            raise CorruptRecordError(key, exc) from exc
        document = _load(key, entry.value)
        reason = document.get("reason", "")
        at = document.get("requested_at", 0.0)
        if not isinstance(reason, str) or not isinstance(at, int | float):
            raise CorruptRecordError(key, "malformed cancel request")
        return CancelRequest(session_id, run_id, reason, float(at))

    async def cancel_ids(self, session_id: str) -> list[str]:
        prefix = _session_prefix(session_id, "cancel-requests")
        return [k[len(prefix) :] for k in await self.kv.keys(prefix) if is_id(k[len(prefix) :])]

    async def delete_cancel(self, session_id: str, run_id: str) -> None:
        await self.kv.delete(cancel_request_key(session_id, run_id), **fence_arg())

    # -- bells -----------------------------------------------------------------------------

    async def ring(self, session_id: str, run_id: str) -> None:
        """Ring the run's bell (after writing a request record)."""
        key = bell_key(session_id, run_id)
        # The bell is the write that makes the request visible: its commit wakes the owner.
        with contextlib.suppress(StorageConflictError), waking_session(session_id):
            await self.kv.put(key, b"{}", expected=0)  # a conflict: it is ringing already

    async def bells(self, session_id: str) -> list[str]:
        """The runs of one session whose bell rings."""
        prefix = f"{BELLS_PREFIX}{session_id}/"
        return [k[len(prefix) :] for k in await self.kv.keys(prefix) if is_id(k[len(prefix) :])]

    async def silence(self, session_id: str, run_ids: Iterable[str]) -> None:
        """Delete bells (before reading the request records they announce)."""
        for run_id in run_ids:
            await self.kv.delete(bell_key(session_id, run_id))
