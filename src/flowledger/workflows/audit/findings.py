"""What a check of the database found: `Damage`, `Findings` (collected while checking) and
`AuditReport` (the verdict, with the runs each damage touches).

A damage names a place - ``database`` (the engine's own check), ``kv``, ``blob``,
``log`` (a ledger log or one of its records), ``attachment`` or ``run`` (records of one
run that contradict each other) - and the name of what is damaged there (a key, a log
and sequence number, a digest, a run ID), and says what is wrong in fixed words and
names only: never a value's contents. Each damage lists the runs it touches, found from
the name: a run ID in it (a run record, pending record, request, order entry, journal),
a graph run ID in it (checkpoints, pins, traces, tool intents) or an input blob a run
refers to.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Final

from ...storage import EngineCheck
from ..records.run import Run

__all__ = ["AuditReport", "Damage", "Findings", "RunIndex"]

_UUID: Final = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
#: More damage than this is counted, not listed (a wrecked file can hold millions).
MAX_LISTED: Final = 1000


@dataclass(frozen=True, slots=True)
class Damage:
    place: str
    name: str
    problem: str
    runs: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {
            "place": self.place,
            "name": self.name,
            "problem": self.problem,
            "runs": list(self.runs),
        }


@dataclass
class RunIndex:
    """Which run a name belongs to: run IDs, graph run IDs and input keys of the runs
    whose records could be read (and of runs known only from their journal)."""

    runs: set[str] = field(default_factory=set)
    graph_runs: dict[str, str] = field(default_factory=dict)
    inputs: dict[str, set[str]] = field(default_factory=dict)

    def add(self, run: Run) -> None:
        self.runs.add(run.id)
        self.graph_runs[run.graph_run_id] = run.id
        if isinstance(run.input.key, str):
            self.inputs.setdefault(run.input.key, set()).add(run.id)

    def touched(self, name: str) -> tuple[str, ...]:
        found = set(self.inputs.get(name, ()))
        for uuid in _UUID.findall(name):
            if uuid in self.runs:
                found.add(uuid)
            elif uuid in self.graph_runs:
                found.add(self.graph_runs[uuid])
        return tuple(sorted(found))


@dataclass
class Findings:
    """Damage found so far, and how much of each kind was checked."""

    # (place, name, problem) -> the runs named when it was found, in the order found
    damage: dict[tuple[str, str, str], set[str]] = field(default_factory=dict)
    checked: Counter[str] = field(default_factory=Counter)
    index: RunIndex = field(default_factory=RunIndex)
    more: int = 0  # damage beyond MAX_LISTED, counted only

    def add(self, place: str, name: str, problem: str, *runs: str) -> None:
        entry = (place, name, problem)
        if entry in self.damage:
            self.damage[entry].update(runs)
        elif len(self.damage) >= MAX_LISTED:
            self.more += 1
        else:
            self.damage[entry] = set(runs)

    def report(self, database: EngineCheck) -> AuditReport:
        """The verdict: every damage with the runs it touches (the engine's own problems
        first, one per problem, then the values it named)."""
        listed: list[Damage] = [Damage("database", database.method, p) for p in database.problems]
        for kind, name in database.rows:
            listed.append(
                Damage(
                    kind, name, "the database's index does not find it", self.index.touched(name)
                )
            )
        for (place, name, problem), runs in self.damage.items():
            touched = tuple(sorted({*runs, *self.index.touched(name)}))
            listed.append(Damage(place, name, problem, touched))
        return AuditReport(database, tuple(listed), dict(sorted(self.checked.items())), self.more)


@dataclass(frozen=True)
class AuditReport:
    """``ok`` when the engine found nothing and no record is damaged. ``complete`` is the
    engine check's (PostgreSQL without amcheck checks flowledger's records only)."""

    database: EngineCheck
    damage: tuple[Damage, ...]
    checked: dict[str, int]
    more: int = 0

    @property
    def ok(self) -> bool:
        return not self.damage and not self.more

    @property
    def runs(self) -> tuple[str, ...]:
        """Every run some damage touches, sorted."""
        return tuple(sorted({run for item in self.damage for run in item.runs}))

    def to_json(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "database": self.database.to_json(),
            "checked": self.checked,
            "damage": [item.to_json() for item in self.damage],
            "more_damage": self.more,
            "runs": list(self.runs),
        }
