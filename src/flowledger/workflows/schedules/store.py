"""`ScheduleStore`: a session's schedule records and firing records over storage KV.

Keys (every one under the session's own prefix except the index):

* ``sessions/<sid>/workflows/schedules/<id>``: the `Schedule` record, changed only by
  compare-and-swap on its revision;
* ``workflows/schedules/<sid>/<id>``: present while the schedule is active (not paused).
  Workers list ``workflows/`` on every tick anyway, so this is how a worker learns that a
  session without unfinished runs still needs an owner: someone must fire its slots;
* ``sessions/<sid>/workflows/firings/<id>/<slot>``: one `Firing` per fired slot, written
  create-only (``expected=0``) before its run is created. Only the newest `KEEP_FIRINGS`
  are kept: older slots are behind the schedule's cursor and can never be decided again.

Every write takes the caller's fence (`storage.fence_arg`): an owner's writes carry its
session lease's epoch.
"""

from __future__ import annotations

import builtins
import contextlib
import json
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Final

from ...storage import KV, ConflictError, KeyNotFoundError, fence_arg, validate_name
from ..errors import ConflictError as WorkflowConflictError
from ..records.run import is_id
from .errors import ScheduleNotFoundError
from .record import Schedule, decode_schedule, encode_schedule
from .timing import slot_key

__all__ = [
    "ACTIVE_PREFIX",
    "KEEP_FIRINGS",
    "Firing",
    "FiringFailure",
    "ScheduleStore",
    "active_key",
]

ACTIVE_PREFIX: Final = "workflows/schedules/"
KEEP_FIRINGS: Final = 100


def _ids(session_id: str, schedule_id: str) -> None:
    if not is_id(session_id):
        raise ValueError(f"session ID must be a nonzero lowercase UUID, not {session_id!r}")
    if not is_id(schedule_id):
        raise ScheduleNotFoundError(session_id, str(schedule_id))


def active_key(session_id: str, schedule_id: str) -> str:
    _ids(session_id, schedule_id)
    return validate_name(f"{ACTIVE_PREFIX}{session_id}/{schedule_id}")


def _record_prefix(session_id: str) -> str:
    return f"sessions/{session_id}/workflows/schedules/"


def _firings_prefix(session_id: str, schedule_id: str) -> str:
    return f"sessions/{session_id}/workflows/firings/{schedule_id}/"


@dataclass(frozen=True, slots=True)
class FiringFailure:
    """Why a firing started no run: a stable ``code`` and a message for people."""

    code: str
    message: str

    def to_json(self) -> dict[str, str]:
        return {"code": self.code, "message": self.message}


@dataclass(frozen=True, slots=True)
class Firing:
    """One fired slot: the run it started (its IDs derive from the slot, see `firing`).
    A deployment's firing also records the revision it chose (``deployment_revision``)
    or, when it could not start the run, the ``failure`` (then no run exists)."""

    schedule_id: str
    slot: datetime
    run_id: str
    fired_at: datetime
    manual: bool = False
    deployment_revision: int | None = None
    failure: FiringFailure | None = None

    def encode(self) -> bytes:
        body: dict[str, object] = {"version": 1, "schedule_id": self.schedule_id}
        body.update(self.to_json())
        return json.dumps(body, separators=(",", ":")).encode()

    @classmethod
    def decode(cls, data: bytes) -> Firing:
        try:
            doc = json.loads(data)
            failure = doc.get("failure")
            revision = doc.get("deployment_revision")
            return cls(
                str(doc["schedule_id"]),
                datetime.strptime(doc["slot"], "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC),
                str(doc["run_id"]),
                datetime.strptime(doc["fired_at"], "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC),
                bool(doc.get("manual", False)),
                None if revision is None else int(revision),
                None
                if failure is None
                else FiringFailure(str(failure["code"]), str(failure["message"])),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"malformed firing record: {exc}") from exc

    def to_json(self) -> dict[str, object]:
        body: dict[str, object] = {
            "slot": f"{self.slot:%Y-%m-%dT%H:%M:%SZ}",
            "run_id": self.run_id,
            "fired_at": f"{self.fired_at.astimezone(UTC):%Y-%m-%dT%H:%M:%S.%fZ}",
            "manual": self.manual,
        }
        if self.deployment_revision is not None:
            body["deployment_revision"] = self.deployment_revision
        if self.failure is not None:
            body["failure"] = self.failure.to_json()
        return body


class ScheduleStore:
    def __init__(self, kv: KV) -> None:
        self.kv = kv

    def record_key(self, session_id: str, schedule_id: str) -> str:
        _ids(session_id, schedule_id)
        return validate_name(_record_prefix(session_id) + schedule_id)

    async def create(self, schedule: Schedule) -> Schedule:
        """Store a new schedule (and its active entry unless paused)."""
        key = self.record_key(schedule.session_id, schedule.id)
        revision = await self.kv.put(key, encode_schedule(schedule), expected=0, **fence_arg())
        if not schedule.paused:
            await self._activate(schedule)
        return _with_revision(schedule, revision)

    async def get(self, session_id: str, schedule_id: str) -> Schedule:
        key = self.record_key(session_id, schedule_id)
        try:
            entry = await self.kv.get(key)
        except KeyNotFoundError:
            raise ScheduleNotFoundError(session_id, schedule_id) from None
        schedule = decode_schedule(entry.value, entry.revision)
        if schedule.session_id != session_id or schedule.id != schedule_id:
            raise ValueError(f"schedule record {key} names another session or schedule")
        return schedule

    async def list(self, session_id: str) -> builtins.list[Schedule]:
        """The session's schedules in ID order (a record removed meanwhile is left out)."""
        if not is_id(session_id):
            raise ValueError(f"session ID must be a nonzero lowercase UUID, not {session_id!r}")
        prefix = _record_prefix(session_id)
        found: builtins.list[Schedule] = []
        for key in sorted(await self.kv.keys(prefix)):
            schedule_id = key[len(prefix) :]
            if not is_id(schedule_id):
                continue
            with contextlib.suppress(ScheduleNotFoundError):
                found.append(await self.get(session_id, schedule_id))
        return found

    async def swap(self, before: Schedule, after: Schedule) -> Schedule:
        """Compare-and-swap ``after`` over ``before`` (`WorkflowConflictError` if it moved)
        and keep the active entry in step with ``paused``."""
        key = self.record_key(before.session_id, before.id)
        try:
            revision = await self.kv.put(
                key, encode_schedule(after), expected=before.revision, **fence_arg()
            )
        except ConflictError as exc:
            raise WorkflowConflictError(
                before.session_id, None, f"schedule {before.id} changed meanwhile"
            ) from exc
        if after.paused and not before.paused:
            await self.kv.delete(active_key(after.session_id, after.id), **fence_arg())
        elif before.paused and not after.paused:
            await self._activate(after)
        return _with_revision(after, revision)

    async def remove(self, schedule: Schedule) -> None:
        """Delete the schedule, its active entry and its firing records."""
        await self.kv.delete(active_key(schedule.session_id, schedule.id), **fence_arg())
        await self.kv.delete(self.record_key(schedule.session_id, schedule.id), **fence_arg())
        for key in await self.kv.keys(_firings_prefix(schedule.session_id, schedule.id)):
            await self.kv.delete(key, **fence_arg())

    async def _activate(self, schedule: Schedule) -> None:
        with contextlib.suppress(ConflictError):  # already there: it is right
            await self.kv.put(
                active_key(schedule.session_id, schedule.id), b"", expected=0, **fence_arg()
            )

    # -- firings ---------------------------------------------------------------------------

    def firing_key(
        self, session_id: str, schedule_id: str, slot: datetime, *, manual: bool = False
    ) -> str:
        """A manual firing (``trigger``) has its own key, so it never takes a slot's."""
        _ids(session_id, schedule_id)
        suffix = "-manual" if manual else ""
        return validate_name(_firings_prefix(session_id, schedule_id) + slot_key(slot) + suffix)

    async def claim_firing(self, session_id: str, firing: Firing) -> Firing:
        """Write ``firing`` create-only; if the slot was already fired (by this owner
        before a crash, or a stale one), return the stored firing instead."""
        key = self.firing_key(session_id, firing.schedule_id, firing.slot, manual=firing.manual)
        try:
            await self.kv.put(key, firing.encode(), expected=0, **fence_arg())
            return firing
        except ConflictError:
            return Firing.decode((await self.kv.get(key)).value)

    async def stored_firing(
        self, session_id: str, schedule_id: str, slot: datetime, *, manual: bool = False
    ) -> Firing | None:
        """The firing of that slot, if one was claimed."""
        key = self.firing_key(session_id, schedule_id, slot, manual=manual)
        try:
            return Firing.decode((await self.kv.get(key)).value)
        except KeyNotFoundError:
            return None

    async def record_failure(self, session_id: str, firing: Firing) -> Firing:
        """Mark a claimed firing as failed (its run was never created): compare-and-swap
        over the claimed record, so of two owners one writes and both return it."""
        assert firing.failure is not None
        key = self.firing_key(session_id, firing.schedule_id, firing.slot, manual=firing.manual)
        entry = await self.kv.get(key)
        stored = Firing.decode(entry.value)
        if stored.failure is not None:
            return stored
        try:
            await self.kv.put(key, firing.encode(), expected=entry.revision, **fence_arg())
            return firing
        except ConflictError:
            return Firing.decode((await self.kv.get(key)).value)

    async def firings(self, session_id: str, schedule_id: str, limit: int) -> builtins.list[Firing]:
        """The newest ``limit`` firings, newest first."""
        _ids(session_id, schedule_id)
        keys = sorted(await self.kv.keys(_firings_prefix(session_id, schedule_id)))
        found: builtins.list[Firing] = []
        for key in reversed(keys[-limit:] if limit else []):
            with contextlib.suppress(KeyNotFoundError, ValueError):
                found.append(Firing.decode((await self.kv.get(key)).value))
        return found

    async def trim_firings(self, session_id: str, schedule_id: str) -> None:
        """Delete all but the newest `KEEP_FIRINGS` firing records of the schedule."""
        keys = sorted(await self.kv.keys(_firings_prefix(session_id, schedule_id)))
        for key in keys[:-KEEP_FIRINGS]:
            await self.kv.delete(key, **fence_arg())


def _with_revision(schedule: Schedule, revision: int) -> Schedule:
    return replace(schedule, revision=revision)
