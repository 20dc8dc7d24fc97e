"""Incremental activity projection of live runs: paged checkpoint reads and a per-run
`Projector` kept between publications.

The supervisor publishes a run's activities many times while it runs (`LiveActivities`)
and once at the end of every segment. Re-reading and re-projecting the whole history
each time made a run's cost grow with the square of its length; instead
`RunProjections` keeps, per run, a projector that has seen exactly the checkpoints
before the run's activity cursor, so a publication reads only the checkpoints after
the cursor. When there is none (a new process, an adoption, a resume, an earlier error)
one is rebuilt from revision 0 in pages of `PROJECTION_PAGE` checkpoints, yielding to
the event loop between pages. A rebuilt projector emits exactly what the kept one
would have (`Projector` is byte-for-byte the whole-history `project`).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Final

from ... import flow
from ..authoring.definition import Definition
from ..records.run import Run
from .activity import Projector

__all__ = ["PROJECTION_PAGE", "HistoryReadError", "RunProjections", "checkpoint_pages"]

#: Checkpoints read (and decoded) per page when projecting a run's history.
PROJECTION_PAGE: Final = 500


class HistoryReadError(Exception):
    """Reading a page of checkpoints failed; ``cause`` is the store's error (a projection
    error, by contrast, is an `ActivityValidationError` from the projector)."""

    def __init__(self, cause: Exception) -> None:
        super().__init__(f"read checkpoint history: {cause}")
        self.cause = cause


async def checkpoint_pages(
    definition: Definition,
    graph_run_id: str,
    start: int,
    *,
    upto: int | None = None,
    page: int = PROJECTION_PAGE,
) -> AsyncIterator[list[flow.Checkpoint]]:
    """The run's checkpoints from revision ``start`` (up to ``upto``, exclusive, if given),
    ``page`` at a time; between pages the event loop runs other work. A failed read
    raises `HistoryReadError`."""
    revision = start
    while upto is None or revision < upto:
        size = page if upto is None else min(page, upto - revision)
        try:
            chunk = await definition.checkpoint_page(graph_run_id, after=revision - 1, limit=size)
        except Exception as exc:
            raise HistoryReadError(exc) from exc
        if not chunk:
            return
        yield chunk
        if len(chunk) < size:
            return
        revision = chunk[-1].revision + 1
        await asyncio.sleep(0)


@dataclass(eq=False, slots=True)
class _Kept:
    definition: Definition
    projector: Projector


class RunProjections:
    """The projector of each run being published, valid for one definition object and
    kept only while it has seen exactly the checkpoints before the run's cursor."""

    def __init__(self) -> None:
        self._kept: dict[str, _Kept] = {}

    def __len__(self) -> int:
        return len(self._kept)

    def take(self, definition: Definition, run: Run) -> Projector | None:
        """The kept projector of ``run`` if it is at the run's cursor (it is removed: give it
        back with `keep` once its output is durable)."""
        kept = self._kept.pop(run.id, None)
        if kept is None or kept.definition is not definition:
            return None
        if kept.projector.revision != run.activity_cursor:
            return None
        return kept.projector

    def keep(self, definition: Definition, run_id: str, projector: Projector) -> None:
        self._kept[run_id] = _Kept(definition, projector)

    def forget(self, run_id: str) -> None:
        self._kept.pop(run_id, None)

    def clear(self) -> None:
        self._kept.clear()

    async def rebuild(self, definition: Definition, run: Run) -> Projector:
        """A new projector that has seen the checkpoints before the run's cursor (all of
        them when the history is shorter), emitting from the cursor on."""
        projector = Projector(
            run,
            definition.metadata(),
            fail_on_error=definition.on_error == "fail",
            emit_from=run.activity_cursor,
        )
        if run.activity_cursor > 0:
            async for chunk in checkpoint_pages(
                definition, run.graph_run_id, 0, upto=run.activity_cursor
            ):
                projector.advance(run, chunk)  # below the cursor: counted, not emitted
        return projector
