"""`UnfinishedIndex`: a small durable index of the runs that are not terminal yet.

Workers find work by reading it, never by scanning every run of every session: one key
per unfinished run, ``workflows/unfinished/<session>/<run>``, created (before the run
record) when a run is created and deleted once the run is terminal. So one prefix
listing says which sessions have unfinished runs, and which ones.

The index is a hint that errs on the safe side:

* an entry is written *before* its run record, so a crash in between leaves an entry
  without a record (an *orphan*), never a run nobody can find. Orphans are removed by
  whoever finds them, but only once they are older than `ORPHAN_GRACE` seconds: a
  younger one may belong to a run whose record is being written right now;
* an entry is deleted *after* the run became terminal, so a crash in between leaves a
  *stale* entry; whoever reads the terminal record deletes it.

Each entry holds the wall-clock second it was written (``{"at": 1754000000.5}``), only
for the orphan grace.

A failed run keeps its entry until its owner has published its activities (the
`Supervisor` removes it then), so an owner that died in between leaves work that the
next one finds in the index, as it finds an unfinished run.

Runs created before the index existed have no entry. The first owner that lists every
run of a session (`Supervisor.activate`) indexes them and then marks the session's index
*complete* (`complete_key`, ``sessions/<session>/workflows/unfinished-complete``); from
then on every run is created with its entry, so later owners read the index instead of
every run record, and activating costs the same however many finished runs the session
holds.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Callable
from typing import Final

from ...storage import (
    KV,
    ConflictError,
    CorruptDataError,
    KeyNotFoundError,
    KVPut,
    fence_arg,
    validate_name,
)
from .run import is_id

__all__ = [
    "ORPHAN_GRACE",
    "UNFINISHED_PREFIX",
    "UnfinishedIndex",
    "complete_key",
    "unfinished_key",
]

UNFINISHED_PREFIX: Final = "workflows/unfinished/"
ORPHAN_GRACE: Final = 300.0  # seconds before an entry without a run record may be removed


def unfinished_key(session_id: str, run_id: str) -> str:
    """``workflows/unfinished/<session>/<run>``; `ValueError` for a malformed ID."""
    if not is_id(session_id):
        raise ValueError(f"session ID must be a nonzero lowercase UUID, not {session_id!r}")
    if not is_id(run_id):
        raise ValueError(f"run ID must be a nonzero lowercase UUID, not {run_id!r}")
    return validate_name(f"{UNFINISHED_PREFIX}{session_id}/{run_id}")


def complete_key(session_id: str) -> str:
    """``sessions/<session>/workflows/unfinished-complete``: present once every run of the
    session has its entry (see the module documentation)."""
    if not is_id(session_id):
        raise ValueError(f"session ID must be a nonzero lowercase UUID, not {session_id!r}")
    return validate_name(f"sessions/{session_id}/workflows/unfinished-complete")


class UnfinishedIndex:
    """Add, remove and list the index entries (see the module documentation)."""

    def __init__(self, kv: KV, *, clock: Callable[[], float] = time.time) -> None:
        self.kv = kv
        self._clock = clock

    def entry(self, session_id: str, run_id: str) -> KVPut:
        """The write that creates the entry (for a caller's batch; see `add`)."""
        value = json.dumps({"at": round(self._clock(), 3)}).encode()
        return KVPut(unfinished_key(session_id, run_id), value, 0)

    async def add(self, session_id: str, run_id: str) -> None:
        """Create the entry (an existing one is kept: it is already right)."""
        write = self.entry(session_id, run_id)
        with contextlib.suppress(ConflictError):
            await self.kv.put(write.key, write.value, expected=0)

    async def remove(self, session_id: str, run_id: str) -> None:
        """Delete the entry (idempotent)."""
        await self.kv.delete(unfinished_key(session_id, run_id), **fence_arg())

    async def runs(self, session_id: str) -> list[str]:
        """The run IDs indexed for one session, in ID order."""
        prefix = f"{UNFINISHED_PREFIX}{session_id}/"
        ids = [key[len(prefix) :] for key in await self.kv.keys(prefix)]
        return [run_id for run_id in ids if is_id(run_id)]

    async def complete(self, session_id: str) -> bool:
        """Whether every run of the session is known to have its entry (`mark_complete`);
        an unreadable marker counts as absent (the caller lists every run instead)."""
        try:
            await self.kv.get(complete_key(session_id))
        except (KeyNotFoundError, CorruptDataError):
            return False
        return True

    async def mark_complete(self, session_id: str) -> None:
        """Record that every run of the session has its entry (idempotent)."""
        with contextlib.suppress(ConflictError):
            await self.kv.put(complete_key(session_id), b"", expected=0, **fence_arg())

    async def scan(self) -> dict[str, list[str]]:
        """Every indexed run, by session (one prefix listing); malformed keys are skipped."""
        found: dict[str, list[str]] = {}
        for key in await self.kv.keys(UNFINISHED_PREFIX):
            session_id, sep, run_id = key[len(UNFINISHED_PREFIX) :].partition("/")
            if sep and is_id(session_id) and is_id(run_id):
                found.setdefault(session_id, []).append(run_id)
        return found

    async def age(self, session_id: str, run_id: str) -> float | None:
        """Seconds since the entry was written (None if it is gone; +inf if unreadable)."""
        try:
            entry = await self.kv.get(unfinished_key(session_id, run_id))
        except KeyNotFoundError:
            return None
        except CorruptDataError:
            return float("inf")
        try:
            written = float(json.loads(entry.value)["at"])
        except (ValueError, KeyError, TypeError):
            return float("inf")
        return self._clock() - written

    async def remove_orphan(self, session_id: str, run_id: str) -> bool:
        """Remove an entry whose run record is missing, if it is older than `ORPHAN_GRACE`;
        return whether it was removed."""
        age = await self.age(session_id, run_id)
        if age is None:
            return True
        if age < ORPHAN_GRACE:
            return False
        await self.remove(session_id, run_id)
        return True
