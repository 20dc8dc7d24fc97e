"""`Schedules`: add, list, show, pause, resume, remove and trigger one session's schedules.

This is what the CLI, the MCP tools and applications call. Every check runs before
anything is written: a bad cron expression, an unknown time zone, an interval <= 0, an
unknown definition version or deployment, an input its schema refuses, or an
``overlap``/``catch_up`` outside its enum is an `InvalidScheduleError` naming the field.
A session only ever sees and changes its own schedules (every key is under its session).
"""

from __future__ import annotations

import builtins
import json
import uuid
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, Final

from ...clock import Clock
from ..errors import InvalidInputError, UnknownDefinitionError
from ..records.inputs import canonical_json
from .deployments import DeploymentStarter
from .errors import InvalidScheduleError
from .firing import fire
from .record import CatchUp, Overlap, Schedule, parse_enum
from .store import Firing, ScheduleStore
from .timing import Timing, utc_seconds

if TYPE_CHECKING:
    from ..runtime.session import WorkflowSession
    from .loop import ScheduleLoop

__all__ = ["MAX_SCHEDULES", "NEXT_FIRE_TIMES", "Schedules"]

MAX_SCHEDULES: Final = 1000  # per session
NEXT_FIRE_TIMES: Final = 3  # how many upcoming slots `describe` shows
RECENT_FIRINGS: Final = 10
_ONE: Final = timedelta(seconds=1)


def _parse_start(value: object) -> datetime:
    if not isinstance(value, str):
        raise InvalidScheduleError("start_at", "must be an ISO 8601 time with a UTC offset")
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise InvalidScheduleError("start_at", f"{value!r} is not an ISO 8601 time") from None
    if moment.tzinfo is None:
        raise InvalidScheduleError("start_at", f"{value!r} has no UTC offset")
    return utc_seconds(moment)


class Schedules:
    """The schedules of ``session`` (a built `WorkflowSession`; owning it is not needed
    except by `trigger`, which starts the run at once only when the session is owned
    here, and otherwise leaves it pending for the owner). ``loop``, when this process
    runs the session's `ScheduleLoop`, is poked after every change. ``deployments``
    checks and starts deployments' runs (default: the session's starter; without one,
    deployments cannot be targeted)."""

    def __init__(
        self,
        session: WorkflowSession,
        *,
        clock: Clock | None = None,
        loop: ScheduleLoop | None = None,
        deployments: DeploymentStarter | None = None,
    ) -> None:
        self.session = session
        self.store = ScheduleStore(session.store.kv)
        self.clock = clock or session.clock  # the slots' and the firings' times
        self.loop = loop
        self._deployments = deployments

    @property
    def deployments(self) -> DeploymentStarter | None:
        if self._deployments is not None:
            return self._deployments
        return self.session.deployment_starter

    @property
    def session_id(self) -> str:
        return self.session.session_id

    def _poke(self) -> None:
        if self.loop is not None:
            self.loop.poke()

    async def add(
        self,
        *,
        definition_name: str | None = None,
        definition_version: str | None = None,
        deployment: str | None = None,
        input: Any,
        cron: str | None = None,
        timezone: str | None = None,
        every: object = None,
        start_at: object = None,
        overlap: object = "skip",
        catch_up: object = "none",
        paused: bool = False,
    ) -> Schedule:
        """Validate and store a new schedule of a definition version or of a
        ``deployment`` of the session (its live revision at each firing); return it."""
        now = utc_seconds(self.clock.now())
        if (cron is None) == (every is None):
            raise InvalidScheduleError("cron", "give exactly one of cron and every")
        if cron is not None:
            if start_at is not None:
                raise InvalidScheduleError("start_at", "applies to every, not to cron")
            timing = Timing.cron_in(cron, "UTC" if timezone is None else timezone)
        else:
            if timezone is not None:
                raise InvalidScheduleError("timezone", "applies to cron, not to every")
            anchor = now if start_at is None else _parse_start(start_at)
            timing = Timing.interval(every, anchor)
        overlap_value = parse_enum(Overlap, "overlap", overlap)
        catch_up_value = parse_enum(CatchUp, "catch_up", catch_up)
        if deployment is None:
            one_target = definition_name is not None and definition_version is not None
        else:
            one_target = definition_name is None and definition_version is None
        if not one_target:
            raise InvalidScheduleError(
                "target", "give definition_name and definition_version, or deployment"
            )
        try:
            canonical = canonical_json(input, field="input")
        except InvalidInputError as exc:
            raise InvalidScheduleError("input", "must be a JSON object of JSON values") from exc
        inline_sources = False
        if deployment is None:
            name, version = self._check_definition(definition_name, definition_version, canonical)
        else:
            inline_sources = await self._check_deployment(deployment, canonical)
            name, version = "", ""
        input = json.loads(canonical)  # stored as the canonical document it fires with
        if len(await self.store.kv.keys(f"sessions/{self.session_id}/workflows/schedules/")) >= (
            MAX_SCHEDULES
        ):
            raise InvalidScheduleError("schedule_id", f"a session has at most {MAX_SCHEDULES}")
        schedule = Schedule(
            id=str(uuid.uuid4()),
            session_id=self.session_id,
            definition_name=name,
            definition_version=version,
            deployment=deployment,
            inline_sources=inline_sources,
            input=input,
            timing=timing,
            overlap=overlap_value,
            catch_up=catch_up_value,
            created_at=now,
            # the first slot is the first after now; an interval given a later start_at
            # fires at start_at itself
            cursor=now if start_at is None else min(now, _parse_start(start_at) - _ONE),
            paused=paused,
        )
        created = await self.store.create(schedule)
        self._poke()
        return created

    def _check_definition(self, name: object, version: object, canonical: bytes) -> tuple[str, str]:
        """The definition version's name and version, after its schema accepted the input."""
        try:
            definition = self.session.catalog.resolve(name, version)  # type: ignore[arg-type]
        except (UnknownDefinitionError, ValueError, TypeError):
            raise InvalidScheduleError(
                "target", f"unknown workflow definition {name!r} version {version!r}"
            ) from None
        try:
            definition.validate_input(canonical)
        except InvalidInputError as exc:
            # the reason is not quoted: it may repeat the document (kept as the cause)
            raise InvalidScheduleError(
                "input", f"the input schema of {name}@{version} refused it"
            ) from exc
        metadata = definition.metadata()
        return metadata.name, metadata.version

    async def _check_deployment(self, deployment: object, canonical: bytes) -> bool:
        """Check a deployment target; whether its firings may start inline sources."""
        if not isinstance(deployment, str) or not deployment:
            raise InvalidScheduleError("deployment", "must be a deployment's name")
        starter = self.deployments
        if starter is None:
            raise InvalidScheduleError("deployment", "this process does not serve deployments")
        await starter.check_schedule(deployment, canonical)
        return starter.inline_sources

    async def get(self, schedule_id: str) -> Schedule:
        return await self.store.get(self.session_id, schedule_id)

    async def list(self) -> builtins.list[Schedule]:
        return await self.store.list(self.session_id)

    def next_fire_times(
        self, schedule: Schedule, count: int = NEXT_FIRE_TIMES
    ) -> builtins.list[datetime]:
        """The next ``count`` slots not yet decided (none while paused)."""
        if schedule.paused:
            return []
        return schedule.timing.upcoming(max(schedule.cursor, self.clock.now()), count)

    async def describe(self, schedule: Schedule, *, firings: bool = False) -> dict[str, Any]:
        """The schedule as JSON with ``next_fire_times`` (and, with ``firings``, the
        newest firings)."""
        body = schedule.to_json()
        body["next_fire_times"] = [_text(slot) for slot in self.next_fire_times(schedule)]
        if firings:
            recent = await self.store.firings(self.session_id, schedule.id, RECENT_FIRINGS)
            body["recent_firings"] = [item.to_json() for item in recent]
        return body

    async def _set_paused(self, schedule_id: str, paused: bool) -> Schedule:
        schedule = await self.get(schedule_id)
        if schedule.paused == paused:
            return schedule
        changed = replace(schedule, paused=paused)
        if not paused:
            # slots that came due while paused were not missed: they were not wanted
            changed = replace(changed, cursor=max(schedule.cursor, utc_seconds(self.clock.now())))
        stored = await self.store.swap(schedule, changed)
        self._poke()
        return stored

    async def pause(self, schedule_id: str) -> Schedule:
        """Stop firing (idempotent); slots that come due while paused never fire."""
        return await self._set_paused(schedule_id, True)

    async def resume(self, schedule_id: str) -> Schedule:
        """Fire again from the next slot after now (idempotent)."""
        return await self._set_paused(schedule_id, False)

    async def remove(self, schedule_id: str) -> Schedule:
        """Delete the schedule and its firing records (its runs stay)."""
        schedule = await self.get(schedule_id)
        await self.store.remove(schedule)
        self._poke()
        return schedule

    async def trigger(self, schedule_id: str) -> Firing:
        """Fire the schedule once now, outside its slots (also while paused); the run is
        keyed by this second, so a repeated trigger within one second starts one run."""
        schedule = await self.get(schedule_id)
        now = self.clock.now()
        owned = self.session.supervisor.active
        return await fire(
            self.session,
            self.store,
            schedule,
            utc_seconds(now),
            now,
            manual=True,
            start=owned,
            deployments=self.deployments,
        )


def _text(moment: datetime) -> str:
    return f"{moment.astimezone(UTC):%Y-%m-%dT%H:%M:%SZ}"
