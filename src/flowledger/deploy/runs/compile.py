"""Compiling an artifact (with its children) onto the flow engine.

`compile_artifact` turns a validated artifact closure into an `ArtifactDefinition`: an
ordinary `workflows.TypedDefinition` over a ``dict`` state, so checkpoints, de-duplicated
state, activity history, leases, the supervisor, workers and PostgreSQL apply unchanged.
Its graph id is the artifact's name and its graph version the closure digest, so a
checkpoint can never be continued by other artifact bytes (the bridge reports
``graph_changed`` instead).

The run's state, one flat JSON object (each key de-duplicated on its own):

* ``$input``: the root's input; each declared state field under its own name;
* a child run by workflow node ``w`` lives under ``w/`` (``w/$input``, ``w/<field>``,
  ``w/$outcome``, ``w/$output``), a grandchild under ``w/v/``;
* ``$outcome`` and ``$output``: what the root's end node produced;
* bookkeeping: ``$route/<vertex>`` (a switch's choice), ``$arrived/<join>/<branch>``
  (which branches of a parallel reached its join).

Keys starting with ``$`` or holding ``/`` cannot collide with state fields (their grammar
is a vertex id).

The graph: one vertex per node (a child's nodes prefixed ``w__``; node ids may not
contain ``__``), and these synthetic ones: ``finish__`` (the flow finish, after the root's
end nodes), ``w__return`` (continues the parent after child ``w`` ended), and
``<join>__wait`` (where a branch that reached its join early waits). Node semantics:

* ``set``, ``tool``, ``interrupt``: a task computing the ``assign`` updates;
* ``switch``: a task choosing the first case whose condition is true, and a route;
* ``parallel``: static edges to every branch (the branches run in the same super-steps);
  a branch's edge into the join is a route that goes to the join only once every branch
  has arrived (the arrivals are state, so this holds after a restart too), else to the
  join's wait vertex; the join resets the arrivals, so a parallel inside a loop works;
* ``workflow``: a task validating the child's input and initialising the child's state
  (replacing what an earlier visit left), then the child's vertices; the child's end
  nodes continue at ``w__return``, which assigns the parent's fields from ``result``
  (``{outcome, output}``). An interrupt inside the child pauses the run like any other.
* ``foreach``: a vertex that routes back to itself, one batch of items per execution,
  until every item is done (`flowledger.deploy.runs.foreach`: its state keys
  ``$each/<vertex>/...``, batches, per-item intents and error policies).
  A child or sequence body runs per item as a nested run of a graph of its own
  (`_Nested`; a sequence's nodes read ``item`` and ``index``, kept in the nested
  state as ``$item`` and ``$index``).
* ``end``: validates its output against the artifact's output schema.

Templates and conditions are evaluated under the evaluation limits (docs/deploy.md,
"Limits") and off the event loop (`off_loop`), so one run's heavy expression does not
hold up the server's other sessions. Every node execution appends a `RunTrace` entry.
Tool nodes call through the run's `SourcePool` (one session per source while a segment
of the run executes, closed when it pauses or stops, opened again on resume: by the
resume's check of the pinned sources, inside `ArtifactDefinition.resuming`), validate
their arguments against the tool's input schema first, and keep a `ToolIntents` record
around the call (`flowledger.deploy.runs.calls`, shared with foreach tool bodies); what
tasks need at run time is the executing segment's `Runtime`
(`flowledger.deploy.runs.runtime`).
"""

from __future__ import annotations

import asyncio
import copy
import json
import operator
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final

from ... import flow, storage
from ...clock import Clock
from ...flow.ids import VERTEX_ID
from ...storage.memory import MemoryLedger
from ...workflows.authoring.definition import (
    TypedDefinition,
    ValidatedInput,
    ValidatedResume,
    WorkflowResult,
)
from ...workflows.authoring.metadata import MAX_LABEL_BYTES, Metadata, VertexMetadata, bound_text
from ..artifacts.expressions import Expression, Template, truthy
from ..artifacts.model import (
    EndNode,
    ForeachNode,
    ForeachSequenceBody,
    ForeachToolBody,
    ForeachWorkflowBody,
    InterruptNode,
    ParallelNode,
    SetNode,
    SwitchNode,
    ToolNode,
    WaitNode,
    WorkflowNode,
)
from ..artifacts.records import ChildPin
from ..artifacts.records import closure_digest as pinned_closure_digest
from ..artifacts.store import ArtifactStore
from ..artifacts.validate import ValidatedArtifact
from ..sources.pool import SourcePool
from ..sources.session import ToolResult
from .calls import ToolCall, stored_result
from .errors import (
    ArtifactCompileError,
    ForeachChildError,
    NodeOutputError,
    ToolOutcomeUnknownError,
    ToolResultTooLargeError,
)
from .failures import Failure, FailurePolicy, RecordedFailureError, classify
from .foreach import CHILD_ITEM_ERRORS, ForeachStep, ItemCall
from .intents import MAX_RESULT_BYTES, attempt_key
from .nesting import enter, item_run_id, owner_run, trace_prefix
from .offload import off_loop
from .runtime import Runtime, SourceRef, active, held_pool, holding
from .trace import RunTrace, TraceEntry, preview, trace_error

__all__ = [
    "FINISH",
    "ArtifactDefinition",
    "SourceRef",
    "artifact_outcome",
    "closure_digest",
    "compile_artifact",
    "compile_saved",
]

FINISH: Final = "finish__"
INPUT: Final = "$input"
OUTCOME: Final = "$outcome"
OUTPUT: Final = "$output"
ITEM: Final = "$item"  # a sequence body's item and its index, in the item's nested run
INDEX: Final = "$index"

# The run's input, while a foreach item's sequence body runs (read as its `input`).
_RUN_INPUT: ContextVar[Any] = ContextVar("flowledger_deploy_sequence_input", default=None)

_REDUCERS: Final[Mapping[str, flow.FieldReducer]] = {
    "append": flow.append,
    "merge": lambda current, update: {**current, **update},
    "sum": operator.add,
}

Update = dict[str, Any]
Task = Callable[[dict[str, Any]], Awaitable[Update]]


def artifact_outcome(state: Mapping[str, Any]) -> tuple[str | None, Any]:
    """``(outcome, output)`` of a run's state (``(None, None)`` before an end node ran)."""
    return state.get(OUTCOME), state.get(OUTPUT)


@dataclass(frozen=True)
class _Scope:
    """One artifact instance in the run: the root, or a child under its workflow node.
    A foreach's sequence body, run per item, is the root of its own graph with ``item``
    and ``index`` in scope (``items``: kept in its state as ``$item`` and ``$index``),
    and the run's input as ``input`` (`_RUN_INPUT`: not copied into the item's state,
    which every nested checkpoint encodes)."""

    validated: ValidatedArtifact
    keys: str  # "" or "w/" or "w/v/"
    vertices: str  # "" or "w__" or "w__v__"
    label: str  # "" or "Review: "
    items: bool = False

    def key(self, name: str) -> str:
        return self.keys + name

    def vertex(self, node: str) -> str:
        return self.vertices + node

    def view(self, state: Mapping[str, Any]) -> dict[str, Any]:
        """The expression scope ``{input, state}`` of this instance."""
        fields = self.validated.artifact.state
        view = {
            "input": _RUN_INPUT.get() if self.items else state.get(self.key(INPUT)),
            "state": {name: state.get(self.key(name)) for name in fields},
        }
        if self.items:
            view["item"], view["index"] = state.get(ITEM), state.get(INDEX)
        return view

    def initial(self) -> Update:
        values = self.validated.initial_state()
        return {self.key(name): value for name, value in values.items()}


@dataclass(frozen=True)
class _Gate:
    """An edge into the join of a parallel, from branch ``branch`` of ``branches``."""

    join: str  # the join's vertex
    branch: int
    branches: int

    def marker(self, index: int) -> str:
        return f"$arrived/{self.join}/{index}"

    def open(self, state: Mapping[str, Any]) -> bool:
        return all(state.get(self.marker(i)) is True for i in range(self.branches))


@dataclass
class _Note:
    """What a node's trace entry says beyond its identity and status."""

    dependency: str = ""
    tool: str = ""
    arguments: str = ""
    result: str = ""
    status: str = "ok"
    attempt: int = 0
    failure: str = ""
    error: BaseException | None = None  # a failure the node routed (it did not raise)


def _now() -> datetime:
    return flow.now()  # the run's clock, as its checkpoints: trace times agree with them


class _Compiler:
    def __init__(
        self,
        root: ValidatedArtifact,
        children: Mapping[str, ValidatedArtifact],
        sources: Mapping[str, SourceRef],
        *,
        items: bool = False,
    ) -> None:
        self.children = children
        self.sources = sources
        self.scopes: list[_Scope] = []
        self._collect(_Scope(root, "", "", "", items), depth=0)
        reducers: dict[str, flow.FieldReducer] = {}
        for scope in self.scopes:
            for name, spec in scope.validated.artifact.state.items():
                if spec.reduce != "replace":
                    reducers[scope.key(name)] = _REDUCERS[spec.reduce]
        self.graph: flow.Graph[dict[str, Any]] = flow.Graph(
            root.name, state=dict, reducers=reducers
        )
        self.labels: list[VertexMetadata] = []
        self.resume_schemas: dict[str, Mapping[str, Any]] = {}
        self.gates: dict[str, list[_Gate]] = {}  # join vertex -> its branches' gates
        # per instance: (node inside a branch, its join) -> the gate of that edge
        self.edge_gates: dict[str, dict[tuple[str, str], _Gate]] = {}
        self.waits: set[str] = set()
        self.foreach_steps: list[ForeachStep] = []

    # -- the instances ---------------------------------------------------------------------

    def _collect(self, scope: _Scope, depth: int) -> None:
        self.scopes.append(scope)
        artifact = scope.validated.artifact
        for node_id, node in artifact.nodes.items():
            if "__" in node_id:
                raise ArtifactCompileError(
                    f"{scope.label}nodes.{node_id}", "node ids may not contain '__'"
                )
            if isinstance(node, WorkflowNode):
                child = self.children.get(node.workflow)
                if child is None:
                    raise ArtifactCompileError(
                        f"{scope.label}nodes.{node_id}.workflow",
                        f"child artifact {node.workflow!r} was not given",
                    )
                label = f"{scope.label}{node.label or node_id}: "
                self._collect(
                    _Scope(child, scope.key(node_id) + "/", scope.vertex(node_id) + "__", label),
                    depth + 1,
                )
        for node_id in artifact.nodes:
            for suffix in ("", "__wait", "__return"):
                vertex = scope.vertex(node_id) + suffix
                if not VERTEX_ID.fullmatch(vertex):
                    raise ArtifactCompileError(
                        f"{scope.label}nodes.{node_id}",
                        f"the vertex id {vertex!r} is too long: nest children less deeply "
                        "or use shorter node ids",
                    )

    def child_scope(self, scope: _Scope, node_id: str) -> _Scope:
        keys = scope.key(node_id) + "/"
        return next(s for s in self.scopes if s.keys == keys)

    # -- building --------------------------------------------------------------------------

    def build(self) -> None:
        for scope in self.scopes:
            self._index_gates(scope)
        for scope in self.scopes:
            for node_id, node in scope.validated.artifact.nodes.items():
                self._node(scope, node_id, node)
        self.graph.add_vertex(FINISH, _nothing)

    def _index_gates(self, scope: _Scope) -> None:
        artifact = scope.validated.artifact
        scope_gates: dict[tuple[str, str], _Gate] = {}
        for parallel_id, regions in scope.validated.branches.items():
            node = artifact.nodes[parallel_id]
            assert isinstance(node, ParallelNode)
            join_vertex = scope.vertex(node.join)
            gates = self.gates.setdefault(join_vertex, [])
            for index, region in enumerate(regions):
                gate = _Gate(join_vertex, index, len(regions))
                gates.append(gate)
                for member in region:
                    scope_gates[(member, node.join)] = gate
        self.edge_gates[scope.keys] = scope_gates

    def _gate(self, scope: _Scope, source: str, target: str) -> _Gate | None:
        return self.edge_gates[scope.keys].get((source, target))

    def _label(self, scope: _Scope, node_id: str, label: str | None, vertex: str) -> None:
        text = bound_text(f"{scope.label}{label or node_id}", MAX_LABEL_BYTES)
        self.labels.append(VertexMetadata(text, vertex))

    def _exit(self, scope: _Scope, vertex: str, source: str, target: str, task: Task) -> None:
        """Add ``vertex`` running ``task``, continuing at node ``target`` of ``scope``."""
        gate = self._gate(scope, source, target)
        if gate is None:
            self.graph.add_vertex(vertex, self._with_join_reset(vertex, task))
            self.graph.add_edge(vertex, scope.vertex(target))
            return
        marker = gate.marker(gate.branch)
        wait = gate.join + "__wait"
        self._ensure_wait(wait)

        async def arriving(state: dict[str, Any]) -> Update:
            update = await task(state)
            update[marker] = True
            return update

        self.graph.add_vertex(vertex, self._with_join_reset(vertex, arriving))
        self.graph.add_route(
            vertex,
            targets=[gate.join, wait],
            pick=lambda state: gate.join if gate.open(state) else wait,
        )

    def _ensure_wait(self, wait: str) -> None:
        if wait not in self.waits:
            self.waits.add(wait)
            self.graph.add_vertex(wait, _nothing)

    def _with_join_reset(self, vertex: str, task: Task) -> Task:
        gates = self.gates.get(vertex)
        if not gates:
            return task
        markers = [gate.marker(gate.branch) for gate in gates]

        async def joined(state: dict[str, Any]) -> Update:
            update = await task(state)
            for marker in markers:
                update[marker] = False
            return update

        return joined

    def _node(self, scope: _Scope, node_id: str, node: Any) -> None:
        vertex = scope.vertex(node_id)
        self._label(scope, node_id, node.label, vertex)
        traced = self._traced(scope, node_id, node)
        if isinstance(node, SetNode):
            self._exit(scope, vertex, node_id, node.next, traced(self._set(scope, node_id, node)))
        elif isinstance(node, ToolNode):
            task = traced(self._tool(scope, node_id, node))
            if node.on_error is None:
                self._exit(scope, vertex, node_id, node.next, task)
            else:  # the body chose next or on_error.next
                self._chosen_exit(scope, vertex, node_id, [node.next, node.on_error.next], task)
        elif isinstance(node, InterruptNode):
            self.resume_schemas[vertex] = node.resume_schema
            task = traced(self._interrupt(scope, node_id, node))
            if node.timeout_next is None:
                self._exit(scope, vertex, node_id, node.next, task)
            else:
                self._chosen_exit(scope, vertex, node_id, [node.next, node.timeout_next], task)
        elif isinstance(node, WaitNode):
            self._exit(scope, vertex, node_id, node.next, traced(self._wait(scope, node_id, node)))
        elif isinstance(node, SwitchNode):
            self._switch(scope, node_id, node, traced)
        elif isinstance(node, ParallelNode):
            self.graph.add_vertex(vertex, self._with_join_reset(vertex, traced(_nothing_body)))
            for branch in node.branches:
                self.graph.add_edge(vertex, scope.vertex(branch))
        elif isinstance(node, WorkflowNode):
            self._workflow(scope, node_id, node, traced)
        elif isinstance(node, ForeachNode):
            self._foreach(scope, node_id, node, traced)
        elif isinstance(node, EndNode):
            self._end(scope, node_id, node, traced)
        else:  # pragma: no cover - the node union is closed
            raise ArtifactCompileError(f"nodes.{node_id}", f"unknown node kind {node.kind!r}")

    # -- node bodies -----------------------------------------------------------------------

    def _traced(
        self, scope: _Scope, node_id: str, node: Any
    ) -> Callable[[Callable[[dict[str, Any], _Note], Awaitable[Update]]], Task]:
        def wrap(body: Callable[[dict[str, Any], _Note], Awaitable[Update]]) -> Task:
            async def task(state: dict[str, Any]) -> Update:
                info = flow.run_info()
                note = _Note()
                started = _now()
                error: BaseException | None = None
                try:
                    refusal = active().refusals.get(owner_run(info))
                    if refusal is not None:
                        raise refusal
                    return await body(state, note)
                except flow.InterruptSignal:
                    note.status = "paused"
                    raise
                except Exception as exc:
                    note.status, error = "error", exc
                    raise
                finally:
                    shown = error or note.error
                    error_type, message = trace_error(shown) if shown else ("", "")
                    await active().trace.append(
                        owner_run(info),
                        TraceEntry(
                            node=trace_prefix() + scope.keys + node_id,
                            kind=node.kind,
                            vertex=info.vertex,
                            step=info.step,
                            status=note.status,
                            started_at=started,
                            ended_at=_now(),
                            dependency=note.dependency,
                            tool=note.tool,
                            arguments=note.arguments,
                            result=note.result,
                            error_type=error_type,
                            error_message=message,
                            attempt=note.attempt,
                            failure=note.failure or (classify(error) or "" if error else ""),
                        ),
                    )

            return task

        return wrap

    async def _assign(
        self, scope: _Scope, node_id: str, fields: Sequence[str], view: Mapping[str, Any]
    ) -> Update:
        templates = scope.validated.templates
        assigned = [
            (scope.key(name), templates[f"nodes.{node_id}.assign.{name}"]) for name in fields
        ]

        def evaluate() -> Update:
            return {key: template.evaluate(view) for key, template in assigned}

        if all(template.is_literal for _, template in assigned):
            return evaluate()  # copies of literals, bounded by the artifact's size
        return await off_loop(evaluate)

    def _set(self, scope: _Scope, node_id: str, node: SetNode) -> Any:
        async def body(state: dict[str, Any], note: _Note) -> Update:
            return await self._assign(scope, node_id, list(node.assign), scope.view(state))

        return body

    def _interrupt(self, scope: _Scope, node_id: str, node: InterruptNode) -> Any:
        """Pause; on resume assign from ``resume``. With ``timeout_next`` the body also
        chooses the exit (``$route/<vertex>``): ``timeout_next`` when the payload is the
        deadline's (`flow.timed_out`), else ``next``. The choice is part of the vertex's
        update, so it is durable with the step and a restart never chooses again."""
        request = scope.validated.templates[f"nodes.{node_id}.request"]
        route_key = f"$route/{scope.vertex(node_id)}"

        async def body(state: dict[str, Any], note: _Note) -> Update:
            view = scope.view(state)
            answer = flow.interrupt(
                await _evaluated(request, view), timeout=node.timeout, on_timeout=node.on_timeout
            )
            update = await self._assign(
                scope, node_id, list(node.assign), {**view, "resume": answer}
            )
            if node.timeout_next is not None:
                target = node.timeout_next if flow.timed_out() else node.next
                note.result = preview({"next": target})
                update[route_key] = target
            return update

        return body

    def _wait(self, scope: _Scope, node_id: str, node: WaitNode) -> Any:
        """Park on a durable timer: ``seconds`` or ``until``, evaluated now (a re-run after
        the wake evaluates it again; `flow.sleep` returns at once then). A bad value fails
        the run with `flow.TimerError` naming ``nodes.<id>.seconds`` or ``.until``."""
        field = "seconds" if node.seconds is not None else "until"
        template = scope.validated.templates[f"nodes.{node_id}.{field}"]
        place = f"{scope.label}nodes.{node_id}.{field}"

        async def body(state: dict[str, Any], note: _Note) -> Update:
            value = await _evaluated(template, scope.view(state))
            try:
                if field == "seconds":
                    flow.sleep(value)
                else:
                    flow.sleep_until(_timestamp(value))
            except flow.TimerError as exc:
                raise flow.TimerError(place, exc.detail) from None
            return {}

        return body

    def _tool(self, scope: _Scope, node_id: str, node: ToolNode) -> Any:
        """A tool node's body: attempts of the call (``retry``), each guarded by an intent
        record when the tool is not read-only or idempotent or when the node retries
        (so a restarted owner continues the count); the final failure routed by
        ``on_error`` or raised (docs/deploy.md, "Failures")."""
        arguments_template = scope.validated.templates[f"nodes.{node_id}.arguments"]
        place = f"{scope.label}nodes.{node_id}.dependency"
        source = self.sources.get(node.dependency)
        if source is None:
            raise ArtifactCompileError(
                place, f"dependency {node.dependency!r} is not bound to a source"
            )
        name = scope.keys + node_id
        site = ToolCall(name, node.dependency, node.tool, node.timeout, source)
        policy = FailurePolicy.of(node)
        route_key = f"$route/{scope.vertex(node_id)}"
        on_error = node.on_error
        error_assign = (
            [
                (
                    scope.key(field),
                    scope.validated.templates[f"nodes.{node_id}.on_error.assign.{field}"],
                )
                for field in on_error.assign
            ]
            if on_error is not None
            else []
        )

        async def finish(update: Update) -> Update:
            if on_error is not None:
                update[route_key] = node.next
            return update

        async def route(view: Mapping[str, Any], failure: Failure) -> Update:
            scope_view = {**view, "error": failure.to_json()}

            def evaluate() -> Update:
                return {key: template.evaluate(scope_view) for key, template in error_assign}

            update = await off_loop(evaluate) if error_assign else {}
            assert on_error is not None
            update[route_key] = on_error.next
            return update

        async def body(state: dict[str, Any], note: _Note) -> Update:
            runtime = active()
            view = scope.view(state)
            arguments = site.checked(await _evaluated(arguments_template, view))
            note.dependency, note.tool, note.arguments = (
                node.dependency,
                node.tool,
                preview(arguments),
            )
            info = flow.run_info()
            key, run = info.idempotency_key, owner_run(info)
            pinned = runtime.repeatable.get(run, {}).get(node.dependency, {}).get(node.tool)
            retrying = policy.attempts > 1

            async def settle(failure: Failure, error: BaseException, repeatable: bool) -> Update:
                """The last failure: routed, or raised."""
                note.attempt = failure.attempt if retrying else 0
                note.failure = failure.kind
                if policy.routes_kind(failure.kind, repeatable):
                    note.status, note.error = "routed", error
                    return await route(view, failure)
                raise error

            async def traced_attempt(
                failure: Failure, error: BaseException, began: datetime
            ) -> None:
                """The trace entry of an attempt followed by another one."""
                error_type, message = trace_error(error)
                await runtime.trace.append(
                    run,
                    TraceEntry(
                        node=trace_prefix() + name,
                        kind=node.kind,
                        vertex=info.vertex,
                        step=info.step,
                        status="error",
                        started_at=began,
                        ended_at=_now(),
                        dependency=node.dependency,
                        tool=node.tool,
                        arguments=note.arguments,
                        error_type=error_type,
                        error_message=message,
                        attempt=failure.attempt,
                        failure=failure.kind,
                    ),
                )

            # What earlier executions of this step did: the attempts in the intent log.
            attempt = 1
            while True:
                intent = await runtime.intents.get(run, attempt_key(key, attempt))
                if intent is None:
                    break
                if intent.state == "done" and intent.result is not None:
                    note.status = "reused"
                    note.attempt = attempt if retrying else 0
                    result = stored_result(intent.result)
                    return await finish(
                        await self._tool_result(scope, node_id, node, view, result, note)
                    )
                repeatable = intent.repeatable if pinned is None else pinned
                if intent.state == "started":
                    if repeatable:  # calling a read-only or idempotent tool again is allowed
                        break
                    error: BaseException = ToolOutcomeUnknownError(
                        name,
                        f"a call of {node.dependency}.{node.tool} was under way when the run "
                        "stopped, and the tool is not read-only or idempotent: it is not "
                        "called again",
                    )
                    failure = Failure.of(error, "outcome_unknown", node.tool, attempt)
                    began = _now()
                    await runtime.intents.record(
                        run,
                        attempt_key(key, attempt),
                        "failed",
                        node=name,
                        tool=node.tool,
                        failure=failure.to_json(),
                    )
                else:
                    failure = Failure.from_json(intent.failure, node.tool, attempt)
                    error = RecordedFailureError(name, failure)
                    began = _now()
                if not policy.retries(failure, repeatable):
                    return await settle(failure, error, repeatable)
                # An attempt found under way gets its entry here; a failure the stopped
                # owner recorded may have lost its entry (stopped before tracing it).
                if intent.state == "started" or not await runtime.trace.has_attempt(
                    run, trace_prefix() + name, info.step, attempt
                ):
                    await traced_attempt(failure, error, began)
                attempt += 1

            while True:
                if attempt > 1:
                    await asyncio.sleep(policy.delay(attempt))  # never holds the event loop
                began = _now()
                known: list[bool] = []  # whether the tool is repeatable, once known
                try:
                    result = await site.attempt(
                        runtime, arguments, key, attempt, pinned, retrying, known
                    )
                except Exception as exc:
                    kind = classify(exc)
                    if kind is None:
                        raise
                    repeatable = known[0] if known else bool(pinned)
                    failure = Failure.of(exc, kind, node.tool, attempt)
                    if not policy.retries(failure, repeatable):
                        return await settle(failure, exc, repeatable)
                    await traced_attempt(failure, exc, began)
                    attempt += 1
                    continue
                note.attempt = attempt if retrying else 0
                return await finish(
                    await self._tool_result(scope, node_id, node, view, result, note)
                )

        return body

    def _chosen_exit(
        self, scope: _Scope, vertex: str, node_id: str, exits: Sequence[str], task: Task
    ) -> None:
        """Add ``vertex`` running ``task``, which chooses one of the nodes ``exits``
        (``$route/<vertex>``), entering a parallel's join through its gate."""
        route_key = f"$route/{vertex}"
        gates = {target: self._gate(scope, node_id, target) for target in dict.fromkeys(exits)}

        async def marked(state: dict[str, Any]) -> Update:
            update = await task(state)
            gate = gates[str(update[route_key])]
            if gate is not None:
                update[gate.marker(gate.branch)] = True
            return update

        self.graph.add_vertex(vertex, self._with_join_reset(vertex, marked))
        self._add_chosen_route(scope, vertex, route_key, gates)

    async def _tool_result(
        self,
        scope: _Scope,
        node_id: str,
        node: ToolNode,
        view: Mapping[str, Any],
        result: ToolResult,
        note: _Note,
    ) -> Update:
        if len(json.dumps(result.to_json(), separators=(",", ":")).encode()) > MAX_RESULT_BYTES:
            raise ToolResultTooLargeError(
                scope.keys + node_id, f"the result is larger than {MAX_RESULT_BYTES} bytes"
            )
        scope_result = {
            "structured": None
            if result.structured_content is None
            else dict(result.structured_content),
            "content": [dict(block) for block in result.content],
            "text": result.text,
        }
        note.result = preview(scope_result["structured"] or scope_result["text"])
        return await self._assign(
            scope, node_id, list(node.assign), {**view, "result": scope_result}
        )

    def _switch(self, scope: _Scope, node_id: str, node: SwitchNode, traced: Any) -> None:
        vertex = scope.vertex(node_id)
        conditions = scope.validated.conditions
        cases = [
            (conditions[f"nodes.{node_id}.cases[{index}].when"], case.next)
            for index, case in enumerate(node.cases)
        ]
        route_key = f"$route/{vertex}"
        choices = [*(target for _, target in cases), node.default]
        gates = {target: self._gate(scope, node_id, target) for target in choices}

        async def body(state: dict[str, Any], note: _Note) -> Update:
            view = scope.view(state)
            chosen = await off_loop(_first_true, cases, view)
            target = node.default if chosen is None else chosen
            note.result = preview({"next": target})
            update: Update = {route_key: target}
            gate = gates[target]
            if gate is not None:
                update[gate.marker(gate.branch)] = True
            return update

        self.graph.add_vertex(vertex, self._with_join_reset(vertex, traced(body)))
        self._add_chosen_route(scope, vertex, route_key, gates)

    def _add_chosen_route(
        self,
        scope: _Scope,
        vertex: str,
        route_key: str,
        gates: Mapping[str, _Gate | None],
    ) -> None:
        """Route ``vertex`` to the node its task chose (``state[route_key]``, one of
        ``gates``' keys): straight there, or through the join gate of a parallel, which
        opens once every branch has arrived and otherwise parks the branch at its wait."""
        targets: list[str] = []
        for target, gate in gates.items():
            if gate is None:
                targets.append(scope.vertex(target))
            else:
                wait = gate.join + "__wait"
                self._ensure_wait(wait)
                targets += [gate.join, wait]

        def pick(state: dict[str, Any]) -> str:
            target = str(state[route_key])
            gate = gates[target]
            if gate is None:
                return scope.vertex(target)
            return gate.join if gate.open(state) else gate.join + "__wait"

        self.graph.add_route(vertex, targets=list(dict.fromkeys(targets)), pick=pick)

    def _workflow(self, scope: _Scope, node_id: str, node: WorkflowNode, traced: Any) -> None:
        vertex = scope.vertex(node_id)
        child = self.child_scope(scope, node_id)
        input_template = scope.validated.templates[f"nodes.{node_id}.input"]
        input_schema = child.validated.schemas["input_schema"]
        name = scope.keys + node_id

        async def body(state: dict[str, Any], note: _Note) -> Update:
            document = await _evaluated(input_template, scope.view(state))
            _check_schema(name, input_schema, document, f"the input of child {node.workflow}")
            note.arguments = preview(document)
            update = child.initial()
            update.update(_reset_markers(self.gates, child))
            update[child.key(INPUT)] = document
            update[child.key(OUTCOME)] = None
            update[child.key(OUTPUT)] = None
            return update

        # A replacing reducer: a visit starts the child afresh, whatever its fields' reducers.
        self.graph.add_vertex(
            vertex, self._with_join_reset(vertex, traced(body)), reduce=_replace_fields
        )
        self.graph.add_edge(vertex, child.vertex(child.validated.artifact.start))
        returning = vertex + "__return"

        async def back(state: dict[str, Any]) -> Update:
            result = {
                "outcome": state.get(child.key(OUTCOME)),
                "output": state.get(child.key(OUTPUT)),
            }
            return await self._assign(
                scope, node_id, list(node.assign), {**scope.view(state), "result": result}
            )

        self._exit(scope, returning, node_id, node.next, back)

    def _foreach(self, scope: _Scope, node_id: str, node: ForeachNode, traced: Any) -> None:
        vertex = scope.vertex(node_id)
        base = f"nodes.{node_id}"
        templates = scope.validated.templates
        value: Template | None = None
        arguments: Template | None = None
        call: ItemCall | None = None
        if isinstance(node.body, ForeachToolBody):
            arguments = templates[f"{base}.body.arguments"]
            call = self._item_caller(scope, node_id, node.body)
        elif isinstance(node.body, ForeachWorkflowBody):
            arguments = templates[f"{base}.body.input"]
            call = self._item_child(scope, node_id, node.body)
        elif isinstance(node.body, ForeachSequenceBody):
            call = self._item_sequence(scope, node_id)  # given the item's whole scope
        else:
            value = templates[f"{base}.body.value"]
        step = ForeachStep(
            name=scope.keys + node_id,
            vertex=vertex,
            node=node,
            items=scope.validated.conditions[f"{base}.items"],
            body=value,
            arguments=arguments,
            call=call,
            into=scope.key(node.into),
        )
        self.foreach_steps.append(step)
        gate = self._gate(scope, node_id, node.next)

        async def body(state: dict[str, Any], note: _Note) -> Update:
            update, batch = await step(state, scope.view(state))
            note.result = preview({"items": [batch.start, batch.stop]})
            # Arrive at a join only when the visit ends (not while the vertex loops).
            if gate is not None and update.get(step.items_key, "") is None:
                update[gate.marker(gate.branch)] = True
            return update

        if gate is None:
            exits = [scope.vertex(node.next)]
        else:
            wait = gate.join + "__wait"
            self._ensure_wait(wait)
            exits = [gate.join, wait]

        def pick(state: dict[str, Any]) -> str:
            if step.running(state):
                return vertex
            if gate is None:
                return scope.vertex(node.next)
            return gate.join if gate.open(state) else gate.join + "__wait"

        self.graph.add_vertex(vertex, self._with_join_reset(vertex, traced(body)))
        self.graph.add_route(vertex, targets=[vertex, *exits], pick=pick)

    def _item_child(self, scope: _Scope, node_id: str, body: ForeachWorkflowBody) -> ItemCall:
        """One foreach item's child run: the child closure compiled as a graph of its own,
        run per item as a nested flow run (`flowledger.deploy.runs.nesting`) over
        checkpoints in memory; the item's result is the child's ``{outcome, output}``."""
        place = f"{scope.label}nodes.{node_id}.body.workflow"
        child = self.children.get(body.workflow)
        if child is None:
            raise ArtifactCompileError(place, f"child artifact {body.workflow!r} was not given")
        compiler = _Compiler(child, self.children, self.sources)
        compiler.build()
        nested = _Nested(
            scope.keys + node_id,
            f"child {body.workflow}@{child.version}",
            compiler,
            closure_digest(child, self.children),
        )
        input_schema = child.schemas["input_schema"]

        async def run(document: Any, index: int) -> Any:
            try:
                _check_schema(nested.name, input_schema, document, f"the input of {nested.label}")
            except NodeOutputError as exc:
                raise ForeachChildError(nested.name, f"item {index}: {exc}", exc.code) from None
            return await nested.run(compiler.initial_state(document), index)

        return run

    def _item_sequence(self, scope: _Scope, node_id: str) -> ItemCall:
        """One foreach item's sequence body: its anonymous artifact
        (`flowledger.deploy.artifacts.sequence`) run like a child body's child, from a
        state holding the item, its index and the sequence's fields (the run's input is
        read from the context: `_RUN_INPUT`)."""
        sequence = scope.validated.sequences[node_id]
        compiler = _Compiler(sequence, {}, self.sources, items=True)
        compiler.build()
        nested = _Nested(scope.keys + node_id, "its sequence", compiler, sequence.digest)

        async def run(view: Any, index: int) -> Any:
            state = compiler.initial_state({})  # `input` is the run's: see `_RUN_INPUT`
            state[ITEM], state[INDEX] = view["item"], view["index"]
            token = _RUN_INPUT.set(view["input"])  # the nested run's tasks copy the context
            try:
                return await nested.run(state, index)
            finally:
                _RUN_INPUT.reset(token)

        return run

    def _item_caller(self, scope: _Scope, node_id: str, body: ForeachToolBody) -> ItemCall:
        """One foreach item's tool call (`ToolCall.item`): a tool node's call (pinned
        contract, argument check), with an intent per item for a tool that is not
        read-only or idempotent."""
        source = self.sources.get(body.dependency)
        if source is None:
            raise ArtifactCompileError(
                f"{scope.label}nodes.{node_id}.body.dependency",
                f"dependency {body.dependency!r} is not bound to a source",
            )
        site = ToolCall(scope.keys + node_id, body.dependency, body.tool, body.timeout, source)

        async def call(arguments: Any, index: int) -> Any:
            return await site.item(active(), arguments, index)

        return call

    def _end(self, scope: _Scope, node_id: str, node: EndNode, traced: Any) -> None:
        vertex = scope.vertex(node_id)
        output_template = scope.validated.templates[f"nodes.{node_id}.output"]
        output_schema = scope.validated.schemas.get("output_schema")  # none: a sequence's
        name = scope.keys + node_id

        async def body(state: dict[str, Any], note: _Note) -> Update:
            output = await _evaluated(output_template, scope.view(state))
            if output_schema is not None:
                _check_schema(name, output_schema, output, "the output")
            note.result = preview({"outcome": node.outcome, "output": output})
            return {scope.key(OUTCOME): node.outcome, scope.key(OUTPUT): output}

        self.graph.add_vertex(vertex, self._with_join_reset(vertex, traced(body)))
        if scope.keys:
            parent_vertex = scope.vertices[: -len("__")]
            self.graph.add_edge(vertex, parent_vertex + "__return")
        else:
            self.graph.add_edge(vertex, FINISH)

    # -- the definition --------------------------------------------------------------------

    def initial_state(self, document: dict[str, Any]) -> dict[str, Any]:
        state: dict[str, Any] = {INPUT: copy.deepcopy(document), OUTCOME: None, OUTPUT: None}
        for scope in self.scopes:
            state.update(scope.initial())
            if scope.keys:
                state.update({scope.key(INPUT): None, scope.key(OUTCOME): None})
                state[scope.key(OUTPUT)] = None
        for gates in self.gates.values():
            for gate in gates:
                state[gate.marker(gate.branch)] = False
        for step in self.foreach_steps:
            state.update(step.initial())
        return state


class _Nested:
    """The nested flow runs of one foreach's items (a child or sequence body): each
    item's run of ``compiler``'s graph over checkpoints in memory, under the run id
    derived from the foreach step's idempotency key and the item's index
    (`flowledger.deploy.runs.nesting`); its result is ``{outcome, output}`` of the end
    node it reached, and its failure the item's (`ForeachChildError`) when it is one
    ``on_item_error`` decides about (`CHILD_ITEM_ERRORS`); any other fails the run."""

    def __init__(self, name: str, label: str, compiler: _Compiler, version: str) -> None:
        self.name = name  # the foreach node's, in errors
        self.label = label  # "child stamp@1", "its sequence"
        start = compiler.scopes[0].validated.artifact.start
        self.graph = compiler.graph.compile(entry=start, finish=FINISH, version=version).graph

    async def run(self, state: dict[str, Any], index: int) -> Any:
        name, label = self.name, self.label
        info = flow.run_info()
        runner: flow.Runner[dict[str, Any]] = flow.Runner(self.graph, flow.MemoryCheckpointStore())
        with enter(info, name, index):
            result = await runner.run(state, run_id=item_run_id(info.idempotency_key, index))
        if result.run.status is flow.RunStatus.COMPLETED:
            outcome, output = artifact_outcome(result.state)
            return {"outcome": outcome, "output": output}
        cause: BaseException | None = None
        if result.interrupts:
            cause = result.interrupts[0].cause
        elif result.halt is not None:
            cause = result.halt.cause
        while isinstance(cause, flow.VertexError):  # the engine's wrapper of a task's error
            cause = cause.cause
        if isinstance(cause, CHILD_ITEM_ERRORS):
            code = str(getattr(cause, "code", "node_failed"))
            raise ForeachChildError(name, f"item {index}: {label} failed: {cause}", code) from None
        if isinstance(cause, Exception):
            raise cause  # fails the run, as the same failure of a tool body would
        # not reachable: a child that pauses is refused at save (a sequence that can,
        # at validation), and one whose task failed halts with its cause; say so rather
        # than return a result it has not
        raise RuntimeError(
            f"node {name}: item {index}: {label} stopped "
            f"({result.run.status.value}) without reaching an end node"
        )


def _timestamp(value: Any) -> datetime:
    """A wait's ``until`` value: an RFC 3339 text (`flow.TimerError` otherwise)."""
    if not isinstance(value, str):
        raise flow.TimerError("until", f"expected an RFC 3339 time, not {type(value).__name__}")
    try:
        return datetime.fromisoformat(value)
    except ValueError:
        raise flow.TimerError("until", f"{value[:64]!r} is not an RFC 3339 time") from None


async def _evaluated(template: Template, view: Mapping[str, Any]) -> Any:
    """``template`` over ``view``: off the event loop (`off_loop`), unless it is a literal
    (a copy bounded by the artifact's size)."""
    if template.is_literal:
        return template.evaluate(view)
    return await off_loop(template.evaluate, view)


def _first_true(cases: Sequence[tuple[Expression, str]], view: Mapping[str, Any]) -> str | None:
    """The target of the first case whose condition is true over ``view``, or ``None``."""
    return next((target for cond, target in cases if truthy(cond.evaluate(view))), None)


async def _nothing(state: dict[str, Any]) -> Update:
    return {}


async def _nothing_body(state: dict[str, Any], note: _Note) -> Update:
    return {}


def _replace_fields(state: dict[str, Any], update: Update) -> dict[str, Any]:
    state.update(update)
    return state


def _reset_markers(gates: Mapping[str, list[_Gate]], scope: _Scope) -> Update:
    return {
        gate.marker(gate.branch): False
        for join, found in gates.items()
        if join.startswith(scope.vertices)
        for gate in found
    }


def _check_schema(name: str, schema: Any, document: Any, what: str) -> None:
    try:
        schema.validate(document)
    except ValueError as exc:
        raise NodeOutputError(name, f"{what} does not match its schema: {exc}") from None


class ArtifactDefinition(TypedDefinition[dict[str, Any]]):
    """The workflow definition of a compiled artifact closure. Every segment of a run
    (start, resume, adoption) keeps one MCP session per source, closed when it ends."""

    def __init__(
        self,
        metadata: Metadata,
        runner: flow.Runner[dict[str, Any]],
        *,
        runtime: Runtime,
        state_decoder: Callable[[dict[str, Any]], dict[str, Any]],
        resume_schemas: Mapping[str, Mapping[str, Any]],
        closure_digest: str,
    ) -> None:
        super().__init__(
            metadata,
            runner,
            state_decoder=state_decoder,
            summarizer=_summary,
            on_error="fail",
            resume_schemas=resume_schemas,
        )
        self.runtime = runtime
        self.closure_digest = closure_digest

    @property
    def trace(self) -> RunTrace:
        """The traces of this definition's runs (in the database it is bound to)."""
        return self.runtime.trace

    def with_checkpoints(
        self, checkpoints: flow.CheckpointStore, *, clock: Clock | None = None
    ) -> ArtifactDefinition:
        """Bound to ``checkpoints``; the tool intents and traces go to the same ledger."""
        rebound = super().with_checkpoints(checkpoints, clock=clock)
        assert isinstance(rebound, ArtifactDefinition)
        ledger = getattr(checkpoints, "ledger", None)
        if isinstance(ledger, storage.Ledger):
            rebound.runtime = self.runtime.over(ledger)
        return rebound

    @asynccontextmanager
    async def resuming(self, graph_run_id: str) -> AsyncIterator[None]:
        """One resume by the owner (see `Definition.resuming`): a source pool for the run
        that its check may open sessions in (`held_pool`) and its resumed segment then
        uses, so a resume connects to each source once; closed at the end."""
        pool = SourcePool(connect_timeout=self.runtime.connect_timeout)
        try:
            with holding(graph_run_id, pool):
                yield
        finally:
            await pool.close()

    def held_pool(self, graph_run_id: str) -> SourcePool | None:
        """The pool of ``graph_run_id``'s resume under way in this context (inside
        `resuming`), or None (a reader's check, a start, an adoption)."""
        return held_pool(graph_run_id)

    async def refusal(self, graph_run_id: str) -> Exception | None:
        """Why a segment of ``graph_run_id`` must not execute here (the first node that
        runs raises it, failing the run), or ``None``. A hook for subclasses."""
        return None

    async def pinned_contracts(self, graph_run_id: str) -> Mapping[str, Mapping[str, str]] | None:
        """The contract fingerprints (dependency -> tool -> fingerprint) each tool must
        still have when ``graph_run_id`` calls it, or ``None``. A hook for subclasses."""
        return None

    async def pinned_sources(self, graph_run_id: str) -> Mapping[str, SourceRef] | None:
        """Sources (dependency -> source) that replace the compiled ones for
        ``graph_run_id``, or ``None``. A hook for subclasses."""
        return None

    async def pinned_repeatable(self, graph_run_id: str) -> Mapping[str, Mapping[str, bool]] | None:
        """Whether each tool (dependency -> tool) counts as read-only or idempotent for
        ``graph_run_id``'s retries and routing, or ``None`` (the live listing's
        annotations decide). A hook for subclasses."""
        return None

    async def _guards(
        self, graph_run_id: str
    ) -> tuple[
        Exception | None,
        Mapping[str, Mapping[str, str]] | None,
        Mapping[str, SourceRef] | None,
        Mapping[str, Mapping[str, bool]] | None,
    ]:
        return (
            await self.refusal(graph_run_id),
            await self.pinned_contracts(graph_run_id),
            await self.pinned_sources(graph_run_id),
            await self.pinned_repeatable(graph_run_id),
        )

    async def start(
        self, token: ValidatedInput, *, graph_run_id: str, hooks: Sequence[flow.Hooks] = ()
    ) -> WorkflowResult:
        async with self.runtime.segment(graph_run_id, *await self._guards(graph_run_id)):
            return await super().start(token, graph_run_id=graph_run_id, hooks=hooks)

    async def resume(
        self,
        graph_run_id: str,
        token: ValidatedResume | None,
        *,
        hooks: Sequence[flow.Hooks] = (),
    ) -> WorkflowResult:
        async with self.runtime.segment(graph_run_id, *await self._guards(graph_run_id)):
            return await super().resume(graph_run_id, token, hooks=hooks)

    async def adopt(self, graph_run_id: str, *, hooks: Sequence[flow.Hooks] = ()) -> WorkflowResult:
        async with self.runtime.segment(graph_run_id, *await self._guards(graph_run_id)):
            return await super().adopt(graph_run_id, hooks=hooks)


def _summary(state: dict[str, Any]) -> str:
    outcome = state.get(OUTCOME)
    return f"outcome {outcome}" if isinstance(outcome, str) else ""


def compile_artifact(
    root: ValidatedArtifact,
    *,
    children: Mapping[str, ValidatedArtifact] | None = None,
    sources: Mapping[str, SourceRef],
    connect_timeout: float = 10.0,
    name: str | None = None,
    version: str | None = None,
    definition_type: type[ArtifactDefinition] | None = None,
    clock: Clock | None = None,
) -> ArtifactDefinition:
    """The definition of ``root``: ``children`` maps each child artifact name the closure
    uses (at any depth) to its validated artifact, ``sources`` each dependency the
    closure's tool nodes name to a concrete source. `ArtifactCompileError` names the
    place of what cannot be compiled. A source may be given as a function returning it,
    called when a tool node connects. ``name`` and ``version`` replace the artifact's as
    the definition's (a deployment's definition is ``<deployment>@r<revision>``), and
    ``definition_type`` is the `ArtifactDefinition` subclass to build. Register the
    result in a `Catalog` like any definition; a host binding the catalog to its
    database (`Catalog.bound`) keeps the runs' checkpoints, tool intents and traces
    there. ``clock`` is what wait nodes and interrupt deadlines count from (default: the
    system clock)."""
    children = dict(children or {})
    runtime = Runtime(sources, MemoryLedger(), connect_timeout)
    compiler = _Compiler(root, children, runtime.sources)
    compiler.build()
    digest = closure_digest(root, children)
    runner = compiler.graph.compile(
        entry=root.artifact.start, finish=FINISH, version=digest, clock=clock
    )
    interrupts = [
        node
        for scope in compiler.scopes
        for node in scope.validated.artifact.nodes.values()
        if isinstance(node, InterruptNode)
    ]
    metadata = Metadata(
        root.name if name is None else name,
        root.version if version is None else version,
        description=root.artifact.description,
        input_schema=root.artifact.input_schema,
        resume_schema=interrupts[0].resume_schema if interrupts else None,
        vertices=compiler.labels,
    )
    return (definition_type or ArtifactDefinition)(
        metadata,
        runner,
        runtime=runtime,
        state_decoder=compiler.initial_state,
        resume_schemas=compiler.resume_schemas,
        closure_digest=digest,
    )


async def compile_saved(
    artifacts: ArtifactStore,
    session_id: str,
    name: str,
    version: str,
    *,
    sources: Mapping[str, SourceRef],
    connect_timeout: float = 10.0,
) -> ArtifactDefinition:
    """`compile_artifact` of a saved artifact and the children it pinned when it was
    saved (each verified against its pinned digest)."""
    closure = await artifacts.closure(session_id, name, version)
    root = closure.pop(f"{name}@{version}")
    children = {stored.record.name: stored.validated for stored in closure.values()}
    return compile_artifact(
        root.validated, children=children, sources=sources, connect_timeout=connect_timeout
    )


def closure_digest(root: ValidatedArtifact, children: Mapping[str, ValidatedArtifact]) -> str:
    """The digest the store records for ``root`` and its children (see `ArtifactRecord`)."""

    def of(validated: ValidatedArtifact) -> str:
        pins = tuple(
            ChildPin(name, version, children[name].digest, of(children[name]))
            for name, version in validated.artifact.children.items()
            if name in children
        )
        return pinned_closure_digest(validated.digest, pins)

    return of(root)
