"""`WorkflowSession`: everything that serves one session over one store, put together.

A host (the CLI, the MCP server, a worker) opens a store, binds its application catalog
to the store's checkpoints, and builds the session's registry, input store, activity
journal and supervisor from it. `default_session_id` gives local tools one stable session
per database: the first caller creates it (compare-and-swap), everyone else reads it.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final

from ... import flow
from ...clock import Clock, system_clock
from ...storage import ConflictError as StorageConflictError
from ...storage import KeyNotFoundError, Store
from ..activities.journal import ActivityJournal
from ..records.answers import AnswerStore
from ..records.input_claims import InputClaims
from ..records.inputs import InputStore
from ..records.pending import PendingStore
from ..records.registry import RunRegistry
from ..records.requests import RunRequests
from ..records.run import is_id
from ..records.timers import TimerIndex
from ..records.unfinished import UnfinishedIndex
from .catalog import Catalog
from .supervisor import Supervisor

if TYPE_CHECKING:
    from ..schedules.deployments import DeploymentStarter

__all__ = ["DEFAULT_SESSION_KEY", "WorkflowSession", "default_session_id"]

DEFAULT_SESSION_KEY: Final = "flowledger/default-session"


async def default_session_id(store: Store) -> str:
    """The database's default session, created on first use. A read-only store is not
    written: without a default session yet, a fresh ID (of a session with no runs)."""
    try:
        entry = await store.kv.get(DEFAULT_SESSION_KEY)
    except KeyNotFoundError:
        created = str(uuid.uuid4())
        if store.read_only:
            return created
        try:
            await store.kv.put(DEFAULT_SESSION_KEY, created.encode(), expected=0)
            return created
        except StorageConflictError:  # another process created it first
            entry = await store.kv.get(DEFAULT_SESSION_KEY)
    session_id = entry.value.decode("ascii", errors="replace")
    if not is_id(session_id):
        raise ValueError(f"the stored default session {session_id!r} is not a UUID")
    return session_id


@dataclass(eq=False)
class WorkflowSession:
    store: Store
    session_id: str
    catalog: Catalog
    checkpoints: flow.CheckpointStore
    registry: RunRegistry
    inputs: InputStore
    journal: ActivityJournal
    supervisor: Supervisor
    requests: RunRequests
    pending: PendingStore
    answers: AnswerStore
    # set by a process that serves deployments (the deploy layer, above this one), so
    # schedules can start deployments' runs (`flowledger.workflows.schedules.deployments`)
    deployment_starter: DeploymentStarter | None = None
    # what every time the session records or decides by comes from (`build`)
    clock: Clock = field(default=system_clock)

    @classmethod
    def build(
        cls,
        store: Store,
        session_id: str,
        catalog: Catalog,
        *,
        lease_ttl: float | None = None,
        max_workers: int = 4,
        poll_interval: float | None = None,
        adopt_from_index: bool = False,
        clock: Clock | None = None,
    ) -> WorkflowSession:
        """Bind ``catalog`` to ``store``'s checkpoints and assemble the session's parts.
        Nothing is activated: call ``session.supervisor.activate()`` to own the session.

        The registry keeps the unfinished-run index (which workers read to find work).
        ``poll_interval`` makes the owning supervisor look for front-door requests on
        its own every so many seconds (a worker drives `Supervisor.poll` itself);
        ``adopt_from_index`` makes activation adopt the indexed runs instead of listing
        every run of the session.

        ``clock`` (default: the system clock) is the session's one clock: the supervisor's
        timer loop waits on it, run records and checkpoints are stamped from it and the
        deadlines, wake times and ages the session decides by are read from it. Given, it
        also replaces the clock each definition's graph was compiled with
        (`flow.Graph.compile`); not given, those keep their own."""
        checkpoints = flow.LedgerCheckpointStore(store.ledger)
        bound = catalog.bound(checkpoints, clock=clock)
        one_clock = clock or system_clock
        journal = ActivityJournal(store.ledger)
        registry = RunRegistry(
            store.kv, index=UnfinishedIndex(store.kv), witness=journal.has_records
        )
        inputs = InputStore(store.blobs, claims=InputClaims(store.kv, store.blobs, store.leases))
        requests = RunRequests(store.kv, clock=lambda: one_clock.now().timestamp())
        pending = PendingStore(store.kv)
        answers = AnswerStore(store.kv)
        supervisor = Supervisor(
            session_id,
            catalog=bound,
            registry=registry,
            inputs=inputs,
            leases=store.leases,
            publisher=journal,
            lease_ttl=lease_ttl,
            max_workers=max_workers,
            requests=requests,
            poll_interval=poll_interval,
            adopt_from_index=adopt_from_index,
            pending=pending,
            integrity=store.integrity,
            timers=TimerIndex(store.kv),
            clock=clock,
            wakeups=store.wakeups,
            answers=answers,
        )
        return cls(
            store,
            session_id,
            bound,
            checkpoints,
            registry,
            inputs,
            journal,
            supervisor,
            requests,
            pending,
            answers,
            clock=one_clock,
        )
