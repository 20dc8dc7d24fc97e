"""Conformance: checkpoint records and their documents (flow-spec §1.2-§1.6, §1.8;
checklist §8.1-7, plus §8.187-188 for the run/vertex enums).

Ours: snake_case documents (`to_document` / `from_document`), timestamps as integer
microseconds since the epoch, absent optional fields omitted. The decoder is strict and
every failure is a `CheckpointDecodeError` whose ``field`` is the path of the problem
(e.g. ``checkpoint.vertices[1].status``). Go's PascalCase names and RFC 3339 times need
not match (DESIGN.md); the behaviour does.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from flowledger.flow import (
    Checkpoint,
    CheckpointDecodeError,
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
from flowledger.flow.checkpoint import from_document, to_document
from flowledger.flow.codec import dumps, loads

RUN = "0b7e3a52-5a7e-4b5c-9f10-6c2d3e4f5a6b"
T0 = datetime(2025, 3, 4, 5, 6, 7, 891_234, tzinfo=UTC)
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


STATE = {"vals": ["a", "b"], "n": 2, "html": {"a&b<c>": "x & y < z"}, "uni": "é✓", "f": 1.5}
BASE = {"vals": ["a"], "n": 1, "html": {"a&b<c>": "x & y < z"}, "uni": "é✓", "f": 0.25}


def full(phase: StepPhase) -> Checkpoint:
    """A fully populated checkpoint of ``phase`` (interrupts only while running/paused, a
    halt only when halted, neither when routed)."""
    run = RunRecord(
        graph_run_id=RUN,
        graph_id="review",
        graph_version="ab" * 32 + ":3",
        status=RunStatus.INTERRUPTED,
        step=-7 if phase is StepPhase.HALTED else 4,
        revision=9,
        created_at=at(0),
        started_at=at(0),
        updated_at=at(9),
        completed_at=at(10),
        interrupted_at=at(8),
        cancelled_at=at(11),
        cancel_reason="operator said stop",
        finish_reached=True,
    )
    vertices = [
        VertexRecord("a", "11111111-2222-4333-8444-555555555555", 4, VertexStatus.DONE, 1,
                     at(1), at(2), at(3)),
        VertexRecord("b", "21111111-2222-4333-8444-555555555555", 4, VertexStatus.FAILED, 3,
                     at(1), at(2), None, None, at(4), "vertex b failed: boom"),
        VertexRecord("c", "31111111-2222-4333-8444-555555555555", 4, VertexStatus.INTERRUPTED, 1,
                     at(1), at(2), None, at(5)),
    ]  # fmt: skip
    routes = [RouteRecord("a", ("b", "c"), False), RouteRecord("b", ("c",), True)]
    interrupts: list[InterruptRecord] = []
    halt = None
    if phase in (StepPhase.RUNNING, StepPhase.PAUSED):
        interrupts = [
            InterruptRecord("b", InterruptKind.ERRORED, None, "vertex b failed: boom"),
            InterruptRecord(
                "c",
                InterruptKind.AWAITING,
                {"question": "approve?", "opts": [1, None, True]},
                "",
                True,
                {"asked": ["q1"], "n": 1},
            ),
            InterruptRecord("d", InterruptKind.AWAITING, "plain text", "", True, None),
        ]
    if phase is StepPhase.HALTED:
        halt = HaltRecord(HaltKind.MAX_STEPS, -7, "flow: max steps exceeded: limit 4")
    return Checkpoint(
        run=run,
        phase=phase,
        state=copy.deepcopy(STATE),
        step_base=copy.deepcopy(BASE),
        vertices=vertices,
        frontier=["b", "c", "d"],
        routes=routes if phase is not StepPhase.PAUSED else routes[:1],
        interrupts=interrupts,
        halt=halt,
    )


def zero() -> Checkpoint:
    """The least checkpoint: an empty run record, epoch times, nothing optional."""
    run = RunRecord("", "", "", RunStatus.RUNNING, 0, 0, EPOCH, EPOCH, EPOCH)
    return Checkpoint(run=run, phase=StepPhase.RUNNING)


PHASES = list(StepPhase)


# -- §8.1-3, §8.187-188 enum integers -------------------------------------------------------


def test_enum_integers_are_the_stored_contract() -> None:
    """§8.1-3 / §8.187-188: persisted enum integers never change."""
    assert {m.name: int(m) for m in StepPhase} == {
        "RUNNING": 0,
        "PAUSED": 1,
        "ROUTED": 2,
        "HALTED": 3,
    }
    assert {m.name: int(m) for m in InterruptKind} == {"AWAITING": 0, "ERRORED": 1, "TIMER": 2}
    assert {m.name: int(m) for m in HaltKind} == {
        "CONDITION": 0,
        "UNDECLARED_TARGET": 1,
        "DEAD_END": 2,
        "MAX_STEPS": 3,
    }
    assert {m.name: int(m) for m in RunStatus} == {
        "RUNNING": 0,
        "COMPLETED": 1,
        "INTERRUPTED": 2,
        "CANCELLED": 3,
    }
    assert {m.name: int(m) for m in VertexStatus} == {
        "PENDING": 0,
        "RUNNING": 1,
        "DONE": 2,
        "INTERRUPTED": 3,
        "FAILED": 4,
    }


def test_enums_encode_as_integers() -> None:
    """§1.8: enums are stored as integers."""
    doc = to_document(full(StepPhase.PAUSED))
    assert doc["phase"] == 1 and type(doc["phase"]) is int
    assert doc["run"]["status"] == 2
    assert [v["status"] for v in doc["vertices"]] == [2, 4, 3]
    assert [i["kind"] for i in doc["interrupts"]] == [1, 0, 0]
    assert to_document(full(StepPhase.HALTED))["halt"]["kind"] == 3


def test_status_strings() -> None:
    """§8.189-190 (ours: lowercase names): str() of statuses is the lowercase name."""
    assert [str(s) for s in RunStatus] == ["running", "completed", "interrupted", "cancelled"]
    assert str(VertexStatus.FAILED) == "failed"
    assert RunStatus.COMPLETED.terminal and RunStatus.CANCELLED.terminal
    assert not RunStatus.RUNNING.terminal and not RunStatus.INTERRUPTED.terminal


# -- §8.4-6 round trips and fixtures ---------------------------------------------------------


@pytest.mark.parametrize("phase", PHASES, ids=str)
def test_full_checkpoint_round_trips(phase: StepPhase) -> None:
    """§8.4: a full checkpoint of every phase round-trips equal, as a document and as bytes."""
    cp = full(phase)
    assert from_document(to_document(cp)) == cp
    data = dumps(to_document(cp))
    back = from_document(loads(data))
    assert back == cp
    assert dumps(to_document(back)) == data


def test_zero_checkpoint_round_trips() -> None:
    """§8.4: the least checkpoint round-trips; absent optional parts are omitted."""
    cp = zero()
    doc = to_document(cp)
    assert set(doc) == {"run", "phase", "vertices", "frontier"}
    assert {
        "graph_run_id",
        "graph_id",
        "graph_version",
        "status",
        "step",
        "revision",
        "created_at",
        "started_at",
        "updated_at",
    } <= set(doc["run"])
    assert not {"completed_at", "interrupted_at", "cancelled_at", "cancel_reason"} & set(doc["run"])
    assert doc["run"]["created_at"] == 0
    back = from_document(loads(dumps(doc)))
    assert back == cp
    assert back.state is None and back.step_base is None and back.halt is None
    assert back.vertices == [] and back.frontier == [] and back.interrupts == []


def test_empty_frontier_stays_a_list() -> None:
    """§8.203: an empty frontier encodes as [] and reads back as an empty list."""
    cp = full(StepPhase.ROUTED)
    cp.frontier = []
    doc = to_document(cp)
    assert doc["frontier"] == []
    assert from_document(doc).frontier == []


def test_json_fields_survive_exactly() -> None:
    """§8.5: state, step_base, info and continuation survive byte-for-byte (incl. & < >)."""
    cp = full(StepPhase.PAUSED)
    back = from_document(loads(dumps(to_document(cp))))
    assert dumps(back.state) == dumps(STATE)
    assert dumps(back.step_base) == dumps(BASE)
    assert b"a&b<c>" in dumps(to_document(cp))
    assert [(i.info, i.continuation, i.stateful) for i in back.interrupts] == [
        (None, None, False),
        ({"question": "approve?", "opts": [1, None, True]}, {"asked": ["q1"], "n": 1}, True),
        ("plain text", None, True),
    ]


def test_info_always_encoded_continuation_only_when_stateful() -> None:
    """§1.8: info is always encoded (None -> null); continuation only when stateful."""
    docs = to_document(full(StepPhase.PAUSED))["interrupts"]
    assert docs[0] == {"vertex": "b", "kind": 1, "info": None, "cause": "vertex b failed: boom"}
    assert "continuation" not in docs[0]
    assert docs[2]["continuation"] is None and "continuation" in docs[2]
    assert "cause" not in docs[1]


def test_fixture_sanity() -> None:
    """§8.6: running/paused fixtures have interrupts only, halted a halt only, routed neither."""
    for phase in PHASES:
        cp = full(phase)
        has_interrupts, has_halt = bool(cp.interrupts), cp.halt is not None
        assert not (has_interrupts and has_halt)
        assert has_interrupts == (phase in (StepPhase.RUNNING, StepPhase.PAUSED))
        assert has_halt == (phase is StepPhase.HALTED)


def test_times_keep_microseconds_and_instant() -> None:
    """§1.8: timestamps keep microseconds and the instant (any zone in, UTC out)."""
    cp = zero()
    plus2 = timezone(timedelta(hours=2))
    cp.run.created_at = datetime(2030, 1, 2, 3, 4, 5, 6, tzinfo=plus2)
    cp.run.started_at = datetime(1969, 12, 31, 23, 59, 59, 999_999, tzinfo=UTC)
    back = from_document(loads(dumps(to_document(cp))))
    assert back.run.created_at == cp.run.created_at
    assert back.run.created_at.utcoffset() == timedelta(0)
    assert back.run.started_at == cp.run.started_at


def test_copy_is_independent() -> None:
    """§3.10: Checkpoint.copy shares nothing mutable with the original."""
    cp = full(StepPhase.PAUSED)
    before = to_document(cp)
    dup = cp.copy()
    assert dup == cp
    dup.run.step = 99
    dup.state["vals"].append("z")  # type: ignore[index]
    dup.step_base["n"] = 0  # type: ignore[index]
    dup.vertices[0].status = VertexStatus.FAILED
    dup.frontier.append("zz")
    dup.routes.clear()
    dup.interrupts[1].info["question"] = "changed"
    dup.interrupts[1].continuation["asked"].append("q2")
    assert to_document(cp) == before


# -- strict decoding -----------------------------------------------------------------------


def _set(path: list[Any], value: Any) -> Callable[[dict[str, Any]], None]:
    def change(doc: dict[str, Any]) -> None:
        node: Any = doc
        for key in path[:-1]:
            node = node[key]
        node[path[-1]] = value

    return change


def _drop(path: list[Any]) -> Callable[[dict[str, Any]], None]:
    def change(doc: dict[str, Any]) -> None:
        node: Any = doc
        for key in path[:-1]:
            node = node[key]
        del node[path[-1]]

    return change


STRICT_CASES = [
    ("unknown-top", _set(["bogus"], 1), "checkpoint.bogus", "unknown field"),
    ("unknown-run", _set(["run", "extra"], 1), "checkpoint.run.extra", "unknown field"),
    ("unknown-vertex", _set(["vertices", 1, "x"], 1), "checkpoint.vertices[1].x", "unknown"),
    ("unknown-route", _set(["routes", 0, "x"], 1), "checkpoint.routes[0].x", "unknown"),
    ("unknown-int", _set(["interrupts", 0, "x"], 1), "checkpoint.interrupts[0].x", "unknown"),
    ("unknown-halt", _set(["halt", "x"], 1), "checkpoint.halt.x", "unknown"),
    ("missing-run", _drop(["run"]), "checkpoint.run", "missing"),
    ("missing-phase", _drop(["phase"]), "checkpoint.phase", "missing"),
    ("missing-status", _drop(["run", "status"]), "checkpoint.run.status", "missing"),
    ("missing-info", _drop(["interrupts", 0, "info"]), "checkpoint.interrupts[0].info", "missing"),
    ("phase-99", _set(["phase"], 99), "checkpoint.phase", "99"),
    ("phase-neg", _set(["phase"], -1), "checkpoint.phase", "-1"),
    ("phase-str", _set(["phase"], "paused"), "checkpoint.phase", "int"),
    ("phase-bool", _set(["phase"], True), "checkpoint.phase", "integer"),
    ("phase-float", _set(["phase"], 1.0), "checkpoint.phase", "int"),
    ("status-9", _set(["run", "status"], 9), "checkpoint.run.status", "RunStatus 9"),
    ("vstatus", _set(["vertices", 1, "status"], "done"), "checkpoint.vertices[1].status", "int"),
    ("vstatus-7", _set(["vertices", 2, "status"], 7), "checkpoint.vertices[2].status", "7"),
    ("kind-5", _set(["interrupts", 1, "kind"], 5), "checkpoint.interrupts[1].kind", "5"),
    ("halt-kind", _set(["halt", "kind"], 4), "checkpoint.halt.kind", "HaltKind 4"),
    ("halt-obj", _set(["halt"], [1]), "checkpoint.halt", "object"),
    ("step-str", _set(["run", "step"], "4"), "checkpoint.run.step", "int"),
    ("rev-neg", _set(["run", "revision"], -1), "checkpoint.run.revision", "negative"),
    ("rev-float", _set(["run", "revision"], 9.5), "checkpoint.run.revision", "int"),
    ("finish-int", _set(["run", "finish_reached"], 1), "checkpoint.run.finish_reached", "bool"),
    ("time-str", _set(["run", "created_at"], "2025-01-01"), "checkpoint.run.created_at", "int"),
    ("time-huge", _set(["run", "updated_at"], 10**30), "checkpoint.run.updated_at", "range"),
    ("time-null", _set(["run", "completed_at"], None), "checkpoint.run.completed_at", "None"),
    ("frontier", _set(["frontier"], ["a", 3]), "checkpoint.frontier[1]", "string"),
    ("frontier-obj", _set(["frontier"], {"a": 1}), "checkpoint.frontier", "list"),
    ("targets", _set(["routes", 0, "targets", 1], None), "checkpoint.routes[0].targets[1]", "str"),
    ("conditional", _set(["routes", 1, "conditional"], "yes"),
     "checkpoint.routes[1].conditional", "bool"),
    ("vertices-obj", _set(["vertices"], {}), "checkpoint.vertices", "list"),
    ("vertex-list", _set(["vertices", 0], []), "checkpoint.vertices[0]", "object"),
    ("state-list", _set(["state"], [1]), "checkpoint.state", "dict"),
    ("state-null", _set(["state"], None), "checkpoint.state", "None"),
    ("base-str", _set(["step_base"], "{}"), "checkpoint.step_base", "dict"),
    ("cause-int", _set(["interrupts", 0, "cause"], 1), "checkpoint.interrupts[0].cause", "str"),
    ("run-list", _set(["run"], []), "checkpoint.run", "object"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("change", "path", "detail"),
    [pytest.param(change, path, detail, id=name) for name, change, path, detail in STRICT_CASES],
)
def test_strict_decode_names_the_path(
    change: Callable[[dict[str, Any]], None], path: str, detail: str
) -> None:
    """§8.7 / §6.3: unknown, missing, mistyped or unknown-enum fields fail naming the path."""
    doc = loads(dumps(to_document(full(StepPhase.RUNNING))))
    doc["halt"] = {"kind": 3, "step": 1, "cause": "x"}  # present for the halt cases
    from_document(copy.deepcopy(doc))  # the unchanged document decodes
    change(doc)
    with pytest.raises(CheckpointDecodeError) as caught:
        from_document(doc)
    assert caught.value.field == path
    assert detail in caught.value.detail
    assert str(caught.value).startswith(f"flow: failed to decode checkpoint {path}: ")


@pytest.mark.parametrize("doc", [None, [], "checkpoint", 3, True])
def test_non_object_document(doc: Any) -> None:
    """§6.3: a document that is not an object fails at path "checkpoint"."""
    with pytest.raises(CheckpointDecodeError) as caught:
        from_document(doc)
    assert caught.value.field == "checkpoint"


def test_decoding_does_not_consume_the_document() -> None:
    """§6.3: from_document leaves its input document unchanged (it reads, never pops)."""
    doc = loads(dumps(to_document(full(StepPhase.PAUSED))))
    snapshot = copy.deepcopy(doc)
    assert from_document(doc) == full(StepPhase.PAUSED)
    assert doc == snapshot


# -- §8.7 fuzzing ----------------------------------------------------------------------------

KEYS = st.sampled_from(
    ["run", "phase", "state", "step_base", "vertices", "frontier", "routes", "interrupts",
     "halt", "status", "step", "revision", "kind", "info", "vertex", "cause", "x"]
)  # fmt: skip
SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=6)
)
JSON = st.recursive(
    SCALARS,
    lambda c: st.lists(c, max_size=3) | st.dictionaries(KEYS | st.text(max_size=4), c, max_size=4),
    max_leaves=20,
)
VALID = [to_document(full(p)) for p in PHASES] + [to_document(zero())]


def _paths(node: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found = [prefix]
    if isinstance(node, dict):
        for key, value in node.items():
            found.extend(_paths(value, (*prefix, key)))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            found.extend(_paths(value, (*prefix, index)))
    return found


@st.composite
def mutated(draw: st.DrawFn) -> Any:
    """A valid document with one node replaced, removed, or given an extra key."""
    doc = copy.deepcopy(draw(st.sampled_from(VALID)))
    path = draw(st.sampled_from(_paths(doc)))
    if not path:
        return draw(JSON)
    parent: Any = doc
    for key in path[:-1]:
        parent = parent[key]
    action = draw(st.sampled_from(["replace", "remove", "extra"]))
    if action == "replace":
        parent[path[-1]] = draw(JSON)
    elif action == "remove":
        del parent[path[-1]]
    elif isinstance(parent[path[-1]], dict):
        parent[path[-1]][draw(KEYS)] = draw(JSON)
    else:
        parent[path[-1]] = draw(JSON)
    return doc


def _fixed_point(doc: Any) -> None:
    try:
        cp = from_document(doc)
    except CheckpointDecodeError:
        return
    first = dumps(to_document(cp))
    again = from_document(loads(first))
    assert again == cp
    assert dumps(to_document(again)) == first


@settings(max_examples=400, deadline=None)
@given(JSON)
def test_decoding_arbitrary_json_only_raises_decode_errors(doc: Any) -> None:
    """§8.7: arbitrary JSON decodes to a fixed point or raises CheckpointDecodeError."""
    _fixed_point(doc)


@settings(max_examples=600, deadline=None)
@given(mutated())
def test_decoding_mutated_documents(doc: Any) -> None:
    """§8.7: one-mutation documents decode to a fixed point or raise CheckpointDecodeError."""
    _fixed_point(doc)


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=64) | st.sampled_from([b"not json", b"", b'{"phase":1}']))
def test_decoding_arbitrary_bytes(data: bytes) -> None:
    """§8.7: arbitrary bytes through loads + from_document fail only with typed errors."""
    from flowledger.flow import CodecError

    try:
        doc = loads(data)
    except CodecError:
        return
    _fixed_point(doc)


@pytest.mark.parametrize("record_type", [RunRecord, VertexRecord])
def test_record_copy_is_what_replace_makes(record_type: type[Any]) -> None:
    """`RunRecord.copy` / `VertexRecord.copy` rebuild a record from its fields read in
    declaration order: every field must stay an ``__init__`` parameter, and the copy must
    equal ``dataclasses.replace(record)`` yet be a separate object."""
    import dataclasses

    assert all(f.init for f in dataclasses.fields(record_type))
    values: dict[str, Any] = {}
    for index, f in enumerate(dataclasses.fields(record_type)):
        kind = f.type if isinstance(f.type, str) else f.type.__name__
        if "datetime" in kind:
            values[f.name] = datetime(2026, 1, 1, tzinfo=UTC) + timedelta(seconds=index)
        elif kind == "int":
            values[f.name] = index + 1
        elif kind == "bool":
            values[f.name] = True
        elif "Status" in kind:
            values[f.name] = list(RunStatus if record_type is RunRecord else VertexStatus)[-1]
        else:
            values[f.name] = f"value-{index}"
    record = record_type(**values)
    copied = record.copy()
    assert copied == dataclasses.replace(record) and copied is not record
    assert {f.name: getattr(copied, f.name) for f in dataclasses.fields(record_type)} == values
    copied.step = 99  # the copy is independent
    assert record.step != 99
