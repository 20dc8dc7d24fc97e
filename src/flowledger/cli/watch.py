"""Watching a run execute in this process: live activity lines and a progress bar, and
what a paused run waits for.

`Watch` reads the session's live activity subscription (`ActivityJournal.subscribe`),
or, when a worker executes the run elsewhere (``from_journal``), follows the run's
durable journal (`JournalFollower`): one line per activity of the watched run (label,
super-step, and for a graph without loops completed vertices out of the total), and on a
terminal a progress bar. For a completed vertex it also reads that
revision's checkpoint to say whether the vertex needed more than one attempt (a retry is
not an activity).
"""

from __future__ import annotations

import asyncio
import contextlib
from datetime import datetime
from types import TracebackType
from typing import Final

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    SpinnerColumn,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
)
from rich.text import Text

from .. import flow
from ..workflows import ActivityKind, ActivityRecord, ActivitySubscription
from ..workflows.activities.follow import JournalFollower
from ..workflows.runtime.session import WorkflowSession
from .loops import definition_loops
from .render import KIND_ICONS, Pause
from .runtime import make_tools

__all__ = ["Watch", "load_pause"]

LABEL_WIDTH: Final = 34
STEP_WIDTH: Final = 8  # "step 123"
FRACTION_WIDTH: Final = 5  # "12/12"
CHECKPOINT_CHUNK: Final = 64

_PHRASES: Final = {
    ActivityKind.RUN_STARTED: "run started",
    ActivityKind.RUN_INTERRUPTED: "paused, waiting for input",
    ActivityKind.RUN_RESUMED: "resumed",
    ActivityKind.RUN_COMPLETED: "completed",
    ActivityKind.RUN_CANCELLED: "cancelled",
    ActivityKind.RUN_FAILED: "failed",
}


class Watch:
    """Shows one run's activities as they are published, until `stop`.

    Use as an async context manager around the work; call `follow` once the run id is
    known (activities published before that wait in the subscription). With
    ``from_journal`` only activities stored after `follow` are shown."""

    def __init__(
        self,
        session: WorkflowSession,
        console: Console,
        *,
        quiet: bool = False,
        indent: str = "  ",
        from_journal: bool = False,
    ) -> None:
        self._session = session
        self._console = console
        self._quiet = quiet
        self._indent = indent
        self._from_journal = from_journal
        self._subscription: ActivitySubscription | JournalFollower | None = None
        self._task: asyncio.Task[None] | None = None
        self._progress: Progress | None = None
        self._bar: TaskID | None = None
        self._origin: datetime | None = None
        self._graph_run_id = ""
        self._read_upto = -1
        self._attempt: dict[str, tuple[int, int]] = {}  # vertex -> (attempt, step)
        self._paused_by_error = False  # the latest pausing checkpoint read so far
        self._looping = True  # until the definition's graph is known to have no cycle
        self._completions = 0
        self.run_id = ""
        self.seen = 0

    async def __aenter__(self) -> Watch:
        if not self._from_journal:
            self._subscription = self._session.journal.subscribe(self._session.session_id)
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.stop(drain=exc is None)

    async def follow(self, run_id: str, title: str) -> None:
        """Start showing ``run_id``'s activities (those already published included)."""
        self.run_id = run_id
        with contextlib.suppress(Exception):
            run = await self._session.registry.get(self._session.session_id, run_id)
            self._graph_run_id = run.graph_run_id
            loops = definition_loops(
                self._session.catalog, run.definition_name, run.definition_version
            )
            self._looping = loops is not False
        if self._from_journal:
            try:
                follower = JournalFollower(self._session.journal, self._session.session_id, run_id)
                self._subscription = await follower.start()
            except Exception:
                return  # no such run (the call says so), or the database is away
        if not self._quiet and self._console.is_terminal:
            self._progress = Progress(
                SpinnerColumn(),
                TextColumn("[bold]{task.description}"),
                BarColumn(bar_width=32),
                MofNCompleteColumn(),
                TextColumn("vertices", style="dim"),
                TimeElapsedColumn(),
                console=self._console,
                transient=True,
            )
            self._progress.start()
            self._bar = self._progress.add_task(title, total=None)
        self._task = asyncio.ensure_future(self._consume())

    async def stop(self, *, drain: bool = True) -> None:
        """Stop watching; with ``drain``, show what was already published first."""
        subscription, self._subscription = self._subscription, None
        if subscription is not None:
            subscription.close()
        task, self._task = self._task, None
        if task is not None:
            if not drain:
                task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        if self._progress is not None:
            self._progress.stop()
            self._progress = None

    async def _consume(self) -> None:
        subscription = self._subscription
        if subscription is None:
            return
        async for record in subscription:
            if record.run_id != self.run_id:
                continue
            self.seen += 1
            if self._quiet:
                continue
            try:
                await self._show(record)
            except Exception as exc:  # a display problem never stops the run
                self._console.print(f"(cannot show an activity: {exc})", style="dim", markup=False)

    async def _show(self, record: ActivityRecord) -> None:
        if self._origin is None:
            self._origin = record.occurred_at
        kind = ActivityKind(record.kind)
        icon, style = KIND_ICONS.get(str(kind), ("·", ""))
        line = Text(self._indent)
        line.append(icon + " ", style=style)
        note = ""
        step = ""
        if kind is ActivityKind.VERTEX_COMPLETED:
            label = record.vertex_label or record.vertex_id or "step"
            attempts, number = await self._attempts(record)
            if attempts > 1:
                failures = attempts - 1
                note = f"failed {'once' if failures == 1 else f'{failures} times'}, retried"
            if attempts:  # known: super-steps count from 0, people from 1
                step = f"step {number + 1}"
        elif kind is ActivityKind.RUN_INTERRUPTED and await self._catch_up():
            # A task error pauses the run too; "waiting for input" would mislead there.
            label = "paused by an error" if self._paused_by_error else _PHRASES[kind]
        else:
            label = _PHRASES.get(kind, str(kind))
        line.append(label, style="bold" if kind is not ActivityKind.VERTEX_COMPLETED else "")
        line.pad_right(max(0, LABEL_WIDTH + len(self._indent) - line.cell_len))
        # Fixed-width columns; the retry note goes last so it never shifts them. A graph
        # with a loop visits vertices more than once, so a count of them out of the total
        # would stop at "7/7" long before the end: it shows the step number only.
        line.append(f" {step:<{STEP_WIDTH}}", style="dim")
        if not self._looping:
            fraction = ""
            if record.total_vertices:
                fraction = f"{record.completed_vertices}/{record.total_vertices}"
            line.append(f" {fraction:>{FRACTION_WIDTH}}", style="dim")
        elapsed = max(0.0, (record.occurred_at - self._origin).total_seconds())
        line.append(f"  +{elapsed:.2f}s", style="dim")
        if note:
            line.append(f"  ({note})", style="yellow")
        if self._progress is not None and self._bar is not None:
            if self._looping:  # no total to aim at: count the vertices completed so far
                self._completions += kind is ActivityKind.VERTEX_COMPLETED
                self._progress.update(self._bar, total=None, completed=self._completions)
            else:
                total = record.total_vertices or None
                self._progress.update(self._bar, total=total, completed=record.completed_vertices)
        self._console.print(line, soft_wrap=True)

    async def _attempts(self, record: ActivityRecord) -> tuple[int, int]:
        """How many attempts the completed vertex took, and in which super-step ((0, 0)
        if unknown); the vertex's latest completion so far is the one announced."""
        if record.vertex_id is None or not await self._catch_up():
            return 0, 0
        return self._attempt.get(record.vertex_id, (0, 0))

    async def _catch_up(self) -> bool:
        """Read the run's checkpoints written since the last call (False if unknown)."""
        if not self._graph_run_id:
            return False
        try:
            while True:
                found = await self._session.checkpoints.history(
                    self._graph_run_id, after=self._read_upto, limit=CHECKPOINT_CHUNK
                )
                for checkpoint in found:
                    for vertex in checkpoint.vertices:
                        if vertex.status is flow.VertexStatus.DONE:
                            self._attempt[vertex.vertex] = (vertex.attempt, vertex.step)
                    if checkpoint.phase is flow.StepPhase.HALTED:
                        self._paused_by_error = True
                    elif checkpoint.phase is flow.StepPhase.PAUSED:
                        self._paused_by_error = any(
                            item.kind is flow.InterruptKind.ERRORED
                            for item in checkpoint.interrupts
                        )
                    self._read_upto = checkpoint.revision
                if len(found) < CHECKPOINT_CHUNK:
                    return True
        except Exception:
            return False


async def load_pause(
    session: WorkflowSession, run_id: str, flags: list[str] | tuple[str, ...] = ()
) -> Pause | None:
    """What an interrupted run waits for (None if it waits for nothing it recorded): read
    through the tools, so it needs no definition loaded."""
    result = await make_tools(session, owner=False).call("workflow_run_get", {"run_id": run_id})
    return Pause.from_run(result, flags)
