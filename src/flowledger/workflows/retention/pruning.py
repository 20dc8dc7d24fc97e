"""Retention: `prune` deletes a session's finished runs older than a policy, with their data.

What goes, per pruned run: its record (``workflows/runs/<run>``), its run-order index
entries (``workflows/run-order/.../<rank>-<run>``, stale status entries included), its
pending record, bell, unfinished-index entry, the fork markers naming it, its activity
journal logs (``activity/<run>``, ``activity-generation/<run>``,
``activity-rebuilt/<run>/<n>``), its checkpoint log (the record's ``ledger_locator``),
any further per-run logs the caller names (``run_logs``: the deploy layer's traces,
tool intents and pins), and its input blob once no remaining run refers to it
(`input_claims`). Checkpoint state attachments are shared content-addressed blobs:
`RetentionStorage.sweep` collects them where the store can; otherwise they stay.

Never pruned: a run that is not terminal (pending, running, interrupted), one whose
status is not among the policy's, one that finished (``updated_at``) less than
``older_than`` ago, one with a resume or cancel request, one a remaining fork still
refers to (a marker ``workflows/forks/<run>/<fork>`` of a fork not pruned in the same
pass; a marker whose fork record does not exist yet is a fork being made, and a pruned
fork deletes its marker with it: see `RunRegistry.claim_fork` for the handshake), one a
remaining run names as its parent, and one whose record changed between the pass's scan
and its delete (the next pass looks again).

Order, per run, so that a crash at any point leaves nothing a reader trips over:

1. a *tombstone* ``workflows/pruning/<run>`` naming every key and log to delete (read by
   nobody but the next pass);
2. the record is read again and must be unchanged (same KV revision; terminal statuses
   never change, so only a late bookkeeping update of a finished run can lose); the
   fork markers are listed again;
3. the run record is deleted: from here on the run does not exist for any reader
   (``get`` is not found; listings skip index entries without a record);
4. the index entries and side keys, then the logs;
5. the tombstone.

Where the store's KV writes in batches (`storage.BatchKV`: every bundled backend), runs
go `BATCH_RUNS` at a time through the same steps, each step one transaction for the whole
batch instead of one per key: 1. all tombstones; 2. each record re-read; 3. the records
and then their index entries and side keys (with the tombstones of runs step 2 kept);
4. the logs (one `Ledger.drop`, which bounds its own transactions); 5. the tombstones.
A crash leaves at most one batch's tombstones for the next pass, as it leaves one run's.

Input blobs go last, for the whole pass (`input_claims`). A pass first finishes the
tombstones an interrupted pass left (their record already gone), and deletes run-order
entries without a record older than the cutoff (a create that crashed before its
record). One pass per session at a time: real passes hold the lease
``sessions/<sid>/workflows/prune`` (`PruneBusyError` otherwise). A dry run computes the
same plan and writes nothing at all (no lease, no tombstone).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Any, Final

from ...observability import metrics
from ...storage import (
    ConflictError as StorageConflictError,
)
from ...storage import (
    KeyNotFoundError,
    KVDelete,
    KVPut,
    KVWrite,
    Lease,
    LeaseHeldError,
    Store,
    validate_name,
)
from ..activities.journal import generation_log, journal_name
from ..errors import CorruptRecordError, WorkflowError
from ..records.input_claims import InputClaims
from ..records.run import (
    Run,
    RunStatus,
    decode_run,
    inputs_prefix,
    is_digest,
    is_id,
    pruning_key,
    runs_prefix,
)
from ..records.unfinished import ORPHAN_GRACE
from .storage import RetentionStorage, Swept

__all__ = [
    "BATCH_RUNS",
    "PRUNABLE_STATUSES",
    "InvalidDurationError",
    "InvalidStatusError",
    "PruneBusyError",
    "PruneReport",
    "RetentionError",
    "RetentionPolicy",
    "RunLogs",
    "parse_duration",
    "parse_statuses",
    "prune",
    "prune_lease_name",
]

PRUNABLE_STATUSES: Final = (RunStatus.COMPLETED, RunStatus.CANCELLED, RunStatus.FAILED)
DEFAULT_EVERY: Final = 3600.0
_LEASE_TTL: Final = 30.0
_MAX_DURATION: Final = timedelta(days=36500)
_DURATION: Final = re.compile(r"(?:(\d+)d)?(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?")
_TOMBSTONE_VERSION: Final = 1
BATCH_RUNS: Final = 100
"""Runs pruned together: bounds a batch's transactions (a run is about five KV writes,
within `storage.MAX_KV_WRITES` a transaction) and what a crash leaves to the next pass."""

RunLogs = Callable[[Run], Iterable[str]]
"""More ledger logs that belong to a run (the layers above name their own)."""


class RetentionError(WorkflowError):
    """Base of the retention errors."""


class InvalidDurationError(RetentionError, ValueError):
    def __init__(self, text: object, reason: str) -> None:
        self.text = text
        super().__init__(
            f"invalid duration {text!r}: {reason} (hint: a whole number of days, hours, "
            "minutes or seconds, e.g. 30d, 12h, 90m, 1d12h)"
        )


class InvalidStatusError(RetentionError, ValueError):
    def __init__(self, status: object) -> None:
        self.status = status
        names = ", ".join(str(s) for s in PRUNABLE_STATUSES)
        super().__init__(
            f"cannot prune runs with status {status!r}: only finished runs are pruned "
            f"(hint: a comma-separated list of {names})"
        )


class PruneBusyError(RetentionError):
    def __init__(self, session_id: str) -> None:
        self.session_id = session_id
        super().__init__(
            f"another prune of session {session_id} is running; try again when it is done"
        )


def parse_duration(text: object) -> timedelta:
    """``30d``, ``12h``, ``90m``, ``45s`` or a combination in that order (``1d12h``)."""
    if not isinstance(text, str):
        raise InvalidDurationError(text, f"a duration is text, not {type(text).__name__}")
    match = _DURATION.fullmatch(text.strip().lower())
    if not text.strip() or match is None or not any(match.groups()):
        raise InvalidDurationError(text, "not a duration")
    days, hours, minutes, seconds = (int(g) if g else 0 for g in match.groups())
    if days > _MAX_DURATION.days:
        raise InvalidDurationError(text, f"more than {_MAX_DURATION.days} days")
    value = timedelta(days=days, hours=hours, minutes=minutes, seconds=seconds)
    if value <= timedelta(0):
        raise InvalidDurationError(text, "it must be longer than zero")
    if value > _MAX_DURATION:
        raise InvalidDurationError(text, f"more than {_MAX_DURATION.days} days")
    return value


def parse_statuses(text: str | Iterable[str] | None) -> frozenset[RunStatus]:
    """``completed,cancelled,failed`` (or a subset; None: all three)."""
    if text is None:
        return frozenset(PRUNABLE_STATUSES)
    items = text.split(",") if isinstance(text, str) else list(text)
    chosen: set[RunStatus] = set()
    for item in items:
        name = item.strip().lower() if isinstance(item, str) else item
        if name == "":
            continue
        try:
            status = RunStatus(name)
        except ValueError:
            raise InvalidStatusError(item) from None
        if status not in PRUNABLE_STATUSES:
            raise InvalidStatusError(item)
        chosen.add(status)
    if not chosen:
        raise InvalidStatusError(text if isinstance(text, str) else ",".join(items))
    return frozenset(chosen)


@dataclass(frozen=True)
class RetentionPolicy:
    """Prune runs with one of ``statuses`` that finished more than ``older_than`` ago;
    a worker applies it to each session it owns every ``every`` seconds."""

    older_than: timedelta
    statuses: frozenset[RunStatus] = frozenset(PRUNABLE_STATUSES)
    every: float = DEFAULT_EVERY

    def __post_init__(self) -> None:
        if not isinstance(self.older_than, timedelta) or self.older_than <= timedelta(0):
            raise InvalidDurationError(self.older_than, "it must be a positive timedelta")
        parse_statuses(self.statuses)
        if not 1.0 <= self.every <= 7 * 86400:
            raise ValueError(f"retention every must be in 1..604800 seconds, not {self.every}")

    @classmethod
    def parse(
        cls, older_than: str, statuses: str | None = None, every: str | None = None
    ) -> RetentionPolicy:
        """From the command line's texts (``30d``; ``completed,failed``; ``1h``)."""
        period = DEFAULT_EVERY if every is None else parse_duration(every).total_seconds()
        return cls(parse_duration(older_than), parse_statuses(statuses), period)

    def to_json(self) -> dict[str, Any]:
        return {
            "older_than_seconds": int(self.older_than.total_seconds()),
            "statuses": sorted(str(s) for s in self.statuses),
            "every_seconds": self.every,
        }


def prune_lease_name(session_id: str) -> str:
    return validate_name(_session_base(session_id) + "workflows/prune")


def _session_base(session_id: str) -> str:
    return runs_prefix(session_id).removesuffix("workflows/runs/")


def _tombstone_key(session_id: str, run_id: str) -> str:
    return pruning_key(session_id, run_id)


def _iso(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


# -- the report ----------------------------------------------------------------------------


@dataclass
class PruneReport:
    """What a pass deleted (or, with ``dry_run``, would delete)."""

    session_id: str
    dry_run: bool
    cutoff: datetime
    policy: RetentionPolicy
    runs: dict[str, str] = field(default_factory=dict)  # run id -> status
    kept: dict[str, int] = field(
        default_factory=lambda: dict.fromkeys(
            ("requested", "forked", "parent", "changed", "unreadable"), 0
        )
    )
    records: int = 0
    kv_keys: int = 0
    logs: int = 0
    input_blobs: int = 0
    leftover_runs: int = 0
    leftover_keys: int = 0
    record_bytes: int = 0
    kv_bytes: int = 0
    log_bytes: int = 0
    input_bytes: int = 0
    sweep: Swept | None = None

    def by_status(self) -> dict[str, int]:
        counts = {str(s): 0 for s in PRUNABLE_STATUSES}
        for status in self.runs.values():
            counts[status] = counts.get(status, 0) + 1
        return counts

    @property
    def total_bytes(self) -> int:
        swept = self.sweep.bytes + self.sweep.exclusive_bytes if self.sweep is not None else 0
        return self.record_bytes + self.kv_bytes + self.log_bytes + self.input_bytes + swept

    def attachments_note(self) -> str:
        if self.sweep is None:
            return (
                "checkpoint state attachments were not counted or deleted: this store was "
                "written before attachment references were kept; run `flowledger "
                "backfill-refs` (flowledger.deploy.backfill_refs(store)) once, then prune again"
            )
        verb = "would be" if self.dry_run else "were"
        note = f"{self.sweep.attachments} unreferenced attachment(s) of the store {verb} swept"
        if self.dry_run:
            note += (
                f", and {self.sweep.exclusive_bytes} bytes of attachments only these runs "
                "refer to would be freed with them"
            )
        return note

    def to_json(self) -> dict[str, Any]:
        return {
            "session_id": self.session_id,
            "dry_run": self.dry_run,
            "cutoff": _iso(self.cutoff),
            "policy": self.policy.to_json(),
            "runs": {**self.by_status(), "total": len(self.runs)},
            "run_ids": sorted(self.runs),
            "kept": dict(self.kept),
            "deleted": {
                "records": self.records,
                "kv_keys": self.kv_keys,
                "logs": self.logs,
                "input_blobs": self.input_blobs,
                "leftover_runs": self.leftover_runs,
                "leftover_keys": self.leftover_keys,
            },
            "bytes": {
                "records": self.record_bytes,
                "kv_keys": self.kv_bytes,
                "logs": self.log_bytes,
                "input_blobs": self.input_bytes,
                "attachments": (
                    self.sweep.bytes + self.sweep.exclusive_bytes
                    if self.sweep is not None
                    else None
                ),
                "total": self.total_bytes,
            },
            "attachments": {
                "swept": self.sweep is not None,
                "count": self.sweep.attachments if self.sweep is not None else None,
                "note": self.attachments_note(),
            },
        }


# -- the pass ------------------------------------------------------------------------------


@dataclass
class _Plan:
    """Everything of one run to delete, besides its record and input."""

    keys: list[str]
    logs: list[str]
    digest: str

    def encode(self) -> bytes:
        doc = {
            "version": _TOMBSTONE_VERSION,
            "keys": self.keys,
            "logs": self.logs,
            "digest": self.digest,
        }
        return json.dumps(doc, separators=(",", ":")).encode()

    @classmethod
    def decode(cls, data: bytes) -> _Plan | None:
        try:
            doc = json.loads(data)
            keys, logs, digest = doc["keys"], doc["logs"], doc["digest"]
        except (ValueError, KeyError, TypeError):
            return None
        if not (
            isinstance(keys, list)
            and isinstance(logs, list)
            and all(isinstance(k, str) for k in keys + logs)
            and isinstance(digest, str)
        ):
            return None
        return cls(keys, logs, digest)


@dataclass
class _Scan:
    records: dict[str, Run] = field(default_factory=dict)
    sizes: dict[str, int] = field(default_factory=dict)
    keys: set[str] = field(default_factory=set)  # the record keys listed
    unreadable: int = 0
    side_keys: dict[str, list[str]] = field(default_factory=dict)  # run id -> its keys
    order_keys: dict[str, list[str]] = field(default_factory=dict)  # run id -> entries
    forks: dict[str, list[str]] = field(default_factory=dict)  # origin -> fork run ids
    requested: set[str] = field(default_factory=set)
    rebuilt: dict[str, list[str]] = field(default_factory=dict)  # run id -> rebuilt logs
    tombstones: list[str] = field(default_factory=list)


class _Pass:
    def __init__(
        self,
        store: Store,
        session_id: str,
        policy: RetentionPolicy,
        *,
        dry_run: bool,
        now: datetime,
        run_logs: Sequence[RunLogs],
    ) -> None:
        self.store = store
        self.kv = store.kv
        self.session_id = session_id
        self.policy = policy
        self.dry_run = dry_run
        self.cutoff = now - policy.older_than
        self.now = now
        self.run_logs = run_logs
        self.storage = RetentionStorage(store)
        self.claims = InputClaims(store.kv, store.blobs, store.leases)
        self.base = _session_base(session_id)
        self.report = PruneReport(session_id, dry_run, self.cutoff, policy)
        self.planned_logs: list[str] = []  # a dry run's, for the attachments they free
        self.lease: Lease | None = None

    # -- scanning --------------------------------------------------------------------------

    async def scan(self) -> _Scan:
        scan = _Scan()
        prefix = runs_prefix(self.session_id)
        workflows = self.base + "workflows/"
        order = workflows + "run-order/"
        paused = workflows + "paused/"  # pause-kind markers: paused/<kind>/<run>
        forks = workflows + "forks/"
        pending = (workflows + "pending/", workflows + "answers/")
        pruning = workflows + "pruning/"
        requests = (workflows + "resume-requests/", workflows + "cancel-requests/")
        for key in await self.kv.keys(workflows):
            if key.startswith(prefix):
                run_id = key[len(prefix) :]
                if is_id(run_id):
                    scan.keys.add(key)
            elif key.startswith(order):
                rank, _, run_id = key.rpartition("/")[2].partition("-")
                if is_id(run_id) and rank.isdigit():
                    scan.order_keys.setdefault(run_id, []).append(key)
            elif key.startswith(forks):
                origin, _, fork = key[len(forks) :].partition("/")
                if is_id(origin) and is_id(fork):
                    scan.forks.setdefault(origin, []).append(fork)
                    scan.side_keys.setdefault(fork, []).append(key)
            elif key.startswith(pending):
                run_id = key.rpartition("/")[2]
                if is_id(run_id):
                    scan.side_keys.setdefault(run_id, []).append(key)
            elif key.startswith(requests):
                scan.requested.add(key.rpartition("/")[2])
            elif key.startswith(paused):
                run_id = key.rpartition("/")[2]
                if is_id(run_id):
                    scan.side_keys.setdefault(run_id, []).append(key)
            elif key.startswith(pruning):
                scan.tombstones.append(key)
        for family in ("workflows/unfinished/", "workflows/bells/"):
            for key in await self.kv.keys(f"{family}{self.session_id}/"):
                run_id = key.rpartition("/")[2]
                if is_id(run_id):
                    scan.side_keys.setdefault(run_id, []).append(key)
        rebuilt = workflows + "activity-rebuilt/"
        for name in await self.store.ledger.names(rebuilt):
            run_id = name[len(rebuilt) :].partition("/")[0]
            scan.rebuilt.setdefault(run_id, []).append(name)
        for key in sorted(scan.keys):
            await self._read_record(scan, key)
        return scan

    async def _read_record(self, scan: _Scan, key: str) -> Run | None:
        try:
            entry = await self.kv.get(key)
        except KeyNotFoundError:
            scan.keys.discard(key)
            return None
        except Exception:
            scan.unreadable += 1
            return None
        try:
            run = decode_run(key, entry.value)
        except CorruptRecordError:
            scan.unreadable += 1
            return None
        run = replace(run, revision=entry.revision)
        scan.records[run.id] = run
        scan.sizes[run.id] = len(entry.value)
        return run

    # -- choosing --------------------------------------------------------------------------

    def choose(self, scan: _Scan) -> set[str]:
        chosen = {
            run.id
            for run in scan.records.values()
            if run.status in self.policy.statuses and run.updated_at <= self.cutoff
        }
        self.report.kept["requested"] += len(chosen & scan.requested)
        chosen -= scan.requested
        children: dict[str, list[str]] = {}
        for run in scan.records.values():
            if run.parent_run_id is not None:
                children.setdefault(run.parent_run_id, []).append(run.id)
        changed = True
        while changed:  # a kept run keeps its origin and its parent in turn
            changed = False
            for run_id in sorted(chosen):
                # A marker without its fork's record is a fork being made (or one whose
                # creation crashed): it keeps the origin, never the other way round.
                if any(f not in chosen for f in scan.forks.get(run_id, ())):
                    chosen.discard(run_id)
                    self.report.kept["forked"] += 1
                    changed = True
                elif any(c not in chosen for c in children.get(run_id, ())):
                    chosen.discard(run_id)
                    self.report.kept["parent"] += 1
                    changed = True
        self.report.kept["unreadable"] = scan.unreadable
        return chosen

    async def plan(self, scan: _Scan, run: Run) -> _Plan:
        keys = sorted(set(scan.order_keys.get(run.id, [])) | set(scan.side_keys.get(run.id, [])))
        keys += [
            f"{self.base}workflows/forks/{run.id}/{fork}" for fork in scan.forks.get(run.id, ())
        ]
        if run.forked_from is not None:  # the fork's own marker under its origin goes with it
            keys.append(f"{self.base}workflows/forks/{run.forked_from.run_id}/{run.id}")
        names = [
            journal_name(run.session_id, run.id),
            generation_log(run.session_id, run.id),
            *scan.rebuilt.get(run.id, ()),
            run.ledger_locator,
        ]
        for extra in self.run_logs:
            names.extend(extra(run))
        logs = [name for name in dict.fromkeys(names) if await self.store.ledger.tip(name) > 0]
        return _Plan(list(dict.fromkeys(keys)), logs, run.input.digest)

    # -- deleting --------------------------------------------------------------------------

    async def _erase(self, plan: _Plan) -> None:
        self.report.kv_bytes += await self.storage.key_bytes(plan.keys)
        self.report.log_bytes += await self.storage.log_bytes(plan.logs)
        self.planned_logs.extend(plan.logs)
        self.report.kv_keys += len(plan.keys)
        self.report.logs += len(plan.logs)
        if self.dry_run:
            return
        await self.storage.delete_keys(plan.keys, self._fence())
        await self.storage.drop_logs(plan.logs)

    async def leftovers(self, scan: _Scan) -> None:
        """Finish what an interrupted pass began (record gone, tombstone still there)."""
        for key in scan.tombstones:
            run_id = key.rpartition("/")[2]
            if run_id in scan.records:  # stopped before its record went: judged afresh
                if not self.dry_run:
                    await self.kv.delete(key, fence=self._fence())
                continue
            try:
                plan = _Plan.decode((await self.kv.get(key)).value)
            except KeyNotFoundError:
                continue
            if plan is not None:
                await self._erase(plan)
            self.report.leftover_runs += 1
            if not self.dry_run:
                await self.kv.delete(key, fence=self._fence())
        # Index entries written before a record that never came (a crashed create).
        grace = self.now - max(self.policy.older_than, timedelta(seconds=ORPHAN_GRACE))
        floor = int((grace - datetime(1970, 1, 1, tzinfo=UTC)).total_seconds() * 1_000_000)
        for run_id, entries in scan.order_keys.items():
            if run_id in scan.records or f"{runs_prefix(self.session_id)}{run_id}" in scan.keys:
                continue
            old = [k for k in entries if int(k.rpartition("/")[2].partition("-")[0]) < floor]
            if old:
                self.report.leftover_keys += len(old)
                if not self.dry_run:
                    await self.storage.delete_keys(old, self._fence())

    def _fence(self) -> Any:
        return None if self.lease is None else self.lease.fence

    async def prune_run(self, scan: _Scan, run: Run, chosen: set[str]) -> bool:
        plan = await self.plan(scan, run)
        key = f"{runs_prefix(self.session_id)}{run.id}"
        if not self.dry_run:
            tombstone = _tombstone_key(self.session_id, run.id)
            try:
                await self.kv.put(tombstone, plan.encode(), expected=0, fence=self._fence())
            except StorageConflictError:
                current = await self.kv.get(tombstone)
                await self.kv.put(
                    tombstone, plan.encode(), expected=current.revision, fence=self._fence()
                )
            if not await self._still_prunable(run, chosen):
                await self.kv.delete(tombstone, fence=self._fence())
                return False
            await self.kv.delete(key, fence=self._fence())
        self.report.records += 1
        self.report.record_bytes += scan.sizes.get(run.id, 0)
        self.report.runs[run.id] = str(run.status)
        await self._erase(plan)
        if not self.dry_run:
            await self.kv.delete(_tombstone_key(self.session_id, run.id), fence=self._fence())
        return True

    async def prune_batch(self, scan: _Scan, runs: list[Run], chosen: set[str]) -> set[str]:
        """`prune_run`'s steps for many runs, each step one write for all of them."""
        plans = {run.id: await self.plan(scan, run) for run in runs}
        tombstones = [
            KVPut(_tombstone_key(self.session_id, run.id), plans[run.id].encode(), 0)
            for run in runs
        ]
        try:
            await self.storage.write(tombstones, self._fence())
        except StorageConflictError:
            # A tombstone is there already (the leftovers were finished under the lease,
            # so only a pass outside it could have written it): one run at a time, which
            # takes the tombstone over.
            return {run.id for run in runs if await self.prune_run(scan, run, chosen)}
        # One listing of the fork markers for the batch, after all its tombstones.
        markers: dict[str, list[str]] = {}
        for marker in await self.kv.keys(f"{self.base}workflows/forks/"):
            origin = marker.removeprefix(f"{self.base}workflows/forks/").partition("/")[0]
            markers.setdefault(origin, []).append(marker)
        going = [run for run in runs if await self._still_prunable(run, chosen, markers)]
        gone_ids = {run.id for run in going}
        staying = [run for run in runs if run.id not in gone_ids]
        keys: list[str] = []
        logs: list[str] = []
        for run in going:
            plan = plans[run.id]
            self.report.records += 1
            self.report.record_bytes += scan.sizes.get(run.id, 0)
            self.report.runs[run.id] = str(run.status)
            self.report.kv_keys += len(plan.keys)
            self.report.logs += len(plan.logs)
            keys.extend(plan.keys)
            logs.extend(plan.logs)
        keys = list(dict.fromkeys(keys))  # a fork marker is in its origin's and its fork's plan
        logs = list(dict.fromkeys(logs))
        self.report.kv_bytes += await self.storage.key_bytes(keys)
        self.report.log_bytes += await self.storage.log_bytes(logs)
        # Records first: if the batch is cut in chunks, no index entry loses its record
        # while the record stays.
        deletes: list[KVWrite] = [
            KVDelete(f"{runs_prefix(self.session_id)}{run.id}") for run in going
        ]
        deletes += [KVDelete(key) for key in keys]
        deletes += [KVDelete(_tombstone_key(self.session_id, run.id)) for run in staying]
        await self.storage.write(deletes, self._fence())
        await self.storage.drop_logs(logs)
        done = [KVDelete(_tombstone_key(self.session_id, run.id)) for run in going]
        await self.storage.write(done, self._fence())
        return gone_ids

    async def _still_prunable(
        self, run: Run, chosen: set[str], markers: Mapping[str, list[str]] | None = None
    ) -> bool:
        """The record is unchanged and no fork outside ``chosen`` refers to it. The fork
        markers are listed now, or taken from ``markers``: a listing of every marker of
        the session made after this run's tombstone was written."""
        key = f"{runs_prefix(self.session_id)}{run.id}"
        try:
            entry = await self.kv.get(key)
        except KeyNotFoundError:
            return False
        if entry.revision != run.revision:
            self.report.kept["changed"] += 1
            return False
        forks = f"{self.base}workflows/forks/{run.id}/"
        listed = await self.kv.keys(forks) if markers is None else markers.get(run.id, [])
        for marker in listed:
            fork = marker[len(forks) :]
            if fork in chosen or not is_id(fork):
                continue
            # A marker whose fork record is missing belongs to a fork being made: its
            # creator writes the marker before the record, so this read and that write
            # cannot both miss each other (a pruned fork takes its marker with it).
            self.report.kept["forked"] += 1
            return False
        return True

    async def inputs(self, scan: _Scan, pruned: set[str]) -> None:
        if scan.unreadable:
            return  # a record we cannot read may refer to any input: delete none
        referenced = {run.input.digest for rid, run in scan.records.items() if rid not in pruned}
        prefix = inputs_prefix(self.session_id)
        stored = [k[len(prefix) :] for k in await self.store.blobs.list(prefix)]
        candidates = sorted(d for d in stored if is_digest(d) and d not in referenced)
        if not candidates:
            return
        if self.dry_run or self.lease is None:
            for digest in candidates:
                self.report.input_blobs += 1
                self.report.input_bytes += await self.storage.blob_bytes(prefix + digest)
            return
        condemned = await self.claims.condemn(self.session_id, candidates, self.lease)
        # Records created since the scan may refer to a condemned input: those stay.
        keep: set[str] = set()
        for key in await self.kv.keys(runs_prefix(self.session_id)):
            if key in scan.keys:
                continue
            try:
                entry = await self.kv.get(key)
                keep.add(decode_run(key, entry.value).input.digest)
            except KeyNotFoundError:
                continue
            except CorruptRecordError:
                keep = set(condemned)
                break
        try:
            for digest in condemned:
                if digest in keep:
                    continue
                size = await self.storage.blob_bytes(prefix + digest)
                await self.claims.delete(self.session_id, digest, self.lease)
                self.report.input_blobs += 1
                self.report.input_bytes += size
        finally:
            await self.claims.release(self.session_id, condemned, self.lease)

    async def run(self) -> PruneReport:
        scan = await self.scan()
        await self.leftovers(scan)
        chosen = self.choose(scan)
        pruned: set[str] = set()
        ordered = [
            scan.records[r] for r in sorted(chosen, key=lambda r: scan.records[r].updated_at)
        ]
        if self.dry_run or not self.storage.batched:
            for run in ordered:
                if await self.prune_run(scan, run, chosen):
                    pruned.add(run.id)
        else:
            for start in range(0, len(ordered), BATCH_RUNS):
                pruned |= await self.prune_batch(scan, ordered[start : start + BATCH_RUNS], chosen)
        await self.inputs(scan, pruned)
        self.report.sweep = await self.storage.sweep(
            dry_run=self.dry_run, planned=self.planned_logs if self.dry_run else ()
        )
        return self.report


async def prune(
    store: Store,
    session_id: str,
    policy: RetentionPolicy,
    *,
    dry_run: bool = False,
    now: datetime | None = None,
    run_logs: Sequence[RunLogs] = (),
) -> PruneReport:
    """One retention pass over ``session_id`` (see the module documentation).

    ``now`` (aware UTC; default: the wall clock) is what ages are measured from;
    ``run_logs`` name more per-run logs to delete. With ``dry_run`` nothing is written
    (a read-only store will do). `PruneBusyError` when another pass holds the session's
    prune lease."""
    if not is_id(session_id):
        raise ValueError(f"session ID must be a nonzero lowercase UUID, not {session_id!r}")
    moment = datetime.now(UTC) if now is None else now
    if moment.tzinfo is None:
        raise ValueError("now must be an aware datetime")
    work = _Pass(
        store, session_id, policy, dry_run=dry_run, now=moment.astimezone(UTC), run_logs=run_logs
    )
    if dry_run:
        return await work.run()
    try:
        work.lease = await store.leases.acquire(prune_lease_name(session_id), ttl=_LEASE_TTL)
    except LeaseHeldError:
        raise PruneBusyError(session_id) from None
    try:
        report = await work.run()
    finally:
        await work.lease.release()
    for status, runs in report.by_status().items():
        metrics.retention_deleted(status, runs)
    return report
