"""Resume: flow-spec §4.3-4.7 and checklist §8.138-156, with our decisions Q3 and Q5."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest

from flowledger import flow
from flowledger.clock import system_clock
from flowledger.flow import (
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
from flowledger.flow.checkpoint import to_document
from flowledger.flow.codec import dumps

from .conftest import Calls, Cnt, FaultyStore, Recorder, chain, fan, inject, pauser, tag

# -- validation before anything runs (§8.138-140) -------------------------------------------


async def paused_chain(store: Any, calls: Calls) -> tuple[flow.Runner[Cnt], str]:
    """a -> b -> fin where b pauses; returns the runner and the paused run's id."""
    graph: flow.Graph[Cnt] = flow.Graph("g", state=Cnt)
    tag(graph, "a", calls)
    tag(graph, "b", calls, body=pauser("b?"))
    tag(graph, "fin", calls)
    graph.add_edge("a", "b")
    graph.add_edge("b", "fin")
    runner = graph.compile(entry="a", finish="fin", store=store)
    result = await runner.run(Cnt())
    assert result.run.status is RunStatus.INTERRUPTED
    return runner, result.run.graph_run_id


HALT = HaltRecord(HaltKind.CONDITION, 1, "x")
STRANGER = InterruptRecord("zzz", InterruptKind.AWAITING, "x")

CORRUPTIONS: dict[str, tuple[dict[str, Any], type[Exception], dict[str, Any]]] = {
    "a-graph-id": ({"run": {"graph_id": "other"}}, flow.GraphMismatchError, {"actual": "other"}),
    "b-graph-version": (
        {"run": {"graph_version": "f00:0"}},
        flow.GraphVersionMismatchError,
        {"actual": "f00:0"},
    ),
    "c-completed": (
        {"run": {"status": RunStatus.COMPLETED}},
        flow.ResumeTerminalError,
        {"status": RunStatus.COMPLETED},
    ),
    "d-cancelled": (
        {"run": {"status": RunStatus.CANCELLED}},
        flow.ResumeTerminalError,
        {"status": RunStatus.CANCELLED},
    ),
    "e-state": (
        {"state": {"n": "not a number", "vals": []}},
        flow.CheckpointDecodeError,
        {"field": "state"},
    ),
    "f-step-base": ({"step_base": {"vals": 5}}, flow.CheckpointDecodeError, {"field": "step_base"}),
    "g-frontier": ({"frontier": ["b", "zzz"]}, flow.UnknownVertexError, {"vertex": "zzz"}),
    "h-interrupts": (
        {"interrupts": [STRANGER]},
        flow.UnknownVertexError,
        {"vertex": "zzz"},
    ),
    "i-route-target": (
        {"routes": [RouteRecord("a", ("zzz",), False)]},
        flow.UnknownVertexError,
        {"vertex": "zzz"},
    ),
    "i-route-source": (
        {"routes": [RouteRecord("yyy", ("b",), False)]},
        flow.UnknownVertexError,
        {"vertex": "yyy"},
    ),
    "j-paused-no-interrupts": (
        {"interrupts": []},
        flow.CheckpointDecodeError,
        {"field": "phase"},
    ),
    "k-halted-interrupts": (
        {"phase": StepPhase.HALTED, "halt": HALT},
        flow.CheckpointDecodeError,
        {"field": "phase"},
    ),
    "l-halted-no-halt": (
        {"phase": StepPhase.HALTED, "interrupts": []},
        flow.CheckpointDecodeError,
        {"field": "phase"},
    ),
    "m-running-halt": (
        {"phase": StepPhase.RUNNING, "halt": HALT},
        flow.CheckpointDecodeError,
        {"field": "phase"},
    ),
    "n-paused-halt": ({"halt": HALT}, flow.CheckpointDecodeError, {"field": "phase"}),
    "o-routed-interrupts": (
        {"phase": StepPhase.ROUTED},
        flow.CheckpointDecodeError,
        {"field": "phase"},
    ),
    "p-routed-halt": (
        {"phase": StepPhase.ROUTED, "interrupts": [], "halt": HALT},
        flow.CheckpointDecodeError,
        {"field": "phase"},
    ),
    # Our decision Q5: vertex records are validated too.
    "q5-vertex-record": (
        {"vertices": [VertexRecord("zzz", str(uuid.uuid4()), 1, VertexStatus.DONE)]},
        flow.UnknownVertexError,
        {"vertex": "zzz"},
    ),
}


@pytest.mark.parametrize("case", sorted(CORRUPTIONS))
async def test_resume_validates_before_running(store: Any, case: str) -> None:
    """§8.138a-p (+Q5) a bad latest checkpoint is refused before any task runs."""
    changes, error, fields = CORRUPTIONS[case]
    calls = Calls()
    runner, run_id = await paused_chain(store, calls)
    before = dict(calls.count)
    cp = await inject(store, run_id, **dict(changes))
    with pytest.raises(error) as caught:
        await runner.resume(run_id, "payload")
    for name, value in fields.items():
        assert getattr(caught.value, name) == value
    if error is flow.GraphVersionMismatchError:
        assert caught.value.expected == runner.graph_version  # type: ignore[attr-defined]
    if error is flow.CheckpointDecodeError and fields["field"] == "phase":
        assert "phase" in str(caught.value)
    assert dict(calls.count) == before
    assert (await runner.latest(run_id)).revision == cp.revision


async def test_resume_unknown_phase_value() -> None:
    """§8.138q (ours) phase 99 is refused by the strict store decoder."""
    store = flow.MemoryCheckpointStore()
    calls = Calls()
    runner, run_id = await paused_chain(store, calls)
    latest = await store.latest(run_id)
    doc = to_document(latest)
    doc["phase"] = 99
    store.corrupt(run_id, latest.revision, dumps(doc))
    with pytest.raises(flow.StoreError) as caught:
        await runner.resume(run_id, "x")
    assert isinstance(caught.value.cause, flow.CheckpointDecodeError)
    assert "phase" in caught.value.cause.field
    assert calls.count == {"a": 1, "b": 1}


async def test_resume_unknown_run(store: Any) -> None:
    """§8.139 resume of an unknown run -> CheckpointNotFoundError."""
    runner = chain(["a"], store)
    with pytest.raises(flow.CheckpointNotFoundError):
        await runner.resume(str(uuid.uuid4()), None)


class OtherRunStore(FaultyStore):
    """Returns a latest checkpoint that claims to belong to another run."""

    def __init__(self, inner: Any, other: str) -> None:
        super().__init__(inner)
        self.other = other

    async def latest(self, run_id: str) -> Checkpoint:
        cp = await super().latest(run_id)
        cp.run.graph_run_id = self.other
        return cp


async def test_resume_run_id_mismatch(store: Any) -> None:
    """§8.140 a store returning another run's checkpoint -> GraphRunMismatchError."""
    calls = Calls()
    runner, run_id = await paused_chain(store, calls)
    other = str(uuid.uuid4())
    liar = OtherRunStore(store, other)
    graph: flow.Graph[Cnt] = flow.Graph("g", state=Cnt)
    tag(graph, "a", calls)
    tag(graph, "b", calls, body=pauser("b?"))
    tag(graph, "fin", calls)
    graph.add_edge("a", "b")
    graph.add_edge("b", "fin")
    lying = graph.compile(entry="a", finish="fin", store=liar)
    assert lying.graph_version == runner.graph_version
    with pytest.raises(flow.GraphRunMismatchError) as caught:
        await lying.resume(run_id, "x")
    assert (caught.value.requested, caught.value.actual) == (run_id, other)
    assert calls.count == {"a": 1, "b": 1}


# -- resuming pauses (§8.141-147) -----------------------------------------------------------


async def test_headline_resume(store: Any) -> None:
    """§8.141 first -> second pauses; resume re-runs only second, which gets the payload."""
    calls = Calls()
    seen: list[Any] = []
    graph: flow.Graph[Cnt] = flow.Graph("g", state=Cnt)
    tag(graph, "first", calls)
    tag(graph, "second", calls, body=pauser("ok?", seen))
    graph.add_edge("first", "second")
    runner = graph.compile(entry="first", finish="second", store=store)
    paused = await runner.run(Cnt())
    result = await runner.resume(paused.run.graph_run_id, "the-payload")
    assert result.run.status is RunStatus.COMPLETED
    assert seen == ["the-payload"]
    assert calls.count == {"first": 1, "second": 2}
    assert result.state == Cnt(["first", "second"], 2)
    assert result.run.revision > 1
    assert result.run.revision > paused.run.revision
    assert result.run.interrupted_at == paused.run.interrupted_at  # kept, never cleared
    assert result.run.created_at == paused.run.created_at
    assert result.run.completed_at is not None


async def test_errored_pause_resumes(store: Any) -> None:
    """§8.142 an errored pause (task failed once) resumed with no payload completes."""
    failures = [RuntimeError("transient")]

    def task(state: dict[str, Any]) -> dict[str, Any]:
        if failures:
            raise failures.pop()
        return {"vals": ["fixed"]}

    graph: flow.Graph[dict[str, Any]] = flow.Graph("g")
    graph.add_vertex("a", task)
    runner = graph.compile(entry="a", finish="a", store=store)
    paused = await runner.run({"vals": []})
    assert paused.interrupts is not None
    assert paused.interrupts[0].kind is InterruptKind.ERRORED
    result = await runner.resume(paused.run.graph_run_id)
    assert result.run.status is RunStatus.COMPLETED
    assert result.state == {"vals": ["fixed"]}


async def test_paused_siblings_share_the_payload(store: Any) -> None:
    """§8.143 two paused siblings both receive the same payload."""
    seen: list[Any] = []
    _, runner = fan(store, a=pauser("a?", seen), b=pauser("b?", seen))
    paused = await runner.run(Cnt())
    result = await runner.resume(paused.run.graph_run_id, "shared")
    assert result.run.status is RunStatus.COMPLETED
    assert seen == ["shared", "shared"]
    assert result.state.vals == ["v", "a", "b", "fin"]


async def test_done_sibling_not_rerun(store: Any) -> None:
    """§8.144 the DONE sibling runs once, the paused one twice; outputs once."""
    calls = Calls()
    _, runner = fan(store, calls, a=pauser())
    paused = await runner.run(Cnt())
    result = await runner.resume(paused.run.graph_run_id, "go")
    assert result.run.status is RunStatus.COMPLETED
    assert calls.count == {"v": 1, "a": 2, "b": 1, "fin": 1}
    assert result.state.vals == ["v", "b", "a", "fin"]
    assert calls.seen["a"] == [1, 1]  # the re-run derives its input from the same step base


async def test_repeat_pause_then_complete(store: Any) -> None:
    """§8.146 a re-run that pauses again gives a fresh pause; a second resume completes."""
    answers = iter([None, "yes"])
    graph: flow.Graph[dict[str, Any]] = flow.Graph("g")

    def task(state: dict[str, Any]) -> dict[str, Any]:
        return {"answer": flow.interrupt("sure?")}

    graph.add_vertex("a", task)
    runner = graph.compile(entry="a", finish="a", store=store)
    first = await runner.run({})
    again = await runner.resume(first.run.graph_run_id, next(answers))
    assert again.run.status is RunStatus.INTERRUPTED
    assert again.interrupts is not None and len(again.interrupts) == 1
    assert again.run.revision > first.run.revision
    history = await runner.history(first.run.graph_run_id)
    assert [cp.phase for cp in history].count(StepPhase.PAUSED) == 2
    done = await runner.resume(first.run.graph_run_id, next(answers))
    assert done.run.status is RunStatus.COMPLETED
    assert done.state == {"answer": "yes"}


async def test_routed_failure_not_rerun_handler_after_resume(store: Any) -> None:
    """§8.147 routed failure not re-run; handler once."""
    calls = Calls()

    def fail(_: int) -> None:
        raise RuntimeError("broken")

    graph: flow.Graph[Cnt] = flow.Graph("g", state=Cnt)
    tag(graph, "v", calls)
    tag(graph, "a", calls, body=fail, on_error=flow.ErrorRoute("handler"))
    tag(graph, "b", calls, body=pauser())
    tag(graph, "handler", calls)
    tag(graph, "fin", calls)
    for source, target in (("v", "a"), ("v", "b"), ("b", "fin")):
        graph.add_edge(source, target)  # the handler is a sink: fin runs once
    runner = graph.compile(entry="v", finish="fin", store=store)
    paused = await runner.run(Cnt())
    assert calls.count["handler"] == 0
    result = await runner.resume(paused.run.graph_run_id, "go")
    assert result.run.status is RunStatus.COMPLETED
    assert calls.count == {"v": 1, "a": 1, "b": 2, "handler": 1, "fin": 1}
    history = await runner.history(paused.run.graph_run_id)
    routes = [r for cp in history for r in cp.routes if r.source == "a"]
    assert routes == [RouteRecord("a", ("handler",), False)]


# -- hand-built and halted checkpoints (§8.148-153) -----------------------------------------


def run_record(
    runner: flow.Runner[Any],
    run_id: str,
    revision: int,
    step: int,
    *,
    finish_reached: bool = False,
) -> RunRecord:
    moment = system_clock.now()
    return RunRecord(
        graph_run_id=run_id,
        graph_id=runner.graph_id,
        graph_version=runner.graph_version,
        status=RunStatus.RUNNING,
        step=step,
        revision=revision,
        created_at=moment,
        started_at=moment,
        updated_at=moment,
        finish_reached=finish_reached,
    )


def done(vertex: str, step: int) -> VertexRecord:
    return VertexRecord(
        vertex, str(uuid.uuid4()), step, VertexStatus.DONE, 1, completed_at=system_clock.now()
    )


def running(vertex: str, step: int) -> VertexRecord:
    return VertexRecord(
        vertex, str(uuid.uuid4()), step, VertexStatus.RUNNING, created_at=system_clock.now()
    )


def cnt(*vals: str) -> dict[str, Any]:
    return {"vals": list(vals), "n": len(vals)}


async def test_resume_hand_built_seed(store: Any) -> None:
    """§8.148 a hand-built seed (STEP_ROUTED, step 0, frontier [a]) runs a and fin once."""
    calls = Calls()
    runner = chain(["a", "fin"], store, calls)
    run_id = str(uuid.uuid4())
    seed = Checkpoint(run_record(runner, run_id, 0, 0), StepPhase.ROUTED, cnt(), frontier=["a"])
    await store.append([seed])
    result = await runner.resume(run_id, None)
    assert result.run.status is RunStatus.COMPLETED
    assert calls.count == {"a": 1, "fin": 1}
    assert result.state == Cnt(["a", "fin"], 2)
    assert [k.split("/")[2] for k in calls.keys["a"] + calls.keys["fin"]] == ["step=0", "step=1"]


async def test_resume_routed_boundary_continues_at_next_step(store: Any) -> None:
    """§8.148/Q3 (ours) a STEP_ROUTED boundary resumes at N+1."""
    calls = Calls()
    seen: list[Any] = []
    graph: flow.Graph[Cnt] = flow.Graph("g", state=Cnt)
    tag(graph, "a", calls)
    tag(graph, "fin", calls, body=pauser("fin?", seen))
    graph.add_edge("a", "fin")
    runner = graph.compile(entry="a", finish="fin", store=store)
    run_id = str(uuid.uuid4())
    seed = Checkpoint(run_record(runner, run_id, 0, 0), StepPhase.ROUTED, cnt(), frontier=["a"])
    boundary = Checkpoint(
        run_record(runner, run_id, 1, 0),
        StepPhase.ROUTED,
        cnt("a"),
        step_base=cnt(),
        vertices=[done("a", 0)],
        frontier=["fin"],
        routes=[RouteRecord("a", ("fin",), False)],
    )
    await store.append([seed, boundary])
    result = await runner.resume(run_id, "ignored")
    assert result.run.status is RunStatus.INTERRUPTED  # the payload did not reach fin
    assert seen == []
    assert result.run.step == 1
    assert calls.count == {"fin": 1}
    assert calls.keys["fin"] == [f"graph=g/run={run_id}/step=1/vertex=fin"]
    finished = await runner.resume(run_id, "now")
    assert finished.run.status is RunStatus.COMPLETED
    assert finished.run.step == 1
    assert finished.state == Cnt(["a", "fin"], 2)


async def test_crash_recovery_keeps_step_and_key(store: Any) -> None:
    """§8.148/Q3 (ours) crash recovery keeps step index and key."""
    calls = Calls()
    faulty = FaultyStore(store, fail_append=3)  # seed, step 0 boundary, [step 1 boundary]
    failing = chain(["a", "b", "fin"], faulty, calls)
    run_id = str(uuid.uuid4())
    with pytest.raises(flow.StoreError):
        await failing.run(Cnt(), run_id=run_id, checkpoint=flow.Granularity.PER_STEP)
    runner = chain(["a", "b", "fin"], store, calls)
    result = await runner.resume(run_id, None, checkpoint=flow.Granularity.PER_STEP)
    assert result.run.status is RunStatus.COMPLETED
    assert result.state == Cnt(["a", "b", "fin"], 3)
    assert result.run.step == 2
    assert calls.count == {"a": 1, "b": 2, "fin": 1}
    assert len(set(calls.keys["b"])) == 1
    assert calls.keys["b"][0].endswith("/step=1/vertex=b")


async def test_resume_max_steps_halt(store: Any) -> None:
    """§8.149 a MAX_STEPS halt resumes with a larger budget; same budget re-halts."""
    calls = Calls()
    runner = chain(["a", "b", "c", "fin"], store, calls)
    halted = await runner.run(Cnt(), max_steps=2)
    assert halted.halt is not None and halted.halt.kind is HaltKind.MAX_STEPS
    run_id = halted.run.graph_run_id
    again = await runner.resume(run_id, None, max_steps=2)
    assert again.halt is not None and again.halt.kind is HaltKind.MAX_STEPS
    assert again.run.revision == halted.run.revision + 1
    assert sum(calls.count.values()) == 2
    result = await runner.resume(run_id, None, max_steps=10)
    assert result.run.status is RunStatus.COMPLETED
    assert result.state == Cnt(["a", "b", "c", "fin"], 4)
    assert calls.count == {"a": 1, "b": 1, "c": 1, "fin": 1}


async def test_resume_condition_halt(store: Any) -> None:
    """§8.150 a CONDITION halt re-routes on resume without re-running entry."""
    calls = Calls()
    failures = [RuntimeError("flaky pick")]

    def pick(state: Cnt) -> str:
        if failures:
            raise failures.pop()
        return "fin"

    graph: flow.Graph[Cnt] = flow.Graph("g", state=Cnt)
    tag(graph, "entry", calls)
    tag(graph, "fin", calls)
    graph.add_route("entry", targets=["fin"], pick=pick)
    runner = graph.compile(entry="entry", finish="fin", store=store)
    halted = await runner.run(Cnt())
    assert halted.halt is not None and halted.halt.kind is HaltKind.CONDITION
    recorder = Recorder()
    result = await runner.resume(halted.run.graph_run_id, None, hooks=recorder.hooks)
    assert result.run.status is RunStatus.COMPLETED
    assert calls.count == {"entry": 1, "fin": 1}
    assert result.state == Cnt(["entry", "fin"], 2)
    assert [(e[0], e[1]) for e in recorder.of("on_edge")] == [("entry", "fin")]
    assert recorder.of("on_run_start") == []


async def test_resume_dead_end_halts_again(store: Any) -> None:
    """§8.150/§5.3 a DEAD_END resume re-halts without re-running anything."""
    calls = Calls()
    graph: flow.Graph[Cnt] = flow.Graph("g", state=Cnt)
    for vertex in ("a", "sink", "fin"):
        tag(graph, vertex, calls)
    graph.add_route("a", targets=["sink", "fin"], pick=lambda s: "sink")
    runner = graph.compile(entry="a", finish="fin", store=store)
    halted = await runner.run(Cnt())
    again = await runner.resume(halted.run.graph_run_id, None)
    assert again.halt is not None and again.halt.kind is HaltKind.DEAD_END
    assert again.run.revision == halted.run.revision + 1
    assert calls.count == {"a": 1, "sink": 1}


async def test_resume_hand_built_running_checkpoint(store: Any) -> None:
    """§8.151 hand-built STEP_RUNNING (a DONE, b RUNNING): only b re-runs."""
    calls = Calls()
    _, runner = fan(store, calls)
    run_id = str(uuid.uuid4())
    history = [
        Checkpoint(run_record(runner, run_id, 0, 0), StepPhase.ROUTED, cnt(), frontier=["v"]),
        Checkpoint(
            run_record(runner, run_id, 1, 0),
            StepPhase.ROUTED,
            cnt("v"),
            step_base=cnt(),
            vertices=[done("v", 0)],
            frontier=["a", "b"],
            routes=[RouteRecord("v", ("a", "b"), False)],
        ),
        Checkpoint(
            run_record(runner, run_id, 2, 1),
            StepPhase.RUNNING,
            cnt("v", "a"),
            step_base=cnt("v"),
            vertices=[done("a", 1), running("b", 1)],
        ),
    ]
    await store.append(history)
    result = await runner.resume(run_id, None)
    assert result.run.status is RunStatus.COMPLETED
    assert calls.count == {"b": 1, "fin": 1}
    assert calls.seen["b"] == [1]  # from the step base, not the accumulated state
    assert result.state == Cnt(["v", "a", "b", "fin"], 4)


async def test_resume_hand_built_running_with_errored_pause(store: Any) -> None:
    """§8.152 STEP_RUNNING with a DONE and b FAILED + ERRORED record: b re-runs once."""
    calls = Calls()
    _, runner = fan(store, calls)
    run_id = str(uuid.uuid4())
    failed = VertexRecord(
        "b",
        str(uuid.uuid4()),
        1,
        VertexStatus.FAILED,
        1,
        failed_at=system_clock.now(),
        error="boom",
    )
    history = [
        Checkpoint(run_record(runner, run_id, 0, 0), StepPhase.ROUTED, cnt(), frontier=["v"]),
        Checkpoint(
            run_record(runner, run_id, 1, 0),
            StepPhase.ROUTED,
            cnt("v"),
            step_base=cnt(),
            vertices=[done("v", 0)],
            frontier=["a", "b"],
        ),
        Checkpoint(
            run_record(runner, run_id, 2, 1),
            StepPhase.RUNNING,
            cnt("v", "a"),
            step_base=cnt("v"),
            vertices=[done("a", 1), failed],
            interrupts=[InterruptRecord("b", InterruptKind.ERRORED, None, "boom")],
        ),
    ]
    await store.append(history)
    result = await runner.resume(run_id, None)
    assert result.run.status is RunStatus.COMPLETED
    assert calls.count == {"b": 1, "fin": 1}
    assert result.state == Cnt(["v", "a", "b", "fin"], 4)


async def test_finish_ran_latch_survives_resume(store: Any) -> None:
    """§8.153 finish ran before a pausing gate: resume completes."""
    calls = Calls()
    graph: flow.Graph[Cnt] = flow.Graph("g", state=Cnt)
    tag(graph, "fin", calls)
    tag(graph, "gate", calls, body=pauser("open?"))
    graph.add_edge("fin", "gate")
    runner = graph.compile(entry="fin", finish="fin", store=store)
    paused = await runner.run(Cnt())
    history = await runner.history(paused.run.graph_run_id)
    assert any(
        v.vertex == "fin" and v.status is VertexStatus.DONE for cp in history for v in cp.vertices
    )
    result = await runner.resume(paused.run.graph_run_id, "open")
    assert result.run.status is RunStatus.COMPLETED
    assert calls.count == {"fin": 1, "gate": 2}


async def test_crash_during_resumed_step(store: Any) -> None:
    """§8.154 crash mid resumed step, second resume completes, no double work.

    (ours) A step's vertex checkpoints and its boundary are one commit, so a crash during
    the resumed step leaves the paused checkpoint as the latest: nothing of the step is
    half-written, the second resume re-runs exactly the paused vertices, and the DONE
    sibling never runs again. (Resuming from a mid-step STEP_RUNNING checkpoint, as older
    or foreign histories may hold, is covered by §8.151-152.)"""
    calls = Calls()

    def build(target: Any) -> flow.Runner[Cnt]:
        graph: flow.Graph[Cnt] = flow.Graph("g", state=Cnt)
        tag(graph, "v", calls)
        tag(graph, "a", calls)
        tag(graph, "b", calls, body=pauser())
        tag(graph, "c", calls, body=pauser())
        tag(graph, "fin", calls)
        for sibling in ("a", "b", "c"):
            graph.add_edge("v", sibling)
            graph.add_edge(sibling, "fin")
        return graph.compile(entry="v", finish="fin", store=target)

    runner = build(store)
    paused = await runner.run(Cnt())
    run_id = paused.run.graph_run_id
    before = await runner.latest(run_id)
    crashing = build(FaultyStore(store, fail_append=1))
    with pytest.raises(flow.StoreError):
        await crashing.resume(run_id, "go")
    latest = await runner.latest(run_id)
    assert latest.revision == before.revision
    assert latest.phase is StepPhase.PAUSED
    result = await runner.resume(run_id, "go")
    assert result.run.status is RunStatus.COMPLETED
    assert calls.count == {"v": 1, "a": 1, "b": 3, "c": 3, "fin": 1}
    assert result.state.vals == ["v", "a", "b", "c", "fin"]
    history = await runner.history(run_id)
    assert [cp.revision for cp in history] == list(range(len(history)))


async def test_graph_version_matrix(store: Any) -> None:
    """§8.155 an identical rebuild resumes; an added vertex or another version refuses."""

    def build(extra: bool = False, version: str = "0") -> flow.Runner[Cnt]:
        graph: flow.Graph[Cnt] = flow.Graph("g", state=Cnt)
        tag(graph, "a", body=pauser())
        tag(graph, "fin")
        graph.add_edge("a", "fin")
        if extra:
            tag(graph, "more")
            graph.add_edge("fin", "more")
        return graph.compile(entry="a", finish="fin", store=store, version=version)

    paused = await build().run(Cnt())
    run_id = paused.run.graph_run_id
    for other in (build(extra=True), build(version="42")):
        with pytest.raises(flow.GraphVersionMismatchError) as caught:
            await other.resume(run_id, "go")
        assert caught.value.actual == paused.run.graph_version
        assert caught.value.expected == other.graph_version != paused.run.graph_version
    result = await build().resume(run_id, "go")
    assert result.run.status is RunStatus.COMPLETED


async def test_revision_invariant(store: Any) -> None:
    """§8.156 result revision == latest revision == history length - 1."""
    completed = await chain(["a", "fin"], store).run(Cnt())
    _, runner = fan(store, a=pauser())
    paused = await runner.run(Cnt())
    resumed = await runner.resume(paused.run.graph_run_id, "go")
    for result in (completed, paused, resumed):
        run_id = result.run.graph_run_id
        history = await store.history(run_id)
        latest = await store.latest(run_id)
        if result is paused:
            history = history[: paused.run.revision + 1]
            assert history[-1].phase is StepPhase.PAUSED
        else:
            assert result.run.revision == latest.revision
        assert result.run.revision == len(history) - 1 == history[-1].revision
    assert resumed.run.revision > paused.run.revision


async def test_resume_rejects_terminal_runs(store: Any) -> None:
    """§8.138c/§4.7 resuming a completed run -> ResumeTerminalError, nothing runs or is written."""
    calls = Calls()
    runner = chain(["a"], store, calls)
    result = await runner.run(Cnt())
    with pytest.raises(flow.ResumeTerminalError) as caught:
        await runner.resume(result.run.graph_run_id, None)
    assert caught.value.status is RunStatus.COMPLETED
    assert calls.count == {"a": 1}
    assert (await runner.latest(result.run.graph_run_id)).revision == result.run.revision


async def test_concurrent_resumes(store: Any) -> None:
    """§8.141/§4.6 8 concurrent resumes: one result, 7 RevisionConflictError."""
    started = 0
    everyone = asyncio.Event()

    async def task(state: dict[str, Any]) -> dict[str, Any]:
        nonlocal started
        answer = flow.interrupt("who?")
        started += 1
        if started == 8:
            everyone.set()
        await asyncio.wait_for(everyone.wait(), 60)
        return {"winner": answer}

    graph: flow.Graph[dict[str, Any]] = flow.Graph("g")
    graph.add_vertex("a", task)
    graph.add_vertex("fin", lambda s: {"done": True})
    graph.add_edge("a", "fin")
    runner = graph.compile(entry="a", finish="fin", store=store)
    paused = await runner.run({})
    run_id = paused.run.graph_run_id
    outcomes = await asyncio.gather(
        *(runner.resume(run_id, f"r{i}") for i in range(8)), return_exceptions=True
    )
    results = [o for o in outcomes if isinstance(o, flow.Result)]
    conflicts = [o for o in outcomes if isinstance(o, flow.RevisionConflictError)]
    assert len(results) == 1 and len(conflicts) == 7
    assert all(c.run_id == run_id for c in conflicts)
    assert results[0].run.status is RunStatus.COMPLETED
    latest = await runner.latest(run_id)
    assert latest.state == results[0].state
    history = await runner.history(run_id)
    assert [cp.revision for cp in history] == list(range(len(history)))
