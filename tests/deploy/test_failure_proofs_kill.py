"""SIGKILL of a run's owner at every point of a retried call of a tool annotated not
idempotent (docs/deploy.md, "Failures": durable attempt counts), then adoption by a new
owner: the server's call file never holds more calls than the attempts the trace
records, an attempt that may have reached the tool is never made again, and the count
goes on from where the killed owner left it.

The owner is a process of ``tests.deploy.runs.proof_app`` (the session owned with a
one-second lease, so adoption follows the kill within seconds); it is stopped
deterministically at the point (``PROOF_STOP``: a hook on the intent records, or the
server holding the request), never by sleeping. The call: ``write`` retried on
``tool_error`` up to 3 attempts, the first call answering an error; an unknown outcome
is routed to the ``failed`` end because ``on_error.kinds`` names it."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from flowledger.tools import WorkflowTools

from .runs.proof_app import catalog
from .servers import REPO
from .test_runs import adopting, outcome, trace_of, wait_for


def lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


@pytest.fixture
def proof(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The proof server's folder (``PROOF_DIR``)."""
    folder = tmp_path / "proof"
    folder.mkdir()
    monkeypatch.setenv("PROOF_DIR", str(folder))
    return folder


def start_owner(
    db: str, name: str, document: dict[str, Any], env: dict[str, str]
) -> subprocess.Popen[bytes]:
    """The run's owner: a process of ``proof_app`` starting ``name`` with ``document``."""
    return subprocess.Popen(
        [sys.executable, "-m", "tests.deploy.runs.proof_app", db, name, json.dumps(document)],
        cwd=REPO,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,  # its process group holds the server too: killed together
    )


# (where the owner stops, the attempt, the calls made in all, the run's outcome, the
# routed failure's attempt when it ends `failed`)
KILL_POINTS = [
    ("before-started", 1, 2, "done", None),  # nothing recorded yet: attempt 1 is made anew
    ("after-started", 1, 0, "failed", 1),  # recorded, never sent: still unknown, not re-sent
    ("before-outcome", 1, 1, "failed", 1),  # the error answer not recorded: unknown
    ("after-outcome", 1, 2, "done", None),  # attempt 1's failure recorded: attempt 2 follows
    ("before-started", 2, 2, "done", None),
    ("after-started", 2, 1, "failed", 2),
    ("server-holds", 2, 2, "failed", 2),  # between the request and the answer
    ("before-outcome", 2, 2, "failed", 2),
    ("after-outcome", 2, 2, "done", None),  # the success recorded: its result is reused
]


@pytest.mark.parametrize(("point", "attempt", "calls", "ending", "routed"), KILL_POINTS)
async def test_a_killed_owner_at_any_point_never_calls_more_than_the_trace_records(
    tmp_path: Path,
    proof: Path,
    point: str,
    attempt: int,
    calls: int,
    ending: str,
    routed: int | None,
) -> None:
    db = f"sqlite:///{tmp_path / 'crash.db'}"
    (proof / "write.error-upto").write_text("1")
    env = dict(os.environ)
    if point == "server-holds":
        (proof / "write.hold-at").write_text(str(attempt))
        stopped = proof / f"write.held-{attempt}"
    else:
        env["PROOF_STOP"] = f"{point}:{attempt}"
        stopped = proof / "stopped"
    owner = start_owner(db, "proof_write", {"text": "paid"}, env)
    try:
        await asyncio.to_thread(wait_for, stopped.exists, f"the owner at {point}:{attempt}")
    finally:
        os.killpg(owner.pid, signal.SIGKILL)
        await asyncio.to_thread(owner.wait, 60)
    (proof / "release").touch()
    killed_calls = len(lines(proof / "write.calls"))

    async with adopting(db, catalog()) as adopted:
        assert await adopted.supervisor.wait_idle() is None
        [run] = (await adopted.registry.list(adopted.session_id)).runs
        final: dict[str, Any] = await WorkflowTools.for_session(adopted).call(
            "workflow_run_get", {"run_id": run.id}
        )
        state = await outcome(adopted, "proof_write", run.id)
        page = await trace_of(adopted, "proof_write", run.id)
    trace = [entry for entry in page.entries if entry.node == "call"]
    made = lines(proof / "write.calls")
    attempts = sorted({entry.attempt for entry in trace})
    assert final["status_summary"] == f"outcome {ending}", (final, trace)
    # the proof: never more calls than the attempts the trace records, each attempt traced
    assert len(made) <= len(attempts), (made, trace)
    assert attempts == list(range(1, len(attempts) + 1)), trace
    assert len(made) == calls, (made, trace)
    if routed is None:
        assert state["answer"] == str(calls)
        assert trace[-1].attempt == len(made) and trace[-1].status in ("ok", "reused")
    else:
        # the attempt in flight was not made again: its unknown outcome is routed
        assert len(made) == killed_calls
        assert (state["kind"], state["code"], state["attempt"]) == (
            "outcome_unknown",
            "tool_outcome_unknown",
            routed,
        )
        assert (trace[-1].attempt, trace[-1].status, trace[-1].failure) == (
            routed,
            "routed",
            "outcome_unknown",
        )
    if attempts[-1] > 1:  # the first attempt's error is in the trace, whoever made it
        assert (trace[0].attempt, trace[0].failure) == (1, "tool_error"), trace


async def test_a_killed_owner_mid_foreach_may_call_a_read_only_item_again_never_a_finished_one(
    tmp_path: Path, proof: Path
) -> None:
    """A serial foreach of the read-only ``read`` over a, b, c; the owner is SIGKILLed
    while the server holds b's call. The adopting owner does not call a again (its
    result is in the committed state), calls b again (read-only: allowed, no intent
    guards it), then c: the calls file holds a once, b twice, c once, and the answers
    are in item order (the repeated b answers the new count)."""
    db = f"sqlite:///{tmp_path / 'each.db'}"
    (proof / "read.hold-at").write_text("2")
    owner = start_owner(db, "proof_each", {"texts": ["a", "b", "c"]}, dict(os.environ))
    try:
        await asyncio.to_thread(wait_for, (proof / "read.held-2").exists, "b's call")
    finally:
        os.killpg(owner.pid, signal.SIGKILL)
        await asyncio.to_thread(owner.wait, 60)
    (proof / "release").touch()
    async with adopting(db, catalog()) as adopted:
        assert await adopted.supervisor.wait_idle() is None
        [run] = (await adopted.registry.list(adopted.session_id)).runs
        final: dict[str, Any] = await WorkflowTools.for_session(adopted).call(
            "workflow_run_get", {"run_id": run.id}
        )
        state = await outcome(adopted, "proof_each", run.id)
    assert final["status_summary"] == "outcome done", final
    assert [answer["text"] for answer in state["answers"]] == ["1", "3", "4"], state
    assert lines(proof / "read.calls") == ["a", "b", "b", "c"]
