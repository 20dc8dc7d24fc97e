"""Retention: deleting a session's finished runs an application no longer needs.

A `RetentionPolicy` says which terminal runs are old enough to go; `prune` (`pruning`) is
one pass over a session that deletes them with their data (record, index entries, pending
record, activity journal, checkpoint log, and the input blob once no remaining run refers
to it); `RetentionStorage` (`storage`) is the storage operations a pass needs, including
the sweep of attachments no log refers to any more; a `RetentionSchedule` (`schedule`)
runs passes periodically over the sessions a worker owns.
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
