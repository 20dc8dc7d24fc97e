"""`Runner`: run, resume, cancel and inspect runs of one compiled graph.

A runner is safe for many concurrent runs; everything per-run is passed per
call. `run` and `resume` return a `Result` for every outcome that is part of
the run's life (completed, paused, halted, cancelled while running); they
raise only for engine failures (store, codec, revision conflicts) and for
refusals (unknown, terminal or incompatible runs).

`fork` makes a new run from any revision of another run of the same graph (see
`flow.fork` for where it continues, what it re-executes and how its patch is checked):
it writes the fork's revision 0 only, checking everything before, so a refused fork
writes nothing; `resume` then runs it.

Resume validates everything before any task runs, in this order: the stored
run id, graph id and graph version match; the run is not terminal; the stored
states decode; every vertex the checkpoint names exists; the phase agrees
with its interrupts and halt.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import replace
from typing import Any, Generic, TypeVar

from ..clock import Clock, system_clock
from .checkpoint import Checkpoint, ForkOrigin, RunRecord, RunStatus, StepPhase
from .engine import Coordinator, Granularity, RunOptions
from .errors import (
    CheckpointDecodeError,
    CheckpointNotFoundError,
    FlowError,
    ForkRevisionError,
    GraphMismatchError,
    GraphRunExistsError,
    GraphRunMismatchError,
    GraphVersionMismatchError,
    ResumeTerminalError,
    RevisionConflictError,
    UnknownVertexError,
)
from .fork import ForkPlan, checkpoint_digest, fork_plan, fork_point, patch_state
from .graph import CompiledGraph
from .hooks import Hooks, fire
from .ids import new_run_id, validate_run_id
from .result import Halt, Interruption, Result, StoredError
from .store import CheckpointStore

__all__ = ["Runner"]

S = TypeVar("S")


def _options(
    hooks: Hooks | Sequence[Hooks],
    concurrency: int | None,
    max_steps: int | None,
    checkpoint: Granularity,
    clock: Clock = system_clock,
) -> RunOptions:
    hook_sets = (hooks,) if isinstance(hooks, Hooks) else tuple(hooks)
    for hook_set in hook_sets:
        if not isinstance(hook_set, Hooks):
            raise TypeError(f"hooks must be flow.Hooks, not {type(hook_set).__name__}")
    for name, value in (("concurrency", concurrency), ("max_steps", max_steps)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
            raise TypeError(f"{name} must be an int")
        if value is not None and value < 1:
            raise ValueError(f"{name} must be >= 1, not {value}")
    if not isinstance(checkpoint, Granularity):
        raise TypeError("checkpoint must be a flow.Granularity")
    return RunOptions(
        hooks=hook_sets,
        concurrency=concurrency or os.cpu_count() or 1,
        max_steps=max_steps or 10_000,
        checkpoint=checkpoint,
        clock=clock,
    )


class Runner(Generic[S]):
    def __init__(
        self, graph: CompiledGraph, store: CheckpointStore, *, clock: Clock = system_clock
    ) -> None:
        self.graph = graph
        self.store = store
        self.clock = clock  # what `flow.sleep` and interrupt deadlines count from

    @property
    def graph_id(self) -> str:
        return self.graph.graph_id

    @property
    def graph_version(self) -> str:
        return self.graph.version

    async def run(
        self,
        state: S,
        *,
        run_id: str | None = None,
        hooks: Hooks | Sequence[Hooks] = (),
        concurrency: int | None = None,
        max_steps: int | None = None,
        checkpoint: Granularity = Granularity.PER_VERTEX,
    ) -> Result[S]:
        """Start a new run from ``state``. With ``run_id``, the id must be unused."""
        options = _options(hooks, concurrency, max_steps, checkpoint, self.clock)
        doc = self.graph.codec.dump(state)  # fails early, naming the path; nothing written
        if run_id is None:
            run_id = new_run_id()
        else:
            validate_run_id(run_id)
            try:
                await self.store.latest(run_id)
            except CheckpointNotFoundError:
                pass
            else:
                raise GraphRunExistsError(run_id)
        moment = self.clock.now()
        record = RunRecord(
            graph_run_id=run_id,
            graph_id=self.graph.graph_id,
            graph_version=self.graph.version,
            status=RunStatus.RUNNING,
            step=0,
            revision=0,
            created_at=moment,
            started_at=moment,
            updated_at=moment,
        )
        coordinator = Coordinator(self.graph, self.store, options, record, doc)
        try:
            return await coordinator.start()
        except RevisionConflictError as conflict:
            if conflict.actual == 0:  # someone else seeded this id first
                raise GraphRunExistsError(run_id) from conflict
            raise

    async def resume(
        self,
        run_id: str,
        payload: Any = None,
        *,
        hooks: Hooks | Sequence[Hooks] = (),
        concurrency: int | None = None,
        max_steps: int | None = None,
        checkpoint: Granularity = Granularity.PER_VERTEX,
    ) -> Result[S]:
        """Continue a paused, halted or crashed run from its latest checkpoint.

        ``payload`` reaches the vertices the resumed step re-runs (the first
        `flow.interrupt` call of each returns it); ``None`` means no payload."""
        options = _options(hooks, concurrency, max_steps, checkpoint, self.clock)
        cp = await self.store.latest(run_id)
        self._check_resumable(run_id, cp)
        assert cp.state is not None
        run = replace(cp.run, status=RunStatus.RUNNING)
        coordinator = Coordinator(self.graph, self.store, options, run, cp.state)
        return await coordinator.resume(cp, payload)

    async def cancel(
        self, run_id: str, reason: str = "", *, hooks: Hooks | Sequence[Hooks] = ()
    ) -> RunRecord:
        """Append a terminal CANCELLED checkpoint. A coordinator still running the run
        notices at its next append and stops gracefully."""
        options = _options(hooks, None, None, Granularity.PER_VERTEX, self.clock)
        if not isinstance(reason, str):
            raise TypeError("reason must be a str")
        cp = await self.store.latest(run_id)
        if cp.run.status.terminal:
            raise ResumeTerminalError(cp.run.status)
        moment = self.clock.now()
        run = replace(
            cp.run,
            status=RunStatus.CANCELLED,
            cancelled_at=moment,
            cancel_reason=reason,
            revision=cp.run.revision + 1,
            updated_at=moment,
        )
        cancelled = replace(cp, run=run, routes=[], interrupts=[], halt=None, origin=None)
        await self.store.append([cancelled])
        await fire(options.hooks, "on_run_finish", replace(run))
        return replace(run)

    async def fork(
        self,
        graph_run_id: str,
        revision: int,
        patch: Any = None,
        *,
        run_id: str | None = None,
    ) -> str:
        """Write revision 0 of a new run forked from ``graph_run_id`` at ``revision`` with
        the state optionally ``patch``-ed; return the new run's id (``run_id`` if given,
        which must be unused). The origin must be a run of this graph and version, of
        any status; its history is only read. Raises, writing nothing:
        `CheckpointNotFoundError`, `GraphMismatchError`, `GraphVersionMismatchError`,
        `ForkRevisionError` (not an int in 0..latest), `StatePatchError`,
        `UnknownVertexError`, `GraphRunExistsError`."""
        if isinstance(revision, bool) or not isinstance(revision, int):
            raise ForkRevisionError(graph_run_id, revision, -1)
        latest = await self.store.latest(graph_run_id)
        origin_run = latest.run
        if origin_run.graph_run_id != graph_run_id:
            raise GraphRunMismatchError(graph_run_id, origin_run.graph_run_id)
        if origin_run.graph_id != self.graph.graph_id:
            raise GraphMismatchError(self.graph.graph_id, origin_run.graph_id)
        if origin_run.graph_version != self.graph.version:
            raise GraphVersionMismatchError(self.graph.version, origin_run.graph_version)
        if not 0 <= revision <= origin_run.revision:
            raise ForkRevisionError(graph_run_id, revision, origin_run.revision)
        history = await self.store.history(graph_run_id, limit=revision + 1)
        if len(history) != revision + 1 or history[revision].revision != revision:
            raise CheckpointDecodeError("history", f"revision {revision} could not be read")
        forked = history[revision]
        point = fork_point(history, revision)
        for vertex in point.frontier:
            if vertex not in self.graph.vertices:
                raise UnknownVertexError(vertex)
        self._decode_state(point.state, "state")
        state = patch_state(self.graph.codec, point.state, patch)
        if run_id is None:
            run_id = new_run_id()
        else:
            validate_run_id(run_id)
        if run_id == graph_run_id:
            raise GraphRunExistsError(run_id)
        moment = self.clock.now()
        seed = Checkpoint(
            run=RunRecord(
                graph_run_id=run_id,
                graph_id=self.graph.graph_id,
                graph_version=self.graph.version,
                status=RunStatus.RUNNING,
                step=point.step,
                revision=0,
                created_at=moment,
                started_at=moment,
                updated_at=moment,
                finish_reached=point.finish_reached,
            ),
            phase=StepPhase.ROUTED,
            state=state,
            frontier=list(point.frontier),
            origin=ForkOrigin(graph_run_id, revision, checkpoint_digest(forked)),
        )
        try:
            await self.store.append([seed])
        except RevisionConflictError as conflict:
            raise GraphRunExistsError(run_id) from conflict
        return run_id

    async def fork_plan(self, graph_run_id: str, revision: int, *, after: bool = False) -> ForkPlan:
        """What `fork` would do with ``revision`` - or, with ``after``, with the revision
        that ends its step (`flow.fork.step_end`) - by `flow.fork.fork_plan`: the revision
        a fork is made from, its first step and the vertices it runs again. Reads the
        origin's whole history, writes nothing; raises what `fork` raises for the origin
        and the revision."""
        if isinstance(revision, bool) or not isinstance(revision, int):
            raise ForkRevisionError(graph_run_id, revision, -1)
        latest = await self.store.latest(graph_run_id)
        origin_run = latest.run
        if origin_run.graph_id != self.graph.graph_id:
            raise GraphMismatchError(self.graph.graph_id, origin_run.graph_id)
        if origin_run.graph_version != self.graph.version:
            raise GraphVersionMismatchError(self.graph.version, origin_run.graph_version)
        if not 0 <= revision <= origin_run.revision:
            raise ForkRevisionError(graph_run_id, revision, origin_run.revision)
        history = await self.store.history(graph_run_id, limit=origin_run.revision + 1)
        if len(history) <= revision or history[revision].revision != revision:
            raise CheckpointDecodeError("history", f"revision {revision} could not be read")
        return fork_plan(history, revision, after=after)

    async def status(self, run_id: str) -> RunRecord:
        """The latest run record (the state is not decoded)."""
        return (await self.store.latest(run_id)).run

    async def get(self, run_id: str) -> Result[S]:
        """The run as its latest checkpoint describes it; never executes anything."""
        cp = await self.store.latest(run_id)
        state = self._decode_state(cp.state, "state")
        interrupts = None
        halt = None
        if cp.run.status is not RunStatus.INTERRUPTED:
            pass  # completed, cancelled or mid-step: neither pauses nor halts to report
        elif cp.phase is StepPhase.PAUSED:
            interrupts = [
                Interruption(
                    run_id,
                    i.vertex,
                    i.kind,
                    i.info,
                    StoredError(i.cause, i.error_type) if i.cause else None,
                    wake_at=i.wake_at,
                    on_timeout=i.on_timeout,
                )
                for i in cp.interrupts
            ]
        elif cp.phase is StepPhase.HALTED and cp.halt is not None:
            halt = Halt(run_id, cp.halt.kind, cp.halt.step, StoredError(cp.halt.cause))
        return Result(cp.run, state, interrupts, halt)

    async def latest(self, run_id: str) -> Checkpoint:
        return await self.store.latest(run_id)

    async def history(
        self, run_id: str, *, after: int = -1, limit: int | None = None
    ) -> list[Checkpoint]:
        return await self.store.history(run_id, after=after, limit=limit)

    async def check_resumable(self, run_id: str) -> Checkpoint:
        """The latest checkpoint, after the checks `resume` makes before running anything:
        raises `GraphMismatchError`, `GraphVersionMismatchError` or `UnknownVertexError`
        when the checkpoint belongs to another graph than this runner's, and the errors of
        an unusable checkpoint (`CheckpointDecodeError`, `ResumeTerminalError`, ...)."""
        cp = await self.store.latest(run_id)
        self._check_resumable(run_id, cp)
        return cp

    # -- validation ------------------------------------------------------------------------

    def _decode_state(self, doc: Any, field: str) -> S:
        if doc is None:
            raise CheckpointDecodeError(field, "missing")
        try:
            state: S = self.graph.codec.load(doc)
        except FlowError as exc:
            raise CheckpointDecodeError(field, str(exc)) from exc
        return state

    def _check_resumable(self, run_id: str, cp: Checkpoint) -> None:
        run = cp.run
        if run.graph_run_id != run_id:
            raise GraphRunMismatchError(run_id, run.graph_run_id)
        if run.graph_id != self.graph.graph_id:
            raise GraphMismatchError(self.graph.graph_id, run.graph_id)
        if run.graph_version != self.graph.version:
            raise GraphVersionMismatchError(self.graph.version, run.graph_version)
        if run.status.terminal:
            raise ResumeTerminalError(run.status)
        self._decode_state(cp.state, "state")
        if cp.step_base is not None:
            self._decode_state(cp.step_base, "step_base")
        known = self.graph.vertices
        named = [
            *cp.frontier,
            *(i.vertex for i in cp.interrupts),
            *(r.source for r in cp.routes),
            *(t for r in cp.routes for t in r.targets),
            *(v.vertex for v in cp.vertices),
        ]
        for vertex in named:
            if vertex not in known:
                raise UnknownVertexError(vertex)
        phase_error = _phase_error(cp)
        if phase_error:
            raise CheckpointDecodeError(
                "phase", f"invalid checkpoint phase/interrupt/halt combination: {phase_error}"
            )


def _phase_error(cp: Checkpoint) -> str:
    has_interrupts = bool(cp.interrupts)
    has_halt = cp.halt is not None
    if cp.phase is StepPhase.PAUSED:
        if not has_interrupts:
            return "a paused checkpoint has no interrupts"
        if has_halt:
            return "a paused checkpoint has a halt"
    elif cp.phase is StepPhase.HALTED:
        if not has_halt:
            return "a halted checkpoint has no halt"
        if has_interrupts:
            return "a halted checkpoint has interrupts"
    elif cp.phase is StepPhase.RUNNING:
        if has_halt:
            return "a running checkpoint has a halt"
    elif cp.phase is StepPhase.ROUTED and (has_interrupts or has_halt):
        return "a routed checkpoint has interrupts or a halt"
    return ""
