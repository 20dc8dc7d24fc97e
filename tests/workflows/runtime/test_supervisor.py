"""The supervisor: ownership, start, adoption, resume, cancel, failure semantics, shutdown.

Each test names the workflows-spec §12 item it covers; "(ours)" marks our decisions.
"""

from __future__ import annotations

import asyncio
from dataclasses import replace
from typing import Any

import pytest

from flowledger import flow
from flowledger.storage import open_store
from flowledger.workflows.errors import (
    AdoptionError,
    ConflictError,
    DefinitionError,
    InvalidInputError,
    NotFoundError,
    SessionOwnedError,
    SupervisorActiveError,
    SupervisorClosedError,
)
from flowledger.workflows.records.run import RunStatus
from flowledger.workflows.runtime.supervisor.workers import spawn
from tests.observability._spans import from_sdk, in_memory

from ..conftest import Session, build_session

COMPLETED_KINDS = ["run_started", "vertex_completed", "vertex_completed", "run_completed"]


async def status_of(session: Session, run_id: str) -> RunStatus:
    return (await session.registry.get(session.session_id, run_id)).status


async def test_second_owner_is_refused(session: Session) -> None:
    """§12.32: two supervisors for one session: the second activation fails."""
    first = session.supervisor()
    await first.activate()
    second = session.supervisor()
    with pytest.raises(SessionOwnedError) as caught:
        await second.activate()
    assert caught.value.session_id == session.session_id
    assert caught.value.holder_epoch >= 1
    await first.shutdown()
    await second.activate()  # the lease is free again
    await second.shutdown()


async def test_activation_starts_a_pending_run_once(session: Session) -> None:
    """§12.34: activation adopts a pending run exactly once; a second activate refuses."""
    run = await session.create_run()
    supervisor = session.supervisor()
    await supervisor.activate()
    with pytest.raises(SupervisorActiveError):
        await supervisor.activate()
    assert await supervisor.wait_idle() is None
    done = await session.registry.get(session.session_id, run.id)
    assert done.status is RunStatus.COMPLETED
    assert session.gates.runs == {"one": 1, "two": 1}
    assert await session.kinds(run.id) == COMPLETED_KINDS
    history = await session.checkpoints.history(run.graph_run_id)
    assert done.activity_cursor == len(history)
    assert done.checkpoint_revision == history[-1].revision
    await supervisor.shutdown()


async def test_start_returns_once_seeded_while_the_graph_runs(session: Session) -> None:
    """§12.61: start returns after revision 0 is durable, while the graph is still blocked;
    once it finishes, the activities are run_started, 2 x vertex_completed, run_completed."""
    session.gates.close("one")
    supervisor = session.supervisor()
    await supervisor.activate()
    run = await session.create_run()
    ticket = await supervisor.start(run.id)
    async with asyncio.timeout(60):  # only catches a hang
        await ticket.wait()
    seed = await session.checkpoints.latest(run.graph_run_id)
    assert seed.revision >= 0
    assert await status_of(session, run.id) is RunStatus.RUNNING
    session.gates.open("one")
    assert await supervisor.wait_idle() is None
    final = await session.registry.get(session.session_id, run.id)
    assert final.status is RunStatus.COMPLETED
    assert final.status_summary == "count=2"
    result = await session.catalog.resolve("counter", "v1").get(run.graph_run_id)
    assert result.state["count"] == 2
    assert await session.kinds(run.id) == COMPLETED_KINDS
    await supervisor.shutdown()


async def test_start_of_a_non_pending_run_fails_the_ticket(session: Session) -> None:
    """§5.6: a run that is not pending cannot be started; the ticket says why."""
    supervisor = session.supervisor()
    await supervisor.activate()
    run = await session.create_run()
    ticket = await supervisor.start(run.id)
    await ticket.wait()
    await supervisor.wait_idle()
    again = await supervisor.start(run.id)
    with pytest.raises(ConflictError, match="not pending"):
        await again.wait()
    await supervisor.shutdown()


async def test_interrupted_run_waits_for_an_explicit_resume(session: Session) -> None:
    """§12.44 + §12.64 + (ours, §11.2): an interrupted run is not resumed on activation;
    an explicit resume completes it, and run_resumed stays in the history afterwards."""
    first = session.supervisor()
    await first.activate()
    run = await session.create_run("asker", {"count": 1})
    ticket = await first.start(run.id)
    await ticket.wait()
    await first.wait_idle()
    paused = await session.registry.get(session.session_id, run.id)
    assert paused.status is RunStatus.INTERRUPTED
    await first.shutdown()

    second = session.supervisor()
    await second.activate()
    assert await second.wait_idle() is None
    still = await session.registry.get(session.session_id, run.id)
    assert still.status is RunStatus.INTERRUPTED
    assert still.checkpoint_revision == paused.checkpoint_revision
    assert session.gates.runs == {"ask": 1}
    with pytest.raises(InvalidInputError):
        await second.resume(run.id, b'{"increment": 0}')
    finished = await second.resume(run.id, b'{"increment": 2}')
    assert finished is not None and finished.status is RunStatus.COMPLETED
    result = await session.catalog.resolve("asker", "v1").get(run.graph_run_id)
    assert result.state["count"] == 3
    kinds = await session.kinds(run.id)
    assert kinds == [
        "run_started",
        "run_interrupted",
        "run_resumed",
        "vertex_completed",
        "run_completed",
    ]
    page = await second.history(run.id, limit=100)
    assert [str(p.activity.kind) for p in page.records] == kinds
    await second.shutdown()


async def test_sixteen_concurrent_resumes_execute_once(session: Session) -> None:
    """§12.45: of 16 concurrent resumes of one interrupted run exactly one executes."""
    supervisor = session.supervisor()
    await supervisor.activate()
    run = await session.create_run("asker", {"count": 0})
    await (await supervisor.start(run.id)).wait()
    await supervisor.wait_idle()
    outcomes = await asyncio.gather(
        *(supervisor.resume(run.id, b'{"increment": 1}') for _ in range(16)),
        return_exceptions=True,
    )
    winners = [o for o in outcomes if not isinstance(o, BaseException)]
    losers = [o for o in outcomes if isinstance(o, BaseException)]
    assert len(winners) == 1
    assert all(isinstance(e, ConflictError) and "not interrupted" in str(e) for e in losers)
    assert session.gates.runs == {"ask": 2}  # the first run, then exactly one resume
    await supervisor.shutdown()


async def test_completed_and_cancelled_runs_are_left_alone(session: Session) -> None:
    """§12.46: activation touches neither completed nor cancelled runs."""
    supervisor = session.supervisor()
    await supervisor.activate()
    done = await session.create_run()
    await (await supervisor.start(done.id)).wait()
    await supervisor.wait_idle()
    pending = await session.create_run()
    await supervisor.cancel(pending.id)
    await supervisor.shutdown()
    runs_before = dict(session.gates.runs)
    again = session.supervisor()
    await again.activate()
    assert await again.wait_idle() is None
    assert session.gates.runs == runs_before
    assert await status_of(session, done.id) is RunStatus.COMPLETED
    assert await status_of(session, pending.id) is RunStatus.CANCELLED
    await again.shutdown()


async def test_missing_checkpoint_fails_the_run_without_leaking_ids(session: Session) -> None:
    """§12.47: a running run whose checkpoint is missing is failed with a bounded summary
    that names no ids; exactly one run_failed activity is published."""
    run = await session.create_run()
    running = replace(run, status=RunStatus.RUNNING)
    await session.registry.compare_and_swap(run.revision, running)
    supervisor = session.supervisor()
    await supervisor.activate()
    assert await supervisor.wait_idle() is None
    failed = await session.registry.get(session.session_id, run.id)
    assert failed.status is RunStatus.FAILED
    assert failed.status_summary == "workflow checkpoint missing"
    assert run.graph_run_id not in failed.status_summary
    assert await session.kinds(run.id) == ["run_failed"]
    await supervisor.shutdown()


class FlakyHistory:
    """A definition whose checkpoint reads fail with an ambiguous (non-definite) error."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    async def history(self, graph_run_id: str) -> list[flow.RunRecord]:
        raise OSError("disk hiccup")


async def test_ambiguous_read_errors_leave_the_run_alone(session: Session) -> None:
    """§12.48: an ambiguous checkpoint read error leaves the run running and surfaces as
    an AdoptionError in last_error."""
    run = await session.create_run()
    await session.registry.compare_and_swap(run.revision, replace(run, status=RunStatus.RUNNING))
    real = session.catalog._definitions[("counter", "v1")]  # type: ignore[attr-defined]
    session.catalog._definitions[("counter", "v1")] = FlakyHistory(real)  # type: ignore[attr-defined]
    supervisor = session.supervisor()
    await supervisor.activate()
    error = await supervisor.wait_idle()
    assert isinstance(error, AdoptionError)
    assert supervisor.last_error is error
    assert await status_of(session, run.id) is RunStatus.RUNNING
    await supervisor.shutdown()


class ChangedDecoder:
    """A definition changed since its runs were written: stored inputs no longer decode."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def validate_input(self, raw: bytes | str) -> Any:
        raise DefinitionError("counter", "v1", "input", "count", "no longer an int")


async def test_a_definition_error_on_a_stored_input_fails_the_run(session: Session) -> None:
    """Usability 2: the supervisor treats a definition's own error on a stored input like an
    invalid input (the run fails), instead of leaving it pending for ever."""
    run = await session.create_run(document={"count": 1})
    real = session.catalog._definitions[("counter", "v1")]  # type: ignore[attr-defined]
    session.catalog._definitions[("counter", "v1")] = ChangedDecoder(real)  # type: ignore[attr-defined]
    supervisor = session.supervisor()
    await supervisor.activate()
    await supervisor.wait_idle()
    failed = await session.registry.get(session.session_id, run.id)
    assert (failed.status, failed.status_summary) == (RunStatus.FAILED, "workflow input invalid")
    await supervisor.shutdown()


async def test_input_problems_fail_the_run(session: Session) -> None:
    """§5.6: a missing input and an input the definition refuses fail the run."""
    supervisor = session.supervisor()
    await supervisor.activate()
    invalid = await session.create_run(document={"count": -1})
    ticket = await supervisor.start(invalid.id)
    with pytest.raises(RuntimeError, match="seed"):
        await ticket.wait()
    await supervisor.wait_idle()
    failed = await session.registry.get(session.session_id, invalid.id)
    assert (failed.status, failed.status_summary) == (RunStatus.FAILED, "workflow input invalid")
    missing = await session.create_run(document={"count": 5})
    await session.store.blobs.delete(missing.input.key)
    await (await supervisor.start(missing.id)).failed
    await supervisor.wait_idle()
    gone = await session.registry.get(session.session_id, missing.id)
    assert (gone.status, gone.status_summary) == (RunStatus.FAILED, "workflow input unavailable")
    assert await session.kinds(gone.id) == ["run_failed"]
    await supervisor.shutdown()


async def test_cancel_pending_running_and_terminal_runs(session: Session) -> None:
    """§5.12: cancel a pending run (no Flow), a running one (Flow's cancelled checkpoint),
    again (idempotent); a completed run refuses."""
    supervisor = session.supervisor()
    await supervisor.activate()
    pending = await session.create_run()
    cancelled = await supervisor.cancel(pending.id)
    assert cancelled is not None and cancelled.status is RunStatus.CANCELLED
    assert await session.kinds(pending.id) == []

    session.gates.close("two")
    running = await session.create_run()
    await (await supervisor.start(running.id)).wait()
    await session.gates.entered["two"].wait()
    stopped = await supervisor.cancel(running.id, "no longer needed")
    assert stopped is not None and stopped.status is RunStatus.CANCELLED
    latest = await session.checkpoints.latest(running.graph_run_id)
    assert latest.run.status is flow.RunStatus.CANCELLED
    assert latest.run.cancel_reason == "no longer needed"
    assert stopped.checkpoint_revision == latest.revision
    assert (await session.kinds(running.id))[-1] == "run_cancelled"
    again = await supervisor.cancel(running.id)
    assert again is not None and again.status is RunStatus.CANCELLED

    session.gates.open("two")
    done = await session.create_run()
    await (await supervisor.start(done.id)).wait()
    await supervisor.wait_idle()
    with pytest.raises(ConflictError, match="terminal"):
        await supervisor.cancel(done.id)
    await supervisor.shutdown()


class ConflictingCancel:
    """A definition whose Flow cancel meets ``conflicts`` revision conflicts first."""

    def __init__(self, inner: Any, conflicts: int) -> None:
        self._inner = inner
        self.conflicts = conflicts
        self.calls = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    async def cancel(self, graph_run_id: str, reason: str) -> None:
        self.calls += 1
        if self.calls <= self.conflicts:
            raise flow.RevisionConflictError(graph_run_id, 9, 8)
        await self._inner.cancel(graph_run_id, reason)


@pytest.mark.parametrize(("conflicts", "succeeds"), [(3, True), (8, False)])
async def test_cancel_retries_revision_conflicts(
    session: Session, conflicts: int, succeeds: bool
) -> None:
    """§12.35-36: cancel retries Flow revision conflicts; after 8 it gives up with the run
    still running and its cancel intent durable."""
    supervisor = session.supervisor()
    await supervisor.activate()
    run = await session.create_run("asker", {"count": 0})
    await (await supervisor.start(run.id)).wait()
    await supervisor.wait_idle()
    real = session.catalog._definitions[("asker", "v1")]  # type: ignore[attr-defined]
    wrapper = ConflictingCancel(real, conflicts)
    session.catalog._definitions[("asker", "v1")] = wrapper  # type: ignore[attr-defined]
    if succeeds:
        cancelled = await supervisor.cancel(run.id)
        assert cancelled is not None and cancelled.status is RunStatus.CANCELLED
        assert wrapper.calls == conflicts + 1
    else:
        with pytest.raises(AdoptionError, match="cancel"):
            await supervisor.cancel(run.id)
        assert wrapper.calls == 8
        left = await session.registry.get(session.session_id, run.id)
        assert left.status is RunStatus.INTERRUPTED
        assert left.cancel_requested
    await supervisor.shutdown()


async def test_durable_cancel_intent_is_finished_by_the_next_owner(session: Session) -> None:
    """§5.7 step 3: a run with a durable cancel intent is cancelled on activation."""
    supervisor = session.supervisor()
    await supervisor.activate()
    run = await session.create_run("asker", {"count": 0})
    await (await supervisor.start(run.id)).wait()
    await supervisor.wait_idle()
    await supervisor.shutdown()
    current = await session.registry.get(session.session_id, run.id)
    await session.registry.compare_and_swap(
        current.revision, replace(current, cancel_requested=True)
    )
    successor = session.supervisor()
    await successor.activate()
    assert await successor.wait_idle() is None
    assert await status_of(session, run.id) is RunStatus.CANCELLED
    await successor.shutdown()


async def test_lease_loss_stops_work_without_writing_a_terminal_status(session: Session) -> None:
    """§12.37-38: losing the lease cancels the execution; nothing terminal is written and
    the error is not recorded as a failure."""
    session.gates.close("one")
    # The default TTL: the loss is marked below, and a short TTL could also expire on its
    # own on a busy machine before the run reaches the gate, which would hang the test.
    supervisor = session.supervisor()
    await supervisor.activate()
    run = await session.create_run()
    await (await supervisor.start(run.id)).wait()
    await session.gates.entered["one"].wait()
    lease = supervisor._lease  # type: ignore[attr-defined]
    assert lease is not None
    lease._mark_lost("expired")  # what a failed renewal does
    assert await supervisor.wait_idle() is None
    assert await status_of(session, run.id) is RunStatus.RUNNING
    assert not supervisor.active
    with pytest.raises(RuntimeError, match="not accepting"):
        await supervisor.resume(run.id, b"{}")
    session.gates.open("one")
    await supervisor.shutdown()
    assert await status_of(session, run.id) is RunStatus.RUNNING
    successor = session.supervisor()
    await successor.activate()
    assert await successor.wait_idle() is None
    assert await status_of(session, run.id) is RunStatus.COMPLETED
    await successor.shutdown()


async def test_shutdown_is_idempotent_and_closes_everything(session: Session) -> None:
    """§12.39: shutdown runs once, releases the lease, and later calls are refused."""
    supervisor = session.supervisor()
    await supervisor.activate()
    run = await session.create_run("asker", {"count": 0})
    await (await supervisor.start(run.id)).wait()
    await supervisor.shutdown()
    await supervisor.shutdown()
    for call in (
        supervisor.resume(run.id, b'{"increment": 1}'),
        supervisor.cancel(run.id),
        supervisor.history(run.id),
        supervisor.start(run.id),
    ):
        with pytest.raises(SupervisorClosedError):
            await call
    with pytest.raises(SupervisorClosedError):
        await supervisor.activate()


async def test_shutdown_timeout_is_reported_and_the_lease_still_released(
    session: Session,
) -> None:
    """§12.40: a worker that ignores cancellation makes shutdown time out; the lease is
    released all the same and a second shutdown repeats the result."""
    from flowledger.workflows.errors import ShutdownTimeoutError

    release = asyncio.Event()

    async def stubborn() -> None:
        while not release.is_set():
            try:
                await release.wait()
            except asyncio.CancelledError:
                continue

    supervisor = session.supervisor(shutdown_timeout=0.05)
    await supervisor.activate()
    spawn(supervisor, stubborn())
    await asyncio.sleep(0.01)  # let it begin
    with pytest.raises(ShutdownTimeoutError):
        await supervisor.shutdown()
    other = session.supervisor()
    await other.activate()  # the lease was released
    with pytest.raises(ShutdownTimeoutError):
        await supervisor.shutdown()
    release.set()
    assert await supervisor.wait_idle() is None
    await other.shutdown()


async def test_runs_of_other_sessions_are_not_found(session: Session) -> None:
    """§12.23 through the supervisor: a run of another session is not found."""
    supervisor = session.supervisor()
    await supervisor.activate()
    stranger = build_session(session.store)
    foreign = await stranger.create_run()
    for call in (
        supervisor.resume(foreign.id, b"{}"),
        supervisor.cancel(foreign.id),
        supervisor.history(foreign.id),
    ):
        with pytest.raises(NotFoundError):
            await call
    assert supervisor._controllers == {}  # type: ignore[attr-defined]
    await supervisor.shutdown()


@pytest.mark.parametrize("crash", ["pending-completed", "running-completed"])
async def test_registry_behind_flow_is_repaired(session: Session, crash: str) -> None:
    """§12.65-66: Flow completed but the registry still says pending/running: activation
    repairs the record from the checkpoint without running the graph again."""
    run = await session.create_run()
    definition = session.catalog.resolve("counter", "v1")
    token = definition.validate_input(b'{"count": 0}')
    await definition.start(token, graph_run_id=run.graph_run_id)
    if crash == "running-completed":
        await session.registry.compare_and_swap(
            run.revision, replace(run, status=RunStatus.RUNNING)
        )
    runs_before = dict(session.gates.runs)
    supervisor = session.supervisor()
    await supervisor.activate()
    assert await supervisor.wait_idle() is None
    repaired = await session.registry.get(session.session_id, run.id)
    latest = await session.checkpoints.latest(run.graph_run_id)
    assert repaired.status is RunStatus.COMPLETED
    assert repaired.checkpoint_revision == latest.revision
    assert session.gates.runs == runs_before
    assert await session.kinds(run.id) == COMPLETED_KINDS
    await supervisor.shutdown()


async def test_a_new_supervisor_finishes_a_dropped_ones_run(tmp_path: Any) -> None:
    """Issue 4 restart test: a supervisor is dropped mid-run (its store closed without a
    shutdown); a new one over the same SQLite file adopts the run and completes it."""
    url = f"sqlite:///{tmp_path / 'restart.db'}"
    store = await open_store(url)
    session = build_session(store)
    session.gates.close("two")
    first = session.supervisor(lease_ttl=0.5)
    await first.activate()
    run = await session.create_run()
    await (await first.start(run.id)).wait()
    await session.gates.entered["two"].wait()
    await store.close()  # the process "dies": leases freed, no more writes possible
    first._cancel_everything()  # type: ignore[attr-defined]
    async with open_store(url) as reopened:
        successor_session = build_session(reopened, session.session_id)
        successor = successor_session.supervisor()
        await successor.activate()
        assert await successor.wait_idle() is None
        done = await successor_session.registry.get(session.session_id, run.id)
        assert done.status is RunStatus.COMPLETED
        assert successor_session.gates.runs == {"two": 1}  # one was durable; only two re-ran
        assert await successor_session.kinds(run.id) == COMPLETED_KINDS
        await successor.shutdown()


async def test_history_pages_with_both_cursors(session: Session) -> None:
    """§12.49 through the supervisor: pages split by revision, then inside one."""
    supervisor = session.supervisor()
    await supervisor.activate()
    run = await session.create_run()
    await (await supervisor.start(run.id)).wait()
    await supervisor.wait_idle()
    seen: list[str] = []
    after_revision, after_event = 0, None
    while True:
        page = await supervisor.history(
            run.id, after_revision=after_revision, after_event_id=after_event, limit=1
        )
        seen.extend(str(p.activity.kind) for p in page.records)
        if page.next_revision is None:
            break
        after_revision, after_event = page.next_revision, page.next_event_id
    assert seen == COMPLETED_KINDS
    await supervisor.shutdown()


SENTINEL = "s3cr3t-sentinel"


async def test_sentinels_never_reach_activities_or_listings(session: Session) -> None:
    """Issue 4: text from input, state, interrupt info and task errors never appears in an
    activity, a history page or a run listing."""
    from flowledger.workflows.authoring.definition import TypedDefinition
    from flowledger.workflows.authoring.metadata import Metadata, VertexMetadata

    graph: flow.Graph[dict[str, Any]] = flow.Graph("leaky")

    @graph.vertex("fail", on_error=flow.ErrorRoute("handle"))
    async def fail(state: dict[str, Any]) -> dict[str, Any]:
        raise RuntimeError(f"boom {SENTINEL}")  # recorded as the vertex's error text

    @graph.vertex("handle")
    async def handle(state: dict[str, Any]) -> dict[str, Any]:
        return {"note": f"state {SENTINEL}"}

    @graph.vertex("ask")
    async def ask(state: dict[str, Any]) -> dict[str, Any]:
        answer = flow.interrupt({"info": SENTINEL})
        return {"note": f"{SENTINEL} {answer}"}

    graph.add_edge("handle", "ask")
    runner = graph.compile(entry="fail", finish="ask", store=session.checkpoints)
    session.catalog.register(
        TypedDefinition(
            Metadata(
                "leaky",
                "v1",
                input_schema={
                    "type": "object",
                    "additionalProperties": False,
                    "properties": {"secret": {"type": "string"}},
                },
                resume_schema={
                    "type": "object",
                    "additionalProperties": False,
                    "properties": {"secret": {"type": "string"}},
                },
                vertices=[VertexMetadata(v, v) for v in ("fail", "handle", "ask")],
            ),
            runner,
        )
    )
    supervisor = session.supervisor()
    await supervisor.activate()
    run = await session.create_run("leaky", {"secret": SENTINEL})
    await (await supervisor.start(run.id)).wait()
    await supervisor.wait_idle()
    assert await status_of(session, run.id) is RunStatus.INTERRUPTED
    await supervisor.resume(run.id, f'{{"secret": "{SENTINEL}"}}')
    assert await status_of(session, run.id) is RunStatus.COMPLETED
    history = await session.checkpoints.history(run.graph_run_id)
    assert any(SENTINEL in v.error for cp in history for v in cp.vertices)  # it was there
    page = await supervisor.history(run.id, limit=100)
    listing = await session.registry.list(session.session_id)
    texts = [repr(p.activity.to_json()) for p in page.records]
    texts += [repr(r) for r in listing.runs]
    texts += [repr(await session.journal.records(session.session_id, run.id))]
    assert len(page.records) >= 5
    for text in texts:
        assert SENTINEL not in text
    await supervisor.shutdown()


class LosesAcknowledgements:
    """A publisher whose publications reach the journal but whose acknowledgements are lost
    (the live ones during the segment and the final one alike)."""

    def __init__(self, journal: Any) -> None:
        self.journal = journal
        self.failures = 0

    async def publish(self, items: Any) -> int:
        await self.journal.publish(items)
        self.failures += 1
        raise ConnectionError("acknowledgement lost")


async def test_lost_publisher_acknowledgement_is_healed_without_duplicates(
    session: Session,
) -> None:
    """§12.55 + §12.62: publication acknowledgements are lost: the supervisor records the
    error and leaves the run running with its cursor unmoved; after a restart the run
    completes and the journal holds each activity exactly once."""
    from flowledger.workflows.errors import ReconciliationError
    from flowledger.workflows.runtime.supervisor import Supervisor

    flaky = LosesAcknowledgements(session.journal)
    supervisor = Supervisor(
        session.session_id,
        catalog=session.catalog,
        registry=session.registry,
        inputs=session.inputs,
        leases=session.store.leases,
        publisher=flaky,
    )
    await supervisor.activate()
    run = await session.create_run()
    await (await supervisor.start(run.id)).wait()
    error = await supervisor.wait_idle()
    assert isinstance(error, ReconciliationError) and error.op == "publish durable activity"
    stuck = await session.registry.get(session.session_id, run.id)
    assert (stuck.status, stuck.activity_cursor) == (RunStatus.RUNNING, 0)
    await supervisor.shutdown()

    successor = session.supervisor()
    await successor.activate()
    assert await successor.wait_idle() is None
    done = await session.registry.get(session.session_id, run.id)
    assert done.status is RunStatus.COMPLETED
    records = await session.journal.records(session.session_id, run.id)
    assert [str(p.activity.kind) for p in records] == COMPLETED_KINDS
    assert len({p.activity.event_id for p in records}) == len(records)
    assert session.gates.runs == {"one": 1, "two": 1}  # the graph did not run again
    await successor.shutdown()


class CountingDefinition:
    """Counts the Flow calls a definition receives."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner
        self.calls: dict[str, int] = {}

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self._inner, name)
        if name in ("start", "resume", "adopt", "get", "history", "cancel"):

            async def counted(*args: Any, **kwargs: Any) -> Any:
                self.calls[name] = self.calls.get(name, 0) + 1
                return await attribute(*args, **kwargs)

            return counted
        return attribute


async def test_running_checkpoint_is_adopted_not_restarted(session: Session) -> None:
    """§12.41-43: a running run whose Flow checkpoint is mid-run is continued with one
    adopt (no start, no resume); a pending run whose checkpoint exists is never started."""
    session.gates.close("two")
    first = session.supervisor()
    await first.activate()
    run = await session.create_run()
    await (await first.start(run.id)).wait()
    await session.gates.entered["two"].wait()
    first._cancel_everything()  # type: ignore[attr-defined]  # the owner "dies" mid-vertex
    await first.wait_idle()
    await first.shutdown()
    assert await status_of(session, run.id) is RunStatus.RUNNING
    session.gates.open("two")
    counting = CountingDefinition(session.catalog.resolve("counter", "v1"))
    session.catalog._definitions[("counter", "v1")] = counting  # type: ignore[attr-defined]
    successor = session.supervisor()
    await successor.activate()
    assert await successor.wait_idle() is None
    assert counting.calls == {"history": 1, "get": 1, "adopt": 1}
    assert await status_of(session, run.id) is RunStatus.COMPLETED
    await successor.shutdown()


async def test_an_adopted_run_continues_its_trace(session: Session) -> None:
    """(ours, docs/observability.md) the segment a successor adopts is a child of the run's
    stored trace context, like the start its dead owner cut short: one trace."""
    with in_memory() as exporter:
        session.gates.close("two")
        first = session.supervisor()
        await first.activate()
        run = await session.create_run()
        await (await first.start(run.id)).wait()
        await session.gates.entered["two"].wait()
        first._cancel_everything()  # type: ignore[attr-defined]  # the owner "dies" mid-vertex
        await first.wait_idle()
        await first.shutdown()
        session.gates.open("two")
        successor = session.supervisor()
        await successor.activate()
        assert await successor.wait_idle() is None
        await successor.shutdown()
    assert await status_of(session, run.id) is RunStatus.COMPLETED
    spans = [from_sdk(s) for s in exporter.get_finished_spans()]
    (root,) = [s for s in spans if s.name == "flowledger.run"]
    stored = await session.registry.get(session.session_id, run.id)
    assert (stored.trace_parent or "").startswith(f"00-{root.trace_id}-{root.span_id}-")
    segments = [s for s in spans if s.name == "flowledger.segment"]
    assert [
        (s.attributes["flowledger.segment.kind"], s.attributes["flowledger.outcome"])
        for s in segments
    ] == [("start", "stopped"), ("adoption", "completed")]
    assert {(s.trace_id, s.parent_id) for s in segments} == {(root.trace_id, root.span_id)}


async def test_activities_are_published_while_the_segment_runs(session: Session) -> None:
    """(ours) live progress: a running segment's activities reach the journal as its
    checkpoints become durable, before the segment ends; the cursor follows."""
    session.gates.close("two")
    supervisor = session.supervisor()
    await supervisor.activate()
    subscription = session.journal.subscribe(session.session_id)
    run = await session.create_run()
    await (await supervisor.start(run.id)).wait()
    await session.gates.entered["two"].wait()
    seen: list[str] = []
    async with asyncio.timeout(60):
        async for activity in subscription:
            seen.append(str(activity.kind))
            if seen == ["run_started", "vertex_completed"]:
                break
    # The cursor follows the publication (a separate write): wait for it.
    async with asyncio.timeout(60):
        while True:
            midway = await session.registry.get(session.session_id, run.id)
            if midway.activity_cursor >= 2:
                break
            await asyncio.sleep(0.01)
    assert midway.status is RunStatus.RUNNING
    session.gates.open("two")
    assert await supervisor.wait_idle() is None
    assert await session.kinds(run.id) == COMPLETED_KINDS
    subscription.close()
    await supervisor.shutdown()
