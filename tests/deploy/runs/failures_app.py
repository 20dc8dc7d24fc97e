"""The failure tests' artifacts and catalog (``--app tests.deploy.runs.failures_app:catalog``,
run from the repository root): one call of a tool of ``flaky_server.py`` (or of
server-everything), with the node's ``retry`` and ``on_error`` given; a routed failure
ends the run with outcome ``failed`` and the failure's kind, code and attempt in state.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

from flowledger.deploy import StdioSource, compile_artifact, validate_artifact
from flowledger.workflows import Catalog

HERE = Path(__file__).parent


def flaky_source() -> StdioSource:
    """The test server of ``flaky_server.py`` (its files: ``FLAKY_DIR``)."""
    return StdioSource(
        sys.executable,
        ["-m", "tests.deploy.runs.flaky_server"],
        env={"FLAKY_DIR": os.environ.get("FLAKY_DIR", "")},
        cwd=str(HERE.parents[2]),
    )


def one_call(
    tool: str = "append",
    arguments: Any = None,
    *,
    name: str = "flaky_call",
    dependency: str = "flaky",
    retry: dict[str, Any] | None = None,
    on_error: dict[str, Any] | None = None,
    timeout: float | None = None,
) -> dict[str, Any]:
    """An artifact calling ``tool`` once; ``on_error`` (if given) defaults to routing to
    the ``failed`` end, recording the failure in state."""
    node: dict[str, Any] = {
        "kind": "tool",
        "dependency": dependency,
        "tool": tool,
        "arguments": {"text": "${ input.text }"} if arguments is None else arguments,
        "assign": {"answer": "${ result.text }"},
        "next": "done",
    }
    if retry is not None:
        node["retry"] = retry
    if on_error is not None:
        node["on_error"] = {
            "next": "failed",
            "assign": {
                "kind": "${ error.kind }",
                "code": "${ error.code }",
                "attempt": "${ error.attempt }",
            },
            **on_error,
        }
    if timeout is not None:
        node["timeout"] = timeout
    nodes: dict[str, Any] = {
        "call": node,
        "done": {"kind": "end", "outcome": "done", "output": {"answer": "${ state.answer }"}},
    }
    if on_error is not None:
        nodes["failed"] = {"kind": "end", "outcome": "failed", "output": {"answer": None}}
    return {
        "format": "flowledger.artifact/v1",
        "name": name,
        "version": "1",
        "input_schema": {
            "type": "object",
            "additionalProperties": False,
            "properties": {"text": {"type": "string"}},
        },
        "output_schema": {
            "type": "object",
            "additionalProperties": False,
            "properties": {"answer": {"type": ["string", "null"]}},
        },
        "dependencies": {dependency: {"tools": [tool]}},
        "state": {"answer": {}, "kind": {}, "code": {}, "attempt": {}},
        "start": "call",
        "nodes": nodes,
    }


# The crash test's artifact: a retried call of the tool that is not idempotent; an
# unknown outcome is routed only because `kinds` names it.
RETRIED_WRITE = one_call(
    name="retried_write",
    retry={"attempts": 3, "on": ["tool_error", "unavailable"], "backoff": {"initial": 0}},
    on_error={"kinds": ["tool_error", "outcome_unknown", "unavailable"]},
)


def catalog() -> Catalog:
    definitions = Catalog()
    definitions.register(
        compile_artifact(validate_artifact(RETRIED_WRITE), sources={"flaky": flaky_source()})
    )
    return definitions
