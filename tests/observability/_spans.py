"""Test helpers for traces: an SDK provider with the in-memory exporter, a minimal OTLP/HTTP
receiver (what a collector is to `flowledger` processes run with ``FLOWLEDGER_TRACES=otlp``),
and one plain shape (`Span`) for spans from either, so a tree can be checked across them."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from flowledger.observability import tracing


@dataclass(frozen=True)
class Span:
    name: str
    trace_id: str  # 32 hex
    span_id: str  # 16 hex
    parent_id: str | None
    attributes: dict[str, Any]
    texts: tuple[str, ...] = field(default=())  # events, links, status: anything else said
    links: tuple[str, ...] = field(default=())  # span ids of linked spans


def from_sdk(span: ReadableSpan) -> Span:
    context = span.context
    assert context is not None
    texts = [span.status.description or ""]
    texts += [f"{e.name} {dict(e.attributes or {})}" for e in span.events]
    texts += [f"{dict(link.attributes or {})}" for link in span.links]
    return Span(
        span.name,
        f"{context.trace_id:032x}",
        f"{context.span_id:016x}",
        None if span.parent is None else f"{span.parent.span_id:016x}",
        dict(span.attributes or {}),
        tuple(texts),
        tuple(f"{link.context.span_id:016x}" for link in span.links),
    )


@contextmanager
def in_memory(*, commits: bool = False) -> Iterator[InMemorySpanExporter]:
    """Tracing on, into an in-memory exporter, for the ``with`` block; the exporter's
    ``provider`` attribute is the SDK provider (for spans of the test's own)."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    exporter.provider = provider  # type: ignore[attr-defined]
    tracing.enable(provider, commits=commits)
    try:
        yield exporter
    finally:
        tracing.disable()
        provider.shutdown()


class Receiver:
    """Spans posted to ``url`` (OTLP/HTTP, protobuf), and every byte that arrived."""

    def __init__(self) -> None:
        self.spans: list[Span] = []
        self.raw: list[bytes] = []
        self.url = ""

    def _take(self, body: bytes) -> None:
        self.raw.append(body)
        request = ExportTraceServiceRequest()
        request.ParseFromString(body)
        for resource in request.resource_spans:
            for scope in resource.scope_spans:
                for span in scope.spans:
                    attributes = {a.key: _value(a.value) for a in span.attributes}
                    self.spans.append(
                        Span(
                            span.name,
                            span.trace_id.hex(),
                            span.span_id.hex(),
                            span.parent_span_id.hex() or None,
                            attributes,
                            (span.status.message,),
                        )
                    )


def _value(value: Any) -> Any:
    kind = value.WhichOneof("value")
    return getattr(value, kind) if kind else None


@contextmanager
def receiver() -> Iterator[Receiver]:
    found = Receiver()
    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            with lock:
                found._take(body)
            self.send_response(200)
            self.send_header("Content-Type", "application/x-protobuf")
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    found.url = f"http://127.0.0.1:{server.server_address[1]}/v1/traces"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield found
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def children(spans: list[Span], parent: Span, name: str | None = None) -> list[Span]:
    return [s for s in spans if s.parent_id == parent.span_id and (name is None or s.name == name)]


def said(span: Span) -> str:
    """Everything a span says, as text, for the sentinel scan."""
    return " ".join([span.name, repr(span.attributes), *span.texts])
