"""The errors a deployed node raises inside a run, provoked through the workflow tools: a
run fails, saved with the error's type and message (naming the node), and that type's
stable ``code`` is the one ``explain`` describes. The run's error shows the type, not the
code, so the tests map one to the other through `flowledger.deploy.runs.errors`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from flowledger.deploy import StdioSource, compile_artifact, validate_artifact
from flowledger.deploy.drafts.explain import explain
from flowledger.deploy.runs import errors
from flowledger.deploy.runs.intents import MAX_RESULT_BYTES
from flowledger.workflows import Catalog

from .test_runs import session, settle, start


def code_of(got: dict[str, Any]) -> str:
    """The code of the error type a failed run shows (an explain entry exists for it)."""
    code = str(getattr(errors, got["error"]["type"]).code)
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
