"""The runs list's counts by status: how many of the session's runs are not finished, by
status, the pending ones that are queued (waiting for a slot of a ``max_running``
limit), and the interrupted ones by pause kind (waiting for an answer, or for a retry of
an error), each with the status filter value that lists them.

Only unfinished runs are counted: they come off the registry's unfinished-run index (one
listing, then one read per unfinished run, a queue read per pending one and a pause read
per interrupted one), so the
counts cost the same however many finished runs the session holds; counting the finished
ones would read every run. Where the index is not complete (a session older than it, read
by a ``--read-only`` dashboard), the runs are read whole, up to `views.MAX_RUNS`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from ..tools.queued import QUEUED
from ..tools.results import run_result
from ..workflows.admission import queued_at
from ..workflows.errors import NotFoundError
from ..workflows.records.run import RunStatus
from .sessions import Served
from .views import all_runs, pause_kind

__all__ = ["QUEUED_LABEL", "StatusCount", "open_counts"]

QUEUED_LABEL: Final = "pending: queued for a slot"

_ORDER: Final = (
    ("pending", "pending"),
    (QUEUED, QUEUED_LABEL),
    ("running", "running"),
    ("interrupted:request", "interrupted: awaiting input"),
    ("interrupted:error", "interrupted: error"),
)


@dataclass(frozen=True)
class StatusCount:
    """``count`` unfinished runs that the status filter ``value`` lists (``label``)."""

    value: str
    label: str
    count: int


async def _unfinished(served: Served) -> list[dict[str, Any]]:
    session = served.session
    index = session.registry.index
    if index is None or not await index.complete(session.session_id):
        runs = await all_runs(served.tools)
        return [run for run in runs if not RunStatus(run["run_status"]).terminal]
    found = []
    for run_id in sorted(await index.runs(session.session_id)):
        try:
            run = await session.registry.get(session.session_id, run_id)
        except NotFoundError:
            continue  # pruned, or an index entry whose record never came
        if not run.status.terminal:  # the index can lag a run that just finished
            found.append(run_result(run))
            queued = await queued_at(session.registry.kv, run)
            if queued is not None:  # as workflow_run_list marks it
                found[-1]["queued"] = queued.to_json()
    return found


def _key(run: Mapping[str, Any], kind: str) -> str:
    status = str(run["run_status"])
    return f"{status}:{kind}" if status == "interrupted" and kind else status


async def open_counts(served: Served) -> list[StatusCount]:
    """The unfinished runs by status (interrupted ones by pause kind), every status
    listed, zero or not, in lifecycle order."""
    counts: Counter[str] = Counter()
    for run in await _unfinished(served):
        counts[_key(run, await pause_kind(served.tools, run))] += 1
        if run.get("queued"):  # also counted as pending: a queued run is one
            counts[QUEUED] += 1
    return [StatusCount(value, label, counts[value]) for value, label in _ORDER]
