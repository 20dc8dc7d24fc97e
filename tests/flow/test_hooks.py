"""Hooks: flow-spec §3.8 (order, durability, isolation) and checklist §8.117-121."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from flowledger import flow
from flowledger.flow import RunStatus, StepPhase, VertexStatus
from flowledger.flow.hooks import fire

from .conftest import EVENTS, Cnt, Recorder, chain, fan, pauser

ARGS: dict[str, tuple[Any, ...]] = {event: (event, object(), 3) for event in EVENTS}


# -- the dispatcher (§8.117-121) ------------------------------------------------------------


async def test_each_event_once_with_its_arguments() -> None:
    """§8.117 each of the nine events calls its callback once with exactly its arguments."""
    recorder = Recorder()
    for event in EVENTS:
        await fire([recorder.hooks], event, *ARGS[event])
    assert recorder.events == [(event, ARGS[event]) for event in EVENTS]
    assert all(recorder.events[i][1][1] is ARGS[e][1] for i, e in enumerate(EVENTS))


async def test_empty_sets_fire_nothing() -> None:
    """§8.118 a set of None callbacks, and no sets at all, fire every event without error."""
    for event in EVENTS:
        await fire([flow.Hooks()], event, *ARGS[event])
        await fire([], event, *ARGS[event])


async def test_sets_fire_in_registration_order() -> None:
    """§8.119 several sets fire in registration order."""
    order: list[int] = []
    sets = [flow.Hooks(on_step=lambda *a, i=i: order.append(i)) for i in (1, 2, 3)]
    await fire(sets, "on_step", "run", 1)
    assert order == [1, 2, 3]


@pytest.mark.parametrize("event", EVENTS)
async def test_raising_callback_is_contained(event: str) -> None:
    """§8.120-121 a raising callback is swallowed; other sets still fire."""
    before, after = Recorder(), Recorder()

    def boom(*args: Any) -> None:
        raise RuntimeError("hook bug")

    async def async_boom(*args: Any) -> None:
        await asyncio.sleep(0)
        raise ValueError("async hook bug")

    sets = [
        before.hooks,
        flow.Hooks(**{event: boom}),
        flow.Hooks(**{event: async_boom}),
        after.hooks,
    ]
    await fire(sets, event, *ARGS[event])
    assert before.events == after.events == [(event, ARGS[event])]


async def test_async_callbacks_are_awaited() -> None:
    """§8.121 coroutine callbacks are awaited before the next set fires."""
    order: list[str] = []

    async def slow(*args: Any) -> None:
        await asyncio.sleep(0.001)
        order.append("slow")

    await fire(
        [flow.Hooks(on_halt=slow), flow.Hooks(on_halt=lambda h: order.append("next"))],
        "on_halt",
        "h",
    )
    assert order == ["slow", "next"]


# -- order within runs (§3.8) ---------------------------------------------------------------


def compact(recorder: Recorder) -> list[tuple[Any, ...]]:
    """Events as comparable tuples: vertex ids, revisions, edge pairs, activated counts."""
    out: list[tuple[Any, ...]] = []
    for name, args in recorder.events:
        if name in ("on_vertex_start", "on_vertex_finish"):
            out.append((name, args[0].vertex))
        elif name == "on_checkpoint":
            out.append((name, args[1]))
        elif name == "on_edge":
            out.append((name, args[0], args[1]))
        elif name == "on_step":
            out.append((name, args[1]))
        elif name == "on_interrupt":
            out.append((name, args[0].vertex))
        else:
            out.append((name,))
    return out


async def test_order_per_vertex(store: Any) -> None:
    """§8.42/§3.8 PER_VERTEX hook order, event by event."""
    recorder = Recorder()
    _, runner = fan(store)
    await runner.run(Cnt(), hooks=recorder.hooks)
    cp, vs, vf = "on_checkpoint", "on_vertex_start", "on_vertex_finish"
    assert compact(recorder) == [
        (cp, 0),
        ("on_run_start",),
        (vs, "v"),
        (cp, 1),
        (vf, "v"),
        (cp, 2),
        ("on_edge", "v", "a"),
        ("on_edge", "v", "b"),
        ("on_step", 1),
        (vs, "a"),
        (vs, "b"),
        (cp, 3),
        (vf, "a"),
        (cp, 4),
        (vf, "b"),
        (cp, 5),
        ("on_edge", "a", "fin"),
        ("on_edge", "b", "fin"),
        ("on_step", 2),
        (vs, "fin"),
        (cp, 6),
        (vf, "fin"),
        (cp, 7),
        ("on_step", 1),
        ("on_run_finish",),
    ]


async def test_order_per_step(store: Any) -> None:
    """§8.87/§3.8 PER_STEP: the same vertex events, one checkpoint per boundary."""
    recorder = Recorder()
    _, runner = fan(store)
    await runner.run(Cnt(), hooks=recorder.hooks, checkpoint=flow.Granularity.PER_STEP)
    cp, vs, vf = "on_checkpoint", "on_vertex_start", "on_vertex_finish"
    assert compact(recorder) == [
        (cp, 0),
        ("on_run_start",),
        (vs, "v"),
        (vf, "v"),
        (cp, 1),
        ("on_edge", "v", "a"),
        ("on_edge", "v", "b"),
        ("on_step", 1),
        (vs, "a"),
        (vs, "b"),
        (vf, "a"),
        (vf, "b"),
        (cp, 2),
        ("on_edge", "a", "fin"),
        ("on_edge", "b", "fin"),
        ("on_step", 2),
        (vs, "fin"),
        (vf, "fin"),
        (cp, 3),
        ("on_step", 1),
        ("on_run_finish",),
    ]


async def test_order_on_pause(store: Any) -> None:
    """§8.73/§3.8 a pause: vertex events, then the STEP_PAUSED checkpoint, nothing else."""
    recorder = Recorder()
    _, runner = fan(store, a=pauser())
    await runner.run(Cnt(), hooks=recorder.hooks)
    events = compact(recorder)
    step1 = events[events.index(("on_vertex_start", "a")) :]
    assert step1 == [
        ("on_vertex_start", "a"),
        ("on_vertex_start", "b"),
        ("on_checkpoint", 3),
        ("on_vertex_finish", "a"),
        ("on_interrupt", "a"),
        ("on_checkpoint", 4),
        ("on_vertex_finish", "b"),
        ("on_checkpoint", 5),
    ]


async def test_order_on_halt(store: Any) -> None:
    """§8.48/§3.8 a halt: the STEP_HALTED checkpoint, then on_halt; no step, no run finish."""
    recorder = Recorder()
    runner = chain(["a", "b", "fin"], store)
    await runner.run(Cnt(), hooks=recorder.hooks, max_steps=1)
    assert compact(recorder)[-3:] == [("on_step", 1), ("on_checkpoint", 3), ("on_halt",)]
    assert recorder.of("on_run_finish") == []


async def test_resume_fires_no_run_start(store: Any) -> None:
    """§8.141/§3.8 resume fires no on_run_start; its vertex and checkpoint hooks do."""
    _, runner = fan(store, a=pauser())
    paused = await runner.run(Cnt())
    recorder = Recorder()
    await runner.resume(paused.run.graph_run_id, "go", hooks=recorder.hooks)
    names = recorder.names()
    assert "on_run_start" not in names
    assert [a[0].vertex for a in recorder.of("on_vertex_start")] == ["a", "fin"]
    assert names[-1] == "on_run_finish"
    activated = [a[1] for a in recorder.of("on_step")]
    assert activated == [2, 1]  # the resumed step counts the carried b too


# -- durability, sequencing and isolation ---------------------------------------------------


class DurabilityProbe:
    """Async hooks that check, inside each callback, that the event is already durable."""

    def __init__(self, store: Any, run_id: str) -> None:
        self.store = store
        self.run_id = run_id
        self.failures: list[str] = []
        self.checked = 0
        self.active = 0

    async def _latest(self) -> flow.Checkpoint:
        self.active += 1
        if self.active > 1:
            self.failures.append("two hook calls overlapped")
        await asyncio.sleep(0)
        try:
            latest: flow.Checkpoint = await self.store.latest(self.run_id)
        finally:
            self.active -= 1
        self.checked += 1
        return latest

    def expect(self, condition: bool, what: str) -> None:
        if not condition:
            self.failures.append(what)

    async def run_start(self, run: flow.RunRecord) -> None:
        latest = await self._latest()
        self.expect(latest.revision == 0, f"run start: latest is {latest.revision}")
        self.expect(run.status is RunStatus.RUNNING, "run start: not RUNNING")

    async def checkpoint(self, run_id: str, revision: int, step: int) -> None:
        latest = await self._latest()
        self.expect(latest.revision >= revision, f"checkpoint {revision} not durable")
        (cp,) = await self.store.history(run_id, after=revision - 1, limit=1)
        self.expect(cp.run.step == step, f"checkpoint {revision}: step {step}")

    async def vertex_finish(self, record: flow.VertexRecord) -> None:
        latest = await self._latest()
        stored = [v for v in latest.vertices if v.vertex_run_id == record.vertex_run_id]
        self.expect(
            bool(stored) and stored[0].status is record.status is not VertexStatus.RUNNING,
            f"finish of {record.vertex} not durable",
        )

    async def interrupt(self, interruption: flow.Interruption) -> None:
        latest = await self._latest()
        vertices = [i.vertex for i in latest.interrupts]
        self.expect(interruption.vertex in vertices, f"interrupt of {interruption.vertex}")

    async def after(self, *args: Any) -> None:
        run = next(a for a in args if isinstance(a, flow.RunRecord))
        latest = await self._latest()
        self.expect(latest.revision >= run.revision, f"{run.revision} not durable")

    async def halt(self, halt: flow.Halt) -> None:
        latest = await self._latest()
        self.expect(latest.phase is StepPhase.HALTED, "halt not durable")

    @property
    def hooks(self) -> flow.Hooks:
        return flow.Hooks(
            on_run_start=self.run_start,
            on_run_finish=self.after,
            on_edge=self.after,
            on_step=self.after,
            on_checkpoint=self.checkpoint,
            on_vertex_finish=self.vertex_finish,
            on_interrupt=self.interrupt,
            on_halt=self.halt,
        )


@pytest.mark.parametrize("mode", list(flow.Granularity))
async def test_hooks_fire_after_durability(store: Any, mode: flow.Granularity) -> None:
    """§8.42/§3.8 (ours) hooks fire after their checkpoint is durable, one at a time."""
    _, runner = fan(store, a=pauser())
    run_id = "5f0c3c1e-6f1a-4c36-9a0e-0d6a2d1c7b11"
    probe = DurabilityProbe(store, run_id)
    paused = await runner.run(Cnt(), run_id=run_id, hooks=probe.hooks, checkpoint=mode)
    await runner.resume(run_id, "go", hooks=probe.hooks, checkpoint=mode)
    halting = chain(["a", "b"], store)
    halt_id = "0b7e9d1c-1f6b-4e4a-8a40-2f3c5d7e9a10"
    halt_probe = DurabilityProbe(store, halt_id)
    await halting.run(Cnt(), run_id=halt_id, hooks=halt_probe.hooks, max_steps=1)
    assert paused.interrupts is not None
    assert probe.failures == [] and halt_probe.failures == []
    assert probe.checked > 10 and halt_probe.checked >= 4


async def test_hooks_get_copies(store: Any) -> None:
    """§8.117/§3.8 mutating what a hook receives never changes the run or its history."""

    def vandal(record: flow.VertexRecord) -> None:
        record.status = VertexStatus.FAILED
        record.error = "vandalised"

    def run_vandal(run: flow.RunRecord, *rest: Any) -> None:
        run.step = 999
        run.status = RunStatus.CANCELLED

    hooks = flow.Hooks(
        on_vertex_start=vandal,
        on_vertex_finish=vandal,
        on_run_start=run_vandal,
        on_step=run_vandal,
    )
    runner = chain(["a", "b"], store)
    result = await runner.run(Cnt(), hooks=hooks)
    assert result.run.status is RunStatus.COMPLETED and result.run.step == 1
    history = await runner.history(result.run.graph_run_id)
    assert all(v.status is VertexStatus.DONE for cp in history for v in cp.vertices)
    assert all(cp.run.step < 999 for cp in history)


async def test_raising_hooks_change_nothing(store: Any) -> None:
    """§8.120/§3.8 hooks raising on every event leave the outcome and history intact."""

    def boom(*args: Any) -> None:
        raise RuntimeError("observer bug")

    quiet = chain(["a", "b", "fin"], store)
    expected = await quiet.run(Cnt())
    noisy = await quiet.run(Cnt(), hooks=flow.Hooks(**{event: boom for event in EVENTS}))
    assert noisy.state == expected.state
    assert noisy.run.status is RunStatus.COMPLETED
    assert noisy.run.revision == expected.run.revision
