"""Activities: the bounded, safe history of what a run did, and how it reaches readers.

`activity` projects a run's checkpoints into `ActivityRecord` entries with stable event
ids; `projection` does so incrementally, page by page, for the supervisor; the
`ActivityJournal` (`journal`) keeps them durably, one log per run, and `live` publishes
them while a segment is still executing. Readers page through a journal (`history`),
subscribe to what this process publishes (`ActivitySubscription`), or follow what any
process publishes (`follow`).
"""

from .activity import ActivityKind, ActivityRecord, ProjectedActivity, event_id, project
from .history import HistoryPage, page_history
from .journal import ActivityJournal, ActivitySubscription

__all__ = [
    "ActivityJournal",
    "ActivityKind",
    "ActivityRecord",
    "ActivitySubscription",
    "HistoryPage",
    "ProjectedActivity",
    "event_id",
    "page_history",
    "project",
]
