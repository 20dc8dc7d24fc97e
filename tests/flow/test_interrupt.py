"""Interrupts: flow-spec §4.1-4.2, §4.5 and checklist §8.73, 79-83, 88, 131-137."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from dataclasses import asdict, dataclass
from typing import Any

import pytest

from flowledger import flow
from flowledger.flow import InterruptKind, RunStatus, StepPhase, VertexStatus

from .conftest import Calls, Cnt, Recorder, fan, pauser, tag


def single(body: Any, store: Any, calls: Calls | None = None) -> flow.Runner[Cnt]:
    graph: flow.Graph[Cnt] = flow.Graph("g", state=Cnt)
    tag(graph, "a", calls, body=body)
    return graph.compile(entry="a", finish="a", store=store)


async def test_interrupt_pauses_with_info(store: Any) -> None:
    """§8.73 interrupt(info): one AWAITING pause with the live info, STEP_PAUSED."""
    info = {"question": "need human approval", "options": ["yes", "no"]}
    recorder = Recorder()
    runner = single(lambda n: flow.interrupt(info), store)
    result = await runner.run(Cnt(), hooks=recorder.hooks)
    assert result.run.status is RunStatus.INTERRUPTED
    assert result.halt is None
    assert result.interrupts is not None and len(result.interrupts) == 1
    (interruption,) = result.interrupts
    assert interruption.kind is InterruptKind.AWAITING
    assert interruption.vertex == "a"
    assert interruption.info is info  # the live value
    assert interruption.cause is None
    assert result.state == Cnt()
    latest = await runner.latest(result.run.graph_run_id)
    assert latest.phase is StepPhase.PAUSED
    assert latest.frontier == ["a"]
    assert len(latest.interrupts) == 1
    assert latest.interrupts[0].kind is InterruptKind.AWAITING
    assert latest.interrupts[0].info == info
    assert latest.interrupts[0].stateful is False
    assert [(v.vertex, v.status) for v in latest.vertices] == [("a", VertexStatus.INTERRUPTED)]
    assert latest.vertices[0].interrupted_at is not None
    assert latest.vertices[0].completed_at is None and latest.vertices[0].failed_at is None
    assert recorder.of("on_interrupt") == [(interruption,)]
    assert recorder.of("on_run_finish") == [] and recorder.of("on_step") == []


async def test_interrupt_in_a_thread_task(store: Any) -> None:
    """§8.73 a plain-function task (worker thread) can interrupt and read the payload."""
    seen: list[Any] = []

    def task(state: dict[str, Any]) -> dict[str, Any]:
        seen.append(flow.interrupt("sync?"))
        return {"answer": seen[-1]}

    graph: flow.Graph[dict[str, Any]] = flow.Graph("g")
    graph.add_vertex("a", task)
    runner = graph.compile(entry="a", finish="a", store=store)
    paused = await runner.run({})
    assert paused.interrupts is not None and paused.interrupts[0].info == "sync?"
    done = await runner.resume(paused.run.graph_run_id, "yes")
    assert done.state == {"answer": "yes"}
    assert seen == ["yes"]


async def test_interrupt_not_swallowed_by_except_exception(store: Any) -> None:
    """§8.131/§4.1 the interrupt signal passes through a task's ``except Exception``."""

    def body(_: int) -> None:
        with contextlib.suppress(Exception):  # a careless task
            flow.interrupt("approve?")

    result = await single(body, store).run(Cnt())
    assert result.run.status is RunStatus.INTERRUPTED
    assert result.interrupts is not None
    assert result.interrupts[0].kind is InterruptKind.AWAITING


async def test_two_siblings_interrupt(store: Any) -> None:
    """§8.79 two paused siblings: two AWAITING interrupts in id order, frontier [a, b]."""
    recorder = Recorder()
    _, runner = fan(store, b=pauser("b?"), a=pauser("a?"))
    result = await runner.run(Cnt(), hooks=recorder.hooks)
    assert result.halt is None
    assert result.interrupts is not None
    assert [(i.vertex, i.kind, i.info) for i in result.interrupts] == [
        ("a", InterruptKind.AWAITING, "a?"),
        ("b", InterruptKind.AWAITING, "b?"),
    ]
    latest = await runner.latest(result.run.graph_run_id)
    assert latest.phase is StepPhase.PAUSED
    assert latest.frontier == ["a", "b"]
    assert [i.vertex for i in latest.interrupts] == ["a", "b"]
    assert all(i.info for i in latest.interrupts)
    assert [args[0].vertex for args in recorder.of("on_interrupt")] == ["a", "b"]
    assert result.state == Cnt(["v"], 1)


async def test_routed_failure_beside_a_pause(store: Any) -> None:
    """§8.80 a routed failure beside a pause: step pauses, handler waits."""
    calls = Calls()
    recorder = Recorder()

    def fail(_: int) -> None:
        raise RuntimeError("broken")

    def record(state: Cnt, error: BaseException) -> None:
        state.vals.append(f"recorded:{type(error).__name__}")

    graph: flow.Graph[Cnt] = flow.Graph("g", state=Cnt)
    tag(graph, "v", calls)
    tag(graph, "a", calls, body=fail, on_error=flow.ErrorRoute("handler", record))
    tag(graph, "b", calls, body=pauser("b?"))
    tag(graph, "handler", calls)
    tag(graph, "fin", calls)
    for source, target in (("v", "a"), ("v", "b"), ("a", "fin"), ("b", "fin")):
        graph.add_edge(source, target)
    graph.add_edge("handler", "fin")
    runner = graph.compile(entry="v", finish="fin", store=store)
    result = await runner.run(Cnt(), hooks=recorder.hooks)
    assert result.run.status is RunStatus.INTERRUPTED
    assert result.interrupts is not None
    assert [(i.vertex, i.kind) for i in result.interrupts] == [("b", InterruptKind.AWAITING)]
    latest = await runner.latest(result.run.graph_run_id)
    assert latest.frontier == ["b"]
    assert [i.vertex for i in latest.interrupts] == ["b"]
    statuses = {v.vertex: v.status for v in latest.vertices}
    assert statuses == {"a": VertexStatus.FAILED, "b": VertexStatus.INTERRUPTED}
    assert calls.count["handler"] == 0
    assert result.state.vals == ["v", "recorded:VertexError"]
    assert len(recorder.of("on_interrupt")) == 1


async def test_slow_sibling_completes_while_other_pauses(store: Any) -> None:
    """§8.81 a slow sibling's reduction lands (record DONE) while the other pauses."""

    def slow(_: int) -> None:
        import time

        time.sleep(0.02)  # sync work inside an async task: the whole step waits

    _, runner = fan(store, a=pauser(), b=slow)
    result = await runner.run(Cnt())
    assert result.state == Cnt(["v", "b"], 2)
    latest = await runner.latest(result.run.graph_run_id)
    assert latest.phase is StepPhase.PAUSED
    statuses = {v.vertex: v.status for v in latest.vertices}
    assert statuses == {"a": VertexStatus.INTERRUPTED, "b": VertexStatus.DONE}
    done = next(v for v in latest.vertices if v.vertex == "b")
    assert done.completed_at is not None


@dataclass
class Progress:
    asked: list[str]
    step: int


async def test_continuation_persisted(store: Any) -> None:
    """§8.82 a continuation is stored as JSON with the info in the paused record."""
    kept = Progress(["q1"], 2)
    runner = single(lambda n: flow.interrupt("q2?", continuation=kept), store)
    result = await runner.run(Cnt())
    latest = await runner.latest(result.run.graph_run_id)
    (record,) = latest.interrupts
    assert record.stateful is True
    assert record.info == "q2?"
    assert record.continuation == asdict(kept)
    assert Progress(**record.continuation) == kept


@pytest.mark.parametrize("where", ["info", "continuation"])
async def test_unencodable_interrupt_data_is_an_engine_error(store: Any, where: str) -> None:
    """§8.83 unencodable info/continuation: codec error."""
    bad = {"event": asyncio.Event()}

    def body(_: int) -> None:
        if where == "info":
            flow.interrupt(bad)
        flow.interrupt("ok", continuation=bad)

    runner = single(body, store)
    run_id = str(uuid.uuid4())
    with pytest.raises(flow.CodecError) as caught:
        await runner.run(Cnt(), run_id=run_id)
    assert caught.value.op == "encode"
    assert "event" in caught.value.path
    history = await runner.history(run_id)
    assert all(cp.phase is not StepPhase.PAUSED and not cp.interrupts for cp in history)


async def test_per_step_pause(store: Any) -> None:
    """§8.88 PER_STEP: a pause still writes STEP_PAUSED with the AWAITING record."""
    _, runner = fan(store, a=pauser({"why": "check"}))
    result = await runner.run(Cnt(), checkpoint=flow.Granularity.PER_STEP)
    assert result.interrupts is not None and len(result.interrupts) == 1
    assert result.interrupts[0].kind is InterruptKind.AWAITING
    history = await runner.history(result.run.graph_run_id)
    assert not any(cp.phase is StepPhase.RUNNING for cp in history)
    assert history[-1].phase is StepPhase.PAUSED
    assert history[-1].interrupts[0].info == {"why": "check"}
    assert history[-1].state == {"vals": ["v", "b"], "n": 2}


async def test_pause_record_survives_in_running_checkpoints(store: Any) -> None:
    """§8.82/§4.2 a pause is listed in every later STEP_RUNNING checkpoint of its step."""
    _, runner = fan(store, a=pauser("a?"))
    result = await runner.run(Cnt())
    history = await runner.history(result.run.graph_run_id)
    step1 = [cp for cp in history if cp.run.step == 1]
    assert [cp.phase for cp in step1] == [StepPhase.RUNNING, StepPhase.RUNNING, StepPhase.PAUSED]
    assert all([i.vertex for i in cp.interrupts] == ["a"] for cp in step1)


# -- the task-side API (§8.131-137) ---------------------------------------------------------


async def test_interrupt_signal_fields(store: Any) -> None:
    """§8.131 the signal carries info (also None) and a continuation only when given."""
    caught: list[flow.InterruptSignal] = []

    def body(n: int) -> None:
        for info, kwargs in (
            ("plain", {}),
            (None, {}),
            ("with", {"continuation": {"k": 1}}),
            ("none", {"continuation": None}),
        ):
            try:
                flow.interrupt(info, **kwargs)
            except flow.InterruptSignal as signal:
                caught.append(signal)
        flow.interrupt("final")

    await single(body, store).run(Cnt())
    got = [(s.info, s.stateful, s.continuation) for s in caught]
    assert got == [
        ("plain", False, None),
        (None, False, None),
        ("with", True, {"k": 1}),
        ("none", True, None),
    ]
    assert all(isinstance(s, BaseException) and not isinstance(s, Exception) for s in caught)
    assert all(str(s) == "flow: vertex interrupt" for s in caught)


def test_task_api_outside_a_task() -> None:
    """§8.131/135 interrupt, continuation and run_info refuse to work outside a task."""
    for call in (lambda: flow.interrupt("x"), flow.continuation, flow.run_info):
        with pytest.raises(RuntimeError, match="inside a running task"):
            call()


async def test_payload_is_the_live_value(store: Any) -> None:
    """§8.132-133 the resume payload reaches interrupt() as the same live object."""
    seen: list[Any] = []
    runner = single(pauser("q", seen), store)
    paused = await runner.run(Cnt())
    payload = {"approved": True, "by": object()}
    result = await runner.resume(paused.run.graph_run_id, payload)
    assert result.run.status is RunStatus.COMPLETED
    assert len(seen) == 1 and seen[0] is payload


async def test_none_payload_pauses_again(store: Any) -> None:
    """§8.132 a None payload is no payload: interrupt() pauses again."""
    calls = Calls()
    runner = single(pauser("q"), store, calls)
    paused = await runner.run(Cnt())
    again = await runner.resume(paused.run.graph_run_id, None)
    assert again.run.status is RunStatus.INTERRUPTED
    assert again.interrupts is not None and again.interrupts[0].info == "q"
    assert calls.count["a"] == 2
    assert again.run.revision > paused.run.revision


async def test_payload_answers_only_the_first_interrupt(store: Any) -> None:
    """§8.132/§4.5 one payload per execution: a second interrupt() pauses."""
    graph: flow.Graph[dict[str, Any]] = flow.Graph("g")

    def task(state: dict[str, Any]) -> dict[str, Any]:
        first = flow.interrupt("first?")
        second = flow.interrupt("second?", continuation={"first": first})
        return {"answers": [first, second]}

    graph.add_vertex("a", task)
    runner = graph.compile(entry="a", finish="a", store=store)
    run_id = (await runner.run({})).run.graph_run_id
    mid = await runner.resume(run_id, "one")
    assert mid.interrupts is not None and mid.interrupts[0].info == "second?"


async def test_payload_not_seen_by_later_steps(store: Any) -> None:
    """§8.132/§4.5 the payload reaches only the re-run vertices of the resumed step."""
    seen: list[Any] = []
    graph: flow.Graph[Cnt] = flow.Graph("g", state=Cnt)
    tag(graph, "a", body=pauser("a?", seen))
    tag(graph, "b", body=pauser("b?", seen))
    graph.add_edge("a", "b")
    runner = graph.compile(entry="a", finish="b", store=store)
    run_id = (await runner.run(Cnt())).run.graph_run_id
    result = await runner.resume(run_id, "for-a")
    assert seen == ["for-a"]
    assert result.interrupts is not None and result.interrupts[0].vertex == "b"
    done = await runner.resume(run_id, "for-b")
    assert done.run.status is RunStatus.COMPLETED
    assert seen == ["for-a", "for-b"]


async def test_continuation_restored(store: Any) -> None:
    """§8.134/145 continuation() returns the stored JSON, else the default."""
    graph: flow.Graph[dict[str, Any]] = flow.Graph("g")

    def survey(state: dict[str, Any]) -> dict[str, Any]:
        answers = flow.continuation(default=[])
        while len(answers) < 3:
            answers.append(flow.interrupt(f"question {len(answers)}", continuation=answers))
        return {"answers": answers}

    graph.add_vertex("survey", survey)
    runner = graph.compile(entry="survey", finish="survey", store=store)
    result = await runner.run({})
    run_id = result.run.graph_run_id
    questions = []
    for answer in ("red", "blue", "green"):
        assert result.interrupts is not None
        questions.append(result.interrupts[0].info)
        result = await runner.resume(run_id, answer)
    assert questions == ["question 0", "question 1", "question 2"]
    assert result.run.status is RunStatus.COMPLETED
    assert result.state == {"answers": ["red", "blue", "green"]}


async def test_continuation_of_a_dataclass_is_json(store: Any) -> None:
    """§8.134 a continuation comes back as JSON data (a dataclass becomes a dict)."""
    seen: list[Any] = []

    def body(_: int) -> None:
        seen.append(flow.continuation("absent"))
        flow.interrupt("q", continuation=Progress(["x"], 1))

    runner = single(body, store)
    run_id = (await runner.run(Cnt())).run.graph_run_id
    await runner.resume(run_id, None)
    assert seen == ["absent", {"asked": ["x"], "step": 1}]


async def test_none_continuation_is_present(store: Any) -> None:
    """§8.134 / §10 Q11 a stored None continuation is restored as present (None)."""
    seen: list[Any] = []

    def body(_: int) -> None:
        seen.append(flow.continuation("absent"))
        flow.interrupt("q", continuation=None)

    runner = single(body, store)
    run_id = (await runner.run(Cnt())).run.graph_run_id
    assert (await runner.latest(run_id)).interrupts[0].stateful is True
    await runner.resume(run_id, None)
    assert seen == ["absent", None]


async def test_run_info(store: Any) -> None:
    """§8.135-136 run_info() names graph, run, vertex, execution id and step."""
    infos: list[flow.RunInfo] = []
    recorder = Recorder()
    graph: flow.Graph[Cnt] = flow.Graph("info-graph", state=Cnt)
    tag(graph, "a", body=lambda n: infos.append(flow.run_info()))
    tag(graph, "b", body=lambda n: infos.append(flow.run_info()))
    graph.add_edge("a", "b")
    runner = graph.compile(entry="a", finish="b", store=store)
    result = await runner.run(Cnt(), hooks=recorder.hooks)
    run_id = result.run.graph_run_id
    assert [(i.graph_id, i.graph_run_id, i.vertex, i.step) for i in infos] == [
        ("info-graph", run_id, "a", 0),
        ("info-graph", run_id, "b", 1),
    ]
    starts = [args[0].vertex_run_id for args in recorder.of("on_vertex_start")]
    assert [i.vertex_run_id for i in infos] == starts
    assert len(set(starts)) == 2
    assert infos[1].idempotency_key == f"graph=info-graph/run={run_id}/step=1/vertex=b"


async def test_rerun_gets_new_execution_id_same_key(store: Any) -> None:
    """§8.193/§1.5 a resumed vertex gets a fresh execution id but the same idempotency key."""
    infos: list[flow.RunInfo] = []

    def body(_: int) -> None:
        infos.append(flow.run_info())
        flow.interrupt("q")

    runner = single(body, store)
    run_id = (await runner.run(Cnt())).run.graph_run_id
    await runner.resume(run_id, "go")
    assert len(infos) == 2
    assert infos[0].vertex_run_id != infos[1].vertex_run_id
    assert infos[0].idempotency_key == infos[1].idempotency_key


async def test_result_records_expose_fields(store: Any) -> None:
    """§8.137 Interruption and Halt expose kind, info, step and the wrapped cause."""
    runner = single(lambda n: flow.interrupt("why"), store)
    paused = await runner.run(Cnt())
    assert paused.interrupts is not None
    (i,) = paused.interrupts
    assert (i.graph_run_id, i.vertex, i.kind, i.info, i.cause) == (
        paused.run.graph_run_id,
        "a",
        InterruptKind.AWAITING,
        "why",
        None,
    )
    graph: flow.Graph[Cnt] = flow.Graph("g", state=Cnt)
    tag(graph, "a")
    tag(graph, "b")
    graph.add_edge("a", "b")
    graph.add_edge("b", "a")
    halted = await graph.compile(entry="a", finish="b", store=store).run(Cnt(), max_steps=1)
    assert halted.halt is not None
    assert halted.halt.graph_run_id == halted.run.graph_run_id
    assert halted.halt.kind is flow.HaltKind.MAX_STEPS
    assert halted.halt.step == 1
    assert isinstance(halted.halt.cause, flow.MaxStepsExceededError)
