"""Every error pause of a run, for its data page: the revision each one first appears
at, its vertex, exception type and message (the traceback is on that revision's page).

The checkpoints are the only record that keeps an error's type and message (the
activity history and the tool results stay free of them), so the run's checkpoints are
read in order, a page at a time, until `MAX_REVISIONS` are read; a list cut there says
so. An
error pause is kept in every checkpoint until its vertex is retried, so an error is
listed once, at the revision where it was not in the checkpoint before.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from .. import flow
from ..workflows.records.pending import readable_cause

__all__ = ["MAX_REVISIONS", "RunError", "RunErrors", "run_errors"]

MAX_REVISIONS: Final = 2000  # checkpoints read for one page; a longer run's list is cut
_PAGE: Final = 100


@dataclass(frozen=True, slots=True)
class RunError:
    """An error pause: where it first appears, and what the vertex raised."""

    revision: int
    vertex: str
    label: str
    type: str
    message: str


@dataclass(frozen=True)
class RunErrors:
    errors: list[RunError]
    read_to: int  # the last revision read
    cut: bool  # revisions after ``read_to`` were not read


async def run_errors(
    checkpoints: flow.CheckpointStore, graph_run_id: str, labels: Mapping[str, str]
) -> RunErrors:
    """The error pauses of the graph run ``graph_run_id``, oldest first."""
    found: list[RunError] = []
    before: set[tuple[str, str, str]] = set()
    revision = -1
    while revision + 1 < MAX_REVISIONS:
        page = await checkpoints.history(graph_run_id, after=revision, limit=_PAGE)
        for checkpoint in page:
            now = {
                (item.vertex, item.error_type or "error", readable_cause(item.cause))
                for item in checkpoint.interrupts
                if item.kind is flow.InterruptKind.ERRORED
            }
            found += [
                RunError(checkpoint.revision, vertex, labels.get(vertex, ""), kind, message)
                for vertex, kind, message in sorted(now - before)
            ]
            before, revision = now, checkpoint.revision
        if len(page) < _PAGE:
            return RunErrors(found, revision, cut=False)
    latest = await checkpoints.latest(graph_run_id)
    return RunErrors(found, revision, cut=latest.revision > revision)
