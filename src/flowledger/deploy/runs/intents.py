"""`ToolIntents`: a durable note, before a tool node calls its tool, of what it is about to do.

A flow vertex runs at least once: after a crash, the vertex whose completion was not yet
durable runs again. For a tool that changes something, running again means calling it
twice. So before a call the node records an *intent* under its flow idempotency key (one
per run, step and vertex), and after the call its outcome:

* ``started``: the call may or may not have reached the server;
* ``done``: the call returned; its result is kept (at most `MAX_RESULT_BYTES`), so an
  execution after a crash reuses it instead of calling again;
* ``failed``: the tool answered with an error result (the call is known to have ended).

A node that finds ``started`` knows nothing about the first call, so it fails with
``tool_outcome_unknown`` (`ToolOutcomeUnknownError`), leaving the decision to a person
(or to the node's ``on_error``, when it names ``outcome_unknown``).
Tools annotated read-only or idempotent may simply be called again: their calls record no
``started`` or ``done`` intents (two fewer commits per call); a retrying node records
their failed attempts only (the attempt count).

Retries (docs/deploy.md, "Failures"): attempt ``n`` of a call has its own key (the flow
idempotency key for attempt 1, ``<key>#attempt<n>`` after it), so one intent record
still guards one call per attempt; a ``failed`` record carries the failure (``kind``,
``code``, bounded ``message``). The attempts a node made are the keys present in the
log: a restarted owner reads them and continues the count, it never resets it.

Storage: one append-only ledger log per graph run, ``deploy/intents/<graph run id>``, in
the database of the run's checkpoints; the latest record of a key is its state. Only the
run's owner appends (under compare-and-append on the tip, serialised per run in this
process). A segment reads the log once and keeps it in memory while the run executes.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final, Literal

from ... import storage

__all__ = ["MAX_RESULT_BYTES", "Intent", "ToolIntents", "attempt_key"]

MAX_RESULT_BYTES: Final = 256 * 1024
_VERSION: Final = 1
_PAGE: Final = 1000

IntentState = Literal["started", "done", "failed"]


@dataclass(frozen=True, slots=True)
class Intent:
    state: IntentState
    node: str
    tool: str
    result: Mapping[str, Any] | None
    failure: Mapping[str, Any] | None = None
    repeatable: bool = False  # the tool was read-only or idempotent when it was called


def attempt_key(idempotency_key: str, attempt: int) -> str:
    """The intent key of attempt ``attempt`` (1-based) of a call."""
    return idempotency_key if attempt == 1 else f"{idempotency_key}#attempt{attempt}"


def intent_log(graph_run_id: str) -> str:
    return storage.validate_name(f"deploy/intents/{graph_run_id}")


def _key(idempotency_key: str) -> str:
    return hashlib.sha256(idempotency_key.encode()).hexdigest()


class ToolIntents:
    def __init__(self, ledger: storage.Ledger) -> None:
        self._ledger = ledger
        self._known: dict[str, dict[str, Intent]] = {}  # graph run -> key -> latest
        self._locks: dict[str, asyncio.Lock] = {}

    def forget(self, graph_run_id: str) -> None:
        """Drop what is cached of a run (its segment ended; another owner may go on)."""
        self._known.pop(graph_run_id, None)
        self._locks.pop(graph_run_id, None)

    def _lock(self, graph_run_id: str) -> asyncio.Lock:
        lock = self._locks.get(graph_run_id)
        if lock is None:
            lock = self._locks[graph_run_id] = asyncio.Lock()
        return lock

    async def _load(self, graph_run_id: str) -> dict[str, Intent]:
        known = self._known.get(graph_run_id)
        if known is not None:
            return known
        name = intent_log(graph_run_id)
        known = {}
        after = 0
        while True:
            records = await self._ledger.read(name, after=after, limit=_PAGE)
            for record in records:
                key, intent = _decode(name, record)
                known[key] = intent
            if len(records) < _PAGE:
                break
            after = records[-1].seq
        self._known[graph_run_id] = known
        return known

    async def get(self, graph_run_id: str, idempotency_key: str) -> Intent | None:
        async with self._lock(graph_run_id):
            return (await self._load(graph_run_id)).get(_key(idempotency_key))

    async def record(
        self,
        graph_run_id: str,
        idempotency_key: str,
        state: IntentState,
        *,
        node: str,
        tool: str,
        result: Mapping[str, Any] | None = None,
        failure: Mapping[str, Any] | None = None,
        repeatable: bool = False,
    ) -> None:
        """Append ``state`` for the key (durable when this returns); a ``failed`` record
        may carry ``failure`` (JSON: kind, code, message)."""
        key = _key(idempotency_key)
        kept = None if result is None else dict(result)
        body = {
            "version": _VERSION,
            "key": key,
            "state": state,
            "node": node,
            "tool": tool,
            "result": kept,
        }
        failed = None if failure is None else dict(failure)
        if failed is not None:
            body["failure"] = failed
        if repeatable:
            body["repeatable"] = True
        data = json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode()
        name = intent_log(graph_run_id)
        async with self._lock(graph_run_id):
            known = await self._load(graph_run_id)
            for _ in range(8):
                tip = await self._ledger.tip(name)
                try:
                    await self._ledger.append(name, [data], expected=tip, **storage.fence_arg())
                    break
                except storage.LedgerConflictError:
                    continue
            else:
                raise RuntimeError(f"tool intents of run {graph_run_id}: the log kept moving")
            known[key] = Intent(state, node, tool, kept, failed, repeatable)


def _decode(name: str, record: storage.Record) -> tuple[str, Intent]:
    try:
        doc = json.loads(record.payload)
        state = doc["state"]
        if doc.get("version") != _VERSION or state not in ("started", "done", "failed"):
            raise ValueError("not a version 1 intent")
        result = doc.get("result")
        failure = doc.get("failure")
        intent = Intent(
            state,
            str(doc["node"]),
            str(doc["tool"]),
            result if isinstance(result, dict) else None,
            failure if isinstance(failure, dict) else None,
            doc.get("repeatable") is True,
        )
        return str(doc["key"]), intent
    except (ValueError, KeyError, TypeError) as exc:
        raise storage.CorruptDataError(f"record {record.seq} of log {name!r}") from exc
