"""The coordinator: one per run, driving bulk-synchronous super-steps.

Each step: freeze the committed state as the step base; every vertex of the
frontier derives its input from its own copy of that base; tasks run
concurrently (at most ``concurrency`` at once) behind a barrier; then, one
vertex at a time in id order, the outcome is classified and reduced into a
copy of the accumulated state, which replaces it only on success. Finally the
step pauses, halts, completes, or routes to the next frontier.

Durability: every transition is a checkpoint appended under compare-and-append.
Checkpoints that become ready together - a step's vertex checkpoints (vertices
are classified after the barrier, with no I/O in between) and the step's
boundary - are committed in one append (up to 63 at a time). Hooks describing
a checkpoint fire only after it is durable. If an append loses a race, the
coordinator looks at the winner: a cancellation ends the run gracefully,
anything else is a `RevisionConflictError`.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from enum import Enum
from typing import Any, Final

from ..clock import Clock, system_clock
from ..observability import metrics, tracing
from .checkpoint import (
    Checkpoint,
    HaltKind,
    HaltRecord,
    InterruptKind,
    InterruptRecord,
    RouteRecord,
    RunRecord,
    RunStatus,
    StepPhase,
    VertexRecord,
    VertexStatus,
)
from .codec import JsonObject, to_json_value
from .context import InterruptSignal, RunInfo, VertexScope, absent, current_scope
from .errors import (
    ConditionError,
    DeadEndError,
    MaxStepsExceededError,
    RevisionConflictError,
    UndeclaredTargetError,
    VertexError,
    bounded_traceback,
    describe,
)
from .execute import run_task
from .graph import CompiledGraph, Vertex
from .hooks import Hooks, fire
from .ids import new_run_id
from .result import Halt, Interruption, Result
from .state import StepMerge, apply_update, changed_fields
from .store import CheckpointStore

__all__ = ["Coordinator", "Granularity", "RunOptions"]


_NO_CONTINUATION: Final[Any] = absent()
# Checkpoints committed in one append: a step's vertex checkpoints and its boundary are
# ready together (classification does no I/O), so they share one commit up to this many.
_MAX_BATCH: Final = 63
# What a span-less block enters when tracing is off (reentrant, shared).
_UNTRACED: Final = contextlib.nullcontext()


class Granularity(Enum):
    PER_VERTEX = "per_vertex"  # a checkpoint after every vertex (default; least re-work)
    PER_STEP = "per_step"  # only step boundaries (fewer writes; a crash re-runs the step)


@dataclass(frozen=True, slots=True)
class RunOptions:
    hooks: tuple[Hooks, ...] = ()
    concurrency: int = field(default_factory=lambda: os.cpu_count() or 1)
    max_steps: int = 10_000
    checkpoint: Granularity = Granularity.PER_VERTEX
    clock: Clock = system_clock  # what `sleep` and interrupt deadlines count from


@dataclass(slots=True)
class _Execution:
    vertex: Vertex
    record: VertexRecord
    payload: Any = None
    continuation: Any = _NO_CONTINUATION
    resumed: InterruptRecord | None = None  # the stored pause this execution resumes
    input: Any = None
    output: Any = None
    failure: BaseException | None = None
    signal: InterruptSignal | None = None
    interrupt: InterruptRecord | None = None
    interruption: Interruption | None = None
    routed_failure: bool = False  # failed under an error route: continue at its handler


class Coordinator:
    def __init__(
        self,
        graph: CompiledGraph,
        store: CheckpointStore,
        options: RunOptions,
        run: RunRecord,
        state_doc: JsonObject,
    ) -> None:
        self.graph = graph
        self.codec = graph.codec
        self.store = store
        self.options = options
        self.run = run
        self.state_doc = state_doc
        self.next_revision = run.revision + 1
        self._pending: list[Checkpoint] = []
        self._events: list[tuple[str, tuple[Any, ...]]] = []
        self._interrupts: dict[str, InterruptRecord] = {}
        self._merge = StepMerge(graph.reducers, graph.codec.state_type)
        self._step_base: JsonObject = state_doc
        self._step_parent: tracing.Recording | None = None  # the step span, while traced

    # -- durability ------------------------------------------------------------------------

    def _emit(
        self,
        phase: StepPhase,
        *,
        step_base: JsonObject | None,
        vertices: Sequence[VertexRecord] = (),
        frontier: Sequence[str] = (),
        routes: Sequence[RouteRecord] = (),
        halt: HaltRecord | None = None,
    ) -> None:
        self.run.revision = self.next_revision + len(self._pending)
        self.run.updated_at = self.options.clock.now()
        interrupts = (
            [self._interrupts[v] for v in sorted(self._interrupts)]
            if phase in (StepPhase.RUNNING, StepPhase.PAUSED)
            else []
        )
        self._pending.append(
            Checkpoint(
                run=self.run.copy(),
                phase=phase,
                state=self.state_doc,
                step_base=step_base,
                # Classified records never change again; only running ones need a copy.
                vertices=[
                    v.copy() if v.status is VertexStatus.RUNNING else v
                    for v in sorted(vertices, key=lambda r: r.vertex)
                ],
                frontier=list(frontier),
                routes=list(routes),
                interrupts=interrupts,
                halt=halt,
            )
        )
        self._later("on_checkpoint", self.run.graph_run_id, self.run.revision, self.run.step)

    def _later(self, event: str, *args: Any) -> None:
        if self.options.hooks:
            self._events.append((event, args))

    async def _flush(self) -> None:
        batch, self._pending = self._pending, []
        events, self._events = self._events, []
        if batch:
            began = time.perf_counter()
            if tracing.commit_spans():
                attributes = self._commit_attributes(len(batch))
                with tracing.span("flowledger.commit", attributes, parent=self._step_parent):
                    await self.store.append(batch)
            else:
                await self.store.append(batch)
            metrics.commit_finished(time.perf_counter() - began)
            self.next_revision += len(batch)
        for event, args in events:
            await fire(self.options.hooks, event, *args)

    # -- entry points ----------------------------------------------------------------------

    async def start(self) -> Result[Any]:
        """Write revision 0 (the seed), fire ``on_run_start``, and run to a result."""
        with self._segment_span("start"):
            self.next_revision = 0
            self._emit(StepPhase.ROUTED, step_base=None, frontier=[self.graph.entry])
            await self._flush()
            await fire(self.options.hooks, "on_run_start", replace(self.run))
            return await self._guard(self._loop(0, [self.graph.entry]))

    async def resume(self, cp: Checkpoint, payload: Any) -> Result[Any]:
        with self._segment_span("resume"):
            return await self._guard(self._resume(cp, payload))

    # -- traces (observability.tracing; nothing is recorded while it is off) --------------

    def _segment_span(self, kind: str) -> contextlib.AbstractContextManager[Any]:
        """A segment span unless a caller (the workflow supervisor) opened one already."""
        if not tracing.ENABLED or tracing.in_segment():
            return _UNTRACED
        return tracing.segment(kind, self._graph_attributes(), None)

    def _step_span(self, step: int) -> contextlib.AbstractContextManager[Any]:
        """The step's span (None inside while tracing is off). It is not the current
        span: its vertex and commit spans name it as their parent (`_step_parent`), which
        spares a context switch per step (the hooks see the segment's span)."""
        if not tracing.ENABLED:
            return _UNTRACED
        attributes: tracing.Attributes = {
            "flowledger.graph_run.id": self.run.graph_run_id,
            "flowledger.step": step,
        }
        return tracing.span("flowledger.step", attributes, tracing.current_segment(), current=False)

    def _graph_attributes(self) -> dict[str, str | int | bool]:
        return {
            "flowledger.graph.id": self.graph.graph_id,
            "flowledger.graph.version": self.run.graph_version,
            "flowledger.graph_run.id": self.run.graph_run_id,
        }

    def _commit_attributes(self, checkpoints: int) -> dict[str, str | int | bool]:
        return {
            "flowledger.graph_run.id": self.run.graph_run_id,
            "flowledger.commit.checkpoints": checkpoints,
        }

    async def _guard(self, work: Any) -> Result[Any]:
        try:
            result: Result[Any] = await work
            return result
        except RevisionConflictError:
            try:
                latest = await self.store.latest(self.run.graph_run_id)
            except Exception:
                latest = None
            if latest is not None and latest.run.status is RunStatus.CANCELLED:
                return Result(latest.run, self.codec.load(self.state_doc))
            raise

    async def _resume(self, cp: Checkpoint, payload: Any) -> Result[Any]:
        if cp.phase is StepPhase.ROUTED:
            # A boundary's frontier belongs to the next step; only the seed starts at its own.
            step = cp.run.step if cp.run.revision == 0 else cp.run.step + 1
            return await self._loop(step, cp.frontier)
        if cp.phase is StepPhase.HALTED:
            assert cp.halt is not None
            if cp.halt.kind is HaltKind.MAX_STEPS:
                return await self._loop(cp.run.step, cp.frontier)
            carry = self._carry(cp, rerun=())
            outcome = await self._finalize(
                carry, cp.run.step, cp.state, [e.record.vertex for e in carry]
            )
            if isinstance(outcome, Result):
                return outcome
            return await self._loop(cp.run.step + 1, outcome)
        paused = {i.vertex for i in cp.interrupts}
        if cp.phase is StepPhase.PAUSED:
            rerun = sorted(cp.frontier)
        else:  # RUNNING: re-run what the crash left unfinished
            rerun = sorted(v.vertex for v in cp.vertices if not _terminal(v, paused))
        return await self._resume_step(cp, rerun, payload)

    # -- the loop --------------------------------------------------------------------------

    async def _loop(self, step: int, frontier: Sequence[str]) -> Result[Any]:
        while True:
            if step >= self.options.max_steps:
                self.run.step = step
                error = MaxStepsExceededError(self.options.max_steps, step)
                return await self._halt(HaltKind.MAX_STEPS, error, sorted(frontier), [], step)
            self.run.step = step
            base = self.state_doc
            self._interrupts = {}
            with self._step_span(step) as step_span:
                self._step_parent = step_span
                executions = [self._prepare(v, step, base) for v in sorted(frontier)]
                began = time.perf_counter()
                await self._execute(executions)
                await self._classify_all(executions, [], base)
                outcome = await self._finalize(executions, step, base, sorted(frontier))
                metrics.step_finished(time.perf_counter() - began)
                if step_span is not None:
                    step_span.set_attribute("flowledger.outcome", _step_outcome(outcome))
            self._step_parent = None
            if isinstance(outcome, Result):
                return outcome
            step, frontier = step + 1, outcome

    async def _resume_step(self, cp: Checkpoint, rerun: Sequence[str], payload: Any) -> Result[Any]:
        step = cp.run.step
        self.run.step = step
        base = cp.step_base if cp.step_base is not None else cp.state
        assert base is not None
        carry = self._carry(cp, rerun)
        self._interrupts = {}
        continuations = {i.vertex: i.continuation for i in cp.interrupts if i.stateful}
        pauses = {i.vertex: i for i in cp.interrupts}
        executions = [
            self._prepare(
                v, step, base, payload, continuations.get(v, _NO_CONTINUATION), pauses.get(v)
            )
            for v in rerun
        ]
        step_frontier = sorted({*rerun, *(e.record.vertex for e in carry)})
        with self._step_span(step) as step_span:
            self._step_parent = step_span
            began = time.perf_counter()
            await self._execute(executions)
            await self._classify_all(executions, carry, base)
            outcome = await self._finalize([*executions, *carry], step, base, step_frontier)
            metrics.step_finished(time.perf_counter() - began)
            if step_span is not None:
                step_span.set_attribute("flowledger.outcome", _step_outcome(outcome))
        self._step_parent = None
        if isinstance(outcome, Result):
            return outcome
        return await self._loop(step + 1, outcome)

    def _carry(self, cp: Checkpoint, rerun: Sequence[str]) -> list[_Execution]:
        """Terminal records of an interrupted step: not re-run, but routed at its end."""
        paused = {i.vertex for i in cp.interrupts}
        carried = []
        for record in cp.vertices:
            if record.vertex in rerun or not _terminal(record, paused):
                continue
            execution = _Execution(self.graph.vertices[record.vertex], replace(record))
            execution.routed_failure = record.status is VertexStatus.FAILED
            carried.append(execution)
        return carried

    # -- one step --------------------------------------------------------------------------

    def _prepare(
        self,
        vertex_id: str,
        step: int,
        base: JsonObject,
        payload: Any = None,
        continuation: Any = _NO_CONTINUATION,
        resumed: InterruptRecord | None = None,
    ) -> _Execution:
        vertex = self.graph.vertices[vertex_id]
        record = VertexRecord(
            vertex_id, new_run_id(), step, VertexStatus.RUNNING, created_at=self.options.clock.now()
        )
        execution = _Execution(vertex, record, payload, continuation, resumed)
        try:
            copy = self.codec.load(base)
            execution.input = copy if vertex.select is None else vertex.select(copy)
        except Exception as exc:
            execution.failure = VertexError(vertex_id, record.vertex_run_id, 1, exc)
        return execution

    async def _execute(self, executions: Sequence[_Execution]) -> None:
        runnable = [e for e in executions if e.failure is None]
        if len(runnable) == 1:
            await self._launch(runnable[0])
            await self._work(runnable[0], None)
            return
        slots = asyncio.Semaphore(max(1, self.options.concurrency))
        workers = []
        try:
            for execution in runnable:
                await slots.acquire()
                await self._launch(execution)
                workers.append(asyncio.ensure_future(self._work(execution, slots)))
            await asyncio.gather(*workers)
        except BaseException:
            for worker in workers:
                worker.cancel()
            raise

    async def _launch(self, execution: _Execution) -> None:
        execution.record.started_at = self.options.clock.now()
        if self.options.hooks:
            await fire(self.options.hooks, "on_vertex_start", replace(execution.record))

    async def _work(self, execution: _Execution, slots: asyncio.Semaphore | None) -> None:
        record = execution.record
        info = RunInfo(
            self.graph.graph_id,
            self.run.graph_run_id,
            record.vertex,
            record.vertex_run_id,
            record.step,
        )
        scope = VertexScope(
            info,
            execution.payload,
            execution.continuation,
            clock=self.options.clock,
            resumed=execution.resumed,
        )

        def on_attempt(attempt: int) -> None:
            scope.payload_used = False
            scope.timer_used = False
            scope.timed_out = False
            record.attempt = attempt

        token = current_scope.set(scope)
        vertex_span = self._vertex_span(record) if tracing.ENABLED else _UNTRACED
        try:
            with vertex_span as traced:
                vertex = execution.vertex
                output, _, failure = await run_task(
                    vertex.task,
                    execution.input,
                    vertex=vertex.id,
                    vertex_run_id=record.vertex_run_id,
                    retry=vertex.retry,
                    time_limit=vertex.timeout,
                    on_attempt=on_attempt,
                )
                if traced is not None:
                    traced.set_attributes(_vertex_end(record, failure))
        finally:
            current_scope.reset(token)
            if slots is not None:
                slots.release()
        if isinstance(failure, InterruptSignal):
            execution.signal = failure
        elif failure is not None:
            execution.failure = failure
        else:
            execution.output = output

    def _vertex_span(self, record: VertexRecord) -> contextlib.AbstractContextManager[Any]:
        return tracing.span(
            "flowledger.vertex",
            # the run and the step are on the spans above (two per step: kept small)
            {"flowledger.vertex": record.vertex, "flowledger.vertex_run.id": record.vertex_run_id},
            parent=self._step_parent,
        )

    async def _classify_all(
        self,
        executions: Sequence[_Execution],
        carry: Sequence[_Execution],
        base: JsonObject,
    ) -> None:
        per_vertex = self.options.checkpoint is Granularity.PER_VERTEX
        ordered = sorted(executions, key=lambda e: e.record.vertex)
        self._step_base = base
        self._merge = StepMerge(self.graph.reducers, self.codec.state_type)
        # A resumed step's carried vertices were reduced before the pause; the state
        # records what they changed together, not which of them changed what.
        self._merge.assume_written(
            changed_fields(base, self.state_doc), tuple(sorted(e.record.vertex for e in carry))
        )
        for execution in ordered:
            self._classify(execution)
            if per_vertex:
                # The records name every vertex of the step (running ones too), so the
                # step's frontier can be derived from them on resume.
                self._emit(
                    StepPhase.RUNNING,
                    step_base=base,
                    vertices=[e.record for e in (*executions, *carry)],
                )
            if self.options.hooks:
                self._later("on_vertex_finish", replace(execution.record))
            if execution.interruption is not None:
                self._later("on_interrupt", execution.interruption)
            if len(self._pending) >= _MAX_BATCH:
                await self._flush()

    def _classify(self, execution: _Execution) -> None:
        record = execution.record
        if execution.signal is None and execution.failure is None:
            try:
                self.state_doc = self._reduce(
                    record.vertex, execution.vertex.reduce, execution.output
                )
            except InterruptSignal as raised:
                execution.signal = raised
            except Exception as exc:
                execution.failure = exc
            else:
                record.status = VertexStatus.DONE
                record.completed_at = self.options.clock.now()
                if record.vertex == self.graph.finish:
                    self.run.finish_reached = True
                return
        if execution.signal is not None:
            signal = execution.signal
            info = to_json_value(signal.info, "interrupt.info")
            kept = to_json_value(signal.continuation, "interrupt.continuation")
            default = to_json_value(signal.on_timeout, "interrupt.on_timeout")
            kind = InterruptKind.TIMER if signal.timer else InterruptKind.AWAITING
            record.status = VertexStatus.INTERRUPTED
            record.interrupted_at = self.options.clock.now()
            self._pause(
                execution,
                InterruptRecord(
                    record.vertex,
                    kind,
                    info,
                    "",
                    signal.stateful,
                    kept,
                    wake_at=signal.wake_at,
                    on_timeout=default,
                ),
                Interruption(
                    self.run.graph_run_id,
                    record.vertex,
                    kind,
                    signal.info,
                    wake_at=signal.wake_at,
                    on_timeout=default,
                ),
            )
            return
        failure = execution.failure
        assert failure is not None
        record.status = VertexStatus.FAILED
        record.failed_at = self.options.clock.now()
        record.error = describe(failure)
        route = execution.vertex.on_error
        if route is not None:
            try:
                self.state_doc = self._reduce(
                    record.vertex, route.record, failure, error_record=True
                )
            except (Exception, InterruptSignal):
                pass  # no recursive routing: the vertex pauses as errored below
            else:
                execution.routed_failure = True
                return
        self._pause(
            execution,
            InterruptRecord(
                record.vertex,
                InterruptKind.ERRORED,
                None,
                describe(failure),
                error_type=_error_type(failure),
                traceback=bounded_traceback(failure),
            ),
            Interruption(
                self.run.graph_run_id, record.vertex, InterruptKind.ERRORED, None, failure
            ),
        )

    def _pause(self, execution: _Execution, stored: InterruptRecord, live: Interruption) -> None:
        execution.interrupt = stored
        execution.interruption = live
        self._interrupts[stored.vertex] = stored

    def _reduce(
        self, vertex: str, reducer: Any, value: Any, *, error_record: bool = False
    ) -> JsonObject:
        """Fold ``value`` into a fresh copy of the accumulated state; return the new document.

        Without a custom reducer, ``value`` is the task's blind update and goes through
        the step's field reducers and conflict check (`StepMerge`). Raises whatever fails;
        the committed state is untouched then."""
        copy = self.codec.load(self.state_doc)
        if reducer is not None:
            # A custom reducer sees the accumulated state: what it returns is final.
            new_state = apply_update(copy, reducer(copy, value), self.codec.state_type)
            doc = self._encode(new_state)
            written = changed_fields(self.state_doc, doc)
        elif error_record:  # an error route without a record reducer folds nothing
            return self.state_doc
        else:
            new_state, written = self._merge.merge(
                vertex, copy, value, self._step_base, self.codec.dump
            )
            doc = self._encode(new_state)
        self._merge.record(vertex, written)
        return doc

    def _encode(self, state: Any) -> JsonObject:
        doc = self.codec.dump(state)
        if self.codec.typed:
            self.codec.load(doc)  # what we commit must decode again, or resume would fail
        return doc

    # -- step end --------------------------------------------------------------------------

    async def _finalize(
        self,
        executions: Sequence[_Execution],
        step: int,
        base: JsonObject | None,
        step_frontier: Sequence[str],
    ) -> Result[Any] | list[str]:
        ordered = sorted(executions, key=lambda e: e.record.vertex)
        records = [e.record for e in ordered]
        paused = [e for e in ordered if e.interrupt is not None]
        if paused:
            self.run.status = RunStatus.INTERRUPTED
            self.run.interrupted_at = self.options.clock.now()
            self._emit(
                StepPhase.PAUSED,
                step_base=base,
                vertices=records,
                frontier=[e.record.vertex for e in paused],
            )
            await self._flush()
            return Result(
                replace(self.run),
                self.codec.load(self.state_doc),
                interrupts=[e.interruption for e in paused if e.interruption is not None],
            )
        routes: list[RouteRecord] = []
        for execution in ordered:
            source = execution.record.vertex
            if execution.routed_failure:
                assert execution.vertex.on_error is not None
                routes.append(RouteRecord(source, (execution.vertex.on_error.handler,), False))
                continue
            if execution.record.status is not VertexStatus.DONE:
                continue
            static = self.graph.successors(source)
            if static:
                routes.append(RouteRecord(source, static, False))
                continue
            route = self.graph.routes.get(source)
            if route is None:
                continue
            try:
                picked = route.pick(self.codec.load(self.state_doc))
                if inspect.isawaitable(picked):
                    picked = await picked
                targets = _targets(picked)
            except Exception as exc:
                failed = ConditionError(source, exc)
                return await self._halt(HaltKind.CONDITION, failed, step_frontier, records, step)
            if not targets:
                error = UndeclaredTargetError(source, None)
                return await self._halt(
                    HaltKind.UNDECLARED_TARGET, error, step_frontier, records, step
                )
            for target in targets:
                if target not in route.targets:
                    error = UndeclaredTargetError(source, str(target))
                    return await self._halt(
                        HaltKind.UNDECLARED_TARGET, error, step_frontier, records, step
                    )
            routes.append(RouteRecord(source, targets, True))
        frontier = sorted({t for r in routes for t in r.targets})
        if not frontier and not self.run.finish_reached:
            return await self._halt(HaltKind.DEAD_END, DeadEndError(step), [], records, step)
        if not frontier:
            self.run.status = RunStatus.COMPLETED
            self.run.completed_at = self.options.clock.now()
        self._emit(
            StepPhase.ROUTED, step_base=base, vertices=records, frontier=frontier, routes=routes
        )
        if self.options.hooks:
            run = replace(self.run)
            for route_record in routes:
                for target in route_record.targets:
                    self._later("on_edge", route_record.source, target, run)
            self._later("on_step", run, len(records))
            if not frontier:
                self._later("on_run_finish", run)
        await self._flush()
        if not frontier:
            return Result(replace(self.run), self.codec.load(self.state_doc))
        return frontier

    async def _halt(
        self,
        kind: HaltKind,
        cause: BaseException,
        frontier: Sequence[str],
        records: Sequence[VertexRecord],
        step: int,
    ) -> Result[Any]:
        self.run.status = RunStatus.INTERRUPTED
        self.run.interrupted_at = self.options.clock.now()
        self._emit(
            StepPhase.HALTED,
            step_base=self.state_doc,
            vertices=records,
            frontier=frontier,
            halt=HaltRecord(kind, step, describe(cause)),
        )
        await self._flush()
        halt = Halt(self.run.graph_run_id, kind, step, cause)
        await fire(self.options.hooks, "on_halt", halt)
        return Result(replace(self.run), self.codec.load(self.state_doc), halt=halt)


def _targets(picked: Any) -> tuple[str, ...]:
    """A pick's answer as unique targets in the order given: one name or a sequence."""
    if isinstance(picked, str):
        return (picked,)
    if not isinstance(picked, Sequence | set | frozenset):
        raise TypeError(f"a route's pick returned {type(picked).__name__}, not vertex ids")
    targets = tuple(dict.fromkeys(picked))
    for target in targets:
        if not isinstance(target, str):
            raise TypeError(f"a route's pick returned {target!r}, not a vertex id")
    return targets


def _step_outcome(outcome: Result[Any] | list[str]) -> str:
    """A step's end for its span: routed, paused, halted or completed."""
    if not isinstance(outcome, Result):
        return "routed"
    if outcome.halt is not None:
        return "halted"
    if outcome.interrupts:
        return "paused"
    return str(outcome.run.status)


def _vertex_end(record: VertexRecord, failure: BaseException | None) -> dict[str, str | int]:
    """A vertex span's closing attributes: attempts made, outcome, and what failed."""
    attempt = max(record.attempt, 1)
    if failure is None:
        return {"flowledger.vertex.attempt": attempt, "flowledger.outcome": "done"}
    if isinstance(failure, InterruptSignal):
        return {"flowledger.vertex.attempt": attempt, "flowledger.outcome": "interrupted"}
    return {
        "flowledger.vertex.attempt": attempt,
        "flowledger.outcome": "failed",
        "error.type": _error_type(failure),
    }


def _error_type(failure: BaseException) -> str:
    """The class name of what a task raised (a `VertexError` names its cause's)."""
    if isinstance(failure, VertexError):
        failure = failure.cause
    return type(failure).__name__


def _terminal(record: VertexRecord, paused: set[str]) -> bool:
    """DONE, or FAILED under an error route (an errored pause is listed in the interrupts)."""
    if record.status is VertexStatus.DONE:
        return True
    return record.status is VertexStatus.FAILED and record.vertex not in paused
