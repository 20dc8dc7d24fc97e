"""Queued runs in ``workflow_run_list``: each pending run of a page that waits for a slot
of a ``max_running`` limit carries ``queued: {scope, position}`` as in
``workflow_run_get``, and ``status: "queued"`` lists only those (pending runs that are
queued; a filtered page may be short, as every filtered page)."""

from __future__ import annotations

from typing import Any, Final

from flowledger import storage
from flowledger.workflows.admission import queued_at
from flowledger.workflows.records.registry import RunPage
from flowledger.workflows.records.run import RunStatus

from .results import list_result

__all__ = ["QUEUED", "queued_list_result"]

QUEUED: Final = "queued"  # the status filter that is not a run status


async def queued_list_result(
    kv: storage.KV | None, page: RunPage, *, only_queued: bool = False
) -> dict[str, Any]:
    """`list_result` of ``page`` with the queue position of each queued run (``kv``:
    where admission keeps its queues; None: runs are listed as they are)."""
    result = list_result(page)
    if kv is None:
        return result
    kept: list[dict[str, Any]] = []
    for run, entry in zip(page.runs, result["runs"], strict=True):
        queued = None
        if run.status is RunStatus.PENDING:
            queued = await queued_at(kv, run)
        if queued is not None:
            entry["queued"] = queued.to_json()
        if queued is not None or not only_queued:
            kept.append(entry)
    result["runs"] = kept
    return result
