"""The ``schedule_*`` tools: one session's schedules over MCP (or any transport).

``schedule_list`` and ``schedule_get`` read; ``schedule_add``, ``schedule_pause``,
``schedule_resume``, ``schedule_remove`` and ``schedule_trigger`` change the session's
schedules, so a read-only server hides them. Like the ``workflow_*`` tools the bundle is
bound to one session: a schedule of another session is "not found", whatever its ID.
Results are the JSON of `Schedules.describe` (``next_fire_times`` included); a refused
``schedule_add`` names the field (``invalid schedule cron: ...``) and writes nothing. A
schedule may target a deployment of the session (``deployment``): only the session's own
deployments are found, so a tenant cannot schedule another tenant's.
"""

from __future__ import annotations

import builtins
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Final

from ..workflows.schedules import InvalidScheduleError, ScheduleNotFoundError, Schedules
from .arguments import ArgumentField, decode_arguments, decode_document, parse_id
from .bundle import ToolInfo
from .errors import ToolError, invalid_arguments, translate

__all__ = ["SCHEDULE_TOOLS", "SCHEDULE_TOOL_NAMES", "ScheduleTools"]

_ID: Final = {"type": "string", "description": "the schedule's ID (a UUID)"}
_ONE_ID: Final[dict[str, Any]] = {
    "type": "object",
    "properties": {"schedule_id": _ID},
    "required": ["schedule_id"],
    "additionalProperties": False,
}
_ADD: Final[dict[str, Any]] = {
    "type": "object",
    "properties": {
        "definition_name": {"type": "string"},
        "definition_version": {"type": "string"},
        "deployment": {
            "type": "string",
            "description": "a deployment of this session instead of a definition version: "
            "each firing starts its live revision",
        },
        "input": {"type": "object", "description": "validated against the input schema"},
        "cron": {"type": "string", "description": "five-field cron, e.g. '0 9 * * 1-5'"},
        "timezone": {"type": "string", "description": "IANA zone of cron (default UTC)"},
        "every": {"type": "integer", "minimum": 1, "description": "interval in seconds"},
        "start_at": {"type": "string", "description": "first slot of every (ISO 8601)"},
        "overlap": {"enum": ["skip", "queue", "allow"], "default": "skip"},
        "catch_up": {"enum": ["none", "latest", "all"], "default": "none"},
        "paused": {"type": "boolean", "default": False},
    },
    "required": ["input"],
    "additionalProperties": False,
}
_ADD_FIELDS: Final = (
    ArgumentField("definition_name", "string"),
    ArgumentField("definition_version", "string"),
    ArgumentField("deployment", "string"),
    ArgumentField("input", "object", required=True),
    ArgumentField("cron", "string"),
    ArgumentField("timezone", "string"),
    ArgumentField("every", "integer"),
    ArgumentField("start_at", "string"),
    ArgumentField("overlap", "string"),
    ArgumentField("catch_up", "string"),
)
_ID_FIELDS: Final = (ArgumentField("schedule_id", "string", required=True),)

SCHEDULE_TOOLS: Final[tuple[tuple[str, str, dict[str, Any], bool], ...]] = (
    (
        "schedule_list",
        "List this session's schedules with their next fire times.",
        {"type": "object", "properties": {}, "additionalProperties": False},
        False,
    ),
    (
        "schedule_get",
        "One schedule: its target, timing, policies, next fire times and newest firings.",
        _ONE_ID,
        False,
    ),
    (
        "schedule_add",
        "Start runs of a definition version (definition_name + definition_version) or of a "
        "deployment of this session (its live revision at each firing) on a schedule: cron "
        "(with timezone) or every N seconds, with one input. overlap: what a slot does "
        "while the previous run is unfinished; catch_up: which slots missed while no owner "
        "ran still fire.",
        _ADD,
        True,
    ),
    ("schedule_pause", "Stop a schedule firing (idempotent).", _ONE_ID, True),
    (
        "schedule_resume",
        "Fire a paused schedule again from its next slot after now.",
        _ONE_ID,
        True,
    ),
    ("schedule_remove", "Delete a schedule (its runs stay).", _ONE_ID, True),
    (
        "schedule_trigger",
        "Fire a schedule once now, outside its slots; returns the firing and its run ID.",
        _ONE_ID,
        True,
    ),
)

SCHEDULE_TOOL_NAMES: Final = tuple(name for name, _, _, _ in SCHEDULE_TOOLS)


class ScheduleTools:
    """The ``schedule_*`` bundle over one session's `Schedules`."""

    def __init__(self, schedules: Schedules) -> None:
        self.schedules = schedules
        self._handlers: dict[str, Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]] = {
            "schedule_list": self._list,
            "schedule_get": self._get,
            "schedule_add": self._add,
            "schedule_pause": self._pause,
            "schedule_resume": self._resume,
            "schedule_remove": self._remove,
            "schedule_trigger": self._trigger,
        }

    def infos(self) -> builtins.list[ToolInfo]:
        return [
            ToolInfo(name, description, dict(schema), mutating=mutating)
            for name, description, schema, mutating in SCHEDULE_TOOLS
        ]

    async def call(
        self, name: str, arguments: Mapping[str, Any] | str | bytes | None
    ) -> dict[str, Any]:
        handler = self._handlers.get(name) if isinstance(name, str) else None
        if handler is None:
            raise ToolError(f"unknown tool {str(name)[:64]!r}")
        try:
            return await handler(decode_document(arguments))
        except ToolError:
            raise
        except InvalidScheduleError as exc:
            raise invalid_arguments(str(exc), cause=exc) from exc
        except ScheduleNotFoundError as exc:
            raise ToolError(f"{name}: schedule {exc.schedule_id} not found", cause=exc) from exc
        except Exception as exc:
            raise translate(exc, action=name) from exc

    def _schedule_id(self, document: dict[str, Any]) -> str:
        fields = decode_arguments(document, _ID_FIELDS)
        return parse_id("schedule_id", fields["schedule_id"])

    async def _list(self, document: dict[str, Any]) -> dict[str, Any]:
        decode_arguments(document, ())
        found = await self.schedules.list()
        return {"schedules": [await self.schedules.describe(s) for s in found]}

    async def _get(self, document: dict[str, Any]) -> dict[str, Any]:
        schedule = await self.schedules.get(self._schedule_id(document))
        return await self.schedules.describe(schedule, firings=True)

    async def _add(self, document: dict[str, Any]) -> dict[str, Any]:
        paused = document.pop("paused", False)
        if not isinstance(paused, bool):
            raise invalid_arguments("field 'paused' must be a boolean")
        fields = decode_arguments(document, _ADD_FIELDS)
        schedule = await self.schedules.add(
            definition_name=fields.get("definition_name"),
            definition_version=fields.get("definition_version"),
            deployment=fields.get("deployment"),
            input=fields["input"],
            cron=fields.get("cron"),
            timezone=fields.get("timezone"),
            every=fields.get("every"),
            start_at=fields.get("start_at"),
            overlap=fields.get("overlap", "skip"),
            catch_up=fields.get("catch_up", "none"),
            paused=paused,
        )
        return await self.schedules.describe(schedule)

    async def _pause(self, document: dict[str, Any]) -> dict[str, Any]:
        schedule = await self.schedules.pause(self._schedule_id(document))
        return await self.schedules.describe(schedule)

    async def _resume(self, document: dict[str, Any]) -> dict[str, Any]:
        schedule = await self.schedules.resume(self._schedule_id(document))
        return await self.schedules.describe(schedule)

    async def _remove(self, document: dict[str, Any]) -> dict[str, Any]:
        schedule = await self.schedules.remove(self._schedule_id(document))
        return {"schedule_id": schedule.id, "removed": True}

    async def _trigger(self, document: dict[str, Any]) -> dict[str, Any]:
        firing = await self.schedules.trigger(self._schedule_id(document))
        return {"schedule_id": firing.schedule_id, **firing.to_json()}
