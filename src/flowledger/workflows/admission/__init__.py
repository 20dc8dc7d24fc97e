"""Admission: `max_running` limits per definition, per deployment and per session, and the
FIFO queue.

`limits` keeps the operator's limits (JSON records in the KV store); `gate` admits a
pending run into a slot or queues it; `position` reads where a queued run stands.
"""

from __future__ import annotations

from .gate import Admission, Scope
from .limits import (
    LIMITS_PREFIX,
    SCOPE_KINDS,
    InvalidLimitError,
    Limits,
    deployment_scope_name,
    is_deployed_version,
    validate_limit,
)
from .occupancy import Occupancy, occupancy
from .position import QueuedAt, queued_at

__all__ = [
    "LIMITS_PREFIX",
    "SCOPE_KINDS",
    "Admission",
    "InvalidLimitError",
    "Limits",
    "Occupancy",
    "QueuedAt",
    "Scope",
    "deployment_scope_name",
    "is_deployed_version",
    "occupancy",
    "queued_at",
    "validate_limit",
]
