"""Building a graph: vertices, static edges, conditional routes; then `compile`.

A vertex binds a *task* to the state with a *selector* and a *reducer*:

* ``select(state) -> input`` reads a private copy of the step's frozen state
  (default: the task receives that copy itself);
* ``task(input) -> output`` is ``async def`` or a plain function (plain ones
  run in a worker thread);
* ``reduce(state, output)`` folds the output into a copy of the accumulated
  state: it may mutate the copy, or return a new state. The default reducer
  takes a mapping of field updates, a whole new state, or ``None``; field
  reducers (`flowledger.flow.reducers`) combine updates of the same field, and
  two blind writes of a field without one are a `ConflictingUpdateError`
  (`flowledger.flow.state`).

The builder is not thread-safe. `compile` validates the graph (first failure
wins, in a fixed order) and freezes a snapshot: later changes to the builder
never reach a compiled runner.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from .codec import StateCodec
from .errors import (
    AmbiguousRoutingError,
    BuildError,
    DuplicateEdgeError,
    DuplicateRouteError,
    DuplicateVertexError,
    MissingEntryError,
    UnknownVertexError,
    UnreachableVertexError,
)
from .ids import GRAPH_ID, validate_graph_id, validate_vertex_id
from .policy import ErrorRoute, Retry
from .reducers import FieldReducer, declared_reducers

if TYPE_CHECKING:
    from ..clock import Clock
    from ..storage import Store
    from .runner import Runner
    from .store import CheckpointStore

__all__ = ["CompiledGraph", "Graph", "Route", "Vertex", "has_loop"]

S = TypeVar("S")
F = TypeVar("F", bound=Callable[..., Any])


@dataclass(frozen=True, slots=True)
class Vertex:
    id: str
    task: Callable[[Any], Any]
    select: Callable[[Any], Any] | None
    reduce: Callable[[Any, Any], Any] | None
    retry: Retry | None
    timeout: float | None
    on_error: ErrorRoute | None


@dataclass(frozen=True, slots=True)
class Route:
    """A conditional edge: ``pick(state)`` returns one target or a list of targets."""

    source: str
    targets: tuple[str, ...]
    pick: Callable[[Any], str | Sequence[str]]


class Graph(Generic[S]):
    """A mutable graph builder; ``state`` is the state type (default: plain ``dict``).

    Field reducers come from the state type's ``Annotated`` fields; ``reducers`` adds
    more by field name (the way to declare them for a plain ``dict`` state)."""

    def __init__(
        self,
        graph_id: str,
        *,
        state: type[S] | None = None,
        reducers: Mapping[str, FieldReducer] | None = None,
    ) -> None:
        self.graph_id = validate_graph_id(graph_id)
        self.state_type = state
        self._codec: StateCodec[S] = StateCodec(state)  # refuses unusable state types now
        if reducers is not None and not isinstance(reducers, Mapping):
            raise BuildError("Graph", "reducers must be a mapping of field name to reducer")
        self.reducers: Mapping[str, FieldReducer] = MappingProxyType(
            declared_reducers(self._codec.state_type, reducers)
        )
        self._vertices: dict[str, Vertex] = {}
        self._edges: dict[str, list[str]] = {}
        self._routes: dict[str, Route] = {}

    def add_vertex(
        self,
        vertex_id: str,
        task: Callable[[Any], Any],
        *,
        select: Callable[[S], Any] | None = None,
        reduce: Callable[[S, Any], Any] | None = None,
        retry: Retry | None = None,
        timeout: float | None = None,
        on_error: ErrorRoute | None = None,
    ) -> None:
        validate_vertex_id(vertex_id)
        if vertex_id in self._vertices:
            raise DuplicateVertexError(vertex_id)
        for name, value in (("task", task), ("select", select), ("reduce", reduce)):
            if value is not None and not callable(value):
                raise BuildError("add_vertex", f"{name} of {vertex_id} is not callable")
        if task is None:
            raise BuildError("add_vertex", f"task of {vertex_id} is None")
        if retry is not None and not isinstance(retry, Retry):
            raise BuildError("add_vertex", f"retry of {vertex_id} must be a flow.Retry")
        if timeout is not None and (
            isinstance(timeout, bool)
            or not isinstance(timeout, int | float)
            or not math.isfinite(timeout)
            or timeout <= 0
        ):
            raise BuildError("add_vertex", f"timeout of {vertex_id} must be a positive number")
        if on_error is not None:
            if not isinstance(on_error, ErrorRoute):
                raise BuildError("add_vertex", f"on_error of {vertex_id} must be a flow.ErrorRoute")
            validate_vertex_id(on_error.handler, "add_vertex")
        self._vertices[vertex_id] = Vertex(
            vertex_id,
            task,
            select,
            reduce,
            retry,
            None if timeout is None else float(timeout),
            on_error,
        )

    def vertex(
        self,
        vertex_id: str,
        *,
        select: Callable[[S], Any] | None = None,
        reduce: Callable[[S, Any], Any] | None = None,
        retry: Retry | None = None,
        timeout: float | None = None,
        on_error: ErrorRoute | None = None,
    ) -> Callable[[F], F]:
        """Decorator form: the function takes (a copy of) the state, or what ``select``
        derives from it, and returns a partial update, a new state, or ``None`` (or what
        ``reduce`` folds into the state). The options are those of `add_vertex`."""

        def register(fn: F) -> F:
            self.add_vertex(
                vertex_id,
                fn,
                select=select,
                reduce=reduce,
                retry=retry,
                timeout=timeout,
                on_error=on_error,
            )
            return fn

        return register

    def add_edge(self, source: str, target: str) -> None:
        validate_vertex_id(source, "add_edge")
        validate_vertex_id(target, "add_edge")
        successors = self._edges.setdefault(source, [])
        if target in successors:
            raise DuplicateEdgeError(source, target)
        successors.append(target)

    def add_route(
        self,
        source: str,
        *,
        targets: Iterable[str],
        pick: Callable[[S], str | Sequence[str]],
    ) -> None:
        validate_vertex_id(source, "add_route")
        if pick is None or not callable(pick):
            raise BuildError("add_route", f"pick of {source} is not callable")
        declared = tuple(targets) if not isinstance(targets, str) else (targets,)
        if not declared:
            raise BuildError("add_route", f"route of {source} declares no targets")
        for target in declared:
            validate_vertex_id(target, "add_route")
        if len(set(declared)) != len(declared):
            raise BuildError("add_route", f"route of {source} declares a target twice")
        if source in self._routes:
            raise DuplicateRouteError(source)
        self._routes[source] = Route(source, declared, pick)

    def compile(
        self,
        *,
        entry: str,
        finish: str,
        store: CheckpointStore | Store | None = None,
        version: str = "0",
        clock: Clock | None = None,
    ) -> Runner[S]:
        """Validate, freeze, and return a `Runner` over ``store``. ``version`` is yours to
        bump when behaviour changes without the topology changing; resume requires the
        exact same graph version.

        ``store`` is a `CheckpointStore`, or the `flowledger.storage.Store` that
        ``open_store`` gives (its ledger then holds the checkpoints, exactly as the
        workflow hosts keep them). Without one, checkpoints live in a private in-memory
        store that ends with the process; a `TypedDefinition` in a catalog is rebound to
        its host's database anyway, so definitions compile without a store. Anything else
        is a `BuildError` now, not an ``AttributeError`` at the first checkpoint.

        ``clock`` (default: the system clock) is what `flow.sleep` and interrupt deadlines
        count from; a test passes a `ManualClock`."""
        from ..clock import system_clock
        from .runner import Runner

        checkpoints = _checkpoint_store(store)
        compiled = CompiledGraph.build(self, entry, finish, version)
        return Runner(compiled, checkpoints, clock=clock or system_clock)


def _checkpoint_store(store: object) -> CheckpointStore:
    from ..storage import Store, StoreOpener
    from .ledger_store import LedgerCheckpointStore
    from .store import CheckpointStore, MemoryCheckpointStore

    if store is None:
        return MemoryCheckpointStore()
    if isinstance(store, Store):
        return LedgerCheckpointStore(store.ledger)
    if isinstance(store, StoreOpener):
        raise BuildError(
            "compile",
            "store is an unopened open_store(...): use `async with open_store(url) as "
            "store:` (or `store = await open_store(url)`) and pass that store",
        )
    if isinstance(store, CheckpointStore):
        return store
    raise BuildError(
        "compile",
        f"store must be a flowledger.storage.Store (from open_store) or a "
        f"flow.CheckpointStore, not {type(store).__name__}",
    )


@dataclass(frozen=True)
class CompiledGraph:
    """An immutable, validated snapshot of a `Graph`."""

    graph_id: str
    version: str
    entry: str
    finish: str
    vertices: dict[str, Vertex]
    edges: dict[str, tuple[str, ...]]
    routes: dict[str, Route]
    codec: StateCodec[Any] = field(repr=False)
    reducers: Mapping[str, FieldReducer] = field(default_factory=dict, repr=False)

    @staticmethod
    def build(graph: Graph[Any], entry: str, finish: str, version: str) -> CompiledGraph:
        if not isinstance(version, str) or not GRAPH_ID.fullmatch(version):
            raise BuildError("compile", f"version {version!r} must match {GRAPH_ID.pattern}")
        vertices = dict(graph._vertices)
        edges = {k: tuple(v) for k, v in graph._edges.items() if v}
        routes = dict(graph._routes)
        if entry not in vertices:
            raise MissingEntryError(entry, "entry")
        if finish not in vertices:
            raise MissingEntryError(finish, "finish")
        for source, targets in edges.items():
            for name in (source, *targets):
                if name not in vertices:
                    raise UnknownVertexError(name)
        for source, route in routes.items():
            for name in (source, *route.targets):
                if name not in vertices:
                    raise UnknownVertexError(name)
        for v in vertices.values():
            if v.on_error is not None and v.on_error.handler not in vertices:
                raise UnknownVertexError(v.on_error.handler)
        for source in edges:
            if source in routes:
                raise AmbiguousRoutingError(source)
        seen = {entry}
        queue = [entry]
        while queue:
            current = queue.pop(0)
            nexts = list(edges.get(current, ()))
            if current in routes:
                nexts.extend(routes[current].targets)
            handler = vertices[current].on_error
            if handler is not None:
                nexts.append(handler.handler)
            for n in nexts:
                if n not in seen:
                    seen.add(n)
                    queue.append(n)
        for name in vertices:
            if name not in seen:
                raise UnreachableVertexError(name)
        fingerprint = graph_fingerprint(vertices, edges, routes, entry, finish)
        return CompiledGraph(
            graph.graph_id,
            f"{fingerprint}:{version}",
            entry,
            finish,
            vertices,
            edges,
            routes,
            graph._codec,
            graph.reducers,
        )

    def successors(self, vertex: str) -> tuple[str, ...]:
        return self.edges.get(vertex, ())

    def loops(self) -> bool:
        """Whether edges, routes and error routes can lead back to a vertex already
        visited (progress displays count steps for such a graph, not vertices)."""
        targets: dict[str, set[str]] = {name: set() for name in self.vertices}
        for source, ends in self.edges.items():
            targets[source].update(ends)
        for source, route in self.routes.items():
            targets[source].update(route.targets)
        for name, vertex in self.vertices.items():
            if vertex.on_error is not None:
                targets[name].add(vertex.on_error.handler)
        return has_loop(self.vertices, lambda vertex: sorted(targets[vertex]))


def has_loop(vertices: Iterable[str], successors: Callable[[str], Iterable[str]]) -> bool:
    """Whether following ``successors`` from any of ``vertices`` can come back to a vertex
    on the path taken (a depth-first search, without recursion)."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    for start in vertices:
        if start in state:
            continue
        state[start] = 1
        stack = [(start, iter(successors(start)))]
        while stack:
            node, children = stack[-1]
            child = next(children, None)
            if child is None:
                state[node] = 2
                stack.pop()
            elif state.get(child) == 1:
                return True
            elif child not in state:
                state[child] = 1
                stack.append((child, iter(successors(child))))
    return False


def graph_fingerprint(
    vertices: dict[str, Vertex],
    edges: dict[str, tuple[str, ...]],
    routes: dict[str, Route],
    entry: str,
    finish: str,
) -> str:
    """SHA-256 over the topology: vertices, edges, routes, error routes, entry and finish.

    Code (tasks, selectors, reducers, picks) is not part of it, and neither is the
    order in which things were declared.
    """
    sections = {
        "V": sorted(vertices),
        "E": sorted(f"{s}->{t}" for s, ts in edges.items() for t in ts),
        "C": sorted(f"{s}?{','.join(sorted(r.targets))}" for s, r in routes.items()),
        "X": sorted(f"{v.id}!{v.on_error.handler}" for v in vertices.values() if v.on_error),
        "R": [entry, finish],
    }
    text = "\f".join(f"{tag}\n" + "\n".join(entries) for tag, entries in sections.items())
    return hashlib.sha256(text.encode()).hexdigest()
