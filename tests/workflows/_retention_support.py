"""Helpers for the retention tests: runs in each status, backdating, store snapshots, and
the names each run owns (computed here from the layout, independently of the pruner)."""

from __future__ import annotations

import dataclasses
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from flowledger.storage import Store
from flowledger.tools import WorkflowTools
from flowledger.workflows.records.registry import order_prefix
from flowledger.workflows.records.run import Run, RunStatus, decode_run, encode_run, run_key
from flowledger.workflows.runtime.session import WorkflowSession

from . import semantics_app

__all__ = [
    "Runs",
    "Snapshot",
    "backdate",
    "owned_names",
    "snapshot",
]

OLD = timedelta(days=40)


@dataclass(frozen=True)
class Snapshot:
    kv: frozenset[str]
    blobs: frozenset[str]
    logs: frozenset[str]

    def __sub__(self, other: Snapshot) -> Snapshot:
        return Snapshot(self.kv - other.kv, self.blobs - other.blobs, self.logs - other.logs)

    def names(self) -> frozenset[str]:
        return self.kv | self.blobs | self.logs


async def snapshot(store: Store) -> Snapshot:
    return Snapshot(
        frozenset(await store.kv.keys("")),
        frozenset(await store.blobs.list("")),
        frozenset(await store.ledger.names("")),
    )


async def backdate(store: Store, session_id: str, run_id: str, by: timedelta = OLD) -> Run:
    """Move a run's timestamps ``by`` into the past (as if it had finished long ago)."""
    key = run_key(session_id, run_id)
    entry = await store.kv.get(key)
    run = decode_run(key, entry.value)
    older = dataclasses.replace(run, created_at=run.created_at - by, updated_at=run.updated_at - by)
    revision = await store.kv.put(key, encode_run(older), expected=entry.revision)
    return dataclasses.replace(older, revision=revision)


async def owned_names(store: Store, session_id: str, run: Run) -> frozenset[str]:
    """Every KV key and log that belongs to ``run`` alone (not its input blob)."""
    keys = {
        key for key in await store.kv.keys(order_prefix(session_id)) if key.endswith("-" + run.id)
    }
    base = f"sessions/{session_id}/workflows/"
    for key in await store.kv.keys(base):
        if key.endswith("/" + run.id) and not key.startswith(base + "run-order/"):
            keys.add(key)
    for family in ("workflows/unfinished/", "workflows/bells/"):
        keys.update(await store.kv.keys(f"{family}{session_id}/{run.id}"))
    logs = {
        name for name in await store.ledger.names("") if run.id in name or run.graph_run_id in name
    }
    return frozenset(keys | logs)


class Runs:
    """Makes runs of the semantics catalog in a session this process owns."""

    def __init__(self, session: WorkflowSession) -> None:
        self.session = session
        self.tools = WorkflowTools.for_session(session)

    async def call(self, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        result = await self.tools.call(name, arguments)
        await self.session.supervisor.wait_idle()
        return result

    async def interrupted(self, text: str) -> str:
        started = await self.call(
            "workflow_run_start",
            {"definition_name": "ask", "definition_version": "v1", "input": {"text": text}},
        )
        run_id = str(started["run_id"])
        got = await self.call("workflow_run_get", {"run_id": run_id})
        assert got["run_status"] == "interrupted", got
        return run_id

    async def completed(self, text: str) -> str:
        run_id = await self.interrupted(text)
        done = await self.call(
            "workflow_run_resume", {"run_id": run_id, "resume": {"approved": True}}
        )
        assert done["run_status"] == "completed", done
        return run_id

    async def cancelled(self, text: str) -> str:
        run_id = await self.interrupted(text)
        done = await self.call("workflow_run_cancel", {"run_id": run_id, "reason": "test"})
        assert done["run_status"] == "cancelled", done
        return run_id

    async def failed(self, source: str) -> str:
        started = await self.call(
            "workflow_run_start",
            {"definition_name": "strict", "definition_version": "v1", "input": {"source": source}},
        )
        run_id = str(started["run_id"])
        got = await self.call("workflow_run_get", {"run_id": run_id})
        assert got["run_status"] == "failed", got
        return run_id

    async def running_record(self, like: str) -> str:
        """A record that says ``running`` (as while a worker executes it), made from the
        record of ``like`` with new IDs; its input is the same blob."""
        registry = self.session.registry
        template = await registry.get(self.session.session_id, like)
        now = datetime.now(UTC)
        run_id = str(uuid.uuid4())
        graph_run_id = str(uuid.uuid4())
        record = dataclasses.replace(
            template,
            id=run_id,
            graph_run_id=graph_run_id,
            tool_execution_id=str(uuid.uuid4()),
            ledger_locator=f"flow/runs/{graph_run_id}",
            artifact_run_id=run_id,
            created_at=now,
            updated_at=now,
            status=RunStatus.RUNNING,
            revision=0,
            checkpoint_revision=0,
            activity_cursor=0,
            cancel_requested=False,
        )
        await registry.create(record)
        return run_id


def catalog() -> Any:
    return semantics_app.catalog()
