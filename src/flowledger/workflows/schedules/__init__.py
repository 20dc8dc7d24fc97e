"""Schedules: start runs of a definition version on cron slots or fixed intervals.

`Timing` (`timing`) computes slots, `Schedule` (`record`) is the durable record,
`ScheduleStore` (`store`) keeps records and firing records in KV, `fire` (`firing`)
starts one slot's run exactly once, `ScheduleLoop` (`loop`) is the session owner's loop
that fires due slots, and `Schedules` (`service`) is the API the CLI and tools call.
"""

from .errors import InvalidScheduleError, ScheduleNotFoundError
from .firing import derived_id, fire
from .loop import MAX_CATCH_UP, ScheduleLoop
from .record import CatchUp, Overlap, Schedule
from .service import Schedules
from .store import ACTIVE_PREFIX, Firing, ScheduleStore
from .timing import Timing

__all__ = [
    "ACTIVE_PREFIX",
    "MAX_CATCH_UP",
    "CatchUp",
    "Firing",
    "InvalidScheduleError",
    "Overlap",
    "Schedule",
    "ScheduleLoop",
    "ScheduleNotFoundError",
    "ScheduleStore",
    "Schedules",
    "Timing",
    "derived_id",
    "fire",
]
