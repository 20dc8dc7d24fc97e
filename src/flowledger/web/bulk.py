"""Bulk actions on the runs list: cancel the chosen runs, or retry their errored pauses.

Three steps, each through the session's own tools (another session's run is "not
found", never touched):

1. ``GET /runs/bulk?action=...&run=...``: the confirmation page, each run with what will
   happen to it (`plan`), and the state it was seen in (`Seen`, carried by the form);
2. ``POST /runs/bulk`` (CSRF field): each run again; one that changed since it was seen
   is reported and left alone, never forced (`apply`);
3. a redirect to ``GET /runs/bulk/done?...`` listing each run's outcome (`Outcome`) next
   to its status now, so a reload shows the report instead of acting again.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Final

from ..tools import ToolError, WorkflowTools
from ..workflows.errors import ConflictError, NotFoundError
from ..workflows.records.run import is_id
from .forms import FormError
from .views import get_run

__all__ = [
    "ACTIONS",
    "MAX_RUNS",
    "OUTCOME_WORDS",
    "Outcome",
    "Planned",
    "Seen",
    "action_of",
    "apply",
    "chosen_runs",
    "parse_outcomes",
    "plan",
]

MAX_RUNS: Final = 100  # runs one bulk action takes (four pages of the list)
ACTIONS: Final = {"cancel": "Cancel", "retry": "Retry the errored pause of"}
_UNFINISHED: Final = frozenset({"pending", "running", "interrupted"})

Resume = Callable[[str], Awaitable[None]]
"""Retries one run's errored pause (returns once it has resumed; a `ToolError` if not)."""


class Outcome(StrEnum):
    """What a bulk action did to one run (the report's words: `OUTCOME_WORDS`)."""

    CANCELLED = "cancelled"
    RETRIED = "retried"
    CHANGED = "changed"  # it is not as the confirmation page showed it: left alone
    SKIPPED = "skipped"  # the action does not apply to it (e.g. a finished run)
    NOT_FOUND = "not_found"
    REFUSED = "refused"  # the tool refused (its message is in the server's log)


OUTCOME_WORDS: Final = {
    Outcome.CANCELLED: "cancelled",
    Outcome.RETRIED: "retried",
    Outcome.CHANGED: "changed since the confirmation: left alone",
    Outcome.SKIPPED: "skipped: the action does not apply to it",
    Outcome.NOT_FOUND: "not found in this session",
    Outcome.REFUSED: "refused by the workflow session",
}


@dataclass(frozen=True)
class Seen:
    """A run as the confirmation page saw it: its status, pause kind and revision."""

    run_id: str
    status: str
    pause: str
    revision: int

    def text(self) -> str:
        return f"{self.run_id}:{self.status}:{self.pause}:{self.revision}"

    @staticmethod
    def parse(text: str) -> Seen:
        parts = text.split(":")
        if (
            len(parts) != 4
            or not is_id(parts[0])
            or parts[1] not in _UNFINISHED | {"completed", "failed", "cancelled"}
            or parts[2] not in {"", "request", "error", "timer"}
            or not parts[3].isdigit()
            or len(parts[3]) > 19
        ):
            raise FormError("seen", "the confirmation form was changed; choose the runs again")
        return Seen(parts[0], parts[1], parts[2], int(parts[3]))


@dataclass(frozen=True)
class Planned:
    """One run on the confirmation page: what will happen to it, in words."""

    seen: Seen | None  # None: not found
    run_id: str
    definition: str
    applies: bool
    words: str


def chosen_runs(values: Sequence[str]) -> list[str]:
    """The ``run`` fields: run IDs, at least one, at most `MAX_RUNS`, duplicates once
    (`FormError` naming the field)."""
    if not values:
        raise FormError("run", "choose at least one run (tick its box in the list)")
    out: list[str] = []
    for value in values:
        if not is_id(value):
            raise FormError("run", f"{value[:40]!r} is not a run ID")
        if value not in out:
            out.append(value)
    if len(out) > MAX_RUNS:
        raise FormError("run", f"at most {MAX_RUNS} runs at once ({len(out)} chosen)")
    return out


def action_of(value: str) -> str:
    if value not in ACTIONS:
        raise FormError("action", "must be cancel or retry")
    return value


def _seen(run: Mapping[str, Any]) -> Seen:
    pending = run.get("pending")
    pause = str(pending.get("kind", "")) if isinstance(pending, Mapping) else ""
    return Seen(str(run["run_id"]), str(run["run_status"]), pause, int(run["checkpoint_revision"]))


def _applies(action: str, seen: Seen) -> tuple[bool, str]:
    if action == "cancel":
        if seen.status in _UNFINISHED:
            return True, "will be cancelled"
        return False, f"is {seen.status}: a finished run is not cancelled"
    if seen.status == "interrupted" and seen.pause == "error":
        return True, "its errored pause will be retried"
    if seen.status == "interrupted":
        return False, f"is paused for a {seen.pause or 'reason'}, not an error: not retried"
    return False, f"is {seen.status}: only an errored pause is retried"


async def plan(tools: WorkflowTools, action: str, run_ids: Sequence[str]) -> list[Planned]:
    out: list[Planned] = []
    for run_id in run_ids:
        try:
            run = await get_run(tools, run_id)
        except ToolError as exc:
            if not isinstance(exc.cause, NotFoundError):
                raise
            out.append(Planned(None, run_id, "", False, "not found in this session"))
            continue
        seen = _seen(run)
        applies, words = _applies(action, seen)
        definition = f"{run['definition_name']} {run['definition_version']}"
        out.append(Planned(seen, run_id, definition, applies, words))
    return out


async def apply(
    tools: WorkflowTools,
    action: str,
    seen: Sequence[Seen],
    *,
    reason: str,
    resume: Resume,
) -> list[tuple[str, Outcome]]:
    """Each run, if it is still as it was seen: cancelled (with ``reason``) or its
    errored pause retried. A run that is not is reported (`Outcome.CHANGED`)."""
    out: list[tuple[str, Outcome]] = []
    for before in seen:
        try:
            now = _seen(await get_run(tools, before.run_id))
        except ToolError as exc:
            if not isinstance(exc.cause, NotFoundError):
                raise
            out.append((before.run_id, Outcome.NOT_FOUND))
            continue
        if not _applies(action, before)[0]:
            out.append((before.run_id, Outcome.SKIPPED))
            continue
        unchanged = now.status == before.status
        if action == "retry":
            unchanged = now == before
        if not unchanged:
            out.append((before.run_id, Outcome.CHANGED))
            continue
        try:
            if action == "cancel":
                await tools.call("workflow_run_cancel", {"run_id": now.run_id, "reason": reason})
                out.append((now.run_id, Outcome.CANCELLED))
            else:
                await resume(now.run_id)
                out.append((now.run_id, Outcome.RETRIED))
        except ToolError as exc:
            out.append((now.run_id, _refused(exc)))
    return out


def _refused(exc: ToolError) -> Outcome:
    if isinstance(exc.cause, NotFoundError):
        return Outcome.NOT_FOUND
    if isinstance(exc.cause, ConflictError):  # it changed between the read and the call
        return Outcome.CHANGED
    return Outcome.REFUSED


def parse_outcomes(values: Sequence[str]) -> list[tuple[str, Outcome]]:
    """The report's ``r`` parameters (``RUN_ID:OUTCOME``); anything else is dropped, so a
    crafted address shows nothing but run IDs and outcome words."""
    out: list[tuple[str, Outcome]] = []
    for value in values[:MAX_RUNS]:
        run_id, _, word = value.partition(":")
        if is_id(run_id) and word in Outcome.__members__.values():
            out.append((run_id, Outcome(word)))
    return out
