"""Admission: `max_running` limits per definition and per session, and the FIFO queue.

`limits` keeps the operator's limits (JSON records in the KV store); `gate` admits a
pending run into a slot or queues it; `position` reads where a queued run stands.
"""

from __future__ import annotations

from .gate import Admission, Scope
from .limits import LIMITS_PREFIX, InvalidLimitError, Limits, validate_limit
from .occupancy import Occupancy, occupancy
from .position import QueuedAt, queued_at

__all__ = [
    "LIMITS_PREFIX",
    "Admission",
    "InvalidLimitError",
    "Limits",
    "Occupancy",
    "QueuedAt",
    "Scope",
    "occupancy",
    "queued_at",
    "validate_limit",
]
