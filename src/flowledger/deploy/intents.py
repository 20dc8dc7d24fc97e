"""`ToolIntents`: a durable note, before a tool node calls its tool, of what it is about to do.

A flow vertex runs at least once: after a crash, the vertex whose completion was not yet
durable runs again. For a tool that changes something, running again means calling it
twice. So before a call the node records an *intent* under its flow idempotency key (one
per run, step and vertex), and after the call its outcome:

* ``started``: the call may or may not have reached the server;
* ``done``: the call returned; its result is kept (at most `MAX_RESULT_BYTES`), so an
  execution after a crash reuses it instead of calling again;
* ``failed``: the tool answered with an error result (the call is known to have ended).

A node that finds ``started`` knows nothing about the first call. It calls again only if
the tool is annotated read-only or idempotent; otherwise it fails with
``tool_outcome_unknown`` (`ToolOutcomeUnknownError`), leaving the decision to a person.

Records live in storage KV under ``deploy/intents/<graph run id>/<digest of the key>``;
only the run's owner writes them (the key is per run), so create-only and
compare-and-swap writes never race another writer.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final, Literal

from .. import storage

__all__ = ["MAX_RESULT_BYTES", "Intent", "ToolIntents"]

MAX_RESULT_BYTES: Final = 256 * 1024
_VERSION: Final = 1

IntentState = Literal["started", "done", "failed"]


@dataclass(frozen=True, slots=True)
class Intent:
    state: IntentState
    node: str
    tool: str
    result: Mapping[str, Any] | None
    revision: int


def _key(graph_run_id: str, idempotency_key: str) -> str:
    digest = hashlib.sha256(idempotency_key.encode()).hexdigest()
    return storage.validate_name(f"deploy/intents/{graph_run_id}/{digest}")


def _encode(state: IntentState, node: str, tool: str, result: Mapping[str, Any] | None) -> bytes:
    body = {"version": _VERSION, "state": state, "node": node, "tool": tool, "result": result}
    return json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode()


class ToolIntents:
    def __init__(self, kv: storage.KV) -> None:
        self._kv = kv

    async def get(self, graph_run_id: str, idempotency_key: str) -> Intent | None:
        key = _key(graph_run_id, idempotency_key)
        try:
            entry = await self._kv.get(key)
        except storage.KeyNotFoundError:
            return None
        doc = json.loads(entry.value)
        if not isinstance(doc, dict) or doc.get("version") != _VERSION:
            raise storage.CorruptDataError(key)
        state = doc.get("state")
        if state not in ("started", "done", "failed"):
            raise storage.CorruptDataError(key)
        result = doc.get("result")
        return Intent(
            state,
            str(doc.get("node", "")),
            str(doc.get("tool", "")),
            result if isinstance(result, dict) else None,
            entry.revision,
        )

    async def begin(
        self, graph_run_id: str, idempotency_key: str, node: str, tool: str, current: Intent | None
    ) -> int:
        """Record ``started`` (over ``current``, the intent found, if any); its revision."""
        key = _key(graph_run_id, idempotency_key)
        expected = 0 if current is None else current.revision
        return await self._kv.put(key, _encode("started", node, tool, None), expected=expected)

    async def end(
        self,
        graph_run_id: str,
        idempotency_key: str,
        node: str,
        tool: str,
        revision: int,
        *,
        result: Mapping[str, Any] | None,
        failed: bool,
    ) -> None:
        """Record the call's outcome over the ``started`` intent at ``revision``."""
        key = _key(graph_run_id, idempotency_key)
        state: IntentState = "failed" if failed else "done"
        await self._kv.put(key, _encode(state, node, tool, result), expected=revision)
