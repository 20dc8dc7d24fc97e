"""Parallel branches never lose an update silently (DESIGN "Decisions"; docs/flow.md
"State updates, field reducers and conflicts").

* Without a field reducer, two vertices of one step writing the same field is a
  `ConflictingUpdateError` of the later vertex (in id order): its update is not committed
  and the run follows the vertex error policy (errored pause, or its error route).
* With a field reducer (``Annotated[..., reducer]`` on a dataclass, TypedDict or pydantic
  model, or ``Graph(reducers=...)`` for a dict state) every update is reduced, in vertex
  id order, also when a single vertex writes the field.
* A property test over random fan-out / fan-in graphs compares both against a sequential
  oracle.
"""

from __future__ import annotations

import asyncio
import operator
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Annotated, Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import AfterValidator, BaseModel, Field
from typing_extensions import TypedDict

from flowledger import flow
from flowledger.flow import InterruptKind, RunStatus

# -- state types: each kind with and without field reducers ---------------------------------


@dataclass
class DataReduced:
    items: Annotated[list[str], flow.append] = field(default_factory=list)
    count: Annotated[int, operator.add] = 0
    note: str = ""


class TypedReduced(TypedDict):
    items: Annotated[list[str], flow.append]
    count: Annotated[int, operator.add]
    note: str


class ModelReduced(BaseModel):
    items: Annotated[list[str], flow.append] = []
    count: Annotated[int, operator.add] = 0
    note: str = ""


@dataclass
class DataPlain:
    items: list[str] = field(default_factory=list)
    count: int = 0
    note: str = ""


class TypedPlain(TypedDict):
    items: list[str]
    count: int
    note: str


class ModelPlain(BaseModel):
    items: list[str] = []
    count: int = 0
    note: str = ""


DICT_REDUCERS: dict[str, flow.FieldReducer] = {"items": flow.append, "count": operator.add}
KINDS = ["dataclass", "typeddict", "pydantic", "dict"]
REDUCED: dict[str, Any] = {
    "dataclass": DataReduced,
    "typeddict": TypedReduced,
    "pydantic": ModelReduced,
    "dict": dict,
}
PLAIN: dict[str, Any] = {
    "dataclass": DataPlain,
    "typeddict": TypedPlain,
    "pydantic": ModelPlain,
    "dict": dict,
}


def new_graph(kind: str, *, reduced: bool, graph_id: str = "fan") -> flow.Graph[Any]:
    state = (REDUCED if reduced else PLAIN)[kind]
    reducers = DICT_REDUCERS if reduced and kind == "dict" else None
    return flow.Graph(graph_id, state=None if state is dict else state, reducers=reducers)


def initial(kind: str, *, reduced: bool) -> Any:
    state = (REDUCED if reduced else PLAIN)[kind]
    values = {"items": [], "count": 0, "note": ""}
    return values if state in (dict, TypedReduced, TypedPlain) else state(**values)


def get(state: Any, name: str) -> Any:
    return state[name] if isinstance(state, dict) else getattr(state, name)


def fan_in(graph: flow.Graph[Any], branches: dict[str, Callable[[Any], Any]]) -> flow.Graph[Any]:
    """``start -> {branches} -> fin``."""
    graph.add_vertex("start", lambda s: None)
    graph.add_vertex("fin", lambda s: None)
    for vertex, task in branches.items():
        graph.add_vertex(vertex, task)
        graph.add_edge("start", vertex)
        graph.add_edge(vertex, "fin")
    return graph


def read_modify_write(vertex: str) -> Callable[[Any], Any]:
    """The lost-update pattern: a new list made from the step base."""
    return lambda s: {"items": [*get(s, "items"), vertex]}


def append_one(vertex: str) -> Callable[[Any], Any]:
    return lambda s: {"items": vertex, "count": 1}


# -- the three-branch lost update -----------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
async def test_three_branches_without_reducer_conflict(store: Any, kind: str) -> None:
    """b and c would overwrite a's write: each fails with ConflictingUpdateError naming the
    field and both vertices; a's update stays, theirs are not committed; the run pauses
    as errored (the vertex error policy without an error route)."""
    graph = fan_in(new_graph(kind, reduced=False), {v: read_modify_write(v) for v in "cab"})
    runner = graph.compile(entry="start", finish="fin", store=store)
    result = await runner.run(initial(kind, reduced=False))
    assert result.run.status is RunStatus.INTERRUPTED
    assert get(result.state, "items") == ["a"]
    assert result.interrupts is not None
    assert [(i.vertex, i.kind) for i in result.interrupts] == [
        ("b", InterruptKind.ERRORED),
        ("c", InterruptKind.ERRORED),
    ]
    for interruption in result.interrupts:
        cause = interruption.cause
        assert isinstance(cause, flow.ConflictingUpdateError)
        assert (cause.field, cause.vertex, cause.earlier) == ("items", interruption.vertex, ("a",))
        assert "'items'" in str(cause) and f"vertex {cause.vertex}" in str(cause)
    latest = await runner.latest(result.run.graph_run_id)
    assert latest.state is not None and latest.state["items"] == ["a"]
    stored = sorted((i.vertex, i.cause) for i in latest.interrupts)
    assert [v for v, _ in stored] == ["b", "c"]
    assert all("conflicting update of field 'items'" in cause for _, cause in stored)


@pytest.mark.parametrize("kind", KINDS)
async def test_three_branches_with_reducer_keep_every_item(store: Any, kind: str) -> None:
    """With field reducers every branch's update lands, in vertex-id order."""
    graph = fan_in(new_graph(kind, reduced=True), {v: append_one(v) for v in "cab"})
    result = await graph.compile(entry="start", finish="fin", store=store).run(
        initial(kind, reduced=True)
    )
    assert result.run.status is RunStatus.COMPLETED
    assert get(result.state, "items") == ["a", "b", "c"]
    assert get(result.state, "count") == 3


@pytest.mark.parametrize("kind", KINDS)
async def test_unequal_branches_keep_every_write(kind: str) -> None:
    """``start -> {a -> fin, b1 -> b2 -> fin}``: steps run {a, b1}, {b2, fin}, {fin}. Without
    a reducer the first parallel step reports the conflict; with one every write is kept,
    the short branch's and both of the join's."""

    def build(reduced: bool) -> flow.Runner[Any]:
        graph = new_graph(kind, reduced=reduced, graph_id="unequal")
        for vertex in ("start", "a", "b1", "b2", "fin"):
            task = append_one(vertex) if reduced else read_modify_write(vertex)
            graph.add_vertex(vertex, task)
        for source, target in (("start", "a"), ("start", "b1"), ("a", "fin"), ("b1", "b2")):
            graph.add_edge(source, target)
        graph.add_edge("b2", "fin")
        return graph.compile(entry="start", finish="fin")

    lost = await build(False).run(initial(kind, reduced=False))
    assert lost.interrupts is not None
    assert [i.vertex for i in lost.interrupts] == ["b1"]  # step 1: a and b1
    assert get(lost.state, "items") == ["start", "a"]
    kept = await build(True).run(initial(kind, reduced=True))
    assert kept.run.status is RunStatus.COMPLETED
    assert get(kept.state, "items") == ["start", "a", "b1", "b2", "fin", "fin"]
    assert get(kept.state, "count") == 6


# -- what counts as an update ----------------------------------------------------------------


async def test_reducer_applies_to_a_single_writer() -> None:
    """A reducer field is always reduced: one writer appends too."""
    graph: flow.Graph[DataReduced] = flow.Graph("one", state=DataReduced)
    graph.add_vertex("only", lambda s: {"items": "x", "count": 2})
    result = await graph.compile(entry="only", finish="only").run(DataReduced(["seed"], 1))
    assert result.state == DataReduced(["seed", "x"], 3)


async def test_append_takes_a_list_or_one_item() -> None:
    assert flow.append(["a"], ["b", "c"]) == ["a", "b", "c"]
    assert flow.append(["a"], ("b",)) == ["a", "b"]
    assert flow.append(["a"], "b") == ["a", "b"]
    assert flow.append(["a"], [["b"]]) == ["a", ["b"]]
    assert flow.append(None, 1) == [1]


async def test_disjoint_fields_and_equal_partial_updates() -> None:
    """Different fields never conflict; naming a field in a mapping is writing it, even
    with the base value."""
    graph = fan_in(
        new_graph("dataclass", reduced=False),
        {"a": lambda s: {"note": "a"}, "b": lambda s: {"count": 7}},
    )
    result = await graph.compile(entry="start", finish="fin").run(DataPlain())
    assert result.state == DataPlain([], 7, "a")
    same = fan_in(
        new_graph("dataclass", reduced=False),
        {"a": lambda s: {"note": ""}, "b": lambda s: {"note": ""}},
    )
    paused = await same.compile(entry="start", finish="fin").run(DataPlain())
    assert paused.interrupts is not None and [i.vertex for i in paused.interrupts] == ["b"]


@pytest.mark.parametrize("kind", ["dataclass", "pydantic"])
async def test_whole_state_writes_only_what_it_changed(kind: str) -> None:
    """A whole state is compared with the step base: only its changed fields are written,
    so it neither erases a sibling's write nor conflicts with a field it left alone."""

    def whole(state: Any) -> Any:
        if isinstance(state, BaseModel):
            return state.model_copy(update={"note": "b"})
        return replace(state, note="b")

    graph = fan_in(new_graph(kind, reduced=True), {"a": append_one("a"), "b": whole})
    result = await graph.compile(entry="start", finish="fin").run(initial(kind, reduced=True))
    assert result.run.status is RunStatus.COMPLETED
    assert (get(result.state, "items"), get(result.state, "note")) == (["a"], "b")

    plain = fan_in(
        new_graph(kind, reduced=False),
        {"a": lambda s: {"note": "a"}, "b": whole},
    )
    paused = await plain.compile(entry="start", finish="fin").run(initial(kind, reduced=False))
    assert paused.interrupts is not None
    cause = paused.interrupts[0].cause
    assert isinstance(cause, flow.ConflictingUpdateError)
    assert (cause.field, cause.vertex) == ("note", "b")


async def test_whole_state_cannot_replace_a_reduced_field() -> None:
    graph: flow.Graph[DataReduced] = flow.Graph("g", state=DataReduced)
    graph.add_vertex("w", lambda s: replace(s, items=[*s.items, "w"]))
    result = await graph.compile(entry="w", finish="w").run(DataReduced(["seed"]))
    assert result.state == DataReduced(["seed"])
    assert result.interrupts is not None
    cause = result.interrupts[0].cause
    assert isinstance(cause, flow.FieldUpdateError)
    assert (cause.field, cause.vertex) == ("items", "w")
    assert "return a mapping" in str(cause)


async def test_custom_reducer_sees_the_accumulated_state() -> None:
    """A custom ``reduce=`` merges for itself: it does not conflict with earlier writers
    (it saw them), but a later blind write of a field it changed does."""

    def merge_own(state: DataPlain, out: str) -> None:
        state.items.append(out)

    after = flow.Graph("after", state=DataPlain)
    fan_in(after, {"a": read_modify_write("a")})
    after.add_vertex("b", lambda s: "b", reduce=merge_own)
    after.add_edge("start", "b")
    after.add_edge("b", "fin")
    result = await after.compile(entry="start", finish="fin").run(DataPlain())
    assert result.run.status is RunStatus.COMPLETED
    assert result.state.items == ["a", "b"]

    before = flow.Graph("before", state=DataPlain)
    fan_in(before, {"b": read_modify_write("b")})
    before.add_vertex("a", lambda s: "a", reduce=merge_own)
    before.add_edge("start", "a")
    before.add_edge("a", "fin")
    paused = await before.compile(entry="start", finish="fin").run(DataPlain())
    assert paused.state.items == ["a"]
    assert paused.interrupts is not None
    cause = paused.interrupts[0].cause
    assert isinstance(cause, flow.ConflictingUpdateError)
    assert (cause.vertex, cause.earlier) == ("b", ("a",))


async def test_custom_reducer_result_is_not_reduced_again() -> None:
    """A custom reducer's mapping sets a reduced field to the value it computed from the
    accumulated state: field reducers do not apply to it a second time."""

    def extend(state: DataReduced, out: str) -> dict[str, Any]:
        return {"items": [*state.items, out], "count": state.count + 1}

    graph: flow.Graph[DataReduced] = flow.Graph("custom", state=DataReduced)
    fan_in(graph, {"a": append_one("a")})
    graph.add_vertex("b", lambda s: "b", reduce=extend)
    graph.add_edge("start", "b")
    graph.add_edge("b", "fin")
    result = await graph.compile(entry="start", finish="fin").run(DataReduced(["seed"]))
    assert result.state == DataReduced(["seed", "a", "b"], 2)


async def test_decorator_takes_reduce_and_select() -> None:
    graph: flow.Graph[DataPlain] = flow.Graph("deco", state=DataPlain)

    def fold(state: DataPlain, out: int) -> dict[str, Any]:
        return {"count": state.count + out}

    @graph.vertex("double", select=lambda s: s.count, reduce=fold)
    def double(count: int) -> int:
        return count * 2

    result = await graph.compile(entry="double", finish="double").run(DataPlain(count=3))
    assert result.state.count == 9


# -- failures follow the vertex error policy -------------------------------------------------


async def test_failing_field_reducer_is_the_vertex_failure() -> None:
    def refuse(current: int, update: int) -> int:
        raise ValueError("no negative counts")

    graph: flow.Graph[dict[str, Any]] = flow.Graph(
        "g", reducers={"items": flow.append, "count": refuse}
    )
    fan_in(graph, {"a": lambda s: {"items": "a"}, "b": lambda s: {"items": "b", "count": -1}})
    result = await graph.compile(entry="start", finish="fin").run({"items": [], "count": 0})
    assert result.state == {"items": ["a"], "count": 0}  # nothing of b's update
    assert result.interrupts is not None and [i.vertex for i in result.interrupts] == ["b"]
    cause = result.interrupts[0].cause
    assert isinstance(cause, flow.FieldUpdateError)
    assert (cause.field, cause.vertex) == ("count", "b")
    assert isinstance(cause.cause, ValueError)
    assert "no negative counts" in str(cause)


async def test_conflict_follows_the_error_route() -> None:
    seen: list[BaseException] = []

    def record(state: dict[str, Any], error: BaseException) -> dict[str, Any]:
        seen.append(error)
        return {"errors": [*state["errors"], type(error).__name__]}

    graph: flow.Graph[dict[str, Any]] = flow.Graph("routed")
    graph.add_vertex("start", lambda s: None)
    graph.add_vertex("fin", lambda s: None)
    graph.add_vertex("triage", lambda s: None)
    graph.add_vertex("a", read_modify_write("a"))
    graph.add_vertex("b", read_modify_write("b"), on_error=flow.ErrorRoute("triage", record))
    for branch in ("a", "b"):
        graph.add_edge("start", branch)
    graph.add_edge("a", "fin")
    graph.add_edge("triage", "fin")
    result = await graph.compile(entry="start", finish="fin").run({"items": [], "errors": []})
    assert result.run.status is RunStatus.COMPLETED
    assert result.state == {"items": ["a"], "errors": ["ConflictingUpdateError"]}
    assert len(seen) == 1 and isinstance(seen[0], flow.ConflictingUpdateError)


async def test_resumed_conflict_is_not_silently_overwritten(store: Any) -> None:
    """Regression: a resumed step knows what its carried vertices wrote. Resuming the
    errored b while a's write is in the state conflicts again; once b writes another field
    the run completes with both."""
    fixed = False

    def b(state: DataPlain) -> dict[str, Any]:
        return {"note": "b"} if fixed else {"items": [*state.items, "b"]}

    graph = fan_in(flow.Graph("resume", state=DataPlain), {"a": read_modify_write("a"), "b": b})
    runner = graph.compile(entry="start", finish="fin", store=store)
    first = await runner.run(DataPlain())
    again = await runner.resume(first.run.graph_run_id, None)
    assert again.state.items == ["a"]
    assert again.interrupts is not None
    cause = again.interrupts[0].cause
    assert isinstance(cause, flow.ConflictingUpdateError)
    assert (cause.field, cause.vertex, cause.earlier) == ("items", "b", ("a",))
    fixed = True
    done = await runner.resume(first.run.graph_run_id, None)
    assert done.run.status is RunStatus.COMPLETED
    assert done.state == DataPlain(["a"], 0, "b")


async def test_typeddict_state_takes_partial_updates() -> None:
    """Regression: a TypedDict state refused every mapping update (isinstance on a
    TypedDict raises), so each vertex failed."""
    graph: flow.Graph[Any] = flow.Graph("td", state=TypedPlain)
    graph.add_vertex("only", lambda s: {"note": "set"})
    runner = graph.compile(entry="only", finish="only")
    result = await runner.run(initial("typeddict", reduced=False))
    assert result.run.status is RunStatus.COMPLETED
    assert result.state["note"] == "set"


async def test_dict_reducer_needs_an_initial_value() -> None:
    graph: flow.Graph[dict[str, Any]] = flow.Graph("g", reducers={"items": flow.append})
    graph.add_vertex("only", lambda s: {"items": "x"})
    result = await graph.compile(entry="only", finish="only").run({})
    assert result.interrupts is not None
    cause = result.interrupts[0].cause
    assert isinstance(cause, flow.FieldUpdateError) and cause.field == "items"
    assert "initial value" in str(cause)


# -- declaring reducers ----------------------------------------------------------------------


@dataclass
class TwoReducers:
    items: Annotated[list[str], flow.append, operator.add] = field(default_factory=list)


class ModelWithConstraints(BaseModel):
    items: Annotated[list[str], Field(max_length=5), flow.append] = []
    checked: Annotated[int, Field(ge=0), AfterValidator(abs)] = 0


@dataclass
class MarkerOnly:
    items: Annotated[list[str], "doc", DataPlain] = field(default_factory=list)


def test_declared_reducers_per_state_kind() -> None:
    for kind in ("dataclass", "typeddict", "pydantic"):
        graph = new_graph(kind, reduced=True)
        assert dict(graph.reducers) == {"items": flow.append, "count": operator.add}, kind
    assert dict(new_graph("dict", reduced=True).reducers) == DICT_REDUCERS
    assert dict(flow.Graph("m", state=MarkerOnly).reducers) == {}  # strings, classes: markers
    # pydantic's constraints and validators are metadata too, but not callables
    assert dict(flow.Graph("c", state=ModelWithConstraints).reducers) == {"items": flow.append}
    extra = flow.Graph("x", state=DataPlain, reducers={"note": operator.add})
    assert dict(extra.reducers) == {"note": operator.add}


@pytest.mark.parametrize(
    ("build", "fragment"),
    [
        (lambda: flow.Graph("g", state=TwoReducers), "declares two reducers"),
        (lambda: flow.Graph("g", state=DataPlain, reducers={"nope": flow.append}), "no field"),
        (lambda: flow.Graph("g", reducers={"items": "append"}), "not callable"),
        (lambda: flow.Graph("g", reducers=[("items", flow.append)]), "must be a mapping"),
        (
            lambda: flow.Graph("g", state=DataReduced, reducers={"items": operator.add}),
            "already declares a reducer",
        ),
    ],
)
def test_bad_reducer_declarations(build: Callable[[], Any], fragment: str) -> None:
    with pytest.raises(flow.BuildError, match=fragment):
        build()


# -- property: random fan-ins against a sequential oracle ------------------------------------


@st.composite
def dags(draw: st.DrawFn) -> tuple[int, tuple[tuple[int, int], ...]]:
    """A DAG on v0..v(n-1) where every vertex is reachable from v0 (fan-out and fan-in)."""
    size = draw(st.integers(2, 7))
    edges = {(draw(st.integers(0, j - 1)), j) for j in range(1, size)}
    extra = draw(st.lists(st.tuples(st.integers(0, size - 1), st.integers(0, size - 1))))
    edges |= {(i, j) for i, j in extra if i < j}
    return size, tuple(sorted(edges))


def oracle_steps(size: int, edges: tuple[tuple[int, int], ...]) -> list[list[str]]:
    """The super-steps of the DAG (every static edge fires): vertex names in id order."""
    steps: list[list[str]] = []
    frontier = {0}
    while frontier:
        steps.append(sorted(f"v{i}" for i in frontier))
        frontier = {j for i, j in edges if i in frontier}
    return steps


def build_dag(kind: str, reduced: bool, size: int, edges: Any) -> flow.Runner[Any]:
    graph = new_graph(kind, reduced=reduced, graph_id="dag")
    for i in range(size):
        vertex = f"v{i}"
        if reduced:
            graph.add_vertex(vertex, append_one(vertex))
        else:
            graph.add_vertex(
                vertex,
                lambda s, v=vertex: {"items": [*get(s, "items"), v], "count": get(s, "count") + 1},
            )
    for i, j in edges:
        graph.add_edge(f"v{i}", f"v{j}")
    return graph.compile(entry="v0", finish=f"v{size - 1}")


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    dag=dags(),
    kind=st.sampled_from(KINDS),
    reduced=st.booleans(),
    mode=st.sampled_from(list(flow.Granularity)),
)
def test_random_fan_ins_match_the_sequential_oracle(
    dag: tuple[int, tuple[tuple[int, int], ...]],
    kind: str,
    reduced: bool,
    mode: flow.Granularity,
) -> None:
    """Reduced: the state is every vertex execution, step by step, in id order - what
    applying the updates one after another gives. Unreduced: the run completes the same
    way while steps have one vertex; the first step with several pauses every vertex but
    the lowest with a conflict, and keeps exactly the lowest one's write."""
    size, edges = dag
    steps = oracle_steps(size, edges)
    runner = build_dag(kind, reduced, size, edges)
    result = asyncio.run(runner.run(initial(kind, reduced=reduced), checkpoint=mode))
    crowded = next((n for n, step in enumerate(steps) if len(step) > 1), None)
    if reduced or crowded is None:
        expected = [vertex for step in steps for vertex in step]
        assert result.run.status is RunStatus.COMPLETED
        assert get(result.state, "items") == expected
        assert get(result.state, "count") == len(expected)
        return
    before = [vertex for step in steps[:crowded] for vertex in step]
    lowest, *later = steps[crowded]
    assert result.run.status is RunStatus.INTERRUPTED
    assert result.run.step == crowded
    assert get(result.state, "items") == [*before, lowest]
    assert get(result.state, "count") == len(before) + 1
    assert result.interrupts is not None
    assert [i.vertex for i in result.interrupts] == later
    for interruption in result.interrupts:
        cause = interruption.cause
        assert isinstance(cause, flow.ConflictingUpdateError)
        assert (cause.field, cause.earlier) == ("items", (lowest,))


def test_unresolvable_reducer_annotation_is_refused() -> None:
    """A local type under postponed annotations cannot be resolved from the module: the
    graph says so instead of silently having no reducer."""

    @dataclass
    class Inner:
        x: int = 0

    @dataclass
    class Local:
        inner: Annotated[list[Inner], flow.append] = field(default_factory=list)

    with pytest.raises(flow.BuildError, match="cannot resolve the annotation of field 'inner'"):
        flow.Graph("g", state=Local)
