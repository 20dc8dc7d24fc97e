"""`Revalidations`: the owners' recent checks of deployed runs' pinned environments.

A resume (or an adoption) checks a run's pinned sources once, by the owner under the
run's lock, and never reuses an earlier check; a check that found the run ready is kept
here. A *reader* of a run's readiness (``inspect_run``, ``workflow_run_get``, the
dashboard when asked to revalidate) reuses the owner's check of the same run and the
same pin while it is younger than `REUSE_SECONDS` (so reads right after a resume that
paused the run again start no server again); otherwise it checks now, and keeps nothing
(a reader's check, or a blocked one whose cause is likely being repaired, never hides a
later change from another reader).
The reader is told when the check it shows was made (``validated_at``) and whether it
was reused (`Revalidation`). Entries live in this process only (never persisted), per
`SourceEnvironment` (so per session and door), at most `MAX_ENTRIES` of them (the
oldest go first).
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any, Final

from .diagnostics import Diagnostic

__all__ = [
    "MAX_ENTRIES",
    "REUSE_SECONDS",
    "Revalidation",
    "Revalidations",
    "note",
    "observing",
]

REUSE_SECONDS: Final = 10.0
MAX_ENTRIES: Final = 1024

_OBSERVED: ContextVar[list[Revalidation] | None] = ContextVar(
    "flowledger_deploy_revalidations_observed", default=None
)


@dataclass(frozen=True)
class Revalidation:
    """One check of a run's pinned environment: its diagnostics, when it was made
    (``validated_at``, UTC ISO 8601; ``at``, this process's monotonic clock) and whether
    the reader got it from an earlier check (``reused``)."""

    diagnostics: tuple[Diagnostic, ...]
    validated_at: str
    at: float
    reused: bool = False

    def to_json(self) -> dict[str, Any]:
        return {"validated_at": self.validated_at, "reused": self.reused}


def _now() -> str:
    moment = datetime.now(UTC)
    return f"{moment:%Y-%m-%dT%H:%M:%S}.{moment.microsecond:06d}Z"


class Revalidations:
    """The last check per (graph run, pin digest) (see the module)."""

    def __init__(self, reuse_seconds: float = REUSE_SECONDS) -> None:
        self.reuse_seconds = reuse_seconds
        self._entries: OrderedDict[tuple[str, str], Revalidation] = OrderedDict()

    def recent(self, graph_run_id: str, pin_digest: str) -> Revalidation | None:
        """The check of this run and pin younger than the bound, marked reused, or None."""
        found = self._entries.get((graph_run_id, pin_digest))
        if found is None or time.monotonic() - found.at >= self.reuse_seconds:
            return None
        return replace(found, reused=True)

    @staticmethod
    def made(diagnostics: Sequence[Diagnostic]) -> Revalidation:
        """A check made now that is not kept (a reader's)."""
        return Revalidation(tuple(diagnostics), _now(), time.monotonic())

    def record(
        self, graph_run_id: str, pin_digest: str, diagnostics: Sequence[Diagnostic]
    ) -> Revalidation:
        """Remember a check made now, and return it."""
        made = self.made(diagnostics)
        key = (graph_run_id, pin_digest)
        self._entries.pop(key, None)
        self._entries[key] = made
        while len(self._entries) > MAX_ENTRIES:
            self._entries.popitem(last=False)
        return made


@contextmanager
def observing() -> Iterator[list[Revalidation]]:
    """Within, the checks `note` reports are collected in the list yielded (a reader
    that says when the readiness it shows was checked)."""
    found: list[Revalidation] = []
    token = _OBSERVED.set(found)
    try:
        yield found
    finally:
        _OBSERVED.reset(token)


def note(revalidation: Revalidation) -> None:
    """Report a check to whoever collects in this context (see `observing`)."""
    found = _OBSERVED.get()
    if found is not None:
        found.append(revalidation)
