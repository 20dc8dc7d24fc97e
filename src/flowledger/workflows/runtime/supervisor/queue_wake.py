"""A freed slot wakes the queue: when a run that admission limits ends, the owner of the
run next in line in each of its scopes is woken (`records.wakeups`), so a queued run
starts at once rather than on its owner's next fallback poll.

The wake-up is only a hint ("look now"): the woken owner asks the gate as it always
does, so a wake-up that arrives late, twice or for a run that left the queue changes
nothing; one that is lost (an SQLite owner in another process is never woken) costs the
fallback poll. A paused run keeps its slot (`admission.gate`), so only an end frees one.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from ...records.run import Run
from ...records.wakeups import wake_session

if TYPE_CHECKING:
    from .owner import Supervisor

__all__ = ["wake_next_in_line"]

log = logging.getLogger(__name__)


async def wake_next_in_line(sup: Supervisor, before: Run, after: Run) -> None:
    """After a recorded transition ``before`` -> ``after``: if the run just ended, wake
    the owners of the runs next in line for the slots it held."""
    if sup.admission is None or sup.wakeups is None:
        return
    if before.status.terminal or not after.status.terminal:
        return
    try:
        for session_id in await sup.admission.next_sessions(after):
            await wake_session(sup.wakeups, session_id)
    except Exception as exc:  # the fallback poll finds the queued run: never fail the end
        log.warning("run %s: waking the queue failed: %s", after.id, exc)
