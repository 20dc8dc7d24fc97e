"""The errors a deployed node raises inside a run, provoked through the workflow tools: a
run fails, saved with the error's type and message (naming the node), and that type's
stable ``code`` is the one ``explain`` describes. The run's error shows the type, not the
code, so the tests map one to the other through the error classes."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from flowledger.deploy import StdioSource, compile_artifact, validate_artifact
from flowledger.deploy.drafts.explain import explain
from flowledger.deploy.runs.errors import (
    NodeOutputError,
    ToolOutcomeUnknownError,
    ToolResultTooLargeError,
)
from flowledger.deploy.runs.failures import RecordedFailureError
from flowledger.deploy.runs.intents import MAX_RESULT_BYTES, ToolIntents
from flowledger.workflows import Catalog

from .runs import failures_app
from .test_runs import session, settle, start

ERRORS = (NodeOutputError, ToolOutcomeUnknownError, ToolResultTooLargeError)


def code_of(got: dict[str, Any]) -> str:
    """The code of the error type a failed run shows (an explain entry exists for it)."""
    kinds = {kind.__name__: kind for kind in (RecordedFailureError, *ERRORS)}
    code = str(kinds[got["error"]["type"]].code)
    assert explain(code)["code"] == code
    return code


async def test_a_result_over_the_limit_fails_the_run(
    tmp_path: Path, everything: StdioSource
) -> None:
    """server-everything's echo answers its message: one over `MAX_RESULT_BYTES` (built
    at run time from a 10 kB state field) is not kept, and the run fails naming the node
    and the limit."""
    piece = "x" * 10_000
    copies = MAX_RESULT_BYTES // len(piece) + 1
    validated = validate_artifact(
        {
            "format": "flowledger.artifact/v1",
            "name": "large",
            "version": "1",
            "input_schema": {"type": "object", "additionalProperties": False},
            "output_schema": {"type": "object", "additionalProperties": False},
            "dependencies": {"dep": {"tools": ["echo"]}},
            "state": {"piece": {}},
            "start": "fill",
            "nodes": {
                "fill": {"kind": "set", "assign": {"piece": piece}, "next": "call"},
                "call": {
                    "kind": "tool",
                    "dependency": "dep",
                    "tool": "echo",
                    "arguments": {
                        "message": "${ join('', [" + ", ".join(["state.piece"] * copies) + "]) }"
                    },
                    "next": "done",
                },
                "done": {"kind": "end", "outcome": "done"},
            },
        }
    )
    catalog = Catalog()
    catalog.register(compile_artifact(validated, sources={"dep": everything}))
    async with session(f"sqlite:///{tmp_path / 'large.db'}", catalog) as (built, tools):
        got = await settle(built, tools, await start(tools, "large", {}))
    assert got["run_status"] == "failed", got
    assert code_of(got) == "tool_result_too_large"
    assert (
        got["error"]["message"] == f"node call: the result is larger than {MAX_RESULT_BYTES} bytes"
    )


async def test_an_output_that_breaks_the_output_schema_fails_the_run(tmp_path: Path) -> None:
    """The end node's output is computed from state at run time; a value its output
    schema refuses fails the run (schema_mismatch), naming the node."""
    validated = validate_artifact(
        {
            "format": "flowledger.artifact/v1",
            "name": "mismatch",
            "version": "1",
            "input_schema": {
                "type": "object",
                "additionalProperties": False,
                "properties": {"count": {}},
            },
            "output_schema": {
                "type": "object",
                "additionalProperties": False,
                "properties": {"count": {"type": "integer"}},
            },
            "start": "done",
            "nodes": {
                "done": {"kind": "end", "outcome": "ok", "output": {"count": "${ input.count }"}}
            },
        }
    )
    catalog = Catalog()
    catalog.register(compile_artifact(validated, sources={}))
    async with session(f"sqlite:///{tmp_path / 'mismatch.db'}", catalog) as (built, tools):
        fine = await settle(built, tools, await start(tools, "mismatch", {"count": 3}))
        assert fine["run_status"] == "completed", fine
        got = await settle(built, tools, await start(tools, "mismatch", {"count": "three"}))
    assert got["run_status"] == "failed", got
    assert code_of(got) == "schema_mismatch"
    assert got["error"]["message"].startswith("node done: ")
    assert "does not match its schema" in got["error"]["message"]


async def test_a_failure_recorded_by_a_stopped_owner_fails_the_adopted_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The owner records the failed attempt of ``append`` (not idempotent, an error
    result) and stops before the step commits (its shutdown cancels the node right after
    the record). The next owner finds the recorded failure: the run fails with it
    (tool_call_failed, naming the attempt, the tool and the original code) and the tool
    is not called again."""
    flaky = tmp_path / "flaky"
    flaky.mkdir()
    monkeypatch.setenv("FLAKY_DIR", str(flaky))
    (flaky / "error-upto").write_text("1")
    url = f"sqlite:///{tmp_path / 'recorded.db'}"
    validated = validate_artifact(failures_app.one_call())
    catalog = Catalog()
    catalog.register(compile_artifact(validated, sources={"flaky": failures_app.flaky_source()}))
    recorded = asyncio.Event()
    original = ToolIntents.record

    async def record_then_stop(self: ToolIntents, *args: Any, **kwargs: Any) -> None:
        await original(self, *args, **kwargs)
        if args[2] == "failed":
            recorded.set()
            await asyncio.Event().wait()  # the owner stops here, its step uncommitted

    monkeypatch.setattr(ToolIntents, "record", record_then_stop)
    async with session(url, catalog) as (_built, tools):
        run_id = await start(tools, validated.name, {"text": "paid"})
        async with asyncio.timeout(120):  # a hang deadline, not a timing bound
            await recorded.wait()
    monkeypatch.setattr(ToolIntents, "record", original)
    assert (flaky / "calls").read_text().splitlines() == ["paid"]
    async with session(url, catalog) as (built, tools):
        got = await settle(built, tools, run_id)
    assert got["run_status"] == "failed", got
    assert code_of(got) == "tool_call_failed"
    assert got["error"]["message"].startswith("node call: attempt 1 of append failed (tool_error, ")
    assert (flaky / "calls").read_text().splitlines() == ["paid"]  # not called again


async def test_a_guarded_call_with_a_result_over_the_limit_is_not_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``append`` is not idempotent, so its result would be kept in the intent log
    before the step commits: one over `MAX_RESULT_BYTES` is refused there (the run fails
    with tool_result_too_large, naming its size) and no ``done`` intent is written."""
    flaky = tmp_path / "flaky"
    flaky.mkdir()
    monkeypatch.setenv("FLAKY_DIR", str(flaky))
    (flaky / "answer-bytes").write_text(str(MAX_RESULT_BYTES + 1))
    validated = validate_artifact(failures_app.one_call())
    catalog = Catalog()
    catalog.register(compile_artifact(validated, sources={"flaky": failures_app.flaky_source()}))
    states: list[str] = []
    original = ToolIntents.record

    async def watched(self: ToolIntents, *args: Any, **kwargs: Any) -> None:
        states.append(str(args[2]))
        await original(self, *args, **kwargs)

    monkeypatch.setattr(ToolIntents, "record", watched)
    async with session(f"sqlite:///{tmp_path / 'kept.db'}", catalog) as (built, tools):
        got = await settle(built, tools, await start(tools, validated.name, {"text": "big"}))
    assert got["run_status"] == "failed", got
    assert code_of(got) == "tool_result_too_large"
    message = got["error"]["message"]
    assert message.startswith("node call: the result is ") and message.endswith(
        f" bytes; the limit is {MAX_RESULT_BYTES}"
    )
    assert states == ["started"]  # never "done": the result was not kept
