"""The worker's census of runs that wait, for ``flowledger_runs_waiting`` (metrics).

What a run waits for, from keys alone (no run record is read), over the whole database:

* ``request``, ``error``, ``timer``: interrupted runs by the kind of their pause - the
  registry's interrupted status entries of each session with unfinished runs, joined
  with the pending records' kind markers (`paused_prefix`);
* ``queued``: pending runs that wait for an admission slot - the admission queue's
  entries, joined with the registry's pending status entries (a queue entry whose run
  moved on is left for its scope's next reader to drop, and is not counted).

Per scrape: one listing of the unfinished index, one of the admission queue, and per
session with unfinished runs three (interrupted and pending status entries, markers).
"""

from __future__ import annotations

from ..observability import metrics
from ..storage import Store
from ..workflows.admission.gate import QUEUE_PREFIX
from ..workflows.records.pending import PauseKind, paused_prefix
from ..workflows.records.registry import status_prefix
from ..workflows.records.run import RunStatus
from ..workflows.records.unfinished import UnfinishedIndex

__all__ = ["REASONS", "waiting_census"]

#: The label values of ``flowledger_runs_waiting``'s ``reason``.
REASONS = (*(str(kind) for kind in PauseKind), "queued")


def waiting_census(store: Store) -> metrics.Census:
    index = UnfinishedIndex(store.kv)
    kv = store.kv

    async def census() -> dict[tuple[str, ...], float]:
        counts = dict.fromkeys(REASONS, 0)
        pending: set[str] = set()
        for session_id in await index.scan():
            interrupted = _runs(await kv.keys(status_prefix(session_id, RunStatus.INTERRUPTED)))
            pending |= _runs(await kv.keys(status_prefix(session_id, RunStatus.PENDING)))
            prefix = paused_prefix(session_id)
            for key in await kv.keys(prefix):
                kind, _, run_id = key[len(prefix) :].partition("/")
                if run_id in interrupted and kind in counts:
                    counts[kind] += 1
        # an entry per limited scope: a run queued in two scopes is one run
        queued = {key.rpartition("/")[2].partition("-")[2] for key in await kv.keys(QUEUE_PREFIX)}
        counts["queued"] = len(queued & pending)
        return {(reason,): float(count) for reason, count in counts.items()}

    return census


def _runs(status_entries: list[str]) -> set[str]:
    """The run ids of status entries (``.../<17-digit rank>-<run id>``)."""
    return {key.rpartition("/")[2].partition("-")[2] for key in status_entries}
