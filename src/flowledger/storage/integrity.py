"""`Integrity`: what a backend can say about its own structures, beyond per-value checksums.

A checksum proves that a value read is the value written. It cannot prove that a value
*not* found is not stored: a damaged index (a flipped byte in an SQLite index page, a
corrupt PostgreSQL b-tree) makes a lookup miss a value that is there, and the miss reads
exactly like absence. Two questions answer that:

* `Integrity.confirm_absent` (``kind``, ``name``): a lookup did not find ``name`` and the
  caller is about to act on that (a terminal write such as failing a run because its
  checkpoints are "missing"). The backend looks again without the index that lookup used
  and checks the structures involved; it returns when the absence is confirmed and raises
  `CorruptDataError` when it is not (the value is there after all, or the table or its
  index is damaged). It costs a scan of one table, so callers use it only where a miss
  contradicts another record, never on every miss.
* `Integrity.check`: the database engine's own check of the whole database
  (`EngineCheck`), for an operator (``flowledger check``).

Kinds: ``kv`` (a KV key), ``blob`` (a blob key), ``log`` (a ledger log: absent means it
holds no record). `Unchecked` is the answer of a store with nothing outside the process
that could damage it (the memory backend), and of stores assembled by hand from
primitives (test wrappers): it trusts every miss.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Literal, Protocol, runtime_checkable

__all__ = ["KINDS", "EngineCheck", "Integrity", "Kind", "Unchecked"]

Kind = Literal["kv", "blob", "log"]
KINDS: Final[tuple[Kind, ...]] = ("kv", "blob", "log")


@dataclass(frozen=True, slots=True)
class EngineCheck:
    """The database engine's verdict on its own structures.

    ``method`` says what ran (``sqlite integrity_check``, ``postgresql amcheck``, ...);
    ``problems`` are the engine's own messages (empty when clean, at most the limit the
    check was given); ``complete`` is False when the engine could check only part of what
    it holds (PostgreSQL without the amcheck extension), and ``note`` then says what to
    do about it. ``rows`` names the stored values a problem is about, where the engine
    identifies the row (SQLite's ``row N missing from index ...``)."""

    method: str
    problems: tuple[str, ...] = ()
    complete: bool = True
    note: str = ""
    # The stored values the problems name, where the engine says which row: (kind, name)
    # with kind ``kv``, ``blob``, ``log`` or ``attachment`` (a hex digest).
    rows: tuple[tuple[str, str], ...] = ()

    @property
    def ok(self) -> bool:
        return not self.problems

    def to_json(self) -> dict[str, object]:
        return {
            "method": self.method,
            "ok": self.ok,
            "complete": self.complete,
            "problems": list(self.problems),
            "note": self.note,
            "rows": [{"kind": kind, "name": name} for kind, name in self.rows],
        }


@runtime_checkable
class Integrity(Protocol):
    async def confirm_absent(self, kind: Kind, name: str) -> None:
        """Return if ``name`` (of ``kind``) is truly absent; `CorruptDataError` if a lookup
        that missed it cannot be trusted. ``ValueError`` for an unknown kind."""
        ...

    async def check(self, *, limit: int = 100) -> EngineCheck:
        """The engine's check of the whole database, at most ``limit`` problems."""
        ...


def check_kind(kind: object) -> Kind:
    if kind not in KINDS:
        raise ValueError(f"integrity kind must be one of {', '.join(KINDS)}, not {kind!r}")
    return kind


def check_limit(limit: object) -> int:
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise ValueError(f"the problem limit must be a positive int, not {limit!r}")
    return limit


class Unchecked:
    """A store whose misses are trusted: nothing outside this process can damage it."""

    def __init__(self, method: str = "none") -> None:
        self._method = method

    async def confirm_absent(self, kind: Kind, name: str) -> None:
        check_kind(kind)

    async def check(self, *, limit: int = 100) -> EngineCheck:
        check_limit(limit)
        return EngineCheck(
            self._method, note="nothing outside this process holds this store's data"
        )
