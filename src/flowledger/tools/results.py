"""The JSON shapes tools return (workflows-spec §7.2, §7.5, §7.7-§7.9).

Every shape is built field by field from an allow-list, so nothing private can reach a
result by accident: a run result never carries the input reference, the session ID, the
tool execution ID, the graph run ID, the ledger locator, the cancel flag, the artifact
namespace fields or any state. Times are RFC 3339 in UTC with a ``Z`` suffix.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from flowledger.workflows.activities.activity import ProjectedActivity, format_time
from flowledger.workflows.activities.history import HistoryPage
from flowledger.workflows.authoring.metadata import Metadata
from flowledger.workflows.records.pending import MAX_SCHEMA_BYTES
from flowledger.workflows.records.registry import RunPage
from flowledger.workflows.records.run import Run, RunStatus

__all__ = [
    "cancel_result",
    "definition_entry",
    "definitions_result",
    "history_entry",
    "history_result",
    "list_result",
    "result_text",
    "run_result",
]


def run_result(run: Run) -> dict[str, Any]:
    """``run_result`` (§7.2): ``status_summary``, ``parent_run_id`` and ``artifacts`` are
    omitted when empty; a fork adds ``forked_from``."""
    result: dict[str, Any] = {
        "run_id": run.id,
        "definition_name": run.definition_name,
        "definition_version": run.definition_version,
        "run_status": str(run.status),
    }
    if run.status_summary:
        result["status_summary"] = run.status_summary
    result["checkpoint_revision"] = run.checkpoint_revision
    result["activity_cursor"] = run.activity_cursor
    if run.parent_run_id:
        result["parent_run_id"] = run.parent_run_id
    if run.artifacts:
        result["artifacts"] = [
            {"id": item.id, "kind": item.kind, "digest": item.digest, "size": item.size}
            for item in run.artifacts
        ]
    result["created_at"] = format_time(run.created_at)
    result["updated_at"] = format_time(run.updated_at)
    if run.forked_from is not None:  # a fork (`workflows.records.forks`); absent otherwise
        result["forked_from"] = {
            "run_id": run.forked_from.run_id,
            "revision": run.forked_from.revision,
            "checkpoint_digest": run.forked_from.checkpoint_digest,
        }
    if run.scheduled_by is not None:  # started by a schedule firing; absent otherwise
        result["scheduled_by"] = run.scheduled_by.to_json()
    return result


def list_result(page: RunPage) -> dict[str, Any]:
    """``{"runs": [...], "next": ...}`` (§7.5): ``runs`` always an array, ``next`` omitted
    when there is no following page."""
    result: dict[str, Any] = {"runs": [run_result(run) for run in page.runs]}
    if page.next:
        result["next"] = page.next
    return result


def cancel_result(run_id: str, status: RunStatus, *, idempotent: bool) -> dict[str, Any]:
    """``{"run_id", "run_status", "idempotent"}`` (§7.7); ``idempotent`` always present."""
    return {"run_id": run_id, "run_status": str(status), "idempotent": idempotent}


def history_entry(item: ProjectedActivity) -> dict[str, Any]:
    """One history entry (§7.8); optional fields omitted when empty or zero."""
    activity = item.activity
    entry: dict[str, Any] = {
        "revision": item.revision,
        "event_id": activity.event_id,
        "kind": str(activity.kind),
        "run_status": activity.status,
    }
    if activity.vertex_id:
        entry["vertex_id"] = activity.vertex_id
    if activity.vertex_label:
        entry["vertex_label"] = activity.vertex_label
    if activity.completed_vertices:
        entry["completed_vertices"] = activity.completed_vertices
    if activity.total_vertices:
        entry["total_vertices"] = activity.total_vertices
    if activity.message:
        entry["message"] = activity.message
    entry["occurred_at"] = format_time(activity.occurred_at)
    return entry


def history_result(run_id: str, page: HistoryPage) -> dict[str, Any]:
    """``{"run_id", "entries", "next_revision"?, "next_event_id"?}`` (§7.8). A reader
    that passes both cursors back reads every entry exactly once."""
    result: dict[str, Any] = {
        "run_id": run_id,
        "entries": [history_entry(item) for item in page.records],
    }
    if page.next_revision is not None:
        result["next_revision"] = page.next_revision
    if page.next_event_id:
        result["next_event_id"] = page.next_event_id
    return result


def definition_entry(metadata: Metadata, *, on_error: str = "pause") -> dict[str, Any]:
    """One definition (§7.9), with what a caller needs to resume its runs: the resume
    schema (omitted when the definition takes no resume payload, or when it is larger
    than `MAX_SCHEMA_BYTES`; ``resume_supported`` says whether there is one) and
    ``on_error``."""
    entry: dict[str, Any] = {
        "name": metadata.name,
        "version": metadata.version,
        "description": metadata.description,
        "input_schema": metadata.input_schema,
        "resume_supported": metadata.resume_schema_bytes is not None,
    }
    resume = metadata.resume_schema_bytes
    if resume is not None and len(resume) <= MAX_SCHEMA_BYTES:
        entry["resume_schema"] = metadata.resume_schema
    entry["on_error"] = on_error
    return entry


def definitions_result(
    metadata: Sequence[Metadata],
    *,
    limit: int,
    on_error: Mapping[tuple[str, str], str] | None = None,
) -> dict[str, Any]:
    """The first ``limit`` definitions (catalog order) and whether more exist; ``on_error``
    maps ``(name, version)`` to each definition's error policy (default ``"pause"``)."""
    shown = list(metadata[:limit])
    policies = on_error or {}
    return {
        "definitions": [
            definition_entry(item, on_error=policies.get((item.name, item.version), "pause"))
            for item in shown
        ],
        "truncated": len(metadata) > limit,
    }


def result_text(result: Mapping[str, Any]) -> str:
    """A tool result as the single compact JSON text block a transport returns."""
    return json.dumps(result, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
