"""The supervisor's side of admission (`workflows.admission`): ask the gate before a
pending run moves to running; a run that must wait stays pending, queued, and is looked
at again soon by `poll` (without the backoff of a failing run).

The wake-up is the poll: when a slot frees in another process nothing rings here yet;
`QUEUE_RECHECK` bounds how long a queued run waits for the next look.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Final

from ...records.run import Run

if TYPE_CHECKING:
    from .owner import Supervisor

__all__ = ["QUEUE_RECHECK", "admitted"]

QUEUE_RECHECK: Final = 0.5  # seconds until a queued run is looked at again


async def admitted(sup: Supervisor, run: Run) -> bool:
    """Whether ``run`` may start now (it holds a slot in every scope limiting it)."""
    admission = sup.admission
    if admission is None or await admission.admit(run):
        return True
    watch = sup._watch.get(run.id)
    if watch is not None:  # waiting is not failing: no backoff, look again soon
        watch.attempts = 0
        watch.next_check = time.monotonic() + QUEUE_RECHECK
    return False
