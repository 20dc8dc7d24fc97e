"""Retention: removing finished runs an application no longer needs.

A `RetentionPolicy` says which terminal runs are old enough to go; `prune` (`pruning`) is
one pass over a session that removes them with everything they own (record, input claims,
activity journal, pending entry); `storage` sweeps the attachments no remaining run refers
to; a `RetentionSchedule` (`schedule`) runs the pass periodically inside a worker.
"""

from .pruning import (
    InvalidDurationError,
    InvalidStatusError,
    PruneBusyError,
    PruneReport,
    RetentionError,
    RetentionPolicy,
    parse_duration,
    parse_statuses,
    prune,
)
from .schedule import RetentionSchedule
from .storage import RetentionStorage

__all__ = [
    "InvalidDurationError",
    "InvalidStatusError",
    "PruneBusyError",
    "PruneReport",
    "RetentionError",
    "RetentionPolicy",
    "RetentionSchedule",
    "RetentionStorage",
    "parse_duration",
    "parse_statuses",
    "prune",
]
