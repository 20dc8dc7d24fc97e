"""How full a limited scope is: the runs holding its slots and the runs queued for one,
for the dashboard's queues panel and ``limits show``. Counts are read, not kept: a
slot counts while its holder is not terminal, a queue entry while its run is pending
(the rules the gate decides by, `gate`), so they are right as of the read."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from flowledger import storage

from ..errors import NotFoundError
from ..records.registry import RunRegistry
from ..records.run import Run, RunStatus
from .gate import QUEUE_PREFIX, SLOTS_PREFIX

__all__ = ["Occupancy", "occupancy"]


@dataclass(frozen=True, slots=True)
class Occupancy:
    """``running`` runs hold slots of ``scope`` (at most ``max_running``); ``queued`` wait."""

    scope: str
    max_running: int
    running: int
    queued: int

    def to_json(self) -> dict[str, Any]:
        return {
            "scope": self.scope,
            "max_running": self.max_running,
            "running": self.running,
            "queued": self.queued,
        }


async def _holder(kv: storage.KV, registry: RunRegistry, key: str) -> Run | None:
    try:
        holder = json.loads((await kv.get(key)).value)
        return await registry.get(str(holder["session"]), str(holder["run"]))
    except (storage.KeyNotFoundError, NotFoundError, ValueError, KeyError, TypeError):
        return None


async def occupancy(
    kv: storage.KV, registry: RunRegistry, scope: str, max_running: int
) -> Occupancy:
    """The occupancy of ``scope`` (``definition/<name>`` or ``session/<id>``)."""
    running = 0
    for key in await kv.keys(f"{SLOTS_PREFIX}{scope}/"):
        run = await _holder(kv, registry, key)
        if run is not None and not run.status.terminal:
            running += 1
    queued = 0
    for key in await kv.keys(f"{QUEUE_PREFIX}{scope}/"):
        run = await _holder(kv, registry, key)
        if run is not None and run.status is RunStatus.PENDING and not run.cancel_requested:
            queued += 1
    return Occupancy(scope, max_running, running, queued)
