"""Who answered a pause (`flowledger.workflows.records.answers`): the owner records the
answer when the resume takes effect, on a front door's path (the request carries its
transport) and on its own, with the payload; a resume request written before the
transport existed reads as a Python call."""

from __future__ import annotations

import json

from flowledger.workflows.records.answers import AnswerStore, answering
from flowledger.workflows.records.requests import resume_request_key

from .test_frontdoor import POLL, Door, door, interrupted_run

__all__ = ["door"]  # the fixture this module uses


async def test_a_front_door_resume_records_its_transport_and_payload(door: Door) -> None:
    answers = AnswerStore(door.session.store.kv)
    owner = door.owner(poll_interval=POLL, answers=answers)
    await owner.activate()
    run_id = await interrupted_run(door, owner)
    sid = door.session.session_id
    paused = (await door.session.registry.get(sid, run_id)).checkpoint_revision
    assert await answers.get(sid, run_id) is None  # nothing answered yet
    with answering("mcp-http"):
        result = await door.tools().call(
            "workflow_run_resume", {"run_id": run_id, "resume": {"increment": 2}}
        )
    assert result["run_status"] == "completed"
    recorded = await answers.get(sid, run_id)
    assert recorded is not None and len(recorded) == 1
    answer = recorded[0]
    assert (answer.checkpoint_revision, answer.kind, answer.transport) == (
        paused,
        "request",
        "mcp-http",
    )
    assert answer.session_id == sid and answer.payload == {"increment": 2}
    # the payload stays out of the activity history
    page = await door.tools().call("workflow_run_history", {"run_id": run_id})
    assert '"increment": 2' not in json.dumps(page["entries"])
    await owner.shutdown()


async def test_an_owner_resume_without_a_surface_is_a_python_call(door: Door) -> None:
    answers = AnswerStore(door.session.store.kv)
    owner = door.owner(answers=answers)
    await owner.activate()
    run_id = await interrupted_run(door, owner)
    await owner.resume(run_id, json.dumps({"increment": 1}))
    await owner.wait_idle()
    recorded = await answers.get(door.session.session_id, run_id)
    assert recorded is not None
    assert [(a.kind, a.transport, a.payload) for a in recorded] == [
        ("request", "python", {"increment": 1})
    ]
    await owner.shutdown()


async def test_a_request_without_a_transport_reads_as_python(door: Door) -> None:
    sid = door.session.session_id
    run_id = "44444444-4444-4444-8444-444444444444"
    old = {
        "version": 1,
        "payload": "{}",
        "checkpoint_revision": 3,
        "requested_at": 1.0,
        "state": "requested",
        "error": "",
    }
    await door.session.store.kv.put(
        resume_request_key(sid, run_id), json.dumps(old).encode(), expected=0
    )
    request = await door.requests.resume_request(sid, run_id)
    assert request is not None and request.transport == "python"
