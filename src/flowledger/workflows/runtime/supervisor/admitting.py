"""The supervisor's side of admission (`workflows.admission`): ask the gate before a
pending run moves to running; a run that must wait stays pending, queued, and is asked
again at the next pass of `poll` (without the backoff of a failing run).

A pass comes when the owner is woken or at its fallback poll. A run that ends wakes the
owner of the run next in line (`queue_wake`), on PostgreSQL in any process, in-process
on SQLite; so a queued run starts as its slot frees, and a lost wake-up costs one
fallback poll.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ...records.run import Run

if TYPE_CHECKING:
    from .owner import Supervisor

__all__ = ["admitted"]


async def admitted(sup: Supervisor, run: Run) -> bool:
    """Whether ``run`` may start now (it holds a slot in every scope limiting it)."""
    admission = sup.admission
    if admission is None or await admission.admit(run):
        return True
    watch = sup._watch.get(run.id)
    if watch is not None:  # waiting is not failing: no backoff, ask again next pass
        watch.attempts = 0
        watch.next_check = 0.0
    return False
