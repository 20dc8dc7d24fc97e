"""Retention for LangGraph threads: `ThreadRetention` and `prune_threads`.

A pass looks at every thread of a saver's store:

* a thread whose newest checkpoint (of any namespace) is older than ``older_than`` and
  whose status is one of ``statuses`` is deleted whole;
* in every other thread, with ``keep_latest = N``, each namespace keeps its ``N`` newest
  checkpoints (and their pending writes); older ones are removed by rewriting the
  namespace's log (`rewrite`), so a run in progress is never disturbed: its appends land
  in the new generation;
* then the attachments no log refers to any more are swept, with the ledger's sweep
  (safe against concurrent appends: docs/storage.md).

A thread's *status* is read from its root namespace's newest checkpoint: ``interrupted``
when an interrupt is pending (a human-in-the-loop pause), ``error`` when a task's error
is, ``idle`` otherwise. Storage cannot tell a finished thread from one whose process died
mid-run: both are ``idle``; ``older_than`` keeps live threads safe. Ages are measured from
the checkpoint's own timestamp (LangGraph's ``ts``). With ``dry_run`` nothing is written:
the report counts what a pass would delete.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Final

from langgraph.checkpoint.serde.types import ERROR, INTERRUPT

from ...workflows.retention import RetentionStorage, parse_duration
from ...workflows.retention.storage import Swept
from .errors import InvalidConfigError, ThreadBusyError
from .logs import ThreadLog
from .records import CheckpointRecord, WritesRecord
from .rewrite import Rewriter

__all__ = ["STATUSES", "ThreadPruneReport", "ThreadRetention", "run_retention", "thread_status"]

STATUSES: Final = ("idle", "interrupted", "error")


def _statuses(text: str | frozenset[str] | None) -> frozenset[str]:
    if text is None:
        return frozenset(STATUSES)
    items = text.split(",") if isinstance(text, str) else list(text)
    chosen = {item.strip().lower() for item in items if item.strip()}
    unknown = chosen - set(STATUSES)
    if unknown or not chosen:
        raise InvalidConfigError(
            "statuses", f"{sorted(unknown) or text!r}: choose among {', '.join(STATUSES)}"
        )
    return frozenset(chosen)


@dataclass(frozen=True)
class ThreadRetention:
    """Delete threads with one of ``statuses`` whose newest checkpoint is older than
    ``older_than``; in the others keep each namespace's ``keep_latest`` newest
    checkpoints. Either may be None (that part does nothing)."""

    older_than: timedelta | None = None
    statuses: frozenset[str] = frozenset(STATUSES)
    keep_latest: int | None = None

    def __post_init__(self) -> None:
        if self.older_than is not None and (
            not isinstance(self.older_than, timedelta) or self.older_than <= timedelta(0)
        ):
            raise InvalidConfigError("older_than", "must be a positive timedelta")
        object.__setattr__(self, "statuses", _statuses(self.statuses))
        if self.keep_latest is not None and (
            not isinstance(self.keep_latest, int)
            or isinstance(self.keep_latest, bool)
            or self.keep_latest < 1
        ):
            raise InvalidConfigError("keep_latest", "must be a whole number of at least 1")
        if self.older_than is None and self.keep_latest is None:
            raise InvalidConfigError("policy", "give older_than, keep_latest or both")

    @classmethod
    def parse(
        cls,
        older_than: str | None = None,
        statuses: str | None = None,
        keep_latest: int | None = None,
    ) -> ThreadRetention:
        """From texts as the CLI's ``--older-than 30d`` / ``--status idle,error``."""
        try:
            age = None if older_than is None else parse_duration(older_than)
        except ValueError as exc:
            raise InvalidConfigError("older_than", str(exc)) from None
        return cls(age, _statuses(statuses), keep_latest)

    def to_json(self) -> dict[str, Any]:
        return {
            "older_than_seconds": None
            if self.older_than is None
            else int(self.older_than.total_seconds()),
            "statuses": sorted(self.statuses),
            "keep_latest": self.keep_latest,
        }


@dataclass
class ThreadPruneReport:
    """What a pass deleted (with ``dry_run``: would delete)."""

    dry_run: bool
    cutoff: datetime | None
    policy: ThreadRetention
    deleted: dict[str, str] = field(default_factory=dict)  # thread id -> its status
    trimmed: dict[str, int] = field(default_factory=dict)  # thread id -> checkpoints removed
    busy: list[str] = field(default_factory=list)  # threads another process was rewriting
    sweep: Swept | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "dry_run": self.dry_run,
            "cutoff": None if self.cutoff is None else self.cutoff.isoformat(),
            "policy": self.policy.to_json(),
            "deleted_threads": dict(sorted(self.deleted.items())),
            "trimmed_checkpoints": dict(sorted(self.trimmed.items())),
            "busy_threads": sorted(self.busy),
            "swept": None
            if self.sweep is None
            else {"attachments": self.sweep.attachments, "bytes": self.sweep.bytes},
        }


def _when(ts: str) -> datetime | None:
    try:
        moment = datetime.fromisoformat(ts)
    except ValueError:
        return None
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


async def thread_status(rewriter: Rewriter, log: ThreadLog) -> str:
    """``interrupted``, ``error`` or ``idle``, from the pending writes of the newest
    checkpoint of a (root namespace) log."""
    if log.latest is None:
        return "idle"
    channels: set[str] = set()
    for seq in log.pending_seqs(log.latest[0], log.latest[1]):
        record = await rewriter.logs.record(log, seq)
        if isinstance(record, WritesRecord):
            channels.update(channel for _, channel, _ in record.writes)
    if INTERRUPT in channels:
        return "interrupted"
    return "error" if ERROR in channels else "idle"


async def run_retention(
    rewriter: Rewriter,
    policy: ThreadRetention,
    *,
    dry_run: bool = False,
    now: datetime | None = None,
) -> ThreadPruneReport:
    """One pass over every thread (see the module documentation)."""
    moment = datetime.now(UTC) if now is None else now
    if moment.tzinfo is None:
        raise InvalidConfigError("now", "must be an aware datetime")
    cutoff = None if policy.older_than is None else moment - policy.older_than
    report = ThreadPruneReport(dry_run, cutoff, policy)
    for thread_id in await rewriter.threads():
        logs = await rewriter.thread_logs(thread_id)
        if not logs:
            continue
        newest: datetime | None = None
        for log in logs:
            if log.latest is not None:
                record = await rewriter.logs.record(log, log.latest[1])
                when = _when(record.ts) if isinstance(record, CheckpointRecord) else None
                if when is not None and (newest is None or when > newest):
                    newest = when
        root = next((log for log in logs if log.checkpoint_ns == ""), None)
        status = await thread_status(rewriter, root) if root is not None else "idle"
        try:
            if (
                cutoff is not None
                and newest is not None
                and newest < cutoff
                and status in policy.statuses
            ):
                report.deleted[thread_id] = status
                if not dry_run:
                    await rewriter.delete_thread(thread_id)
                continue
            if policy.keep_latest is not None:
                removed = await _trim(rewriter, logs, thread_id, policy.keep_latest, dry_run)
                if removed:
                    report.trimmed[thread_id] = removed
        except ThreadBusyError:
            report.busy.append(thread_id)
    storage = RetentionStorage(rewriter.logs.store)
    report.sweep = await storage.sweep(dry_run=dry_run)
    return report


async def _trim(
    rewriter: Rewriter, logs: list[ThreadLog], thread_id: str, keep: int, dry_run: bool
) -> int:
    if not dry_run:
        return await rewriter.keep_latest(thread_id, keep)
    removed = 0
    for log in logs:
        count = sum(isinstance(r, CheckpointRecord) for r in await rewriter.logs.read_all(log))
        removed += max(0, count - keep)
    return removed
