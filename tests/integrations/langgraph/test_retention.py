"""Retention for LangGraph threads: age and status delete whole threads, ``keep_latest``
trims the others, the sweep frees what only deleted checkpoints held, a dry run writes
nothing."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.checkpoint.serde.types import ERROR, INTERRUPT
from langgraph.types import Interrupt

from flowledger.integrations.langgraph import (
    FlowledgerSaver,
    InvalidConfigError,
    JsonSerializer,
    ThreadRetention,
)
from flowledger.storage import AttachmentNotFoundError, digest_of, open_store

OLD = datetime(2020, 1, 1, tzinfo=UTC)


def body(thread_id: str, n: int) -> str:
    return f"{thread_id} step {n}: " + "w" * 120  # an attachment of its own


async def thread(
    saver: FlowledgerSaver, thread_id: str, when: datetime, steps: int = 4
) -> dict[str, Any]:
    current: dict[str, Any] = {"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}}
    for n in range(steps):
        cp: dict[str, Any] = dict(empty_checkpoint())
        cp["ts"] = (when + timedelta(seconds=n)).isoformat()
        cp["channel_values"] = {"body": body(thread_id, n)}
        cp["channel_versions"] = {"body": n + 1}
        current = await saver.aput(current, cp, {"source": "loop", "step": n}, {"body": n + 1})
    return current


async def steps(saver: FlowledgerSaver, thread_id: str) -> list[int]:
    return [
        h.metadata["step"] async for h in saver.alist({"configurable": {"thread_id": thread_id}})
    ]


async def test_age_status_and_keep_latest(store_url: str) -> None:
    async with open_store(store_url) as store:
        saver = FlowledgerSaver(store)
        await thread(saver, "old-idle", OLD)
        paused = await thread(saver, "old-paused", OLD)
        await saver.aput_writes(paused, [(INTERRUPT, (Interrupt(value="ok?", id="i"),))], "task")
        failed = await thread(saver, "old-error", OLD)
        await saver.aput_writes(failed, [(ERROR, "ValueError('boom')")], "task")
        await thread(saver, "recent", datetime.now(UTC))
        policy = ThreadRetention.parse(older_than="1d", statuses="idle,error", keep_latest=2)

        preview = await saver.aprune_threads(policy, dry_run=True)
        assert preview.deleted == {"old-idle": "idle", "old-error": "error"}
        assert preview.trimmed == {"old-paused": 2, "recent": 2}
        assert await steps(saver, "old-idle") == [3, 2, 1, 0]  # a dry run writes nothing

        report = await saver.aprune_threads(policy)
        assert report.to_json()["deleted_threads"] == {"old-error": "error", "old-idle": "idle"}
        assert report.trimmed == {"old-paused": 2, "recent": 2}
        assert report.sweep is not None and report.sweep.attachments >= 2 * 4 + 2 * 2
        cold = FlowledgerSaver(store)
        assert await steps(cold, "old-idle") == [] and await steps(cold, "old-error") == []
        assert await steps(cold, "old-paused") == [3, 2] and await steps(cold, "recent") == [3, 2]
        paused_now = await cold.aget_tuple({"configurable": {"thread_id": "old-paused"}})
        assert paused_now is not None and paused_now.pending_writes is not None
        assert paused_now.pending_writes[0][1] == INTERRUPT  # the pause survives the trim
        gone = [
            digest_of(JsonSerializer().dumps(body("old-idle", 0))),
            digest_of(JsonSerializer().dumps(body("recent", 0))),
        ]
        for digest in gone:
            with pytest.raises(AttachmentNotFoundError):
                await store.ledger.attachments([digest])
        assert await store.ledger.attachments(
            [digest_of(JsonSerializer().dumps(body("recent", 3)))]
        )


def test_a_policy_is_checked() -> None:
    for bad in (
        {"older_than": "soon"},
        {"older_than": "1d", "statuses": "idle,done"},
        {"keep_latest": 0},
        {},
    ):
        with pytest.raises(InvalidConfigError):
            ThreadRetention.parse(**bad)  # type: ignore[arg-type]
