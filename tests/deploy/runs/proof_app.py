"""The failure proofs' owner process (``--app tests.deploy.runs.proof_app:catalog``, run
from the repository root): a retried call of ``proof_server.py``'s ``write`` (annotated
not idempotent), and a hook that stops the owner at a chosen point of an attempt so a
test can SIGKILL it there, deterministically.

``PROOF_STOP=<point>:<attempt>`` (read when this module is imported, in the owner
process only) makes the owner, at ``point`` of attempt ``attempt`` of the call, create
``PROOF_DIR/stopped`` and wait forever (for the SIGKILL). The points, in the order an
attempt passes them (`ToolIntents.record` is where a tool node writes them):

* ``before-started``: before the attempt's ``started`` intent is appended;
* ``after-started``: after it, before the request is sent;
* ``before-outcome``: the tool answered, before the ``done`` / ``failed`` record;
* ``after-outcome``: after that record, before the step's checkpoint.

(The point between the request and the answer is held by the server: ``write.hold-at``.)

``python -m tests.deploy.runs.proof_app DB NAME INPUT`` is that owner: it owns the
database's default session with a short lease (`OWNER_LEASE_TTL`, so the next owner
adopts the run within seconds of the SIGKILL, not the default 15), starts definition
``NAME`` (``proof_write`` or ``proof_each``) with the JSON ``INPUT`` and serves until it
is killed.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from flowledger.deploy import StdioSource, compile_artifact, validate_artifact
from flowledger.deploy.runs.intents import ToolIntents
from flowledger.workflows import Catalog

from .failures_app import one_call

__all__ = ["EACH", "POINTS", "RETRIED", "catalog", "proof_source"]

HERE = Path(__file__).parent
OWNER_LEASE_TTL = 1.0
POINTS = ("before-started", "after-started", "before-outcome", "after-outcome")


def proof_source() -> StdioSource:
    """The server of ``proof_server.py`` (its files: ``PROOF_DIR``)."""
    return StdioSource(
        sys.executable,
        ["-m", "tests.deploy.runs.proof_server"],
        env={"PROOF_DIR": os.environ.get("PROOF_DIR", "")},
        cwd=str(HERE.parents[2]),
    )


# Tool errors and unavailability retried up to 3 attempts; an unknown outcome (of this
# tool that is not idempotent) is routed only because `kinds` names it.
RETRIED = one_call(
    "write",
    name="proof_write",
    dependency="proof",
    retry={"attempts": 3, "on": ["tool_error", "unavailable"], "backoff": {"initial": 0}},
    on_error={"kinds": ["tool_error", "outcome_unknown", "unavailable"]},
)


# A serial foreach of the read-only ``read``, one call per item (the crash test of a
# foreach whose items may be called again).
EACH: dict[str, Any] = {
    "format": "flowledger.artifact/v1",
    "name": "proof_each",
    "version": "1",
    "input_schema": {
        "type": "object",
        "additionalProperties": False,
        "required": ["texts"],
        "properties": {"texts": {"type": "array", "items": {"type": "string"}}},
    },
    "output_schema": {
        "type": "object",
        "additionalProperties": False,
        "properties": {"answers": {"type": "array"}},
    },
    "dependencies": {"proof": {"tools": ["read"]}},
    "state": {"answers": {}},
    "start": "each",
    "nodes": {
        "each": {
            "kind": "foreach",
            "items": "${ input.texts }",
            "body": {
                "kind": "tool",
                "dependency": "proof",
                "tool": "read",
                "arguments": {"text": "${ item }"},
            },
            "into": "answers",
            "next": "done",
        },
        "done": {
            "kind": "end",
            "outcome": "done",
            "output": {"answers": "${ state.answers[*].text }"},
        },
    },
}


def catalog() -> Catalog:
    definitions = Catalog()
    for document in (RETRIED, EACH):
        definitions.register(
            compile_artifact(validate_artifact(document), sources={"proof": proof_source()})
        )
    return definitions


def _attempt_of(key: str) -> int:
    """The attempt an intent key belongs to (`attempt_key`'s inverse)."""
    _, marker, number = key.rpartition("#attempt")
    return int(number) if marker else 1


def _install(point: str, attempt: int) -> None:
    record = ToolIntents.record

    async def stop() -> None:
        (Path(os.environ["PROOF_DIR"]) / "stopped").touch()
        await asyncio.Event().wait()  # until the SIGKILL

    async def stopping(
        self: ToolIntents, graph_run_id: str, idempotency_key: str, state: Any, **kw: Any
    ) -> None:
        here = _attempt_of(idempotency_key) == attempt
        phase = "started" if state == "started" else "outcome"
        if here and point == f"before-{phase}":
            await stop()
        await record(self, graph_run_id, idempotency_key, state, **kw)
        if here and point == f"after-{phase}":
            await stop()

    ToolIntents.record = stopping  # type: ignore[method-assign]


def _from_env(env: Mapping[str, str]) -> None:
    chosen = env.get("PROOF_STOP")
    if chosen:
        point, _, attempt = chosen.partition(":")
        if point not in POINTS:
            raise ValueError(f"PROOF_STOP: {point!r} is none of {POINTS}")
        _install(point, int(attempt))


_from_env(os.environ)


async def _own(url: str, name: str, document: str) -> None:
    from flowledger.host import open_session
    from flowledger.tools import WorkflowTools

    async with open_session(url, catalog(), lease_ttl=OWNER_LEASE_TTL) as owned:
        await WorkflowTools.for_session(owned).call(
            "workflow_run_start",
            {"definition_name": name, "definition_version": "1", "input": json.loads(document)},
        )
        await asyncio.Event().wait()  # until the SIGKILL (or the run's end, unobserved)


if __name__ == "__main__":
    asyncio.run(_own(sys.argv[1], sys.argv[2], sys.argv[3]))
