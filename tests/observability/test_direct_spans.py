"""Spans inside a segment are recorded directly into the SDK provider's span processors
(`flowledger.observability.tracing`, docs/observability.md#how-spans-are-recorded): they
reach every processor, carry their parent's sampling decision and trace state, record
failures like an SDK span, and a provider that is not the SDK's records the same tree
through its own tracer."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, Tracer, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.sampling import ALWAYS_OFF, ParentBased, TraceIdRatioBased
from opentelemetry.trace import StatusCode, TraceState

from flowledger import flow
from flowledger.observability import tracing
from flowledger.storage import open_store

from ._spans import children, from_sdk


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[flow.LedgerCheckpointStore]:
    async with open_store(f"sqlite:///{tmp_path / 'flow.db'}") as storage:
        yield flow.LedgerCheckpointStore(storage.ledger)


@pytest.fixture
def started(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The names of the spans started through the SDK's tracer (not recorded directly)."""
    names: list[str] = []
    start_span = Tracer.start_span

    def counted(self: Tracer, name: str, *args: Any, **kwargs: Any) -> Any:
        names.append(name)
        return start_span(self, name, *args, **kwargs)

    monkeypatch.setattr(Tracer, "start_span", counted)
    return names


def two_steps(store: flow.LedgerCheckpointStore, *, fail: bool = False) -> flow.Runner[Any]:
    built: flow.Graph[dict[str, Any]] = flow.Graph("direct")

    async def a(state: dict[str, Any]) -> dict[str, Any]:
        return {"n": 1}

    async def b(state: dict[str, Any]) -> dict[str, Any]:
        if fail:
            raise KeyError("a message that must not be recorded")
        return {"n": 2}

    built.add_vertex("a", a)
    built.add_vertex("b", b)
    built.add_edge("a", "b")
    return built.compile(entry="a", finish="b", store=store)


@contextmanager
def traced(provider: TracerProvider) -> Iterator[None]:
    tracing.enable(provider)
    try:
        yield
    finally:
        tracing.disable()
        provider.shutdown()


def exporting(provider: TracerProvider) -> InMemorySpanExporter:
    exporter = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return exporter


def tree(spans: Sequence[ReadableSpan]) -> list[tuple[str, str | None]]:
    """(name, parent's name) of each span, in a stable order."""
    by_id = {s.context.span_id: s for s in spans if s.context is not None}
    shape = [(s.name, None if s.parent is None else by_id[s.parent.span_id].name) for s in spans]
    return sorted(shape, key=lambda pair: (pair[0], pair[1] or ""))


EXPECTED = [
    ("flowledger.segment", None),
    ("flowledger.step", "flowledger.segment"),
    ("flowledger.step", "flowledger.segment"),
    ("flowledger.vertex", "flowledger.step"),
    ("flowledger.vertex", "flowledger.step"),
]


async def test_every_processor_of_the_provider_receives_the_spans(
    store: flow.LedgerCheckpointStore, started: list[str]
) -> None:
    provider = TracerProvider()
    first, second = exporting(provider), exporting(provider)
    with traced(provider):
        done = await two_steps(store).run({})
    assert done.run.status is flow.RunStatus.COMPLETED
    assert started == ["flowledger.segment"]  # the steps and vertices were recorded directly
    assert tree(first.get_finished_spans()) == EXPECTED
    assert [s.context for s in first.get_finished_spans()] == [
        s.context for s in second.get_finished_spans()
    ]
    for span in first.get_finished_spans():
        assert span.resource is provider.resource
        assert span.instrumentation_scope is not None
        assert span.instrumentation_scope.name == "flowledger"
        assert span.start_time is not None and span.end_time is not None
        assert span.start_time <= span.end_time


async def test_a_processor_added_while_tracing_receives_every_span_after(
    store: flow.LedgerCheckpointStore,
) -> None:
    provider = TracerProvider()
    first = exporting(provider)
    batched = InMemorySpanExporter()
    with traced(provider):
        await two_steps(store).run({})
        provider.add_span_processor(BatchSpanProcessor(batched))
        await two_steps(store).run({})
    # shut down: the batch processor exported what it held
    assert tree(first.get_finished_spans()) == sorted(
        EXPECTED * 2, key=lambda p: (p[0], p[1] or "")
    )
    assert tree(batched.get_finished_spans()) == EXPECTED
    assert [s.context for s in batched.get_finished_spans()] == [
        s.context for s in first.get_finished_spans()[len(EXPECTED) :]
    ]


async def test_children_carry_their_parents_trace_state_and_flags(
    store: flow.LedgerCheckpointStore,
) -> None:
    provider = TracerProvider()
    exporter = exporting(provider)
    # a caller's span with a trace state: the run's spans continue its trace
    outer = trace.NonRecordingSpan(
        trace.SpanContext(
            0x1234,
            0x99,
            is_remote=True,
            trace_flags=trace.TraceFlags(trace.TraceFlags.SAMPLED),
            trace_state=TraceState([("vendor", "v1")]),
        )
    )
    with traced(provider), trace.use_span(outer):
        await two_steps(store).run({})
    spans = exporter.get_finished_spans()
    assert len(spans) == len(EXPECTED)
    for span in spans:
        assert span.context is not None
        assert span.context.trace_id == 0x1234
        assert span.context.trace_flags.sampled
        assert span.context.trace_state == TraceState([("vendor", "v1")])
    assert len({s.context.span_id for s in spans if s.context is not None}) == len(spans)


async def test_a_run_is_traced_whole_or_not_at_all_under_a_sampler(
    store: flow.LedgerCheckpointStore,
) -> None:
    provider = TracerProvider(sampler=ParentBased(TraceIdRatioBased(0.5)))
    exporter = exporting(provider)
    with traced(provider):
        for _ in range(24):
            await two_steps(store).run({})
    spans = [from_sdk(s) for s in exporter.get_finished_spans()]
    traces = {s.trace_id for s in spans}
    assert 0 < len(traces) < 24  # some runs sampled, some not (seeded ids aside, 2^-24)
    for trace_id in traces:
        (segment,) = [s for s in spans if s.trace_id == trace_id and s.parent_id is None]
        steps = children(spans, segment, "flowledger.step")
        assert len(steps) == 2
        assert [len(children(spans, step, "flowledger.vertex")) for step in steps] == [1, 1]
        assert len([s for s in spans if s.trace_id == trace_id]) == len(EXPECTED)


async def test_an_unsampled_run_records_nothing(store: flow.LedgerCheckpointStore) -> None:
    provider = TracerProvider(sampler=ALWAYS_OFF)
    exporter = exporting(provider)
    with traced(provider):
        done = await two_steps(store).run({})
    assert done.run.status is flow.RunStatus.COMPLETED
    assert exporter.get_finished_spans() == ()


async def test_a_failed_vertex_says_its_type_only(store: flow.LedgerCheckpointStore) -> None:
    provider = TracerProvider()
    exporter = exporting(provider)
    with traced(provider):
        paused = await two_steps(store, fail=True).run({})
    assert paused.run.status is flow.RunStatus.INTERRUPTED  # a failed vertex pauses the run
    (failed,) = [
        s
        for s in exporter.get_finished_spans()
        if s.name == "flowledger.vertex" and (s.attributes or {}).get("flowledger.vertex") == "b"
    ]
    assert dict(failed.attributes or {})["flowledger.outcome"] == "failed"
    assert dict(failed.attributes or {})["error.type"] == "KeyError"
    for span in exporter.get_finished_spans():
        assert "must not be recorded" not in repr(from_sdk(span))


def test_an_exception_leaving_a_direct_span_marks_it_an_error_by_type() -> None:
    provider = TracerProvider()
    exporter = exporting(provider)
    vertex_span = tracing.span("flowledger.vertex", {"flowledger.vertex": "v"})
    with traced(provider), tracing.segment("start", {}, None), pytest.raises(KeyError), vertex_span:
        raise KeyError("a message that must not be recorded")
    (vertex,) = [s for s in exporter.get_finished_spans() if s.name == "flowledger.vertex"]
    assert vertex.status.status_code is StatusCode.ERROR
    assert vertex.status.description is None
    attributes = dict(vertex.attributes or {})
    assert (attributes["flowledger.outcome"], attributes["error.type"]) == ("failed", "KeyError")
    assert "must not be recorded" not in repr(from_sdk(vertex))


class CountingTracer(Tracer):
    """An SDK tracer of someone else's (a subclass): it may record spans its own way."""

    started: list[str] = []

    def start_span(self, name: str, *args: Any, **kwargs: Any) -> Any:
        CountingTracer.started.append(name)
        return super().start_span(name, *args, **kwargs)


class CountingProvider(TracerProvider):
    def get_tracer(self, *args: Any, **kwargs: Any) -> Tracer:
        made = super().get_tracer(*args, **kwargs)
        made.__class__ = CountingTracer
        return made


async def test_a_provider_that_is_not_the_sdks_own_gets_every_span_through_its_tracer(
    store: flow.LedgerCheckpointStore,
) -> None:
    CountingTracer.started = []
    provider = CountingProvider()
    exporter = exporting(provider)
    with traced(provider):
        await two_steps(store).run({})
    assert tree(exporter.get_finished_spans()) == EXPECTED
    assert sorted(CountingTracer.started) == sorted(name for name, _ in EXPECTED)


async def test_an_sdk_whose_finished_span_takes_other_parameters_gets_spans_through_its_tracer(
    store: flow.LedgerCheckpointStore, monkeypatch: pytest.MonkeyPatch, started: list[str]
) -> None:
    """A later SDK whose ReadableSpan changed its parameters is not built positionally."""
    monkeypatch.setattr(tracing, "_READABLE_SPAN_PARAMETERS", ("name", "context", "kind"))
    provider = TracerProvider()
    exporter = exporting(provider)
    with traced(provider):
        await two_steps(store).run({})
    assert tree(exporter.get_finished_spans()) == EXPECTED
    assert sorted(started) == sorted(name for name, _ in EXPECTED)
