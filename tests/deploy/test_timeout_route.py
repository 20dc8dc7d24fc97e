"""An interrupt node's deadline that goes to a declared route: ``timeout_next``.

Validated at save (an unknown node, or a route without a timeout, is a placed issue
naming ``nodes.<id>.timeout_next``), and run through the tools bundle on a ManualClock
over memory, SQLite and PostgreSQL: the deadline continues at ``timeout_next``, an
answer - even one equal to ``on_timeout`` - at ``next``, and resumes racing the deadlines
have exactly one winner per run, whose route the run took."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from flowledger.deploy import validate_artifact
from flowledger.deploy.artifacts.schema import artifact_json_schema
from flowledger.tools.errors import ToolError

from .._postgres import postgres_url
from .test_wait import OBJECT, Env, env, issues_of


def escalating(**changes: Any) -> dict[str, Any]:
    """Ask for approval for 600 s; a deadline escalates, an answer decides."""
    ask = {
        "kind": "interrupt",
        "request": {"question": "approve?"},
        "resume_schema": {
            **OBJECT,
            "required": ["approved"],
            "properties": {"approved": {"type": "boolean"}},
        },
        "assign": {"approved": "${ resume.approved }"},
        "timeout": 600,
        "on_timeout": {"approved": False},
        "timeout_next": "escalate",
        "next": "decided",
        **changes,
    }
    return {
        "format": "flowledger.artifact/v1",
        "name": "escalation",
        "version": "1",
        "input_schema": OBJECT,
        "output_schema": {**OBJECT, "properties": {"approved": {"type": "boolean"}}},
        "state": {"approved": {}},
        "start": "ask",
        "nodes": {
            "ask": {k: v for k, v in ask.items() if v is not None},
            "decided": {
                "kind": "end",
                "outcome": "decided",
                "output": {"approved": "${ state.approved }"},
            },
            "escalate": {
                "kind": "end",
                "outcome": "escalated",
                "output": {"approved": "${ state.approved }"},
            },
        },
    }


@pytest.mark.parametrize(
    ("changes", "issue"),
    [
        ({"timeout_next": "nowhere"}, ("nodes.ask.timeout_next", "unknown_node")),
        ({"timeout": None, "on_timeout": None}, ("nodes.ask.timeout_next", "interrupt_timeout")),
        ({"timeout_next": "Not A Node"}, ("nodes.ask.timeout_next", "bad_name")),
    ],
)
def test_a_bad_timeout_route_is_a_placed_issue(
    changes: dict[str, Any], issue: tuple[str, str]
) -> None:
    assert issues_of(escalating(**changes)) == [issue]


def test_a_timeout_route_validates_and_is_in_the_json_schema() -> None:
    validated = validate_artifact(escalating())
    assert validated.successors("ask") == ("decided", "escalate")
    properties = artifact_json_schema()["$defs"]["InterruptNode"]["properties"]
    assert "timeout_next" in properties


@pytest.fixture(params=["memory", "sqlite", "postgres"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "memory":
        yield "memory://"
    elif request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'route.db'}"
    else:
        with postgres_url() as postgres:
            yield postgres


async def _outcome(e: Env, run_id: str) -> tuple[str, bool]:
    state = await e.state("escalation", run_id)
    return state["$outcome"], state["approved"]


async def test_the_deadline_takes_its_route_and_an_answer_the_other(url: str) -> None:
    async with env(url, escalating()) as e:
        late = await e.start("escalation", {})
        answered = await e.start("escalation", {})
        # the same payload as on_timeout, sent by a person: it is an answer, not a deadline
        await e.tools.call(
            "workflow_run_resume", {"run_id": answered, "resume": {"approved": False}}
        )
        await e.until(lambda: e.status_in(answered, "completed"))
        e.clock.advance(600)
        await e.until(lambda: e.status_in(late, "completed"))
        assert await _outcome(e, late) == ("escalated", False)
        assert await _outcome(e, answered) == ("decided", False)


async def test_resumes_racing_deadlines_have_one_winner_whose_route_is_taken(url: str) -> None:
    async with env(url, escalating()) as e:
        runs = [await e.start("escalation", {}) for _ in range(12)]

        async def resume(run_id: str, turns: int) -> bool:
            for _ in range(turns):  # let some of the owner's wakes get ahead
                await asyncio.sleep(0)
            try:
                await e.tools.call(
                    "workflow_run_resume", {"run_id": run_id, "resume": {"approved": True}}
                )
            except ToolError as refused:
                assert "interrupted" in str(refused), refused  # a definite answer
                return False
            return True

        e.clock.advance(600)  # every deadline is due: the wakes race the resumes
        won = await asyncio.gather(*(resume(run_id, 3 * n) for n, run_id in enumerate(runs)))
        for run_id in runs:
            await e.until(lambda run_id=run_id: e.status_in(run_id, "completed"))  # type: ignore[misc]
        for run_id, resumed in zip(runs, won, strict=True):
            expected = ("decided", True) if resumed else ("escalated", False)
            assert await _outcome(e, run_id) == expected, (resumed, run_id)
