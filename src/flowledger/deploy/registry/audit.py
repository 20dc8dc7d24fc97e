"""`CallAudit`: the append-only log of one session's ``capability_call`` attempts.

One ledger log per session, ``deploy/audit/<session id>``, in the session's database.
A record says who (the session, and the door it came through: ``mcp``, ``web``,
``cli``), when, which source (and revision) and tool, and the outcome; never the
arguments, never the result, never an error's text (a server's error message may
quote the arguments): only its stable ``code``.

A call that is attempted is recorded *before* anything is sent (``started``), then
with how it ended (``ok``, ``tool_error``, ``timeout``, ...) and its duration, under
the same ``call`` id; so a call that was cut short by a crash still shows as started.
A call refused before anything could be sent (not read-only, arguments that do not
match the tool's schema, too many calls at once, the source missing or disabled) is
one record with that outcome. If the ``started`` record cannot be written, the call is
not made.

Records are JSON, compare-and-appended on the log's tip (retried against writers of
other processes). Readers page forwards by sequence number (`read`).
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Final, Literal

from ... import storage
from .errors import RegistryError

__all__ = [
    "MAX_AUDIT_PAGE",
    "OUTCOMES",
    "AuditCorruptError",
    "AuditEntry",
    "CallAudit",
    "Outcome",
    "audit_log",
]

MAX_AUDIT_PAGE: Final = 100
_VERSION: Final = 1
_RETRIES: Final = 32

Outcome = Literal[
    "started",  # about to connect and call; nothing known yet
    "ok",  # the tool answered
    "tool_error",  # the tool answered with an error result (isError)
    "timeout",  # no answer within the call timeout: outcome unknown
    "unreachable",  # the source did not start or answer the handshake: nothing sent
    "refused",  # not read-only and not on the source's call_tools: nothing sent
    "invalid_arguments",  # the arguments do not match the tool's input schema: nothing sent
    "tool_missing",  # the server does not list the tool: nothing sent
    "unavailable",  # source missing, disabled, or a secret not granted: nothing sent
    "busy",  # too many calls of this session at once: nothing sent
    "failed",  # anything else (the connection broke, a protocol error): see code
    "cancelled",  # the caller went away during the call: outcome unknown
]
OUTCOMES: Final = frozenset(Outcome.__args__)  # type: ignore[attr-defined]


def audit_log(session_id: str) -> str:
    return storage.validate_name(f"deploy/audit/{session_id}")


def _now() -> str:
    moment = datetime.now(UTC)
    return f"{moment:%Y-%m-%dT%H:%M:%S}.{moment.microsecond:06d}Z"


@dataclass(frozen=True)
class AuditEntry:
    """One record of the log (what readers are shown)."""

    seq: int
    call: str
    at: str
    session: str
    transport: str
    source: str
    revision: int | None
    tool: str
    outcome: str
    code: str | None
    duration_ms: float | None

    def to_json(self) -> dict[str, Any]:
        return {
            "seq": self.seq,
            "call": self.call,
            "at": self.at,
            "session": self.session,
            "transport": self.transport,
            "source": self.source,
            "revision": self.revision,
            "tool": self.tool,
            "outcome": self.outcome,
            "code": self.code,
            "duration_ms": self.duration_ms,
        }


class CallAudit:
    """The audit log of ``session_id`` in ``ledger``; ``transport`` names the door."""

    def __init__(self, ledger: storage.Ledger, session_id: str, transport: str) -> None:
        self._ledger = ledger
        self.session_id = session_id
        self.transport = transport
        self._name = audit_log(session_id)
        self._lock = asyncio.Lock()  # one appender at a time in this process

    async def record(
        self,
        call: str,
        source: str,
        revision: int | None,
        tool: str,
        outcome: Outcome,
        *,
        code: str | None = None,
        duration_ms: float | None = None,
    ) -> int:
        """Append one record; its sequence number. Storage errors pass through."""
        if outcome not in OUTCOMES:
            raise ValueError(f"unknown audit outcome {outcome!r}")
        data = json.dumps(
            {
                "v": _VERSION,
                "call": call,
                "at": _now(),
                "session": self.session_id,
                "transport": self.transport,
                "source": source,
                "revision": revision,
                "tool": tool,
                "outcome": outcome,
                "code": code,
                "duration_ms": None if duration_ms is None else round(duration_ms, 1),
            },
            separators=(",", ":"),
            sort_keys=True,
        ).encode()
        async with self._lock:
            for attempt in range(_RETRIES):
                tip = await self._ledger.tip(self._name)
                try:
                    return await self._ledger.append(self._name, [data], expected=tip)
                except storage.LedgerConflictError:
                    if attempt == _RETRIES - 1:
                        raise  # the log kept moving under writers of other processes
        raise AssertionError("unreachable")

    async def read(self, *, after: int = 0, limit: int = 50) -> tuple[list[AuditEntry], int | None]:
        """Up to ``limit`` records after sequence number ``after``, oldest first, and the
        ``after`` of the next page (``None`` at the end)."""
        if not 1 <= limit <= MAX_AUDIT_PAGE:
            raise ValueError(f"limit must be 1..{MAX_AUDIT_PAGE}")
        if after < 0:
            raise ValueError("after must not be negative")
        records = await self._ledger.read(self._name, after=after, limit=limit + 1)
        entries = [_entry(record) for record in records[:limit]]
        following = entries[-1].seq if len(records) > limit else None
        return entries, following


def _entry(record: storage.Record) -> AuditEntry:
    try:
        data = json.loads(record.payload)
        revision = data.get("revision")
        duration = data.get("duration_ms")
        return AuditEntry(
            seq=record.seq,
            call=str(data["call"]),
            at=str(data["at"]),
            session=str(data["session"]),
            transport=str(data["transport"]),
            source=str(data["source"]),
            revision=None if revision is None else int(revision),
            tool=str(data["tool"]),
            outcome=str(data["outcome"]),
            code=None if data.get("code") is None else str(data["code"]),
            duration_ms=None if duration is None else float(duration),
        )
    except (ValueError, KeyError, TypeError) as exc:
        raise AuditCorruptError(record.seq, type(exc).__name__) from None


class AuditCorruptError(RegistryError):
    """A record of the audit log cannot be read as one."""

    code = "audit_corrupt"

    def __init__(self, seq: int, detail: str) -> None:
        super().__init__("audit", f"audit record {seq} is damaged: {detail}")
        self.seq = seq
