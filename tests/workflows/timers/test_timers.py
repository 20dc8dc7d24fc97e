"""Durable timers and pause deadlines through the tools bundle, with a ManualClock.

Every test drives time by hand: nothing here waits on the real clock except the generous
hang deadline of `Env.until`."""

from __future__ import annotations

import asyncio
import uuid
from datetime import timedelta
from pathlib import Path

import pytest

from flowledger.tools.bundle import WorkflowTools
from flowledger.tools.errors import ToolError
from flowledger.workflows.records.timers import TimerIndex
from flowledger.workflows.runtime.session import WorkflowSession
from flowledger.workflows.runtime.supervisor.timers import RETRY_DELAY

from ._app import catalog
from .conftest import Env


async def _parked(env: Env) -> int:
    return len(await env.store.kv.keys(f"sessions/{env.session.session_id}/workflows/timers/"))


async def test_sleep_parks_the_run_and_its_owner_wakes_it_when_due(env: Env) -> None:
    run_id = await env.start("sleeper", {"seconds": 60})
    got = await env.get(run_id)
    assert got["run_status"] == "interrupted"
    pending = got["pending"]
    assert pending["kind"] == "timer"
    assert pending["vertex_id"] == "nap"
    wake_at = env.clock.now() + timedelta(seconds=60)
    assert pending["wake_at"] == wake_at.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    assert await _parked(env) == 1
    env.clock.advance(59)
    await env.until(lambda: _loop_waits(env))
    assert (await env.get(run_id))["run_status"] == "interrupted"
    env.clock.advance(1)
    await env.until(lambda: env.status_is(run_id, "completed"))
    assert await _parked(env) == 0
    history = await env.call("workflow_run_history", run_id=run_id)
    kinds = [entry["kind"] for entry in history["entries"]]
    assert kinds[-1] == "run_completed"
    assert kinds.index("run_interrupted") < kinds.index("run_resumed")
    parked = history["entries"][kinds.index("run_interrupted")]
    assert parked["message"] == f"Workflow parked until {pending['wake_at']}"


async def _loop_waits(env: Env) -> bool:
    """The timer loop is asleep on the clock (it read the head and found nothing due)."""
    return env.clock.sleepers >= 1 and env.session.supervisor.idle


async def test_a_resume_of_a_parked_run_is_refused_and_names_the_wake_time(env: Env) -> None:
    run_id = await env.start("sleeper", {"seconds": 60})
    with pytest.raises(ToolError) as refused:
        await env.call("workflow_run_resume", run_id=run_id, resume={})
    assert "parked on a timer until" in str(refused.value)
    assert (await env.get(run_id))["run_status"] == "interrupted"
    assert await _parked(env) == 1


async def test_cancel_removes_the_timer_entry(env: Env) -> None:
    run_id = await env.start("sleeper", {"seconds": 60})
    await env.call("workflow_run_cancel", run_id=run_id)
    await env.until(lambda: env.status_is(run_id, "cancelled"))
    assert await _parked(env) == 0
    env.clock.advance(120)
    await env.until(lambda: _loop_waits_empty(env))
    assert (await env.get(run_id))["run_status"] == "cancelled"


async def _loop_waits_empty(env: Env) -> bool:
    return env.session.supervisor.idle and await _parked(env) == 0


async def test_sleep_until_wakes_at_the_given_time(env: Env) -> None:
    until = env.clock.now() + timedelta(hours=2)
    run_id = await env.start("sleeper", {"until": until.isoformat()})
    assert (await env.get(run_id))["pending"]["wake_at"].startswith("2026-01-01T02:00:00")
    env.clock.set(until)
    await env.until(lambda: env.status_is(run_id, "completed"))


@pytest.mark.parametrize(
    ("document", "field", "words"),
    [
        ({"seconds": -1}, "seconds", "must not be negative"),
        ({"until": "2025-12-31T23:00:00+00:00"}, "until", "is not after now"),
        ({"until": "2026-02-01T00:00:00"}, "until", "naive datetime"),
    ],
)
async def test_bad_timers_fail_the_vertex_with_a_typed_error_naming_the_field(
    env: Env, document: dict[str, object], field: str, words: str
) -> None:
    run_id = await env.start("sleeper", document)
    got = await env.get(run_id)
    # the error pauses the vertex (the definition's on_error policy): nothing is parked
    assert got["run_status"] == "interrupted"
    error = got["pending"]["error"]
    assert error["type"] == "TimerError"
    assert error["message"].startswith(f"{field}: ") and words in error["message"]
    assert await _parked(env) == 0


async def test_a_deadline_resumes_with_the_declared_payload(env: Env) -> None:
    run_id = await env.start("asker", {"seconds": 30})
    pending = (await env.get(run_id))["pending"]
    assert pending["kind"] == "request" and pending["wake_at"].startswith("2026-01-01T00:00:30")
    env.clock.advance(30)
    await env.until(lambda: env.status_is(run_id, "completed"))
    assert (await env.get(run_id))["status_summary"] == "approved=False"  # on_timeout's
    history = await env.call("workflow_run_history", run_id=run_id)
    kinds = [entry["kind"] for entry in history["entries"]]
    assert kinds.index("run_interrupted") < kinds.index("run_resumed") and kinds[-1] == (
        "run_completed"
    )
    assert history["entries"][kinds.index("run_interrupted")]["message"] == (
        "Workflow interrupted"  # a request with a deadline is not parked
    )
    with pytest.raises(ToolError) as late:
        await env.call("workflow_run_resume", run_id=run_id, resume={"approved": True})
    assert "not interrupted" in str(late.value) or "completed" in str(late.value)


async def test_a_resume_before_the_deadline_wins_and_the_deadline_does_nothing(
    env: Env,
) -> None:
    run_id = await env.start("asker", {"seconds": 30})
    await env.call("workflow_run_resume", run_id=run_id, resume={"approved": True})
    await env.until(lambda: env.status_is(run_id, "completed"))
    revision = (await env.get(run_id))["updated_at"]
    env.clock.advance(60)
    await env.until(lambda: _loop_waits_empty(env))
    assert (await env.get(run_id))["updated_at"] == revision  # the stale entry only went


async def test_resumes_racing_deadlines_have_exactly_one_winner_each(env: Env) -> None:
    runs = [await env.start("asker", {"seconds": 30}) for _ in range(12)]

    async def resume(run_id: str, turns: int) -> bool:
        for _ in range(turns):  # let the owner's wakes get ahead of some resumes
            await asyncio.sleep(0)
        try:
            await env.call("workflow_run_resume", run_id=run_id, resume={"approved": True})
        except ToolError as refused:
            assert "interrupted" in str(refused), refused  # a definite answer: it moved on
            return False
        return True

    env.clock.advance(30)  # every deadline is due: the owner's wakes race the resumes
    won = await asyncio.gather(*(resume(run_id, 3 * n) for n, run_id in enumerate(runs)))
    for run_id in runs:
        await env.until(lambda run_id=run_id: env.status_is(run_id, "completed"))  # type: ignore[misc]
    for run_id, resumed in zip(runs, won, strict=True):
        summary = (await env.get(run_id))["status_summary"]
        assert summary == ("approved=True" if resumed else "approved=False"), (resumed, summary)
    await env.until(lambda: _loop_waits_empty(env))


async def test_stale_entries_are_deleted_when_due_and_change_nothing(env: Env) -> None:
    run_id = await env.start("sleeper", {"seconds": 60})
    index = TimerIndex(env.store.kv)
    sid = env.session.session_id
    soon = env.clock.now() + timedelta(seconds=5)
    await index.put(sid, str(uuid.uuid4()), soon, 1, "timer")  # no such run
    await index.put(sid, run_id, soon, 0, "timer")  # an older pause of a parked run
    env.session.supervisor.ring_timers()
    env.clock.advance(5)
    await env.until(lambda: _parked_is(env, 1))
    got = await env.get(run_id)
    assert got["run_status"] == "interrupted" and got["pending"]["kind"] == "timer"
    env.clock.advance(55)
    await env.until(lambda: env.status_is(run_id, "completed"))
    assert await _parked(env) == 0


async def _parked_is(env: Env, count: int) -> bool:
    return env.session.supervisor.idle and await _parked(env) == count


async def test_the_owner_reads_only_the_index_head_with_many_parked_runs(env: Env) -> None:
    if env.store.kv.__class__.__module__.endswith("postgres.kv"):
        count = 200  # enough to show it, on a shared server
    else:
        count = 1000
    index = TimerIndex(env.store.kv)
    sid = env.session.session_id
    for n in range(count):
        run_id = f"00000000-0000-4000-8000-{n:012d}"
        await index.put(sid, run_id, env.clock.now() + timedelta(hours=1, seconds=n), 1, "timer")
    loop = env.session.supervisor.timer_loop
    assert loop is not None
    before = loop.head_reads
    reads: list[str] = []
    original = env.store.kv.keys_page  # type: ignore[attr-defined]

    async def counted(prefix: str = "", **options: object) -> list[str]:
        keys: list[str] = await original(prefix, **options)
        reads.extend(keys)
        return keys

    env.store.kv.keys_page = counted  # type: ignore[attr-defined]
    env.session.supervisor.ring_timers()
    await env.until(lambda: _read_once(loop, before))
    env.store.kv.keys_page = original  # type: ignore[attr-defined]
    assert loop.head_reads - before == 1
    assert len(reads) == 1  # one key of the index, not 1,000


async def _read_once(loop: object, before: int) -> bool:
    return getattr(loop, "head_reads", 0) > before


async def test_another_sessions_owner_never_sees_or_wakes_a_parked_run(env: Env) -> None:
    """The index is per session: a second session's owner over the same store reads only
    its own prefix, so with the first session's owner gone its parked run stays parked."""
    run_id = await env.start("sleeper", {"seconds": 60})
    await env.session.supervisor.shutdown()
    other = WorkflowSession.build(env.store, str(uuid.uuid4()), catalog(env.clock), clock=env.clock)
    await other.supervisor.activate()
    try:
        env.clock.advance(120)
        loop = other.supervisor.timer_loop
        assert loop is not None
        await env.until(lambda: _has_read(loop))
        assert await TimerIndex(env.store.kv).head(other.session_id) is None
        assert await _parked(env) == 1
        tools = WorkflowTools.for_session(other)
        with pytest.raises(ToolError, match="not found"):
            await tools.call("workflow_run_get", {"run_id": run_id})
    finally:
        await other.supervisor.shutdown()
    run = await env.session.registry.get(env.session.session_id, run_id)
    assert str(run.status) == "interrupted"


async def _has_read(loop: object) -> bool:
    return getattr(loop, "head_reads", 0) >= 1


async def test_an_owner_dying_between_the_wake_and_the_entry_delete_wakes_once(
    env: Env, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The owner records the run as running, then dies before deleting the entry (the
    delete raises, and the owner is shut down). The next owner continues the run from its
    checkpoint and finds the entry stale: the vertex after the sleep runs once."""
    marks = tmp_path / "marks.txt"
    monkeypatch.setenv("FLOWLEDGER_TIMER_MARKS", str(marks))
    run_id = await env.start("sleeper", {"seconds": 10})
    original = TimerIndex.delete

    async def dying(self: TimerIndex, key: str) -> None:
        raise ConnectionError("the owner died here")

    monkeypatch.setattr(TimerIndex, "delete", dying)
    env.clock.advance(10)
    await env.until(lambda: env.status_is(run_id, "running"))
    await env.until(lambda: _idle(env))
    await env.session.supervisor.shutdown()
    assert not marks.exists() and await _parked(env) == 1
    monkeypatch.setattr(TimerIndex, "delete", original)

    sid = env.session.session_id
    after = WorkflowSession.build(env.store, sid, catalog(env.clock), clock=env.clock)
    await after.supervisor.activate()
    try:
        tools = WorkflowTools.for_session(after)

        async def completed() -> bool:
            got = await tools.call("workflow_run_get", {"run_id": run_id})
            return bool(got["run_status"] == "completed")

        await env.until(completed)
        env.clock.advance(RETRY_DELAY)  # nothing left to wake, nothing woken again
        await env.until(lambda: _parked_is_for(after, env, 0))
    finally:
        await after.supervisor.shutdown()
    assert len(marks.read_text().splitlines()) == 1


async def _idle(env: Env) -> bool:
    return env.session.supervisor.idle


async def _parked_is_for(owner: WorkflowSession, env: Env, count: int) -> bool:
    return owner.supervisor.idle and await _parked(env) == count


async def test_an_accepted_resume_request_wins_over_a_deadline_that_passes_after_it(
    env: Env,
) -> None:
    """An owner accepted a front door's resume request and died before carrying it out;
    then the deadline passed. The request was accepted first, so it wins: the deadline
    does nothing, the next look at the requests carries it out, and the resumer's answer
    (its request done) is true. (Found by tests/cli/test_time_faults.py: the deadline
    used to win, and the request was then taken as done.)"""
    run_id = await env.start("asker", {"seconds": 30})
    sup = env.session.supervisor
    assert sup.requests is not None
    sid = env.session.session_id
    run = await env.session.registry.get(sid, run_id)
    request = await sup.requests.request_resume(
        sid, run_id, b'{"approved": true}', run.checkpoint_revision
    )
    await sup.requests.accept_resume(request)  # by an owner that died right after
    loop = sup.timer_loop
    assert loop is not None
    before = loop.head_reads
    env.clock.advance(30)
    await env.until(lambda: _read_twice_and_idle(env, before))
    await sup.poll()
    await env.until(lambda: env.status_is(run_id, "completed"))
    assert (await env.get(run_id))["status_summary"] == "approved=True"
    await env.until(lambda: _no_request(env, run_id))  # deleted once the segment ended
    env.clock.advance(RETRY_DELAY)  # the deadline's entry is stale now: it only goes
    await env.until(lambda: _loop_waits_empty(env))
    assert (await env.get(run_id))["status_summary"] == "approved=True"


async def _no_request(env: Env, run_id: str) -> bool:
    requests = env.session.supervisor.requests
    assert requests is not None
    return await requests.resume_request(env.session.session_id, run_id) is None


async def _read_twice_and_idle(env: Env, before: int) -> bool:
    """The timer loop looked at the due entry and settled it (or put it off)."""
    loop = env.session.supervisor.timer_loop
    return loop is not None and loop.head_reads >= before + 2 and env.session.supervisor.idle
