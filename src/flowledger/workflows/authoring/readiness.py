"""`ResumeReadiness`: whether a stopped run can be resumed now, and if not, why.

Readiness is computed when it is read, never stored: a run's checkpoint is compared
with what would execute it *now* (the catalog's definition of the run's name and
version, and, for deployed workflows, the run's pinned environment). It is checked
before every resume, on every path (the tools, the CLI, requests carried out by a
worker), so a resume that could not continue the run correctly is refused before
anything is written: the run stays ``interrupted``, its checkpoint and the caller's
payload untouched.

* ``ready``: the run is interrupted and nothing stands in the way.
* ``blocked``: the run is interrupted but cannot be continued as things are; the
  `Diagnostic` entries say what, and what to do. Blocking is never a failure: once the
  cause is repaired (the old graph registered again, a dependency back), the same run
  reads ``ready``.
* ``not_applicable``: the run is not paused (pending, running or terminal).

Where a check happens: a caller that hands the resume on (the ``workflow_run_resume``
tool, a front door) checks inside `environment_deferred`, where a definition decides
only what it can without contacting anything outside this process (the graph, the
payload); the owner then checks everything once, under the run's lock, right before it
writes (`Definition.resuming`). So a resume pays for one check of what lies outside,
and a refused payload still never reaches the owner.

A `Diagnostic` is control-plane data with a stable ``code`` (a lowercase identifier a
program may branch on), a human ``message`` and a ``hint`` (the repair). Layers above
add their own codes (the deploy layer's dependency checks); this module defines those
of the bridge.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, replace
from enum import StrEnum
from typing import Any, Final

from .guidance import next_actions

__all__ = [
    "DEFINITION_MISSING",
    "GRAPH_CHANGED",
    "Diagnostic",
    "ReadinessStatus",
    "ResumeReadiness",
    "environment_deferred",
    "environment_is_deferred",
]

GRAPH_CHANGED: Final = "graph_changed"
DEFINITION_MISSING: Final = "definition_missing"

_DEFERRED: ContextVar[bool] = ContextVar("flowledger_environment_deferred", default=False)


@contextmanager
def environment_deferred() -> Iterator[None]:
    """Within, `Definition.check_resume` leaves out what needs anything outside this
    process (a deployed run's pinned sources): the caller hands the resume to the owner,
    which checks that under the run's lock before anything is written."""
    token = _DEFERRED.set(True)
    try:
        yield
    finally:
        _DEFERRED.reset(token)


def environment_is_deferred() -> bool:
    """Whether the current check runs inside `environment_deferred`."""
    return _DEFERRED.get()


class ReadinessStatus(StrEnum):
    READY = "ready"
    BLOCKED = "blocked"
    NOT_APPLICABLE = "not_applicable"


@dataclass(frozen=True, slots=True)
class Diagnostic:
    """One reason a run cannot be resumed (``severity="error"``) or a note that does not
    block it (``"warning"``). ``place`` is what it concerns (for the deploy layer's
    dependency checks the dependency, or ``dependency.tool``; empty for the run as a
    whole); ``context`` is what is known of it (`guidance.CONTEXT_KEYS`: dependency,
    tool, source, deployment, run_id, ...), from which `to_json` answers the
    ``next_actions`` (`guidance.next_actions`)."""

    code: str
    message: str
    hint: str = ""
    severity: str = "error"
    place: str = ""
    context: tuple[tuple[str, str], ...] = ()

    def with_context(self, **known: str) -> Diagnostic:
        """This diagnostic knowing ``known`` too (what it knew already is kept)."""
        have = dict(self.context)
        merged = {**known, **have}
        return replace(self, context=tuple(sorted(merged.items())))

    def to_json(self) -> dict[str, Any]:
        """``{place, code, severity, message, hint, next_actions}``."""
        return {
            "place": self.place,
            "code": self.code,
            "severity": self.severity,
            "message": self.message,
            "hint": self.hint,
            "next_actions": next_actions(self.code, dict(self.context)),
        }


@dataclass(frozen=True, slots=True)
class ResumeReadiness:
    status: ReadinessStatus
    diagnostics: tuple[Diagnostic, ...] = ()

    @classmethod
    def of(cls, diagnostics: Sequence[Diagnostic]) -> ResumeReadiness:
        """``blocked`` when any diagnostic is an error, ``ready`` otherwise (warnings kept)."""
        kept = tuple(diagnostics)
        blocked = any(item.severity == "error" for item in kept)
        return cls(ReadinessStatus.BLOCKED if blocked else ReadinessStatus.READY, kept)

    @classmethod
    def not_applicable(cls) -> ResumeReadiness:
        return cls(ReadinessStatus.NOT_APPLICABLE)

    @property
    def blocked(self) -> bool:
        return self.status is ReadinessStatus.BLOCKED

    @property
    def errors(self) -> tuple[Diagnostic, ...]:
        return tuple(item for item in self.diagnostics if item.severity == "error")

    def explain(self) -> str:
        """The blocking diagnostics as one line: ``code: message (hint)``, joined by ``; ``."""
        parts = []
        for item in self.errors:
            text = f"{item.code}: {item.message}"
            if item.hint:
                text += f" ({item.hint})"
            parts.append(text)
        return "; ".join(parts)

    def to_json(self) -> dict[str, Any]:
        document: dict[str, Any] = {"status": str(self.status)}
        if self.diagnostics:
            document["diagnostics"] = [item.to_json() for item in self.diagnostics]
        return document
