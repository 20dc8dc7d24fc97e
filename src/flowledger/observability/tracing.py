"""OpenTelemetry traces of runs, segments, super-steps, vertices, tool calls and commits.

Off by default, and then free: every instrumented place checks the module flag
`ENABLED` first, and nothing here imports :mod:`opentelemetry` until `enable` is called.
`enable` takes a tracer provider (an SDK ``TracerProvider`` with the operator's
exporter), or uses OpenTelemetry's global one; `enable_from_environment` is what the
long-running commands call (``FLOWLEDGER_TRACES=otlp``, see docs/observability.md).

One run reads as one trace: when its record is created (`run_root`), a ``flowledger.run``
span is recorded and its W3C ``traceparent`` is stored in the run record; every later
segment - in this process or another - is a child of that context (`segment`).

Spans carry identifiers, names, counts and outcomes only (`Attributes`); never state,
inputs, payloads, tool arguments or results, nor exception messages (which may quote
them): a failure is recorded as its class name (``error.type``).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
from collections.abc import Iterator, Mapping
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any, Final

from .switches import otlp_requested

if TYPE_CHECKING:
    from opentelemetry.trace import Span, Tracer, TracerProvider

__all__ = [
    "ENABLED",
    "TRACEPARENT",
    "Attributes",
    "Parent",
    "commit_spans",
    "disable",
    "enable",
    "enable_from_environment",
    "in_segment",
    "parent_of",
    "run_root",
    "segment",
    "span",
]

Attributes = Mapping[str, str | int | bool]


class Parent:
    """An OpenTelemetry context naming a parent span (`parent_of`); opaque to callers,
    so that nothing outside this module imports :mod:`opentelemetry`."""

    __slots__ = ("context",)

    def __init__(self, context: Any) -> None:
        self.context = context


ENABLED: bool = False
"""Whether spans are recorded; instrumented hot paths check only this."""

TRACEPARENT: Final = re.compile(r"00-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}")
"""A stored W3C trace context (version 00), as `run_root` writes it."""

_tracer: Tracer | None = None
_otel: Any = None  # (opentelemetry.context, opentelemetry.trace), bound by `enable`
_commits = False
_segment: ContextVar[bool] = ContextVar("flowledger_trace_segment", default=False)


def enable(tracer_provider: TracerProvider | None = None, *, commits: bool = False) -> None:
    """Record spans through ``tracer_provider`` (default: OpenTelemetry's global provider,
    which an application or ``opentelemetry-instrument`` configures). ``commits`` adds a
    span per checkpoint commit (off by default: one per durable append)."""
    global ENABLED, _tracer, _commits, _otel
    from opentelemetry import context, trace

    from .. import __version__

    _otel = (context, trace)
    provider = tracer_provider if tracer_provider is not None else trace.get_tracer_provider()
    _tracer = provider.get_tracer("flowledger", __version__)
    _commits = commits
    ENABLED = True


def disable() -> None:
    """Stop recording spans (the provider and its exporters are the caller's to shut down)."""
    global ENABLED, _tracer, _commits
    ENABLED = False
    _tracer = None
    _commits = False


def enable_from_environment(environ: Mapping[str, str] | None = None) -> bool:
    """Configure tracing from ``FLOWLEDGER_TRACES``: unset or ``none`` leaves it off;
    ``otlp`` installs an SDK provider exporting over OTLP/HTTP (endpoint, headers and
    resource from the standard ``OTEL_*`` variables); ``FLOWLEDGER_TRACE_COMMITS=1``
    adds commit spans. Returns whether tracing is on. `ValueError` names an unknown
    value; `RuntimeError` says which extra is missing."""
    env = os.environ if environ is None else environ
    if not otlp_requested(env, "FLOWLEDGER_TRACES"):
        return False
    try:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.trace import TracerProvider as SdkTracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
    except ImportError as exc:
        raise RuntimeError(
            "FLOWLEDGER_TRACES=otlp needs the otel extra: pip install 'flowledger[otel]'"
        ) from exc
    import atexit

    from opentelemetry import trace

    provider = SdkTracerProvider()  # resource: OTEL_SERVICE_NAME / OTEL_RESOURCE_ATTRIBUTES
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    atexit.register(provider.shutdown)  # flush what is batched when the command ends
    # global too: the MCP SDK's own client and server spans join the same traces
    trace.set_tracer_provider(provider)
    enable(provider, commits=env.get("FLOWLEDGER_TRACE_COMMITS", "") == "1")
    return True


def commit_spans() -> bool:
    """Whether a span is recorded per checkpoint commit."""
    return ENABLED and _commits


def in_segment() -> bool:
    """Whether the current context is inside a ``flowledger.segment`` span."""
    return _segment.get()


def span(
    name: str, attributes: Attributes, *, parent: Parent | None = None, current: bool = True
) -> contextlib.AbstractContextManager[Span]:
    """A span named ``name``, a child of ``parent`` (from `parent_of`) or else of the
    current span; ``current`` makes it the current span for the ``with`` block.

    A span whose children all name it as their ``parent`` need not be current: that
    saves a context attach and detach, and the SDK's look-ups of the current context,
    per span (the engine's step span; see docs/benchmarks.md#traces).

    Only call it when `ENABLED`. An exception leaving the block marks the span as an
    error with ``error.type`` (the class name; its message is never recorded) and
    ``flowledger.outcome`` ``failed``; a cancellation only sets the outcome ``stopped``."""
    return _Started(name, attributes, parent, None, current)


def parent_of(parent: Span) -> Parent:
    """The context that makes spans started with ``parent=`` children of ``parent``
    (the current context otherwise: baggage and the rest carry over)."""
    return Parent(_otel[1].set_span_in_context(parent))


@contextlib.contextmanager
def segment(kind: str, attributes: Attributes, traceparent: str | None) -> Iterator[Span]:
    """A ``flowledger.segment`` span (``kind``: start, resume, adoption), a child of the
    run's stored ``traceparent`` when there is one (then linked to the current span, if
    any: what asked for the segment), else of the current span. Spans of steps and
    vertices inside it are its descendants. Only call it when `ENABLED`."""
    parent = links = None
    if traceparent:
        parent = Parent(_context_of(traceparent))
        # what asked for this segment (an MCP request, a CLI command's span) is linked
        invoker = _otel[1].get_current_span().get_span_context()
        if invoker.is_valid:
            links = [_otel[1].Link(invoker)]
    token = _segment.set(True)
    try:
        with _Started(
            "flowledger.segment", {**attributes, "flowledger.segment.kind": kind}, parent, links
        ) as current:
            yield current
    finally:
        _segment.reset(token)


def run_root(attributes: Attributes) -> str | None:
    """Record the ``flowledger.run`` span of a run being created (a child of the current
    span, e.g. an MCP request's) and return its W3C ``traceparent`` for the run record;
    None when tracing is off."""
    if not ENABLED:
        return None
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    with _Started("flowledger.run", attributes, None):
        carrier: dict[str, str] = {}
        TraceContextTextMapPropagator().inject(carrier)
    found = carrier.get("traceparent")
    return found if found is not None and TRACEPARENT.fullmatch(found) else None


def _context_of(traceparent: str) -> Any:
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    return TraceContextTextMapPropagator().extract({"traceparent": traceparent})


class _Started:
    """One span, current while entered unless told otherwise: `span`'s work, kept lean
    (a class, not generator context managers) because the engine opens two per super-step."""

    __slots__ = ("_attributes", "_current", "_links", "_name", "_parent", "_span", "_token")

    def __init__(
        self,
        name: str,
        attributes: Attributes,
        parent: Parent | None,
        links: Any = None,
        current: bool = True,
    ) -> None:
        self._name = name
        self._attributes = attributes
        self._parent = None if parent is None else parent.context
        self._links = links
        self._current = current
        self._token: Any = None

    def __enter__(self) -> Span:
        tracer, otel = _tracer, _otel
        if tracer is None:  # disabled meanwhile: a span that records nothing
            from opentelemetry.trace import INVALID_SPAN

            self._span: Span = INVALID_SPAN
            return self._span
        context, trace = otel
        self._span = tracer.start_span(
            self._name,
            context=self._parent,
            attributes=self._attributes,
            links=self._links,
            record_exception=False,  # an exception's message may quote state or arguments
            set_status_on_exception=False,
        )
        if self._current:
            self._token = context.attach(trace.set_span_in_context(self._span))
        return self._span

    def __exit__(self, kind: type[BaseException] | None, error: object, tb: object) -> None:
        if self._token is not None:
            _otel[0].detach(self._token)
        current = self._span
        if kind is not None and issubclass(kind, asyncio.CancelledError):
            # cut short (a cancel, a lost lease, a shutdown): not a failure of the work
            current.set_attribute("flowledger.outcome", "stopped")
        elif kind is not None:
            from opentelemetry.trace import StatusCode

            current.set_attribute("flowledger.outcome", "failed")
            current.set_attribute("error.type", kind.__qualname__)
            current.set_status(StatusCode.ERROR)
        current.end()
