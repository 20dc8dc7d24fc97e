"""The metrics registry mirrored as OpenTelemetry metrics: read back with the SDK's
in-memory metric reader in this process (deployed runs calling a real MCP server from the
CLI, a sentinel in their input that the server echoes), and exported over OTLP/HTTP by a
``flowledger`` subprocess with ``FLOWLEDGER_METRICS=otlp`` to a receiver of the test's own.

Metrics are process-wide (one registry): these tests compare with the registry's own
exposition, or movements, rather than expect zeros."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("prometheus_client")
pytest.importorskip("opentelemetry.sdk.metrics")

from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
)
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader, MetricsData

from flowledger.observability import metrics, otel_metrics

from ..cli.conftest import Cli, _create
from ..deploy.servers import REPO, time_command
from ._scrape import parse, value

SENTINEL = "Sentinel/Qm4NotForOtelMetrics"

Points = dict[tuple[str, frozenset[tuple[str, Any]]], Any]


@pytest.fixture
def reader() -> Iterator[InMemoryMetricReader]:
    """The registry mirrored into an SDK meter provider with the in-memory reader."""
    found = InMemoryMetricReader()
    provider = MeterProvider(metric_readers=[found])
    otel_metrics.mirror(provider)
    try:
        yield found
    finally:
        metrics.set_mirror(None)
        provider.shutdown()


def points(data: MetricsData | None) -> Points:
    """Every data point read, keyed by metric name and attributes: a number, or for a
    histogram (count, sum, bucket counts)."""
    assert data is not None
    found: Points = {}
    for resource in data.resource_metrics:
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                for point in metric.data.data_points:
                    key = (metric.name, frozenset((point.attributes or {}).items()))
                    if hasattr(point, "bucket_counts"):
                        found[key] = (point.count, point.sum, tuple(point.bucket_counts))
                    else:
                        found[key] = point.value
    return found


@pytest.fixture
def cli(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Cli:
    monkeypatch.delenv("FLOWLEDGER_DB", raising=False)
    monkeypatch.chdir(tmp_path)
    url = f"sqlite:///{tmp_path}/m.db"
    asyncio.run(_create(url))
    return Cli(url, tmp_path)


def test_the_mirror_reads_the_one_registry_and_never_the_sentinel(
    cli: Cli, tmp_path: Path, reader: InMemoryMetricReader
) -> None:
    deployment = (REPO / "examples" / "clock_deployment.yaml").read_text()
    deployment = deployment.replace("command: mcp-server-time", f"command: {time_command()}")
    (tmp_path / "deployment.yaml").write_text(deployment)
    assert cli("artifact", "save", str(REPO / "examples" / "clock.yaml")).exit_code == 0
    assert cli("deploy", "set", str(tmp_path / "deployment.yaml")).exit_code == 0
    before = points(reader.get_metrics_data())
    ok = cli("deploy", "run", "what_time_local", "--input", '{"timezone": "Etc/UTC"}')
    assert ok.exit_code == 0, ok.output
    # the input is a sentinel the server refuses, echoing it in its error result
    failed = cli("deploy", "run", "what_time_local", "--input", json.dumps({"timezone": SENTINEL}))
    assert failed.exit_code in (0, 1), failed.output
    runs = cli.json("runs", "list")["runs"]
    assert SENTINEL in json.dumps(cli.json("runs", "show", runs[0]["run_id"])) + json.dumps(
        cli.json("runs", "show", runs[-1]["run_id"])
    )  # it reached a run: its owner reads the whole error

    data = reader.get_metrics_data()
    after = points(data)
    scraped = parse(asyncio.run(metrics.exposition()).decode())
    # counters: the registry's values, under the same names and labels
    tool = {"source": "clock", "tool": "get_current_time"}
    for outcome in ("ok", "tool_error"):
        key = ("flowledger_tool_calls", frozenset({**tool, "outcome": outcome}.items()))
        assert after[key] == value(scraped, "flowledger_tool_calls_total", **tool, outcome=outcome)
        assert after[key] >= 1
    started = ("flowledger_runs_started", frozenset({"definition": "what_time_local"}.items()))
    assert after[started] == value(
        scraped, "flowledger_runs_started_total", definition="what_time_local"
    )
    assert after[started] - before.get(started, 0) == 2
    # histograms: every observation since the mirror began, in the registry's buckets
    calls, _, buckets = after[("flowledger_tool_call_seconds", frozenset(tool.items()))]
    assert calls == 2 and len(buckets) == 16  # 15 bounds, 1 ms to 60 s, and +Inf
    steps, seconds, _ = after[("flowledger_step_seconds", frozenset())]
    assert steps >= 3 and seconds > 0
    names = {m.name for r in data.resource_metrics for s in r.scope_metrics for m in s.metrics}
    assert {"flowledger_commit_seconds", "flowledger_runs_finished"} <= names
    # no run id and no sentinel anywhere in what the reader holds
    said = data.to_json()
    assert SENTINEL not in said
    assert all(run["run_id"] not in said for run in runs)


def test_a_census_is_taken_on_its_loop_when_read_from_another_thread(
    reader: InMemoryMetricReader,
) -> None:
    taken: list[str] = []

    async def census() -> dict[tuple[str, ...], float]:
        taken.append(threading.current_thread().name)
        return {("paused_request",): 3.0, ("running",): 1.0}

    async def main() -> tuple[Points, Points]:
        metrics.add_census("flowledger_test_census", "A census of the test's.", ("status",), census)
        await metrics.exposition()  # a scrape: the census's values, as of now
        elsewhere = await asyncio.to_thread(reader.get_metrics_data)  # the exporter's way
        here = reader.get_metrics_data()  # on the loop's own thread: cannot wait for it
        return points(elsewhere), points(here)

    elsewhere, here = asyncio.run(main())
    main_thread = threading.main_thread().name
    assert taken == [main_thread, main_thread]  # the scrape's, then the other thread's
    for found in (elsewhere, here):
        assert found[("flowledger_test_census", frozenset({("status", "paused_request")}))] == 3
        assert found[("flowledger_test_census", frozenset({("status", "running")}))] == 1


class _Receiver:
    def __init__(self) -> None:
        self.names: set[str] = set()
        self.values: dict[str, float] = {}
        self.raw = b""
        self.url = ""

    def take(self, body: bytes) -> None:
        self.raw += body
        request = ExportMetricsServiceRequest()
        request.ParseFromString(body)
        for resource in request.resource_metrics:
            for scope in resource.scope_metrics:
                for metric in scope.metrics:
                    self.names.add(metric.name)
                    kind = metric.WhichOneof("data")
                    for point in getattr(metric, kind).data_points:
                        number = point.count if kind == "histogram" else point.as_int
                        number = number or getattr(point, "as_double", 0)
                        self.values[metric.name] = self.values.get(metric.name, 0) + number


@contextmanager
def receiver() -> Iterator[_Receiver]:
    found = _Receiver()
    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            with lock:
                found.take(body)
            self.send_response(200)
            self.send_header("Content-Type", "application/x-protobuf")
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    found.url = f"http://127.0.0.1:{server.server_address[1]}/v1/metrics"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield found
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def test_flowledger_metrics_otlp_exports_the_registry_when_the_command_ends(
    tmp_path: Path,
) -> None:
    with receiver() as collector:
        done = subprocess.run(
            [sys.executable, "-m", "flowledger", "demo"],
            cwd=tmp_path,
            env={
                **os.environ,
                "PYTHONPATH": str(REPO),
                "FLOWLEDGER_DB": f"sqlite:///{tmp_path / 'demo.db'}",
                "FLOWLEDGER_METRICS": "otlp",
                "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT": collector.url,
            },
            capture_output=True,
            text=True,
            timeout=180,  # only catches a hang
            check=False,
        )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Final status: completed (published)" in done.stdout
    assert {"flowledger_runs_started", "flowledger_step_seconds"} <= collector.names
    assert collector.values["flowledger_runs_started"] >= 1
    assert collector.values["flowledger_step_seconds"] >= 3


def test_an_unknown_metrics_exporter_is_refused_by_name(tmp_path: Path) -> None:
    db = tmp_path / "never.db"
    done = subprocess.run(
        [sys.executable, "-m", "flowledger", "runs", "list", "--db", f"sqlite:///{db}"],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(REPO), "FLOWLEDGER_METRICS": "statsd"},
        capture_output=True,
        text=True,
        timeout=180,  # only catches a hang
        check=False,
    )
    assert done.returncode == 2, done.stdout + done.stderr
    assert "FLOWLEDGER_METRICS='statsd': expected 'otlp' or 'none'" in done.stderr
    assert not db.exists()
