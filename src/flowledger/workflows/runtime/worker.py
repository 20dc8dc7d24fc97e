"""`Worker`: a process that owns sessions with unfinished runs and executes them.

Front doors only write pending runs and requests; workers do the work. A worker makes
one *tick* whenever it is woken (a front door's write of work wakes the ``work``
channel, see `records.wakeups`; something due by time wakes ``due``), and otherwise
every ``poll`` seconds (the slow fallback poll, with a little jitter; see `WorkWaiter`)
and whenever its heartbeat is due:

1. It lists ``workflows/`` once: the unfinished-run index (`UnfinishedIndex`), the
   request bells (`RunRequests`) and the other workers' heartbeat records
   (``workflows/workers/<worker id>``: the sessions each one owns and its lease TTL),
   and reads those records.
2. For each session it owns it calls `Supervisor.poll` with that session's indexed runs
   and bells (start new pending runs, carry out resume and cancel requests, re-adopt
   stuck runs, drop stale index entries). A session whose lease was lost is let go; one
   without unfinished runs or active schedules for ``idle_release`` seconds is released.
   An owned session with active schedules also runs its `ScheduleLoop`, woken when
   they change (``workflows/schedules/`` entries name the sessions with active
   schedules: they need an owner even without runs). An idle tick costs one listing
   and one read per other worker, however many sessions there are.
3. If it owns more than its fair share while a live peer has room, it hands one idle
   session over (see below). Then it claims sessions that have unfinished runs and no
   live owner: a `Supervisor` per session (`WorkflowSession.build` +
   `Supervisor.activate`, which takes the session lease and adopts every indexed run).
   `SessionOwnedError` only means someone else holds it (the claim is retried after a
   short backoff).
4. It rewrites its own heartbeat record when what it owns changed, and at least every
   ``lease_ttl / 3`` seconds.

Sharing the work. A worker claims at most its fair share, ``ceil(sessions with
unfinished runs / live workers)`` (and at most ``max_sessions``), and at most half of
what is left of it per tick, so workers that start together converge on even shares; a
session left unclaimed for two ticks may be claimed beyond the share. A worker that owns
more than its share (one that was alone when the others joined) releases one *idle*
session per tick - no start, adoption or request of it in progress, so no work is
interrupted and redone - as long as some live peer owns fewer than the share (and fewer
than its ``max_sessions``); that peer claims it on its next tick. A busy session is
never handed over. A worker is *live* while its heartbeat record keeps changing: each
worker measures that on its own clock (how long since it saw the record's revision
change), so wall clocks that disagree do not matter.
Sessions named by a live worker's record are not tried; when a worker dies, its record
stops changing, and after its lease TTL both its leases and its record have expired,
so the others claim its sessions and adopt its runs from their last durable checkpoint.
Balancing is only a hint: correctness comes from the session lease, registry
compare-and-swap and the checkpoint ledger's compare-and-append.

`run` returns after `stop` is set (SIGTERM/SIGINT in ``flowledger worker``): the runs
in flight stop at their next step boundary (`Supervisor.stop`; the runs left unfinished
are logged), every supervisor is shut down (its lease released, so the sessions can be
claimed at once) and the heartbeat record deleted.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import math
import os
import random
import socket
import time
import uuid
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final

from ...clock import Clock, system_clock
from ...storage import ConflictError as StorageConflictError
from ...storage import CorruptDataError, KeyNotFoundError, Store, validate_name
from ..errors import SessionOwnedError
from ..records.registry import RunRegistry
from ..records.requests import BELLS_PREFIX
from ..records.run import is_id, runs_prefix
from ..records.unfinished import UNFINISHED_PREFIX, UnfinishedIndex
from ..records.wakeups import DUE, WORK
from ..retention.pruning import RetentionPolicy, RunLogs
from ..retention.schedule import RetentionSchedule
from ..schedules.store import ACTIVE_PREFIX
from .catalog import Catalog
from .ownership import left_message
from .session import WorkflowSession
from .waiting import WorkWaiter

if TYPE_CHECKING:  # imported when first used: the schedules package imports the runtime
    from ..schedules.loop import ScheduleLoop

__all__ = [
    "WORKERS_PREFIX",
    "Worker",
    "WorkerRecord",
    "WorkerSettings",
    "read_workers",
    "reindex",
    "worker_key",
]

log = logging.getLogger(__name__)

WORKFLOWS_PREFIX: Final = "workflows/"
WORKERS_PREFIX: Final = "workflows/workers/"
RECORD_VERSION: Final = 1
FORGET_DEAD_AFTER: Final = 60.0  # seconds (at least) before a dead worker's record is deleted


def worker_key(worker_id: str) -> str:
    if not is_id(worker_id):
        raise ValueError(f"worker ID must be a nonzero lowercase UUID, not {worker_id!r}")
    return validate_name(WORKERS_PREFIX + worker_id)


@dataclass(frozen=True)
class WorkerSettings:
    """``lease_ttl``: seconds a dead worker's sessions stay locked (renewed every third of
    it); ``poll``: seconds between ticks when nothing wakes the worker (the fallback
    poll, see `WorkWaiter`; every ``FAST_POLL`` = 0.5 s while wake-ups are not
    delivered); ``max_sessions``: sessions owned at most;
    ``runs_per_session``: runs of one session executed at once; ``idle_release``:
    seconds a session without unfinished runs is kept (default ``max(2, 4 * poll)``);
    ``retention``: prune each owned session's old finished runs (`RetentionSchedule`;
    default: the catalog's ``retention``, if any)."""

    lease_ttl: float = 15.0
    poll: float = 5.0
    max_sessions: int = 100
    runs_per_session: int = 4
    idle_release: float | None = None
    retention: RetentionPolicy | None = None

    def __post_init__(self) -> None:
        if not 0.05 <= self.lease_ttl <= 3600:
            raise ValueError(f"lease_ttl must be in 0.05..3600 seconds, not {self.lease_ttl}")
        if not 0.01 <= self.poll <= 60:
            raise ValueError(f"poll must be in 0.01..60 seconds, not {self.poll}")
        if not 1 <= self.max_sessions <= 10_000:
            raise ValueError(f"max_sessions must be in 1..10000, not {self.max_sessions}")
        if not 1 <= self.runs_per_session <= 64:
            raise ValueError(f"runs_per_session must be in 1..64, not {self.runs_per_session}")
        if self.idle_release is not None and not self.idle_release >= 0:
            raise ValueError(f"idle_release must be >= 0 seconds, not {self.idle_release}")

    @property
    def release_after(self) -> float:
        return self.idle_release if self.idle_release is not None else max(2.0, 4 * self.poll)


@dataclass(frozen=True)
class WorkerRecord:
    """A worker's heartbeat record as stored (``revision`` is its KV revision)."""

    worker_id: str
    host: str
    pid: int
    lease_ttl: float
    sessions: tuple[str, ...]
    started_at: float
    written_at: float
    revision: int = 0
    max_sessions: int | None = None  # None in records of workers that did not say

    def encode(self) -> bytes:
        return json.dumps(
            {
                "version": RECORD_VERSION,
                "host": self.host,
                "pid": self.pid,
                "lease_ttl": self.lease_ttl,
                "sessions": list(self.sessions),
                "started_at": self.started_at,
                "written_at": self.written_at,
                "max_sessions": self.max_sessions,
            },
            separators=(",", ":"),
        ).encode()

    @classmethod
    def decode(cls, worker_id: str, data: bytes, revision: int) -> WorkerRecord | None:
        try:
            doc = json.loads(data)
            if doc.get("version") != RECORD_VERSION:
                return None
            sessions = tuple(s for s in doc["sessions"] if is_id(s))
            limit = doc.get("max_sessions")
            return cls(
                worker_id,
                str(doc["host"]),
                int(doc["pid"]),
                float(doc["lease_ttl"]),
                sessions,
                float(doc["started_at"]),
                float(doc["written_at"]),
                revision,
                int(limit) if limit is not None else None,
            )
        except (ValueError, KeyError, TypeError, AttributeError):
            return None


async def read_workers(store: Store) -> list[WorkerRecord]:
    """Every worker heartbeat record in the store (live or not), for status displays."""
    records: list[WorkerRecord] = []
    for key in await store.kv.keys(WORKERS_PREFIX):
        worker_id = key[len(WORKERS_PREFIX) :]
        if not is_id(worker_id):
            continue
        try:
            entry = await store.kv.get(key)
        except (KeyNotFoundError, CorruptDataError):
            continue
        record = WorkerRecord.decode(worker_id, entry.value, entry.revision)
        if record is not None:
            records.append(record)
    return records


async def reindex(store: Store) -> int:
    """Index every unfinished run of every session (runs written before the index
    existed); return how many entries were added. Reads every run record once."""
    registry = RunRegistry(store.kv)
    index = UnfinishedIndex(store.kv)
    indexed = {(sid, rid) for sid, rids in (await index.scan()).items() for rid in rids}
    added = 0
    for key in await store.kv.keys("sessions/"):
        parts = key.split("/")
        if len(parts) != 5 or parts[2:4] != ["workflows", "runs"]:
            continue
        session_id, run_id = parts[1], parts[4]
        if not (is_id(session_id) and is_id(run_id)) or not key.startswith(runs_prefix(session_id)):
            continue
        run = await registry.get(session_id, run_id)
        if not run.status.terminal and (session_id, run_id) not in indexed:
            await index.add(session_id, run_id)
            added += 1
    return added


@dataclass(eq=False)
class _Owned:
    session: WorkflowSession
    idle_since: float | None = None
    schedules: ScheduleLoop | None = None  # started once it has an active schedule
    scheduled: frozenset[str] = frozenset()  # its active schedules at the last tick


@dataclass(eq=False)
class _Peer:
    revision: int
    changed_at: float  # our monotonic clock when we saw the revision change
    ttl: float
    sessions: frozenset[str] = field(default_factory=frozenset)
    max_sessions: int | None = None


class Worker:
    """Claims sessions with unfinished runs and executes them (see the module docs)."""

    def __init__(
        self,
        store: Store,
        catalog: Catalog,
        settings: WorkerSettings | None = None,
        *,
        worker_id: str | None = None,
        prepare_session: Callable[[WorkflowSession], Awaitable[object]] | None = None,
        run_logs: Sequence[RunLogs] = (),
        clock: Clock | None = None,
    ) -> None:
        self.store = store
        self.catalog = catalog
        # Runs of the session before it is activated (adoption resolves its runs'
        # definitions then): a layer above registers the session's own definitions.
        self.prepare_session = prepare_session
        self.settings = settings or WorkerSettings()
        # The sessions' clock (`WorkflowSession.build`), also what retention ages and
        # schedule slots are read from; None: the system clock, and each definition keeps
        # the clock it was compiled with.
        self.clock = clock
        self.worker_id = worker_id or str(uuid.uuid4())
        worker_key(self.worker_id)
        self.index = UnfinishedIndex(store.kv)
        self._owned: dict[str, _Owned] = {}
        self._peers: dict[str, _Peer] = {}
        self._retry_claim: dict[str, float] = {}
        self._unowned_since: dict[str, float] = {}
        self._record_revision = 0
        self._record_sessions: tuple[str, ...] | None = None
        self._record_due = 0.0
        # The worker record (liveness, read by other processes) is on the machine's clock.
        self._started_at = time.time()
        self._closed = False
        self.ticks = 0
        self.waiter: WorkWaiter | None = None  # while `run` runs
        policy = self.settings.retention or catalog.retention
        self.retention = (
            None
            if policy is None
            else RetentionSchedule(
                store, policy, run_logs=run_logs, clock=(clock or system_clock).now
            )
        )

    @property
    def sessions(self) -> list[str]:
        """The sessions this worker owns now."""
        return sorted(self._owned)

    # -- the loop --------------------------------------------------------------------------

    async def run(self, stop: asyncio.Event) -> None:
        """Tick until ``stop`` is set, then `close`."""
        log.info(
            "worker %s: wake-ups %s; polling every %gs, lease TTL %gs, at most %d sessions",
            self.worker_id,
            self.store.wakeups.delivery or "in-process",
            self.settings.poll,
            self.settings.lease_ttl,
            self.settings.max_sessions,
        )
        waiter = WorkWaiter(self.store.wakeups, (WORK, DUE), self.settings.poll)
        await waiter.open()
        self.waiter = waiter
        try:
            while not stop.is_set():
                try:
                    await self.tick()
                except Exception as exc:  # the database may be away for a moment
                    log.warning("worker %s: tick failed: %s", self.worker_id, exc)
                delay = waiter.interval * random.uniform(0.8, 1.2)
                # Woken or not, the heartbeat is due every lease_ttl / 3 (peers judge
                # liveness by it).
                due_in = self._record_due - time.monotonic()
                if due_in > 0:  # (past due: the beat failed, so wait as usual)
                    delay = min(delay, due_in)
                await waiter.wait(delay, stop)
        finally:
            await waiter.close()
            await self.close()

    async def tick(self) -> None:
        """One round: read the index, bells and peers, serve owned sessions, claim, beat."""
        self.ticks += 1
        view: dict[str, list[str]] = {}
        bells: dict[str, list[str]] = {}
        scheduled: dict[str, list[str]] = {}
        peers: list[str] = []
        for key in await self.store.kv.keys(WORKFLOWS_PREFIX):
            if key.startswith(WORKERS_PREFIX):
                peers.append(key[len(WORKERS_PREFIX) :])
                continue
            for prefix, found in (
                (UNFINISHED_PREFIX, view),
                (BELLS_PREFIX, bells),
                (ACTIVE_PREFIX, scheduled),
            ):
                if key.startswith(prefix):
                    session_id, sep, run_id = key[len(prefix) :].partition("/")
                    if sep and is_id(session_id) and is_id(run_id):
                        found.setdefault(session_id, []).append(run_id)
        live = await self._read_peers(peers)
        await self._serve(view, bells, scheduled)
        if self.retention is not None:
            self.retention.poke(self._owned)
        # a session with active schedules needs an owner as one with unfinished runs does
        wanted = {s: view.get(s, []) + scheduled.get(s, []) for s in {*view, *scheduled}}
        await self._shed(wanted, live)
        await self._claim(wanted, live)
        await self._beat()

    # -- peers -----------------------------------------------------------------------------

    async def _read_peers(self, worker_ids: list[str]) -> dict[str, _Peer]:
        """The live peers (this worker excluded), refreshing what we know of each."""
        now = time.monotonic()
        seen: set[str] = set()
        for worker_id in worker_ids:
            if worker_id == self.worker_id or not is_id(worker_id):
                continue
            try:
                entry = await self.store.kv.get(worker_key(worker_id))
            except (KeyNotFoundError, CorruptDataError):
                continue  # a damaged heartbeat is rewritten whole by its worker
            seen.add(worker_id)
            peer = self._peers.get(worker_id)
            if peer is not None and peer.revision == entry.revision:
                continue
            record = WorkerRecord.decode(worker_id, entry.value, entry.revision)
            ttl = record.lease_ttl if record is not None else self.settings.lease_ttl
            sessions = frozenset(record.sessions) if record is not None else frozenset()
            limit = record.max_sessions if record is not None else None
            self._peers[worker_id] = _Peer(entry.revision, now, ttl, sessions, limit)
        for worker_id in [w for w in self._peers if w not in seen]:
            del self._peers[worker_id]
        live: dict[str, _Peer] = {}
        for worker_id, peer in self._peers.items():
            silent = now - peer.changed_at
            if silent < peer.ttl:
                live[worker_id] = peer
            elif silent > max(FORGET_DEAD_AFTER, 10 * peer.ttl):
                with contextlib.suppress(Exception):
                    await self.store.kv.delete(worker_key(worker_id))
        return live

    async def _beat(self) -> None:
        sessions = tuple(self.sessions)
        now = time.monotonic()
        if sessions == self._record_sessions and now < self._record_due:
            return
        record = WorkerRecord(
            self.worker_id,
            socket.gethostname(),
            os.getpid(),
            self.settings.lease_ttl,
            sessions,
            self._started_at,
            time.time(),
            max_sessions=self.settings.max_sessions,
        )
        key = worker_key(self.worker_id)
        try:
            self._record_revision = await self.store.kv.put(
                key, record.encode(), expected=self._record_revision
            )
        except StorageConflictError:  # deleted as dead after a long stall: write it anew
            self._record_revision = 0
            self._record_revision = await self.store.kv.put(key, record.encode(), expected=0)
        self._record_sessions = sessions
        self._record_due = now + self.settings.lease_ttl / 3

    # -- owned sessions --------------------------------------------------------------------

    async def _serve(
        self,
        view: Mapping[str, list[str]],
        bells: Mapping[str, list[str]],
        scheduled: Mapping[str, list[str]],
    ) -> None:
        now = time.monotonic()
        polls: list[Any] = []
        for session_id, owned in list(self._owned.items()):
            supervisor = owned.session.supervisor
            if not supervisor.active:
                log.warning("worker %s: lost session %s", self.worker_id, session_id)
                await self._let_go(session_id)
                continue
            runs = view.get(session_id, [])
            if runs or scheduled.get(session_id):
                owned.idle_since = None
            elif owned.idle_since is None:
                owned.idle_since = now
            elif now - owned.idle_since >= self.settings.release_after and supervisor.idle:
                log.info("worker %s: released idle session %s", self.worker_id, session_id)
                await self._let_go(session_id)
                continue
            self._schedule(owned, frozenset(scheduled.get(session_id, ())))
            polls.append(supervisor.poll(runs, bells.get(session_id, [])))
        for result in await asyncio.gather(*polls, return_exceptions=True):
            if isinstance(result, Exception):
                log.warning("worker %s: serving a session failed: %s", self.worker_id, result)

    def _schedule(self, owned: _Owned, active: frozenset[str]) -> None:
        """Run the session's `ScheduleLoop` once it has an active schedule, and wake it
        when the set of active schedules changed (added, paused, resumed, removed)."""
        if active == owned.scheduled:
            return
        owned.scheduled = active
        if owned.schedules is None:
            from ..schedules.loop import ScheduleLoop

            owned.schedules = ScheduleLoop(owned.session)
            owned.schedules.start()
        else:
            owned.schedules.poke()

    async def _stop(self, session_id: str) -> None:
        owned = self._owned.get(session_id)
        if owned is None:
            return
        try:
            left = await owned.session.supervisor.stop()
        except Exception as exc:
            log.warning("worker %s: stopping session %s: %s", self.worker_id, session_id, exc)
            return
        for run in left:
            log.info("worker %s: %s", self.worker_id, left_message(run))

    async def _let_go(self, session_id: str) -> None:
        owned = self._owned.pop(session_id, None)
        if owned is None:
            return
        if owned.schedules is not None:
            await owned.schedules.close()
        try:
            await owned.session.supervisor.shutdown()
        except Exception as exc:
            log.warning("worker %s: shutting session %s down: %s", self.worker_id, session_id, exc)

    async def _shed(self, view: Mapping[str, list[str]], live: Mapping[str, _Peer]) -> None:
        """Release one idle session if this worker owns more than its fair share and a live
        peer has room for it (see the module documentation)."""
        if not live:
            return
        share = math.ceil(len(view) / (len(live) + 1))
        mine = [s for s in self._owned if s in view]
        if len(mine) <= share:
            return

        def has_room(peer: _Peer) -> bool:
            owned = sum(1 for s in peer.sessions if s in view)
            return owned < share and (peer.max_sessions is None or owned < peer.max_sessions)

        if not any(has_room(peer) for peer in live.values()):
            return
        for session_id in mine:
            if self._owned[session_id].session.supervisor.idle:
                log.info("worker %s: handed over session %s", self.worker_id, session_id)
                await self._let_go(session_id)
                return

    # -- claims ----------------------------------------------------------------------------

    async def _claim(self, view: Mapping[str, list[str]], live: Mapping[str, _Peer]) -> None:
        now = time.monotonic()
        taken = set().union(*(peer.sessions for peer in live.values())) if live else set()
        candidates = [s for s in view if s not in self._owned and s not in taken]
        for session_id in [s for s in self._unowned_since if s not in candidates]:
            del self._unowned_since[session_id]
        for session_id in [s for s, until in self._retry_claim.items() if until <= now]:
            del self._retry_claim[session_id]
        share = math.ceil(len(view) / (len(live) + 1)) if view else 0
        room = min(self.settings.max_sessions, share) - len(self._owned)
        # At most half the room per tick: workers that start together (each not yet seeing
        # the others) converge on even shares instead of the first one taking everything.
        budget = max(1, math.ceil(room / 2))
        starved_after = max(2 * self.settings.poll, 0.2)
        random.shuffle(candidates)
        for session_id in candidates:
            first_seen = self._unowned_since.setdefault(session_id, now)
            if session_id in self._retry_claim or self._closed:
                continue
            if len(self._owned) >= self.settings.max_sessions or budget <= 0:
                return
            starving = now - first_seen >= starved_after
            if room <= 0 and not starving:
                continue
            if await self._try_claim(session_id, len(view[session_id])):
                room -= 1
                budget -= 1
                self._unowned_since.pop(session_id, None)

    async def _try_claim(self, session_id: str, indexed: int) -> bool:
        session = WorkflowSession.build(
            self.store,
            session_id,
            self.catalog,
            lease_ttl=self.settings.lease_ttl,
            max_workers=self.settings.runs_per_session,
            adopt_from_index=True,
            clock=self.clock,
        )
        try:
            if self.prepare_session is not None:
                await self.prepare_session(session)
            await session.supervisor.activate()
        except SessionOwnedError:
            backoff = min(self.settings.lease_ttl / 4, 2.0)
            self._retry_claim[session_id] = time.monotonic() + backoff
            return False
        except Exception as exc:
            log.warning(
                "worker %s: claiming session %s failed: %s", self.worker_id, session_id, exc
            )
            self._retry_claim[session_id] = time.monotonic() + self.settings.lease_ttl
            return False
        self._owned[session_id] = _Owned(session)  # its schedules start on the next tick
        log.info(
            "worker %s: claimed session %s (%d unfinished runs)",
            self.worker_id,
            session_id,
            indexed,
        )
        return True

    # -- shutdown --------------------------------------------------------------------------

    async def close(self) -> None:
        """Stop every owned session's runs at their next step boundary, name the runs left
        unfinished (other workers adopt them), shut every supervisor down (releasing its
        lease) and delete the heartbeat. Cancelled while waiting for the boundary (a
        second signal), it lets go at once: the steps in flight are run again elsewhere."""
        if self._closed:
            return
        self._closed = True
        if self.retention is not None:
            await self.retention.close()
        sessions = list(self._owned)
        if sessions:
            log.info(
                "worker %s: stopping; runs in flight stop at their next step boundary",
                self.worker_id,
            )
        try:
            await asyncio.gather(*(self._stop(s) for s in sessions), return_exceptions=True)
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if task is not None:
                task.uncancel()
            log.warning("worker %s: stopping now; steps in flight will run again", self.worker_id)
        await asyncio.gather(*(self._let_go(s) for s in sessions), return_exceptions=True)
        with contextlib.suppress(Exception):
            await self.store.kv.delete(worker_key(self.worker_id))
        log.info("worker %s: stopped (released %d sessions)", self.worker_id, len(sessions))
