"""Which run a node execution belongs to, when it runs inside a foreach item's child.

A foreach whose body is a child artifact runs the child once per item as a *nested*
flow run (`flowledger.deploy.runs.compile`): its own graph and in-memory checkpoints,
with a run id derived from the foreach step's idempotency key and the item's index, so
the same item of the same step gets the same id after a restart. Everything durable the
child's nodes do belongs to the run that owns the foreach (the *owner*): its source
pool, pinned contracts and sources, tool intents (keyed by the nested run's idempotency
keys, which hold the nested id) and trace (entries named ``<foreach>[<index>]/<node>``).
`enter` marks the current asyncio task as executing such an item; `owner_run` and
`trace_prefix` read the mark (the flow engine's tasks copy it with their context).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Final

from ... import flow

__all__ = ["enter", "item_run_id", "owner_run", "trace_prefix"]

# Fixed: the nested run ids of every deployment must stay the same across versions.
_NAMESPACE: Final = uuid.UUID("6f0a3c52-8a57-4d0e-9a5b-7f3f3f0c1e21")


@dataclass(frozen=True)
class _Item:
    owner: str  # the graph run id of the run that owns the foreach
    prefix: str  # what trace entries of the child's nodes are named under


_ITEM: ContextVar[_Item | None] = ContextVar("flowledger_foreach_item", default=None)


def item_run_id(idempotency_key: str, index: int) -> str:
    """The nested run id of item ``index`` of the foreach step ``idempotency_key``."""
    return str(uuid.uuid5(_NAMESPACE, f"{idempotency_key}/item={index}"))


def owner_run(info: flow.RunInfo) -> str:
    """The graph run id whose pool, pins, intents and trace ``info``'s execution uses."""
    item = _ITEM.get()
    return info.graph_run_id if item is None else item.owner


def trace_prefix() -> str:
    """``""``, or ``"each[3]/"`` (nested: ``"each[3]/inner[0]/"``) inside an item."""
    item = _ITEM.get()
    return "" if item is None else item.prefix


@contextmanager
def enter(info: flow.RunInfo, name: str, index: int) -> Iterator[None]:
    """While item ``index`` of foreach ``name`` (executing as ``info``) runs its child."""
    token = _ITEM.set(_Item(owner_run(info), f"{trace_prefix()}{name}[{index}]/"))
    try:
        yield
    finally:
        _ITEM.reset(token)
