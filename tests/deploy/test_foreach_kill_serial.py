"""SIGKILL of a run's owner mid-foreach in **serial** mode, then adoption by another
process: every finished item's non-idempotent call is counted exactly once.

The owner is a ``flowledger start`` process running an artifact of
``tests/deploy/runs/app.py`` over ``tests/deploy/runs/item_server.py`` (the tests' own
SDK server: ``append_item`` is not idempotent, appends a line per call to
``ITEM_DIR/lines``, and waits while ``ITEM_DIR/hold-<text>`` exists, after creating
``ITEM_DIR/started-<text>``). The hold file makes the kill point deterministic: the
test kills only once the held call is under way and everything before it is recorded.
(`test_foreach.py` kills a concurrent foreach with a tool body; `test_foreach_child.py`
a serial one with a child body.)"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from flowledger.tools import WorkflowTools

from .servers import REPO
from .test_foreach import done_intents
from .test_runs import APP, adopting, outcome


async def kill_when_held(
    tmp_path: Path,
    db: str,
    name: str,
    document: dict[str, Any],
    held: str,
    ready: Callable[[], Awaitable[bool]],
) -> None:
    """Start ``name`` in an owner process, SIGKILL it once the call of ``held`` is under
    way and ``ready()`` is true; the held call never completes."""
    (tmp_path / f"hold-{held}").touch()
    owner = subprocess.Popen(  # noqa: ASYNC220 - one child, killed below
        [
            sys.executable, "-m", "flowledger", "start", name, "1",
            "--input", json.dumps(document), "--db", db, *APP,
        ],
        cwd=REPO,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 300  # catches a hang only
        while not ((tmp_path / f"started-{held}").exists() and await ready()):
            assert time.monotonic() < deadline, f"timed out waiting for the call of {held}"
            await asyncio.sleep(0.05)
    finally:
        os.killpg(owner.pid, signal.SIGKILL)
        await asyncio.to_thread(owner.wait, 60)
    # The hold stays: the killed owner's server (a session of its own, so it outlives
    # the kill until it reads EOF) must not finish the held call; a new call of the
    # held text by the adopter would show as a new started file.
    (tmp_path / f"started-{held}").unlink()


async def adopted_run(db: str, name: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """Adopt the database's run in this process: the run as ``workflow_run_get`` shows
    it, and its final state."""
    from .runs.app import catalog

    async with adopting(db, catalog()) as adopted:  # activation adopts the run
        assert await adopted.supervisor.wait_idle() is None
        [run] = (await adopted.registry.list(adopted.session_id)).runs
        got = await WorkflowTools.for_session(adopted).call("workflow_run_get", {"run_id": run.id})
        return got, await outcome(adopted, name, run.id)


def called(tmp_path: Path) -> list[str]:
    lines = tmp_path / "lines"
    return lines.read_text().splitlines() if lines.exists() else []


async def test_a_serial_tool_body_killed_mid_item_counts_each_finished_call_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A serial foreach (one item per super-step, so one checkpoint per item) whose tool
    body calls ``append_item``: killed while item c's call is under way, a and b having
    finished in earlier steps (their records are committed state). After adoption no
    finished item is called again (the file holds a and b once), c is not called again
    either (not idempotent, outcome unknown: the run fails with tool_outcome_unknown,
    naming the item) and nothing after c runs."""
    db = f"sqlite:///{tmp_path / 'serial.db'}"
    monkeypatch.setenv("ITEM_DIR", str(tmp_path))
    texts = ["a", "b", "c", "d"]

    async def ready() -> bool:
        return called(tmp_path) == ["a", "b"] and await done_intents(db) == 2

    await kill_when_held(
        tmp_path, db, "foreach_write", {"texts": texts, "mode": "serial"}, "c", ready
    )
    final, _ = await adopted_run(db, "foreach_write")
    assert final["run_status"] == "failed", final
    assert final["error"]["type"] == "ToolOutcomeUnknownError"
    assert "item 2: a call of items.append_item" in final["error"]["message"]
    assert called(tmp_path) == ["a", "b"]  # each finished item's call exactly once
    assert not (tmp_path / "started-c").exists()  # the call under way was not made again
    assert not (tmp_path / "started-d").exists()


async def test_a_serial_sequence_body_killed_mid_item_routes_the_unknown_call_and_goes_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A serial foreach whose sequence body makes two ``append_item`` calls per item,
    the second with ``on_error: {kinds: [outcome_unknown]}``: killed while item b's
    second call (``b2``) is under way, item a finished (its record is state) and b's
    first call returned (its intent is done). The adopting process runs item b again
    from the sequence's start under the same nested run id: b's first call is not made
    again (its recorded result is reused), the call under way is that attempt's
    ``outcome_unknown`` (never made again), routed to the ``unknown`` end as the author
    declared, and the foreach goes on with c. Every call is in the file exactly once."""
    db = f"sqlite:///{tmp_path / 'sequence.db'}"
    monkeypatch.setenv("ITEM_DIR", str(tmp_path))

    async def ready() -> bool:
        return called(tmp_path) == ["a", "a2", "b"] and await done_intents(db) == 3

    await kill_when_held(
        tmp_path, db, "foreach_sequence_write", {"texts": ["a", "b", "c"]}, "b2", ready
    )
    final, state = await adopted_run(db, "foreach_sequence_write")
    assert final["run_status"] == "completed", final
    assert called(tmp_path) == ["a", "a2", "b", "c", "c2"]
    assert not (tmp_path / "started-b2").exists()  # the call under way was not made again
    assert state["$output"]["items"] == [
        {"outcome": "written", "output": {"lines": [1, 2]}},
        {"outcome": "unknown", "output": {"line": 3, "kind": "outcome_unknown"}},
        {"outcome": "written", "output": {"lines": [4, 5]}},
    ]
