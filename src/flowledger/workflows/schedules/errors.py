"""The errors of schedules: a refused schedule document, and a schedule that is not there."""

from __future__ import annotations

from ..errors import WorkflowError

__all__ = ["InvalidScheduleError", "ScheduleNotFoundError"]


class InvalidScheduleError(WorkflowError, ValueError):
    """A schedule was refused before anything was written; ``field`` names what was wrong
    (``cron``, ``timezone``, ``every``, ``target``, ``input``, ``overlap``, ``catch_up``,
    ``start_at``, ``schedule_id``)."""

    def __init__(self, field: str, reason: str) -> None:
        self.field = field
        self.reason = reason
        super().__init__(f"invalid schedule {field}: {reason}")


class ScheduleNotFoundError(WorkflowError, LookupError):
    """No such schedule in this session (other sessions' schedules are never found)."""

    def __init__(self, session_id: str, schedule_id: str) -> None:
        self.session_id = session_id
        self.schedule_id = schedule_id
        super().__init__(f"schedule not found: {schedule_id} in session {session_id}")
