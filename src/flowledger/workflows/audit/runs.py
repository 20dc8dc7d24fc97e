"""Every run of every session read through the readers that decode it, and its records held
against each other.

Per run: the run record (`RunRegistry.get`: checksum, decode, identity), its input (size
and SHA-256, `InputStore.get`), the tip of its checkpoint log (decoded with the state
attachments it names, and belonging to this graph run and at least at the record's
checkpoint revision), its whole activity journal (every record decoded, in order), its
pending record (an interrupted run must have one) and its resume and cancel requests.
Records that contradict each other are damage even when each one reads: checkpoints
missing while the record says the run has some, a journal with nothing while the run's
activity cursor says activities were published, a finished run whose activities were all
published and whose journal does not end with its ending (its last records lost), and a
journal (whose first record reads as this run's) whose run record is missing (no prune
deleting it: no tombstone).

What is legitimately absent is not damage: a pending run has no checkpoints yet, and a
run failed *because* its input or checkpoints were missing has none (its summary says so).
"""

from __future__ import annotations

from typing import Final

from ... import flow
from ...storage import CorruptDataError, Store
from ..activities.activity import ActivityKind
from ..activities.journal import ActivityJournal, journal_name
from ..errors import CorruptRecordError, NotFoundError
from ..records.inputs import InputStore
from ..records.pending import PendingStore, pending_key
from ..records.registry import RunRegistry
from ..records.requests import RunRequests
from ..records.run import Run, RunStatus, is_id, pruning_key, run_key
from .findings import Findings

__all__ = ["audit_runs", "why"]

# Failed for want of these: their absence is the verdict already recorded, not new damage.
_NO_INPUT: Final = frozenset({"workflow input unavailable"})
_NO_CHECKPOINTS: Final = frozenset(
    {"workflow checkpoint missing", "workflow fork checkpoint missing", *_NO_INPUT}
)
_MAX_WHY: Final = 200
# What the journal of a finished run whose activities were all published ends with.
_ENDINGS: Final = {
    RunStatus.COMPLETED: ActivityKind.RUN_COMPLETED,
    RunStatus.CANCELLED: ActivityKind.RUN_CANCELLED,
    RunStatus.FAILED: ActivityKind.RUN_FAILED,
}
_FAMILIES: Final = ("activity", "activity-generation", "activity-rebuilt")


def why(error: BaseException) -> str:
    """What is wrong, in words that never quote a stored value: a checksum's reason, the
    typed error's own fixed text, or the error's type."""
    seen: BaseException | None = error
    while seen is not None:
        if isinstance(seen, CorruptDataError):
            return seen.reason
        seen = seen.__cause__
    cause = getattr(error, "cause", None)
    if isinstance(cause, str) and cause:
        return cause[:_MAX_WHY]
    inner = error.__cause__ if error.__cause__ is not None else error
    return f"it does not decode ({type(inner).__name__})"


async def audit_runs(store: Store, findings: Findings) -> None:
    sessions: dict[str, set[str]] = {}  # session -> run IDs with a record key
    journals: dict[str, set[str]] = {}  # session -> run IDs with some journal log
    for key in await store.kv.keys("sessions/"):
        parts = key.split("/")
        if len(parts) == 5 and parts[2:4] == ["workflows", "runs"] and is_id(parts[1]):
            if is_id(parts[4]):
                sessions.setdefault(parts[1], set()).add(parts[4])
            else:
                findings.add("kv", key, "a key among the run records that is no run ID")
    for name in await store.ledger.names("sessions/"):
        parts = name.split("/")
        if (
            len(parts) >= 5
            and parts[2] == "workflows"
            and parts[3] in _FAMILIES
            and is_id(parts[1])
            and is_id(parts[4])
        ):
            journals.setdefault(parts[1], set()).add(parts[4])
    for session_id in sorted(set(sessions) | set(journals)):
        await _session(
            store,
            findings,
            session_id,
            sessions.get(session_id, set()),
            journals.get(session_id, set()),
        )


async def _session(
    store: Store, findings: Findings, session_id: str, run_ids: set[str], journaled: set[str]
) -> None:
    registry = RunRegistry(store.kv)  # no witness: journals without a record are found below
    checks = _RunChecks(store, findings, session_id)
    for run_id in sorted(run_ids):
        findings.checked["runs"] += 1
        try:
            run = await registry.get(session_id, run_id)
        except CorruptRecordError as exc:
            findings.add("kv", run_key(session_id, run_id), why(exc), run_id)
            continue
        findings.index.add(run)
        await checks.run(run)
    journal = ActivityJournal(store.ledger)
    for run_id in sorted(journaled - run_ids):
        if await _being_pruned(store, session_id, run_id):
            continue
        try:
            await journal.read_after(session_id, run_id, 0, limit=1)
        except CorruptRecordError:
            continue  # not this run's journal under a damaged name: the scan named it
        findings.index.runs.add(run_id)
        findings.add(
            "run",
            run_id,
            "the run's activity journal exists, but its run record is not found",
            run_id,
        )


async def _being_pruned(store: Store, session_id: str, run_id: str) -> bool:
    return bool(await store.kv.keys(pruning_key(session_id, run_id)))


class _RunChecks:
    def __init__(self, store: Store, findings: Findings, session_id: str) -> None:
        self._findings = findings
        self._session_id = session_id
        self._inputs = InputStore(store.blobs)
        self._checkpoints = flow.LedgerCheckpointStore(store.ledger)
        self._journal = ActivityJournal(store.ledger)
        self._pending = PendingStore(store.kv)
        self._requests = RunRequests(store.kv)

    async def run(self, run: Run) -> None:
        await self._input(run)
        await self._checkpoint_tip(run)
        await self._activities(run)
        await self._pause(run)
        await self._requests_of(run)

    def _failed_for(self, run: Run, causes: frozenset[str]) -> bool:
        return run.status is RunStatus.FAILED and run.status_summary in causes

    async def _input(self, run: Run) -> None:
        if self._failed_for(run, _NO_INPUT):
            return
        self._findings.checked["inputs"] += 1
        try:
            await self._inputs.get(self._session_id, run.input)
        except NotFoundError:
            self._findings.add("blob", str(run.input.key), "the run's input is missing", run.id)
        except CorruptRecordError as exc:
            self._findings.add("blob", str(run.input.key), f"the run's input: {why(exc)}", run.id)

    async def _checkpoint_tip(self, run: Run) -> None:
        if self._failed_for(run, _NO_CHECKPOINTS):
            return
        promised = (
            run.checkpoint_revision > 0
            or run.activity_cursor > 0
            or run.status in (RunStatus.INTERRUPTED, RunStatus.COMPLETED)
        )
        log = run.ledger_locator
        self._findings.checked["checkpoint tips"] += 1
        try:
            tip = await self._checkpoints.latest(run.graph_run_id)
        except flow.CheckpointNotFoundError:
            if promised:
                self._findings.add("log", log, "the run's checkpoints are missing", run.id)
            return
        except flow.StoreError as exc:
            self._findings.add("log", log, f"the latest checkpoint: {why(exc)}", run.id)
            return
        if tip.run.graph_run_id != run.graph_run_id:
            self._findings.add("log", log, "the latest checkpoint belongs to another run", run.id)
        elif tip.run.revision < run.checkpoint_revision:
            self._findings.add(
                "log",
                log,
                f"the run record is at checkpoint revision {run.checkpoint_revision}, "
                f"the log ends at revision {tip.run.revision}",
                run.id,
            )

    async def _activities(self, run: Run) -> None:
        self._findings.checked["journals"] += 1
        try:
            records = await self._journal.records(self._session_id, run.id)
        except CorruptRecordError as exc:
            self._findings.add("log", exc.key, f"activity journal: {why(exc)}", run.id)
            return
        name = journal_name(self._session_id, run.id)
        if run.activity_cursor > 0 and not records:
            self._findings.add(
                "log",
                name,
                f"the run's activities up to revision {run.activity_cursor - 1} were "
                "published, but its journal holds none",
                run.id,
            )
            return
        ending = _ENDINGS.get(run.status)
        published_all = run.activity_cursor > run.checkpoint_revision
        if ending is not None and published_all and records and records[-1].activity.kind != ending:
            self._findings.add(
                "log",
                name,
                f"the run is {run.status} and its activities were all published, but "
                f"its journal does not end with {ending}",
                run.id,
            )

    async def _pause(self, run: Run) -> None:
        if run.status not in (RunStatus.INTERRUPTED, RunStatus.FAILED):
            return
        key = pending_key(self._session_id, run.id)
        try:
            pending = await self._pending.get(self._session_id, run.id)
        except CorruptRecordError as exc:
            self._findings.add("kv", key, f"pending record: {why(exc)}", run.id)
            return
        if pending is None and run.status is RunStatus.INTERRUPTED:
            self._findings.add(
                "kv", key, "the run is interrupted, but what it waits for is not stored", run.id
            )

    async def _requests_of(self, run: Run) -> None:
        for read in (self._requests.resume_request, self._requests.cancel_request):
            try:
                await read(self._session_id, run.id)
            except CorruptRecordError as exc:
                self._findings.add("kv", exc.key, f"request: {why(exc)}", run.id)
