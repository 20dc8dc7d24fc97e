"""A thread's config and a checkpoint of ``n`` items, for tests that call the saver's
``put`` directly (not through a graph)."""

from __future__ import annotations

from typing import Any

from langgraph.checkpoint.base import empty_checkpoint

CONFIG = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}


def checkpoint(n: int) -> dict[str, Any]:
    cp: dict[str, Any] = dict(empty_checkpoint())
    cp["channel_values"] = {"items": list(range(n))}
    cp["channel_versions"] = {"items": n + 1}
    return cp
