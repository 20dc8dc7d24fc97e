"""Who answered a timed pause (`flowledger.workflows.records.answers`): the session's
owner, through its timer loop - ``timer`` for a parked run woken when due, ``deadline``
with the interrupt's ``on_timeout`` payload for a request whose deadline passed."""

from __future__ import annotations

from flowledger.workflows.records.answers import Answer

from .conftest import Env


async def _answers(env: Env, run_id: str) -> list[Answer]:
    found = await env.session.answers.get(env.session.session_id, run_id)
    assert found is not None
    return found


async def test_a_woken_timer_and_a_passed_deadline_are_the_owners_answers(env: Env) -> None:
    napping = await env.start("sleeper", {"seconds": 60})
    asking = await env.start("asker", {"seconds": 30})
    assert await env.session.answers.get(env.session.session_id, napping) is None
    env.clock.advance(60)
    await env.until(lambda: env.status_is(napping, "completed"))
    await env.until(lambda: env.status_is(asking, "completed"))
    [woken] = await _answers(env, napping)
    assert (woken.kind, woken.transport, woken.payload) == ("timer", "owner", None)
    [deadline] = await _answers(env, asking)
    assert (deadline.kind, deadline.transport) == ("deadline", "owner")
    assert deadline.payload == {"approved": False}
    assert deadline.session_id == env.session.session_id
