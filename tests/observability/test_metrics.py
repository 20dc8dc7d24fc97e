"""The process's metrics through the front doors in this process: deployed runs calling a
real MCP server (``mcp-server-time``) from the CLI, ``/metrics`` of the HTTP MCP server
and of the dashboard with and without tokens, and JSON log lines.

Metrics are process-wide (one registry): these tests turn them on for the rest of the
test process, and compare counters before and after rather than expect zeros."""

from __future__ import annotations

import asyncio
import io
import json
import logging
from collections.abc import Iterator
from pathlib import Path

import httpx2
import pytest

from flowledger.observability import logs, metrics

from ..cli.conftest import Cli, _create
from ..deploy.servers import REPO, time_command
from ..mcp.conftest import REVIEW_INPUT, http_client, http_server
from ..web.conftest import dashboard
from ._scrape import Samples, parse, value

pytest.importorskip("prometheus_client")

SENTINEL = "Sentinel/Kz9NotForMetrics"
TOKEN_A = "token-a-0123456789abcdef"
TOKEN_B = "token-b-0123456789abcdef"
SESSION_A = "7c9e6679-7425-40de-944b-e07fc1f90ae7"
SESSION_B = "0b5d2a55-32f6-4d6e-8a55-6c1a1f3a7e11"


def scrape() -> tuple[str, Samples]:
    text = asyncio.run(metrics.exposition()).decode()
    return text, parse(text)


@pytest.fixture
def cli(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Cli:
    monkeypatch.delenv("FLOWLEDGER_DB", raising=False)
    monkeypatch.chdir(tmp_path)
    url = f"sqlite:///{tmp_path}/m.db"
    asyncio.run(_create(url))
    return Cli(url, tmp_path)


@pytest.fixture
def json_lines() -> Iterator[io.StringIO]:
    """Every log record of the test, at DEBUG, as the JSON formatter writes it."""
    sink = io.StringIO()
    handler = logging.StreamHandler(sink)
    handler.setFormatter(logs.JsonFormatter())
    root, flowledger = logging.getLogger(), logging.getLogger("flowledger")
    level = flowledger.level
    root.addHandler(handler)
    flowledger.setLevel(logging.DEBUG)
    try:
        yield sink
    finally:
        root.removeHandler(handler)
        flowledger.setLevel(level)


def test_tool_calls_revalidations_and_runs_are_counted_without_the_sentinel(
    cli: Cli, tmp_path: Path, json_lines: io.StringIO
) -> None:
    metrics.enable()
    deployment = (REPO / "examples" / "clock_deployment.yaml").read_text()
    deployment = deployment.replace("command: mcp-server-time", f"command: {time_command()}")
    (tmp_path / "deployment.yaml").write_text(deployment)
    assert cli("artifact", "save", str(REPO / "examples" / "clock.yaml")).exit_code == 0
    assert cli("deploy", "set", str(tmp_path / "deployment.yaml")).exit_code == 0
    _, before = scrape()
    ok = {"source": "clock", "tool": "get_current_time"}

    # a good call: the run pauses at the confirmation, and its resume is revalidated
    paused = cli("deploy", "run", "what_time_local", "--input", '{"timezone": "Etc/UTC"}')
    assert paused.exit_code == 0, paused.output
    run_id = cli.json("runs", "list")["runs"][0]["run_id"]
    resumed = cli("deploy", "resume", run_id, "--payload", '{"ok": true}')
    assert resumed.exit_code == 0, resumed.output
    # the input is a sentinel the server refuses, echoing it in its error result
    failed = cli("deploy", "run", "what_time_local", "--input", json.dumps({"timezone": SENTINEL}))
    assert failed.exit_code in (0, 1), failed.output

    text, after = scrape()

    def moved(name: str, **labels: str) -> float:
        return value(after, name, **labels) - value(before, name, **labels)

    assert moved("flowledger_tool_calls_total", **ok, outcome="ok") == 1
    assert moved("flowledger_tool_calls_total", **ok, outcome="tool_error") == 1
    assert moved("flowledger_tool_call_seconds_count", **ok) == 2
    assert moved("flowledger_revalidations_total", result="ready") >= 1
    assert moved("flowledger_runs_started_total", definition="what_time_local") == 2
    for status in ("completed", "failed"):
        assert moved("flowledger_runs_finished_total", definition="what_time_local", status=status)
    assert moved("flowledger_step_seconds_count") >= 3
    assert moved("flowledger_commit_seconds_count") >= 3
    # the sentinel reached the run (its owner reads the whole error) but no metric or log
    runs = cli.json("runs", "list")["runs"]
    (failed_id,) = [run["run_id"] for run in runs if run["run_status"] == "failed"]
    shown = cli.json("runs", "show", failed_id)
    assert SENTINEL in json.dumps(shown)
    assert SENTINEL not in text
    assert run_id not in text and failed_id not in text
    for line in json_lines.getvalue().splitlines():  # whatever was logged, at any level
        record = json.loads(line)
        assert {"time", "level", "event", "message"} <= record.keys()
    assert SENTINEL not in json_lines.getvalue()


def test_the_json_formatter_names_the_run_of_the_task_and_no_exception_text() -> None:
    formatter = logs.JsonFormatter()
    log = logging.getLogger("flowledger.test")

    def line(record: logging.LogRecord) -> dict[str, object]:
        parsed = json.loads(formatter.format(record))
        assert isinstance(parsed, dict)
        return parsed

    async def in_task() -> dict[str, object]:
        return line(log.makeRecord(log.name, logging.INFO, __file__, 1, "step %s", ("a",), None))

    async def main() -> list[dict[str, object]]:
        with logs.run_context("3f0c1a52-8e8e-4c6b-9c39-5a0b7a0e0f11"):
            task = asyncio.ensure_future(in_task())  # the task keeps the context
        outside = line(log.makeRecord(log.name, logging.WARNING, __file__, 1, "x", (), None))
        return [await task, outside]

    inside, outside = asyncio.run(main())
    assert inside["run_id"] == "3f0c1a52-8e8e-4c6b-9c39-5a0b7a0e0f11"
    assert inside["message"] == "step a" and inside["level"] == "info"
    assert inside["event"] == "flowledger.test"
    assert str(inside["time"]).endswith("Z")
    assert "run_id" not in outside
    try:
        raise ValueError(SENTINEL)
    except ValueError:
        import sys

        failing = log.makeRecord(
            log.name, logging.ERROR, __file__, 1, "failed", (), sys.exc_info(), extra={"event": "e"}
        )
    said = line(failing)
    assert said["error"] == "ValueError" and said["event"] == "e"
    assert SENTINEL not in formatter.format(failing)


async def test_mcp_http_metrics_need_a_token_and_one_session(tmp_path: Path) -> None:
    metrics.enable()
    db = f"sqlite:///{tmp_path}/h.db"
    tokens = {TOKEN_A: SESSION_A, TOKEN_B: SESSION_B}
    secret_input = {**REVIEW_INPUT, "title": SENTINEL}
    async with (
        http_server(db, tokens=tokens) as url,
        httpx2.AsyncClient(timeout=10) as http,
    ):
        scrape_url = url.removesuffix("/mcp") + "/metrics"
        for headers in ({}, {"Authorization": "Bearer wrong-token-0123456789"}):
            refused = await http.get(scrape_url, headers=headers)
            assert refused.status_code == 401, headers
            assert refused.headers["www-authenticate"].startswith("Bearer")
            assert "flowledger_" not in refused.text
        async with http_client(url, TOKEN_A) as client:
            started = await client.call_tool(
                "workflow_run_start",
                {
                    "definition_name": "document_review",
                    "definition_version": "v1",
                    "input": secret_input,
                },
            )
            assert not started.is_error
            run_id = json.loads(started.content[0].text)["run_id"]  # type: ignore[union-attr]
        # the tokens reach two sessions: the process's counts would show B what A runs
        for token in (TOKEN_A, TOKEN_B):
            shared = await http.get(scrape_url, headers={"Authorization": f"Bearer {token}"})
            assert shared.status_code == 403
            assert "several sessions" in shared.text
            for private in ("flowledger_", "document_review", run_id, SENTINEL, SESSION_A):
                assert private not in shared.text


async def test_mcp_http_metrics_are_served_when_every_token_reaches_one_session(
    tmp_path: Path,
) -> None:
    metrics.enable()
    db = f"sqlite:///{tmp_path}/one.db"
    async with (
        http_server(db, tokens={TOKEN_A: SESSION_A, TOKEN_B: SESSION_A}) as url,
        httpx2.AsyncClient(timeout=10) as http,
    ):
        async with http_client(url, TOKEN_A) as client:
            started = await client.call_tool(
                "workflow_run_start",
                {
                    "definition_name": "document_review",
                    "definition_version": "v1",
                    "input": {**REVIEW_INPUT, "title": SENTINEL},
                },
            )
            assert not started.is_error
            run_id = json.loads(started.content[0].text)["run_id"]  # type: ignore[union-attr]
        shown = await http.get(
            url.removesuffix("/mcp") + "/metrics", headers={"Authorization": f"Bearer {TOKEN_B}"}
        )
        assert shown.status_code == 200
        assert shown.headers["content-type"].startswith("text/plain; version=0.0.4")
        samples = parse(shown.text)
        assert value(samples, "flowledger_runs_started_total", definition="document_review") >= 1
        assert run_id not in shown.text
        assert SENTINEL not in shown.text


def test_dashboard_metrics_need_a_token_when_it_has_tokens(tmp_path: Path) -> None:
    metrics.enable()
    with dashboard(tmp_path / "w.db", tokens={TOKEN_A: SESSION_A}) as client:
        refused = client.get("/metrics")
        assert refused.status_code == 401
        assert "flowledger_" not in refused.text
        wrong = client.get("/metrics", headers={"Authorization": "Bearer wrong-0123456789abc"})
        assert wrong.status_code == 401
        shown = client.get("/metrics", headers={"Authorization": f"Bearer {TOKEN_A}"})
        assert shown.status_code == 200
        assert ("flowledger_leases_acquired_total", frozenset()) in parse(shown.text)
    with dashboard(tmp_path / "open.db") as client:  # loopback, no tokens: as every route
        assert client.get("/metrics").status_code == 200
