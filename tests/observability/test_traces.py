"""OpenTelemetry traces through the front doors: a deployed run with parallel tool calls,
a pause, and a resume by ``flowledger resume`` in another process reads as one trace of
the documented tree (docs/observability.md, "Traces"); each tool call's trace context
arrives at a real MCP server of the tests' own in ``_meta``; and no span or exported byte
holds the run's input, state, payloads, tool results or error messages."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from flowledger.storage import open_store
from flowledger.tools import WorkflowTools
from flowledger.workflows.runtime.session import WorkflowSession, default_session_id

from ._spans import Span, children, from_sdk, in_memory, receiver, said
from .app import REPO, catalog

SENTINEL = "zq-sentinel-7f3a91"


@asynccontextmanager
async def session(db: str) -> AsyncIterator[tuple[WorkflowSession, WorkflowTools]]:
    """The database's default session: the one ``flowledger`` commands use."""
    async with open_store(db) as store:
        built = WorkflowSession.build(store, await default_session_id(store), catalog())
        await built.supervisor.activate()
        try:
            yield built, WorkflowTools.for_session(built)
        finally:
            await built.supervisor.shutdown()


async def start(tools: WorkflowTools, built: WorkflowSession, secret: str) -> dict[str, Any]:
    started = await tools.call(
        "workflow_run_start",
        {"definition_name": "traced", "definition_version": "1", "input": {"secret": secret}},
    )
    await built.supervisor.wait_idle()
    return await tools.call("workflow_run_get", {"run_id": started["run_id"]})


def calls(folder: Path) -> list[dict[str, Any]]:
    lines = (folder / "calls.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines]


def traceparent(meta: dict[str, Any]) -> tuple[str, str]:
    """(trace id, parent span id) of a received ``_meta.traceparent``."""
    version, trace_id, span_id, _flags = str(meta["traceparent"]).split("-")
    assert version == "00"
    return trace_id, span_id


def one(spans: list[Span]) -> Span:
    assert len(spans) == 1, [s.name for s in spans]
    return spans[0]


def tool_call_of(spans: list[Span], span_id: str) -> Span:
    """The ``flowledger.tool_call`` span that is, or is the parent of, ``span_id`` (the MCP
    SDK's own client span sits in between when the global provider is the SDK's)."""
    by_id = {s.span_id: s for s in spans}
    found = by_id[span_id]
    if found.name != "flowledger.tool_call":
        assert found.parent_id is not None
        found = by_id[found.parent_id]
    assert found.name == "flowledger.tool_call", found
    return found


@pytest.mark.slow
async def test_a_run_paused_and_resumed_in_another_process_is_one_trace(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("META_DIR", str(tmp_path))
    db = f"sqlite:///{tmp_path / 'traces.db'}"
    with in_memory() as exporter:
        async with session(db) as (built, tools):
            first = await start(tools, built, SENTINEL)
    assert first["run_status"] == "interrupted", first
    here = [from_sdk(s) for s in exporter.get_finished_spans()]

    with receiver() as collector:
        resumed = await asyncio.to_thread(
            subprocess.run,
            [
                *(sys.executable, "-m", "flowledger", "resume", first["run_id"], "--db", db),
                *("--app", "tests.observability.app:catalog", "--json"),
                *("--payload", json.dumps({"say": f"again {SENTINEL}"})),
            ],
            cwd=REPO,
            env={
                **os.environ,
                "FLOWLEDGER_TRACES": "otlp",
                "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": collector.url,
                "OTEL_SERVICE_NAME": "flowledger-resume",
            },
            capture_output=True,
            text=True,
            timeout=180,
            check=False,
        )
    assert resumed.returncode == 0, resumed.stderr
    there = collector.spans
    spans = here + there

    # the start, in this process: run > segment(start) > steps > vertices > tool calls
    root = one([s for s in here if s.name == "flowledger.run"])
    assert root.parent_id is None
    assert root.attributes["flowledger.run.id"] == first["run_id"]
    assert root.attributes["flowledger.definition.name"] == "traced"
    start_segment = one(children(here, root, "flowledger.segment"))
    assert start_segment.attributes["flowledger.segment.kind"] == "start"
    assert start_segment.attributes["flowledger.outcome"] == "interrupted"
    steps = children(here, start_segment, "flowledger.step")
    ends = [(s.attributes["flowledger.step"], s.attributes["flowledger.outcome"]) for s in steps]
    assert ends == [
        (0, "routed"),
        (1, "routed"),
        (2, "paused"),
    ]
    parallel = children(here, steps[1], "flowledger.vertex")
    assert sorted(v.attributes["flowledger.vertex"] for v in parallel) == ["left", "right"]
    for vertex in parallel:
        call = one(children(here, vertex, "flowledger.tool_call"))
        assert call.attributes == {
            "flowledger.tool.source": "meta",
            "flowledger.tool.name": "note",
            "flowledger.tool.attempt": 1,
            "flowledger.outcome": "ok",
        }
    paused = one(children(here, steps[2], "flowledger.vertex"))
    assert paused.attributes["flowledger.vertex"] == "ask"
    assert paused.attributes["flowledger.outcome"] == "interrupted"

    # the resume, in the other process: a child of the same run span, in the same trace
    resume_segment = one([s for s in there if s.name == "flowledger.segment"])
    assert (resume_segment.trace_id, resume_segment.parent_id) == (root.trace_id, root.span_id)
    assert resume_segment.attributes["flowledger.segment.kind"] == "resume"
    assert resume_segment.attributes["flowledger.outcome"] == "completed"
    assert resume_segment.attributes["flowledger.run.id"] == first["run_id"]
    resumed_vertices = [
        v.attributes["flowledger.vertex"]
        for step in children(there, resume_segment, "flowledger.step")
        for v in children(there, step, "flowledger.vertex")
    ]
    assert resumed_vertices[:2] == ["ask", "again"]
    assert {s.trace_id for s in spans} == {root.trace_id}

    # every tool call's context reached the MCP server, naming its flowledger.tool_call
    received = calls(tmp_path)
    assert len(received) == 3
    for call in received:
        trace_id, parent = traceparent(call["meta"])
        assert trace_id == root.trace_id
        assert tool_call_of(spans, parent).trace_id == root.trace_id
    assert tool_call_of(spans, traceparent(received[2]["meta"])[1]) in there

    # the sentinel: input, state, request, payload and tool results hold it; no span does
    for span in spans:
        assert SENTINEL not in said(span), span
    assert not any(SENTINEL.encode() in body for body in collector.raw)


async def test_failures_are_recorded_by_type_never_by_message(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A tool's error result quotes its (secret) arguments; the run fails; the spans say
    ``tool_error`` and the error's type, never the message. Started inside a caller's
    span (as an MCP request's), the run's span is its child and the segment links it."""
    monkeypatch.setenv("META_DIR", str(tmp_path))
    with in_memory() as exporter:
        caller = exporter.provider.get_tracer("test")  # type: ignore[attr-defined]
        async with session(f"sqlite:///{tmp_path / 'failed.db'}") as (built, tools):
            with caller.start_as_current_span("caller"):
                got = await start(tools, built, f"bad {SENTINEL}")
    assert got["run_status"] == "failed", got
    assert SENTINEL in json.dumps(got["error"])  # the message quotes it: it is there to leak
    spans = [from_sdk(s) for s in exporter.get_finished_spans()]
    calls_ = [s for s in spans if s.name == "flowledger.tool_call"]
    assert {s.attributes["flowledger.outcome"] for s in calls_} == {"tool_error"}
    vertices = [s for s in spans if s.name == "flowledger.vertex"]
    assert {
        (s.attributes["flowledger.vertex"], s.attributes["flowledger.outcome"]) for s in vertices
    } == {("fan", "done"), ("left", "failed"), ("right", "failed")}
    assert {s.attributes.get("error.type") for s in vertices} == {None, "ToolErrorResult"}
    segment = one([s for s in spans if s.name == "flowledger.segment"])
    assert segment.attributes["flowledger.outcome"] == "failed"  # the run's, not the graph's
    request = one([s for s in spans if s.name == "caller"])
    root = one([s for s in spans if s.name == "flowledger.run"])
    assert (root.trace_id, root.parent_id) == (request.trace_id, request.span_id)
    assert (segment.parent_id, segment.links) == (root.span_id, (request.span_id,))
    for span in spans:
        assert SENTINEL not in said(span), span
