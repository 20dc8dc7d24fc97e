"""Where a queued run stands: its scope and 1-based position, for `runs show` and tools."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from flowledger import storage

from ..records.run import Run, RunStatus
from .gate import QUEUE_PREFIX, queue_key, scope_names

__all__ = ["QueuedAt", "queued_at"]


@dataclass(frozen=True, slots=True)
class QueuedAt:
    """A pending run waiting for a slot of ``scope`` (``definition/<name>``,
    ``deployment/<session id>/<name>`` or ``session/<id>``), ``position`` among that
    scope's queue entries (1 = next)."""

    scope: str
    position: int

    def to_json(self) -> dict[str, Any]:
        return {"scope": self.scope, "position": self.position}


async def queued_at(kv: storage.KV, run: Run) -> QueuedAt | None:
    """The first scope queue ``run`` waits in, or None (not pending, or not queued).
    Entries of runs that left the queue without being dropped yet count until the next
    admission attempt reads them, so a position can be an overestimate, never too low."""
    if run.status is not RunStatus.PENDING:
        return None
    for kind, name in scope_names(run):
        scope = f"{kind}/{name}"
        keys = sorted(await kv.keys(f"{QUEUE_PREFIX}{scope}/"))
        mine = queue_key(scope, run)
        if mine in keys:
            return QueuedAt(scope, keys.index(mine) + 1)
    return None
