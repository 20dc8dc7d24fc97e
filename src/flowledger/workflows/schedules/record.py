"""`Schedule`: the durable record of one schedule, and its JSON codec.

A schedule belongs to one session and starts runs of one definition version, or of one
deployment of the session (``deployment``: its live revision at each firing), with one
input document (canonical JSON, checked against the input schema when the schedule is
added, and again at each firing of a deployment). ``cursor`` is the newest slot already
handled (fired or skipped); the owner moves it forward by compare-and-swap, so each slot
is decided once.
``last_run_id`` is the run the newest firing started (what ``overlap`` looks at).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any, Final, TypeVar

from ..records.run import is_id
from .errors import InvalidScheduleError
from .timing import Timing

__all__ = ["CatchUp", "Overlap", "Schedule", "decode_schedule", "encode_schedule", "parse_enum"]

RECORD_VERSION: Final = 1
_E = TypeVar("_E", bound=StrEnum)


class Overlap(StrEnum):
    """What a slot does while the run the previous slot started is still unfinished:
    ``skip`` it, ``queue`` it (it fires once that run has ended) or ``allow`` it (start
    another run alongside)."""

    SKIP = "skip"
    QUEUE = "queue"
    ALLOW = "allow"


class CatchUp(StrEnum):
    """What happens to slots that came due while no owner was running (see the docs):
    ``none`` fires only a slot still within its grace, ``latest`` the newest missed slot,
    ``all`` every missed slot (at most `MAX_CATCH_UP`, the newest)."""

    NONE = "none"
    LATEST = "latest"
    ALL = "all"


def parse_enum(kind: type[_E], field: str, value: object) -> _E:
    try:
        if not isinstance(value, str):
            raise ValueError(value)
        return kind(value)
    except ValueError:
        allowed = " | ".join(member.value for member in kind)
        raise InvalidScheduleError(field, f"must be one of {allowed}, not {value!r}") from None


@dataclass(frozen=True, slots=True)
class Schedule:
    id: str
    session_id: str
    definition_name: str
    definition_version: str
    input: Any  # the input document (JSON value); canonical bytes when fired
    timing: Timing
    overlap: Overlap
    catch_up: CatchUp
    created_at: datetime
    cursor: datetime  # the newest slot handled; slots after it are still to be decided
    paused: bool = False
    last_run_id: str | None = None
    fired: int = 0
    skipped: int = 0
    revision: int = 0  # the KV revision of the stored copy (never encoded)
    deployment: str | None = None  # the target when it is a deployment (no definition then)
    failed: int = 0  # firings that could not start a run (a deployment's, see `Firing`)
    # a deployment's: added through a door that may name inline sources (an operator's);
    # otherwise its firings may start only registered sources, whoever fires them
    inline_sources: bool = False

    @property
    def target(self) -> str:
        """What it starts, for people: ``deployment NAME`` or ``NAME VERSION``."""
        if self.deployment is not None:
            return f"deployment {self.deployment}"
        return f"{self.definition_name} {self.definition_version}"

    def to_json(self) -> dict[str, Any]:
        """The schedule as tools and ``--json`` show it (without next fire times)."""
        body: dict[str, Any] = {"schedule_id": self.id}
        if self.deployment is not None:
            body["deployment"] = self.deployment
        else:
            body["definition_name"] = self.definition_name
            body["definition_version"] = self.definition_version
        body["input"] = self.input
        if self.timing.cron is not None:
            body["cron"] = self.timing.cron
            body["timezone"] = self.timing.timezone
        else:
            assert self.timing.anchor is not None
            body["every"] = self.timing.every
            body["start_at"] = _time(self.timing.anchor)
        body.update(
            overlap=self.overlap.value,
            catch_up=self.catch_up.value,
            paused=self.paused,
            created_at=_time(self.created_at),
            cursor=_time(self.cursor),
            fired=self.fired,
            skipped=self.skipped,
        )
        if self.failed:
            body["failed"] = self.failed
        if self.inline_sources:
            body["inline_sources"] = True
        if self.last_run_id is not None:
            body["last_run_id"] = self.last_run_id
        return body


def _time(moment: datetime) -> str:
    return f"{moment.astimezone(UTC):%Y-%m-%dT%H:%M:%SZ}"


def _parse_time(text: object) -> datetime:
    if not isinstance(text, str) or not text.endswith("Z"):
        raise ValueError(f"not a UTC timestamp: {text!r}")
    return datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)


def _optional_text(value: object) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise TypeError(f"not a string: {value!r}")
    return value


def encode_schedule(schedule: Schedule) -> bytes:
    body = schedule.to_json()
    body["session_id"] = schedule.session_id
    return json.dumps(
        {"version": RECORD_VERSION, "schedule": body},
        separators=(",", ":"),
        ensure_ascii=False,
        allow_nan=False,
        sort_keys=True,
    ).encode()


def decode_schedule(data: bytes, revision: int) -> Schedule:
    """Parse a stored schedule; `ValueError` for anything malformed."""
    try:
        doc = json.loads(data)
        if doc.get("version") != RECORD_VERSION:
            raise ValueError(f"unknown schedule record version {doc.get('version')!r}")
        body = doc["schedule"]
        if "cron" in body:
            timing = Timing.cron_in(body["cron"], body["timezone"])
        else:
            timing = Timing.interval(body["every"], _parse_time(body["start_at"]))
        schedule = Schedule(
            id=str(body["schedule_id"]),
            session_id=str(body["session_id"]),
            definition_name=str(body.get("definition_name", "")),
            definition_version=str(body.get("definition_version", "")),
            input=body["input"],
            timing=timing,
            overlap=Overlap(body["overlap"]),
            catch_up=CatchUp(body["catch_up"]),
            created_at=_parse_time(body["created_at"]),
            cursor=_parse_time(body["cursor"]),
            paused=bool(body["paused"]),
            last_run_id=body.get("last_run_id"),
            fired=int(body["fired"]),
            skipped=int(body["skipped"]),
            revision=revision,
            deployment=_optional_text(body.get("deployment")),
            failed=int(body.get("failed", 0)),
            inline_sources=body.get("inline_sources", False) is True,
        )
    except (KeyError, TypeError, AttributeError, json.JSONDecodeError) as exc:
        raise ValueError(f"malformed schedule record: {exc}") from exc
    if not (is_id(schedule.id) and is_id(schedule.session_id)):
        raise ValueError("malformed schedule record: IDs must be lowercase UUIDs")
    if (schedule.deployment is None) == (schedule.definition_name == ""):
        raise ValueError("malformed schedule record: give a definition or a deployment")
    return schedule
