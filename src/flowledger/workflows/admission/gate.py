"""Admitting a pending run: a slot per limited scope, in FIFO order, or a queue entry.

Each limited scope (``definition/<name>``, ``deployment/<session id>/<name>``,
``session/<id>``) has slot records
``admission/slots/<scope>/<i>`` for ``i`` in ``0..max_running-1`` and queue entries
``admission/queue/<scope>/<created_at µs, 20 digits>-<run id>``. A slot's value names the
run holding it (``{"session": ..., "run": ...}``). Why this is safe under kills and races:

- a run is moved to running only after it holds a slot in every limited scope, and a
  slot is taken by compare-and-swap (``expected=0`` for a new record, the seen revision
  to take over a free one), so at most ``max_running`` runs hold slots of a scope;
- a slot is *free* when its holder is terminal or its record is gone; it is never
  deleted, only taken over by compare-and-swap, so a slow releaser cannot free a slot
  someone else just took. A crash therefore never leaks a slot: the holder's run ends
  (or is cancelled) and the slot is free, whoever notices it;
- every write carries the owner's fence (`storage.fence_arg`) like the registry's, so a
  stale owner writes nothing;
- a paused (interrupted) run keeps its slot: it will continue;
- the scan stops at the first free slot, so a run whose earlier attempt took a later
  slot and died before it ran may take a second one: capacity is under-used until that
  run ends, never exceeded.

FIFO: a run asking for a slot first writes its queue entry (keyed by its creation time);
only the oldest live entry of a scope may take a slot, and it removes its entry once it
holds one. A run that may not start stays pending, queued. Entries whose run is no
longer pending (cancelled, failed) are dropped by whoever reads them. Order is creation
order among the runs owners have seen: an owner queues the pending runs it finds, oldest
first, before it admits any (`Admission.enqueue`); across sessions, a run its owner has
not seen yet cannot be ahead of one already queued.
"""

from __future__ import annotations

import contextlib
import json
from dataclasses import dataclass
from typing import Final

from flowledger import storage

from ..errors import NotFoundError
from ..records.registry import RunRegistry
from ..records.run import Run, RunStatus
from .limits import Limits, ScopeKind, deployment_scope_name, is_deployed_version

__all__ = ["QUEUE_PREFIX", "SLOTS_PREFIX", "Admission", "Scope", "queue_key", "scope_names"]

SLOTS_PREFIX: Final = "admission/slots/"
QUEUE_PREFIX: Final = "admission/queue/"


@dataclass(frozen=True, slots=True)
class Scope:
    """One limited scope: ``kind`` and ``name`` and its ``max_running``."""

    kind: ScopeKind
    name: str
    max_running: int

    @property
    def path(self) -> str:
        return f"{self.kind}/{self.name}"


def scope_names(run: Run) -> list[tuple[ScopeKind, str]]:
    """The scopes a limit may name for ``run``, in the order they are admitted."""
    names: list[tuple[ScopeKind, str]] = [("definition", run.definition_name)]
    if is_deployed_version(run.definition_version):
        names.append(("deployment", deployment_scope_name(run.session_id, run.definition_name)))
    names.append(("session", run.session_id))
    return names


def queue_key(scope_path: str, run: Run) -> str:
    micros = int(run.created_at.timestamp() * 1_000_000)
    return f"{QUEUE_PREFIX}{scope_path}/{micros:020d}-{run.id}"


def _holder(run: Run) -> bytes:
    return json.dumps({"session": run.session_id, "run": run.id}, separators=(",", ":")).encode()


class Admission:
    """The gate the supervisor asks before it moves a pending run to running."""

    def __init__(self, kv: storage.KV, registry: RunRegistry) -> None:
        self._kv = kv
        self._registry = registry
        self.limits = Limits(kv)

    async def scopes(self, run: Run) -> list[Scope]:
        """The limited scopes ``run`` is subject to (definition, deployment, session)."""
        found: list[Scope] = []
        for kind, name in scope_names(run):
            limit = await self.limits.get(kind, name)
            if limit is not None:
                found.append(Scope(kind, name, limit))
        return found

    async def admit(self, run: Run) -> bool:
        """Take a slot of every scope limiting ``run`` (keeping slots it holds already);
        False when it must wait, with its queue entries written."""
        for scope in await self.scopes(run):
            if not await self._admit_in(scope, run):
                return False
        return True

    async def enqueue(self, run: Run) -> None:
        """Write ``run``'s queue entries (an owner does this for the pending runs it sees,
        oldest first, before any of them asks for a slot: so FIFO holds among them)."""
        for scope in await self.scopes(run):
            await self._enqueue(queue_key(scope.path, run), run)

    async def _admit_in(self, scope: Scope, run: Run) -> bool:
        # Queued first, then the head check: of two runs racing, the older one wins.
        mine = queue_key(scope.path, run)
        await self._enqueue(mine, run)
        at_head: bool | None = None
        for i in range(scope.max_running):
            key = f"{SLOTS_PREFIX}{scope.path}/{i}"
            try:
                entry = await self._kv.get(key)
                value, revision = entry.value, entry.revision
            except storage.KeyNotFoundError:
                value, revision = b"", 0
            if value == _holder(run):  # taken by an earlier attempt that died after it
                await self._kv.delete(mine, **storage.fence_arg())
                return True
            if revision and not await self._is_free(value):
                continue
            if at_head is None:
                at_head = await self._head(scope.path) == mine
            if not at_head:
                return False
            try:
                await self._kv.put(key, _holder(run), expected=revision, **storage.fence_arg())
            except storage.ConflictError:
                continue  # someone took it first: try the next one
            await self._kv.delete(mine, **storage.fence_arg())
            return True
        return False

    async def next_sessions(self, run: Run) -> set[str]:
        """The sessions whose run is next in a queue of a scope limiting ``run`` (whom a
        slot ``run`` frees concerns)."""
        found: set[str] = set()
        for scope in await self.scopes(run):
            head = await self._head(scope.path)
            waiting = None if head is None else await self._run_of(await self._value(head))
            if waiting is not None:
                found.add(waiting.session_id)
        return found

    async def _value(self, key: str) -> bytes:
        try:
            return (await self._kv.get(key)).value
        except storage.KeyNotFoundError:
            return b""

    async def _enqueue(self, key: str, run: Run) -> None:
        with contextlib.suppress(storage.ConflictError):  # queued already
            await self._kv.put(key, _holder(run), expected=0, **storage.fence_arg())

    async def _head(self, scope_path: str) -> str | None:
        """The oldest queue entry of a run still pending (dropping the others)."""
        for key in sorted(await self._kv.keys(f"{QUEUE_PREFIX}{scope_path}/")):
            try:
                value = (await self._kv.get(key)).value
            except storage.KeyNotFoundError:
                continue
            if await self._still_waiting(value):
                return key
            await self._kv.delete(key, **storage.fence_arg())
        return None

    async def _run_of(self, value: bytes) -> Run | None:
        try:
            holder = json.loads(value) if value else None
        except ValueError:
            return None  # unreadable: treat as nobody (it can only free a slot)
        if not isinstance(holder, dict):
            return None
        try:
            return await self._registry.get(str(holder["session"]), str(holder["run"]))
        except (NotFoundError, KeyError):
            return None

    async def _is_free(self, value: bytes) -> bool:
        run = await self._run_of(value)
        return run is None or run.status.terminal

    async def _still_waiting(self, value: bytes) -> bool:
        run = await self._run_of(value)
        return run is not None and run.status is RunStatus.PENDING and not run.cancel_requested
