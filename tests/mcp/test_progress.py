"""Activities reach the client while a tool call runs: as progress notifications when
the request carries a progress token, else as log messages where the protocol allows.
Nothing private (state, input, resume payload, interrupt info) is ever in them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import warnings
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest
from mcp import Client

from .conftest import (
    APP,
    REPO,
    http_client,
    http_server,
    payload,
    stdio_params,
    wait_status,
)

SECRET = "sentinel-secret-4f1c"
NOTE = "sentinel-note-9b2e"
START = {"definition_name": "relay", "definition_version": "v1", "input": {"secret": SECRET}}
RESUME = {"note": NOTE}
TOKEN = "progress-token-0123456789"
SESSION = "3f2504e0-4f89-41d3-9a0c-0305e82c3301"


class Progress:
    def __init__(self) -> None:
        self.updates: list[tuple[float, float | None, str | None]] = []

    async def __call__(self, progress: float, total: float | None, message: str | None) -> None:
        self.updates.append((progress, total, message))


class Logs:
    def __init__(self) -> None:
        self.entries: list[types.LoggingMessageNotificationParams] = []

    async def __call__(self, params: types.LoggingMessageNotificationParams) -> None:
        self.entries.append(params)


def assert_private_data_absent(*seen: Any) -> None:
    text = json.dumps(seen, default=str)
    assert SECRET not in text and NOTE not in text and "deliver?" not in text


async def run_relay(
    client: Client, on_progress: Progress | None = None, on_resume: Progress | None = None
) -> str:
    """Start the relay, wait for its pause, resume it; ``on_resume`` (default
    ``on_progress``) receives the resume call's progress."""
    started = payload(
        await client.call_tool("workflow_run_start", START, progress_callback=on_progress)
    )
    run_id: str = started["run_id"]
    await wait_status(client, run_id, "interrupted")
    resumed = payload(
        await client.call_tool(
            "workflow_run_resume",
            {"run_id": run_id, "resume": RESUME},
            progress_callback=on_resume or on_progress,
        )
    )
    assert resumed["run_status"] == "completed"
    return run_id


def check_progress(updates: list[tuple[float, float | None, str | None]]) -> None:
    values = [p for p, _, _ in updates]
    assert values == sorted(set(values)), "progress must increase"
    assert {total for _, total, _ in updates} == {4.0}
    assert values[-1] == 4.0
    messages = [m for _, _, m in updates]
    assert "vertex_completed gate passed" in messages
    assert "vertex_completed delivered" in messages
    assert all(
        m and m.split()[0] in {"run_started", "run_resumed", "vertex_completed"} for m in messages
    )


async def test_progress_notifications_over_stdio(tmp_path: Path) -> None:
    params = stdio_params(f"sqlite:///{tmp_path}/p.db", "--app", APP)
    async with Client(params) as client:
        definitions = payload(await client.call_tool("workflow_definition_list", {}))
        assert [d["name"] for d in definitions["definitions"]] == ["relay"]
        start_progress, resume_progress = Progress(), Progress()
        started = payload(
            await client.call_tool("workflow_run_start", START, progress_callback=start_progress)
        )
        await wait_status(client, started["run_id"], "interrupted")
        resumed = payload(
            await client.call_tool(
                "workflow_run_resume",
                {"run_id": started["run_id"], "resume": RESUME},
                progress_callback=resume_progress,
            )
        )
        assert resumed["run_status"] == "completed"
    # the start call is answered once the run is seeded: its run_started at least
    assert start_progress.updates[:1] == [(0.0, 4.0, "run_started")]
    # the resume segment runs inside the call: every step of it arrives before the answer
    check_progress(resume_progress.updates)
    assert resume_progress.updates[0][2] == "run_resumed"
    assert_private_data_absent(start_progress.updates, resume_progress.updates)


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_progress_notifications_over_http(tmp_path: Path, mode: str) -> None:
    progress = Progress()
    async with (
        http_server(f"sqlite:///{tmp_path}/p.db", tokens={TOKEN: SESSION}, app=APP) as url,
        http_client(url, TOKEN, mode=mode) as client,
    ):
        await run_relay(client, progress)
    check_progress(progress.updates)
    assert_private_data_absent(progress.updates)


@pytest.mark.parametrize(("mode", "log_level"), [("legacy", None), ("auto", "info")])
async def test_log_notifications_without_a_progress_token(
    tmp_path: Path, mode: str, log_level: str | None
) -> None:
    logs = Logs()
    async with (
        http_server(f"sqlite:///{tmp_path}/p.db", tokens={TOKEN: SESSION}, app=APP) as url,
        http_client(url, TOKEN, mode=mode, logging_callback=logs, log_level=log_level) as client,
    ):
        run_id = await run_relay(client)
    assert logs.entries
    kinds = [entry.data["kind"] for entry in logs.entries]
    assert kinds[0] == "run_started"
    assert kinds[-3:] == ["vertex_completed", "vertex_completed", "run_completed"]
    assert "run_resumed" in kinds
    for entry in logs.entries:
        assert entry.level == "info"
        assert entry.logger == "flowledger.activity"
        assert entry.data["run_id"] == run_id
        assert "session_id" not in entry.data
        assert set(entry.data) <= {
            "event_id", "run_id", "workflow_name", "workflow_version", "kind", "status",
            "vertex_id", "vertex_label", "completed_vertices", "total_vertices", "message",
            "occurred_at",
        }  # fmt: skip
    assert_private_data_absent([entry.data for entry in logs.entries])


async def test_no_log_notifications_unless_allowed(tmp_path: Path) -> None:
    async with http_server(f"sqlite:///{tmp_path}/p.db", tokens={TOKEN: SESSION}, app=APP) as url:
        # 2026-07-28: the request must opt in to a level
        quiet = Logs()
        async with http_client(url, TOKEN, logging_callback=quiet) as client:
            await run_relay(client)
        assert quiet.entries == []
        # handshake era: logging/setLevel above info silences the activities
        filtered = Logs()
        async with http_client(url, TOKEN, mode="legacy", logging_callback=filtered) as client:
            assert client.server_capabilities.logging is not None
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                await client.set_logging_level("warning")
            await run_relay(client)
        assert filtered.entries == []


async def test_progress_notifications_from_a_front_door(tmp_path: Path) -> None:
    """A ``--no-execute`` server executes nothing: a worker process runs the relay. The
    front door follows the run's durable journal while a call waits, so the client sees
    the same progress as from an executing server: every journal entry of the resume
    that advances progress, in order, each once."""
    db = f"sqlite:///{tmp_path}/p.db"
    env = {k: v for k, v in os.environ.items() if k != "FLOWLEDGER_DB"}
    options = ["--db", db, "--app", APP, "--lease-ttl", "2", "--poll", "0.05"]
    worker = subprocess.Popen(  # noqa: ASYNC220 - started once, stopped in finally
        [sys.executable, "-m", "flowledger", "worker", *options],
        cwd=REPO,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        async with Client(stdio_params(db, "--app", APP, "--no-execute")) as client:
            start_progress, resume_progress = Progress(), Progress()
            run_id = await run_relay(client, start_progress, resume_progress)
            history = payload(await client.call_tool("workflow_run_history", {"run_id": run_id}))
    finally:
        worker.terminate()
        worker.wait(timeout=30)
    # A front door's start returns once the worker's seed is durable, which may be before
    # the worker publishes run_started: the start call shows it, or nothing yet.
    assert start_progress.updates[:1] in ([], [(0.0, 4.0, "run_started")])
    check_progress(resume_progress.updates)
    entries = history["entries"]
    kinds = [e["kind"] for e in entries]
    expected, last = [], -1
    for entry in entries[kinds.index("run_resumed") :]:
        done = entry.get("completed_vertices", 0)
        if done > last:
            message = f"{entry['kind']} {entry.get('vertex_label', '')}".strip()
            expected.append((float(done), 4.0, message))
            last = done
    assert resume_progress.updates == expected
    assert_private_data_absent(start_progress.updates, resume_progress.updates)
